"""Interleaved rounds (sweep/rounds.py): a sweep runs process r of every job in round r,
so a job's processes lie across the sweep; a sweep stopped between rounds and resumed
runs only the processes its jobs lack; fail_fast between rounds keeps what ran."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
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
from benchflow.core.layout import SweepDir
from benchflow.sweep import rounds

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
        "paired_logs": {n: _text(sweep / n / "benchflow.log") for n in ("0", "1")},
        "paired_hydra": {
            n: (sweep / n / ".hydra" / "config.yaml").stat().st_mtime for n in ("0", "1")
        },
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
    assert f"round {at + 1} of 8" in ran.stderr and f"round {at + 2} of 8" not in ran.stderr
    # A (job 0) first in rounds 1 and 3, B first in round 2
    a, b = (got["paired_processes"][n] for n in ("0", "1"))
    assert [a[p]["launched"] < b[p]["launched"] for p in ("0", "1", "2")] == [True, False, True]
    rows = got["paired_rows"]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert [r["job"]["num"] for r in rows] == [1, 0]  # the closing round is B's first
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
    assert "round 4 of 8" in ran.stderr and "round 5 of 8" not in ran.stderr
    rows = got["reach_rows"]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for r in rows:
        assert len(r["timing"]["processes"]) == 3
        assert "pair=model.size: stopped after 3 of its 8 rounds" in " ".join(r["job"]["notes"])
    (change,) = got["reach_table"]
    assert change["verdict"] == "insufficient data", change
    assert change["method"].endswith("look 1 of 3 at alpha=0.0014")
    assert got["reach_judged"].returncode == 0, got["reach_judged"].stderr[-2000:]


def test_a_jobs_later_rounds_run_where_its_first_did(early_sweeps: EarlySweeps) -> None:
    """Hydra's launcher makes a job's config, folder and log in its first round; the
    later rounds run the task there again (hydra_plugins' _Again): the job's .hydra files
    are not written again, and each job's log holds its own processes, in order (A and B
    swap places every other round, so a log left on the other job would show it)."""
    got = early_sweeps.result("rounds")
    assert got["paired"].returncode == 0, got["paired"].stderr[-3000:]
    for n in ("0", "1"):
        processes = got["paired_processes"][n]
        assert len(processes) >= 3
        logged = re.findall(r"process (\d+) of 8: (\w+) in ", got["paired_logs"][n])
        assert logged == [(str(p + 1), "ok") for p in range(len(processes))], got["paired_logs"]
        assert got["paired_hydra"][n] <= processes["0"]["started_at"]


def _job(num: int, **kw: Any) -> Job:
    return Job(num, f"j{num}", (f"x={num}",), BenchConfig(**kw), backend="eager")


def test_rounds_launch_runs_of_consecutive_jobs_with_a_process_left() -> None:
    jobs = [_job(0), _job(1, repeat=3), _job(2, processes=2), _job(3), _job(4, interleave=False)]
    assert rounds.count(jobs) == 3  # the adaptive jobs' 3 processes
    assert rounds.launches(jobs, 0, 10) == [(0, [[f"x={n}"] for n in range(5)])]
    assert rounds.launches(jobs, 0, 2) == [(0, [["x=0"], ["x=1"]]), (2, [["x=2"], ["x=3"]]),
                                           (4, [["x=4"]])]  # fmt: skip
    assert rounds.launches(jobs, 1, 10) == [(0, [["x=0"]]), (2, [["x=2"], ["x=3"]])]
    assert rounds.launches(jobs, 2, 10) == [(0, [["x=0"]]), (3, [["x=3"]])]
    assert rounds.count([_job(0, repeat=3), _job(1, interleave=False)]) == 1
    # a job with an earlier one's fingerprint is never launched: the first is the job
    twice = [_job(0), _job(1, repeat=3), _job(2), _job(3, processes=2, seed=7)]
    duplicates = rounds.duplicates_of(twice)
    assert duplicates == {2: 0}
    assert rounds.launches(twice, 0, 10, duplicates) == [(0, [["x=0"], ["x=1"]]), (3, [["x=3"]])]
    assert rounds.launches(twice, 1, 10, duplicates) == [(0, [["x=0"]]), (3, [["x=3"]])]
    assert rounds.launches(twice, 2, 10, duplicates) == [(0, [["x=0"]])]
    assert rounds.duplicates_of([_job(0, interleave=False), _job(1, interleave=False)]) == {1: 0}


def test_a_paired_sweep_swaps_a_and_b_every_other_round() -> None:
    """Stopping.swaps: pairs (0, 1) and (2, 3); in odd rounds each B runs in its A's
    place, so the launches break into single jobs in that order; a closed pair is not
    launched, the others still swap."""
    from benchflow.sweep.pairs import Pair, Stopping

    jobs = [_job(n, processes=4) for n in range(5)]
    pairs = [Pair(jobs[0], jobs[1]), Pair(jobs[2], jobs[3])]
    stopping = Stopping(SweepDir(Path("/nonexistent")), pairs, "token", set(), set())
    assert stopping.swaps(0) == {} and stopping.swaps(2) == {}
    assert stopping.swaps(1) == {0: 1, 1: 0, 2: 3, 3: 2}
    one = [(n, [[f"x={n}"]]) for n in (1, 0, 3, 2, 4)]
    assert rounds.launches(jobs, 1, 10, (), stopping.swaps(1)) == one
    assert rounds.launches(jobs, 2, 10, (), stopping.swaps(2)) == [
        (0, [[f"x={n}"] for n in range(5)])
    ]
    stopping.closed = {0, 1}
    assert stopping.swaps(3) == {2: 3, 3: 2}
    assert rounds.launches(jobs, 3, 10, {0, 1}, stopping.swaps(3)) == one[2:]


def test_a_sweep_imports_scipy_stats_as_it_begins_where_it_will_use_it(tmp_path: Path) -> None:
    """start.begin imports scipy.stats where the sweep's jobs run in this process
    (prestart: their rows take their intervals from it, and the import, 0.5 s, fell at
    the first job's end, between two processes), and for a paired sweep wherever its
    jobs run (its looks: the first look's import fell before a B's process every time);
    not for a sweep of no pairs whose jobs run elsewhere. Stopping.of finds the pair."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from omegaconf import OmegaConf\n"
        "from benchflow.config.schema import BenchConfig\n"
        "from benchflow.core.job import Job, Launch, Plan\n"
        "from benchflow.core.layout import SweepDir\n"
        "from benchflow.sweep.pairs import Stopping\n"
        "from benchflow.sweep.start import begin\n"
        "here, paired = sys.argv[1] == 'here', sys.argv[2] == 'paired'\n"
        "config = OmegaConf.create({'hydra': {'sweep': {'dir': sys.argv[3]}}})\n"
        "cfg = BenchConfig(pair='slowdown' if paired else None)\n"
        "jobs = [Job(n, 'j', (f'slowdown={s}',), cfg, backend='eager')\n"
        "        for n, s in enumerate(['null', '0.05'])]\n"
        "launches = {0: Launch(None), 1: Launch(None, steps_from=0 if paired else None)}\n"
        "before = 'scipy.stats' in sys.modules\n"
        "plan = Plan.of(jobs, 2, [], launches)\n"
        "begin(config, plan, prestart=here)\n"
        "stopping = Stopping.of(SweepDir(Path(sys.argv[3])), plan, 't')\n"
        "print(len(stopping.pairs), before, 'scipy.stats' in sys.modules)\n"
    )
    cases = {
        ("here", "alone"): "0 False True",
        ("elsewhere", "paired"): "1 False True",
        ("elsewhere", "alone"): "0 False False",
    }
    for (where, kind), expected in cases.items():
        folder = tmp_path / f"{where}-{kind}"
        out = subprocess.run(
            [sys.executable, "-c", code, where, kind, str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split() == expected.split(), (where, kind, out.stdout)
        assert (folder / "plan.json").exists()


def test_a_paired_sweeps_b_runs_its_as_steps_per_repeat() -> None:
    """The plan gives each B of a pair its A's number (Launch.steps_from); A, and a job
    of no pair, calibrate their own."""
    from benchflow.core.job import Launch
    from benchflow.sweep.pairs import calibrated_by_a

    jobs = [
        Job(n, "j", (f"m={m}", f"slowdown={s}"), BenchConfig(pair="slowdown"), backend="eager")
        for n, (m, s) in enumerate([("a", "null"), ("a", "0.05"), ("b", "null"), ("b", "0.05")])
    ]
    planned = calibrated_by_a(jobs, {n: Launch("torch") for n in range(4)})
    assert [planned[n].steps_from for n in range(4)] == [None, 0, None, 2]
    alone = Job(0, "j", ("m=a",), BenchConfig(), backend="eager")  # not a paired sweep
    assert calibrated_by_a([alone], {0: Launch("torch")}) == {0: Launch("torch")}
