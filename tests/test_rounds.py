"""Interleaved rounds (sweep/steps.py, sweep/run.py): a sweep runs process r of every
job in round r, so a job's processes lie across the sweep; a sweep stopped between
rounds and resumed runs only the processes its jobs lack; fail_fast between rounds
keeps what ran."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import (
    SEARCHPATH,
    EarlySweeps,
    early,
    read_rows,
    run_cli,
    sigterm_once_started,
    start_cli,
    wait_for_text,
)
from tests.early import niced

from benchflow.config.schema import BenchConfig
from benchflow.core.job import Job

# sleepy's steps sleep 0.25 s: a process takes about a second on any machine and load.
SWEEP = [
    "-m",
    SEARCHPATH,
    "model=sleepy",
    "model.size=tiny",
    "dtype=float32",
    "repeat=2,3",
    "iterations_per_run=1",
    "warmup=3",
    "processes=2",
    "mlflow.enabled=false",
]


def _processes(job_dir: Path) -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads((job_dir / "processes.json").read_text())[
        "processes"
    ]
    return data


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@early("rounds", niced=False, long=True)  # the SIGTERM must land inside job 0's second process
def _rounds(root: Path) -> dict[str, Any]:
    """The sweep SIGTERMed in its second round, then resumed; and a fail_fast sweep whose
    second job fails in the first round."""
    cwd = root / "interrupted"
    cwd.mkdir()
    err = cwd / "stderr.log"
    proc = start_cli(SWEEP, cwd, err)
    try:
        wait_for_text(err, "[1/2] sleepy·eager·eval·float32 (process 2 of 2)", proc)
        code = sigterm_once_started(proc, cwd, "multirun/*/*/0/process1.stderr.log", err)
    finally:
        if proc.poll() is None:
            proc.kill()
    got: dict[str, Any] = {"cwd": cwd, "code": code, "err": err.read_text()}
    (sweep,) = [p for p in (cwd / "multirun").glob("*/*") if p.is_dir()]
    got["sweep"] = sweep
    got["first"] = read_rows(sweep)
    got["before"] = {n: _processes(sweep / n) for n in ("0", "1")}
    with niced():  # what follows needs no signal to land at a point
        if code == 143:
            got["again"] = run_cli([*SWEEP, "resume=true"], cwd)
            got["after"] = {n: _processes(sweep / n) for n in ("0", "1")}
            got["rows"] = read_rows(sweep)
        ff = root / "fail_fast"
        ff.mkdir()
        args = [*SWEEP[:3], "model=sleepy,fault_raise", *SWEEP[4:5], "fail_fast=true", "repeat=2"]
        got["ff"] = run_cli([*args, *SWEEP[6:]], ff)
        got |= _paired(root / "paired")
        got |= _out_of_reach(root / "reach")
    got["ff_rows"] = [r for p in (ff / "multirun").glob("*/*") for r in read_rows(p)]
    return got


def _paired(cwd: Path) -> dict[str, Any]:
    """A paired sweep whose B sleeps half as long again (slowdown=0.5): decided at its
    first look, and judged by report --pair."""
    cwd.mkdir()
    sweep = cwd / "sweep"
    args = [*SWEEP[:5], "slowdown=null,0.5", "pair=slowdown", "repeat=2", SWEEP[6]]
    ran = run_cli([*args, "warmup=1", "processes=8", *SWEEP[9:], f"hydra.sweep.dir={sweep}"], cwd)
    judge = ["report", str(sweep), "--pair", "slowdown", "--no-mlflow", "--format", "csv"]
    judged = run_cli(judge, cwd)
    table = list(csv.DictReader((sweep / "pair" / "compare.csv").open())) if judged.stdout else []
    ran_at = {n: _processes(sweep / n) for n in ("0", "1")}
    return {
        "paired_log": _text(sweep / "benchflow.log"),
        "paired": ran,
        "paired_rows": read_rows(sweep),
        "paired_processes": ran_at,
        "judged": judged,
        "table": table,
    }


def _out_of_reach(cwd: Path) -> dict[str, Any]:
    """An A/A-like paired sweep whose B's rounds are +6%, -6% and 0 (jittery, paired on
    model.size): out of reach at its first look."""
    cwd.mkdir()
    sweep = cwd / "sweep"
    args = ["-m", SEARCHPATH, "model=jittery", "model.size=tiny,small", "pair=model.size"]
    args += ["pair_threshold=0.02", "repeat=2", "warmup=1", "processes=8", *SWEEP[4:5]]
    args += [*SWEEP[6:7], *SWEEP[9:], f"hydra.sweep.dir={sweep}"]
    ran = run_cli(args, cwd, JITTERY_DIR=str(cwd))
    judge = ["report", str(sweep), "--pair", "model.size", "--no-mlflow", "--format", "csv"]
    judged = run_cli(judge, cwd)
    table = list(csv.DictReader((sweep / "pair" / "compare.csv").open())) if judged.stdout else []
    return {"reach": ran, "reach_rows": read_rows(sweep), "reach_judged": judged,
            "reach_table": table}  # fmt: skip


def test_a_sweep_runs_one_process_of_each_job_a_round(early_sweeps: EarlySweeps) -> None:
    got = early_sweeps.result("rounds")
    assert got["code"] == 143, got["err"][-3000:]
    lines = [ln for ln in got["err"].splitlines() if "(process " in ln]
    assert [ln.split(" …")[0] for ln in lines] == [
        "[1/2] sleepy·eager·eval·float32 (process 1 of 2)",
        "[2/2] sleepy·eager·eval·float32 (process 1 of 2)",
        "[1/2] sleepy·eager·eval·float32 (process 2 of 2)",
    ]
    before = got["before"]
    # job 1's first process ran between job 0's two
    assert before["0"]["0"]["ended"] <= before["1"]["0"]["launched"]
    assert [r["status"] for r in got["first"]] == ["interrupted"]  # job 0, in round 2


def test_a_resumed_sweep_runs_only_the_processes_its_jobs_lack(
    early_sweeps: EarlySweeps,
) -> None:
    got = early_sweeps.result("rounds")
    again = got["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    before, after = got["before"], got["after"]
    # job 1's first process, from the stopped launch, is kept as it was; job 0, whose
    # row (interrupted) was recorded, ran both again
    assert after["1"]["0"] == before["1"]["0"]
    assert after["0"]["0"]["launched"] > before["0"]["0"]["launched"]
    assert "(process 1 of 2)" not in again.stderr.split("[2/2]", 1)[1].split("\n", 1)[0]
    rows = {r["job"]["num"]: r for r in got["rows"] if not r.get("superseded_by")}
    assert [rows[n]["status"] for n in (0, 1)] == ["ok", "ok"]
    for n in (0, 1):
        row, ran = rows[n], after[str(n)]
        assert len(row["timing"]["processes"]) == 2
        # the job's wall: its processes' own walls, not the span from first to last
        walls = sum(p["wall_time_s"] for p in ran.values())
        assert row["job"]["wall_time_s"] == pytest.approx(walls)
        assert sum(row["job"]["phases"].values()) == pytest.approx(
            walls + sum(p["gap_s"] for p in ran.values())
        )


def test_fail_fast_between_rounds_records_what_ran(early_sweeps: EarlySweeps) -> None:
    got = early_sweeps.result("rounds")
    rows = {r["model"]["model_name"]: r for r in got["ff_rows"]}
    assert len(got["ff_rows"]) == 2, got["ff"].stderr[-3000:]
    assert rows["fault_raise"]["status"] == "failed"
    sleepy = rows["sleepy"]  # its second round came after the failure
    assert sleepy["status"] == "ok" and sleepy["timing"]["repeats"] == 2  # one process's
    assert any("stopped after 1 of its 2 processes" in n for n in sleepy["job"]["notes"])


def test_a_paired_sweep_stops_a_pair_once_decided(early_sweeps: EarlySweeps) -> None:
    """pair=slowdown with at most 8 rounds (looks after 3, 5 and 8): B's 50% is plain at
    the first look, or at the second where the suite's load left a round of the first
    three out (the host busy for one process of the two), so both jobs are recorded in
    the round after from their processes and the sweep launches no round after that;
    report --pair judges them at that look's level."""
    got = early_sweeps.result("rounds")
    ran = got["paired"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    decided = re.search(
        r"job 1 \(slowdown=0.5\) against job 0 \(slowdown=null\): regression after (\d) rounds",
        ran.stderr,
    )
    assert decided, ran.stderr[-3000:]
    at = int(decided.group(1))
    look = {3: "look 1 of 3 at alpha=0.0014", 5: "look 2 of 3 at alpha=0.012"}[at]
    assert f"round {at} of 8" in ran.stderr and f"round {at + 1} of 8" not in ran.stderr
    # A (job 0) first in rounds 1 and 3, B first in round 2
    a, b = (got["paired_processes"][n] for n in ("0", "1"))
    assert [a[p]["launched"] < b[p]["launched"] for p in ("0", "1", "2")] == [True, False, True]
    rows = got["paired_rows"]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert [r["job"]["num"] for r in rows] == [0, 1]  # recorded at the look, in order
    b_row = next(r for r in rows if r["job"]["num"] == 1)
    assert "pair=slowdown: runs job 0's steps per repeat" in b_row["job"]["notes"]
    for r in rows:
        assert len(r["timing"]["processes"]) == at
        assert all(p["quiet"] in (True, False) for p in r["timing"]["processes"])
        assert f"pair=slowdown: stopped after {at} of its 8 rounds" in " ".join(r["job"]["notes"])
        assert r["job"]["paired"] == {"axis": "slowdown", "rounds": 8, "threshold": 0.05}
    assert "benchflow report" in ran.stdout and "--pair slowdown` judges it" in ran.stdout
    judged = got["judged"]
    (change,) = got["table"]
    # suspicious: as decided, but the host was busy (the suite's other lanes)
    assert change["verdict"] in ("regression", "suspicious") and float(change["ratio"]) > 1.3
    assert judged.returncode == (change["verdict"] == "regression"), judged.stderr[-2000:]
    assert change["method"].startswith("paired t over ") and change["method"].endswith(look)
    assert (at == 3) == change["method"].startswith("paired t over 3 rounds,")


def test_a_paired_sweep_stops_a_pair_no_look_could_decide(early_sweeps: EarlySweeps) -> None:
    """B's rounds +6%, -6%, 0 against A: within the 2% threshold, and spread too wide for
    an interval after 8 rounds to fit within it: the sweep stops the pair at its first
    look (results/intervals.out_of_reach), says why, records both jobs from their 3
    processes, and report --pair judges it there: insufficient data, exit 0."""
    got = early_sweeps.result("rounds")
    ran = got["reach"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    stopped = re.search(r"out of reach \(([-+]\d\.\d)% lies within ±2%, and at its rounds' "
                        r"spread an interval after 8 rounds would still reach ([-+]\d+\.\d)%\) "
                        r"after 3 rounds, recorded now", ran.stderr)  # fmt: skip
    assert stopped, ran.stderr[-3000:]
    assert abs(float(stopped.group(1))) < 2 < abs(float(stopped.group(2)))
    assert "round 3 of 8" in ran.stderr and "round 4 of 8" not in ran.stderr
    rows = got["reach_rows"]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for r in rows:
        assert len(r["timing"]["processes"]) == 3
        assert "pair=model.size: stopped after 3 of its 8 rounds" in " ".join(r["job"]["notes"])
    (change,) = got["reach_table"]
    assert change["verdict"] == "insufficient data", change
    assert change["method"].endswith("look 1 of 3 at alpha=0.0014")
    assert got["reach_judged"].returncode == 0, got["reach_judged"].stderr[-2000:]


def test_the_sweeps_log_holds_each_jobs_processes_in_order(early_sweeps: EarlySweeps) -> None:
    """The sweep's log (benchflow.log in its folder) has a line for each process of each
    job as it ended, in order (A and B swap places every other round)."""
    got = early_sweeps.result("rounds")
    assert got["paired"].returncode == 0, got["paired"].stderr[-3000:]
    for n in ("0", "1"):
        processes = got["paired_processes"][n]
        assert len(processes) >= 3
        logged = re.findall(rf"job {n} \(.*?\): process (\d+) of 8: (\w+) in ", got["paired_log"])
        assert logged == [(str(p + 1), "ok") for p in range(len(processes))], got["paired_log"]


def _job(num: int, **kw: Any) -> Job:
    return Job(num, f"j{num}", (f"x={num}",), BenchConfig(**kw), backend="eager")


def test_each_job_runs_one_process_a_round_and_a_launcher_gets_runs_of_jobs() -> None:
    """The plan's steps: round r runs process r of every job with that many (an adaptive
    job's 3, processes=2's 2; a job of interleave=false runs all of its in round 0, one
    after another); a job with an earlier one's fingerprint runs nothing. A launcher of
    Hydra's gets a round's steps as runs of consecutive job numbers, one process of a
    job each."""
    from benchflow.sweep.run import _batches
    from benchflow.sweep.steps import duplicates_of, plan_steps

    jobs = [
        _job(0),
        _job(1, repeat=3),
        _job(2, processes=2, seed=2),
        _job(3, seed=3),
        _job(4, interleave=False, seed=4),
    ]
    steps = plan_steps(jobs, False, {})
    by_round = {r: [(s.job, s.process) for s in steps if s.round == r] for r in range(4)}
    assert by_round[0] == [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (4, 1), (4, 2)]
    assert by_round[1] == [(0, 1), (2, 1), (3, 1)]
    assert by_round[2] == [(0, 2), (3, 2)] and by_round[3] == []
    first = [s for s in steps if s.round == 0]
    assert [[(s.job, s.process) for s in b] for b in _batches(first)] == [
        [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)],
        [(4, 1)],
        [(4, 2)],
    ]
    # hydra.sweeper.max_batch_size=2: the sweep records each batch's rows once it is back
    assert [[(s.job, s.process) for s in b] for b in _batches(first, 2)] == [
        [(0, 0), (1, 0)],
        [(2, 0), (3, 0)],
        [(4, 0)],
        [(4, 1)],
        [(4, 2)],
    ]
    twice = [_job(0), _job(1, repeat=3), _job(2), _job(3, processes=2, seed=7)]
    assert duplicates_of(twice) == {2: 0}
    assert {s.job for s in plan_steps(twice, False, {})} == {0, 1, 3}


def test_a_paired_sweep_swaps_a_and_b_every_other_round() -> None:
    """Stopping.swaps: pairs (0, 1) and (2, 3); in odd rounds each B runs in its A's
    place; a closed pair no longer swaps (it runs no more), the others still do."""
    from benchflow.sweep.pairs import Pair, Stopping

    jobs = [_job(n, processes=4) for n in range(5)]
    pairs = [Pair(jobs[0], jobs[1]), Pair(jobs[2], jobs[3])]
    stopping = Stopping(pairs, set())
    assert stopping.swaps(0) == {} and stopping.swaps(2) == {}
    assert stopping.swaps(1) == {0: 1, 1: 0, 2: 3, 3: 2}
    order = sorted(range(5), key=lambda n: stopping.swaps(1).get(n, n))
    assert order == [1, 0, 3, 2, 4]
    stopping.closed = {0, 1}
    assert stopping.swaps(3) == {2: 3, 3: 2}


def test_a_paired_sweeps_b_runs_its_as_steps_per_repeat() -> None:
    """The plan gives each B of a pair its A's number (Step.steps_from); A, and a job of
    no pair, calibrate their own."""
    from benchflow.sweep.pairs import steps_from

    jobs = [
        Job(n, "j", (f"m={m}", f"slowdown={s}"), BenchConfig(pair="slowdown"), backend="eager")
        for n, (m, s) in enumerate([("a", "null"), ("a", "0.05"), ("b", "null"), ("b", "0.05")])
    ]
    assert steps_from(jobs) == {1: 0, 3: 2}
    alone = Job(0, "j", ("m=a",), BenchConfig(), backend="eager")  # not a paired sweep
    assert steps_from([alone]) == {}
