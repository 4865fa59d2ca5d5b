"""build_ahead: the next model is built while the jobs before it run, and stopped over
their compile and timed regions; checked from the rows' own clocks (results/overlap.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from tests.conftest import SEARCHPATH, EarlySweeps, early, run_cli

from benchflow.core.cpus import ENV_LOCK_DIR
from benchflow.harness.hold import Hold, folder, register, unregister
from benchflow.results.child import Timing
from benchflow.results.overlap import check, check_timings
from benchflow.results.row import ResultRow


@early("build_ahead")
def _ahead(root: Path) -> dict[str, Any]:
    """Three jobs of `work`, then three of `slow_build` (its build: 3 s of CPU), each
    model's jobs sharing its build, with build_ahead (the default); and without it, the
    built-in llama (a quick build) after `work`."""
    args = ["-m", SEARCHPATH, "warmup=1,2,3", "model.size=tiny", "dtype=float32"]
    args += ["repeat=5", "iterations_per_run=2", "mlflow.enabled=false"]
    for side in ("on", "off"):
        (root / side).mkdir()
    # CPU slots (and work beside the jobs) of its own: a job that waited for a slot that
    # the suite's other sweeps hold would find the build done.
    locks = {ENV_LOCK_DIR: str(root / "locks")}
    on = run_cli([*args, "model=work,slow_build"], root / "on", **locks)
    off = run_cli([*args, "model=work,llama", "build_ahead=false"], root / "off", **locks)
    # The default sweep's path: two processes a job, in interleaved rounds.
    (root / "rounds").mkdir()
    # (their steps per repeat calibrated: the first process's count, the second's too)
    calibrated = [a for a in args if not a.startswith("iterations_per_run=")]
    rounds = run_cli(
        [*calibrated, "model=work,slow_build", "processes=2"], root / "rounds", **locks
    )
    return {"on": on, "off": off, "rounds": rounds}


def _by_model(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["model"]["model_name"], []).append(row)
    return out


def test_the_next_model_builds_beside_the_jobs_never_over_a_compile_or_timed_region(
    early_sweeps: EarlySweeps,
) -> None:
    got = early_sweeps.result("build_ahead")
    res = got["on"]
    assert res.returncode == 0, res.stderr[-3000:]
    rows = res.rows()
    assert [r["status"] for r in rows] == ["ok"] * 6, [r["error"] for r in rows]
    models = _by_model(rows)
    assert list(models) == ["work", "slow_build"]
    slow = models["slow_build"]
    pid = {r["timing"]["shared_build_pid"] for r in slow}
    assert len(pid) == 1 and None not in pid  # one build for both jobs
    (builder,) = pid
    built_from, built_to = slow[0]["timing"]["shared_build_at"]
    assert built_to - built_from >= 3.0  # its 3 s of CPU, and the holds on it
    # It began once the first work job had ended (its build had the cores), before the
    # last one: ahead of its own jobs.
    work_children = [s for r in models["work"] for s in r["timing"]["spans"] if s[0] == "child"]
    assert work_children[0][2] < built_from < work_children[-1][2]
    # The work jobs held it over each of their exclusive regions, and it did not run then.
    holds = [h for r in models["work"] for h in r["timing"]["held"] if builder in h["pids"]]
    assert {h["region"] for h in holds} >= {"compile", "warmup", "timed"}, holds
    # and each held region's clocks are in the rows (the fixed warm-up's too)
    spanned = {s[0] for r in models["work"] for s in r["timing"]["spans"]}
    assert spanned == {"compile", "warmup", "timed", "child"}, spanned
    assert all(h["stopped"] and h["cpu_s"] == 0 for h in holds), holds
    overlap = check([ResultRow.from_dict(r) for r in rows])
    assert overlap.builds == 1
    assert overlap.violations == [] and overlap.ok, overlap
    assert overlap.beside_s > 0  # it did run beside the jobs, outside their regions
    (sweep,) = res.sweep_dirs  # the sweep's report says so
    assert overlap.summary() in (sweep / "report" / "report.md").read_text()
    # Its log is in its first job's folder, as without build_ahead.
    assert (Path(slow[0]["job"]["dir"]) / "build.log").is_file()


def test_without_build_ahead_each_model_builds_when_its_first_job_comes(
    early_sweeps: EarlySweeps,
) -> None:
    res = early_sweeps.result("build_ahead")["off"]
    assert res.returncode == 0, res.stderr[-3000:]
    rows = res.rows()
    assert [r["status"] for r in rows] == ["ok"] * 6, [r["error"] for r in rows]
    models = _by_model(rows)
    # the progress line of a job timed with no interval (5 repeats) opens its parenthesis
    assert re.search(r"s/iter \(5 repeats; cold start [^()]+\)", res.stderr), res.stderr[-3000:]
    built_from = models["llama"][0]["timing"]["shared_build_at"][0]
    work_end = max(s[2] for r in models["work"] for s in r["timing"]["spans"] if s[0] == "child")
    assert built_from > work_end
    assert all(not r["timing"]["held"] for r in rows)
    assert check([ResultRow.from_dict(r) for r in rows]).builds == 0
    (sweep,) = res.sweep_dirs
    assert "beside the jobs" not in (sweep / "report" / "report.md").read_text()


def test_interleaved_rounds_build_each_model_once_the_next_one_ahead(
    early_sweeps: EarlySweeps,
) -> None:
    """The default sweep runs its jobs' processes in rounds (sweep/rounds.py), which took
    another path that never built ahead, and built each model once a round. Now the
    first round builds each model once, the next one beside the jobs before it (held
    over their exclusive regions), and later rounds fork from the models kept; each
    model's zygote goes after the last process that forks from it."""
    res = early_sweeps.result("build_ahead")["rounds"]
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr.count("(process 2 of 2)") == 6  # interleaved: one process a round
    rows = res.rows()
    assert [r["status"] for r in rows] == ["ok"] * 6, [r["error"] for r in rows]
    models = _by_model(rows)
    builders = {}
    for name, jobs in models.items():
        forked = [b[0] for r in jobs for b in r["timing"]["shared_builds"]]
        assert len(forked) == 6 and len(set(forked)) == 1, (name, forked)  # once per sweep
        builders[name] = forked[0]
    holds = [h for r in models["work"] for h in r["timing"]["held"]]
    assert any(builders["slow_build"] in h["pids"] for h in holds), holds  # built ahead
    for row in rows:  # the second process runs the steps per repeat the first calibrated
        folder = Path(row["job"]["dir"])
        first, second = (
            Timing.from_dict(json.loads(p.read_text())["timing"])
            for p in (folder / "child_result.json", folder / "process1.child_result.json")
        )
        assert first.calibrated and not second.calibrated, (first, second)
        assert first.iterations_per_run == second.iterations_per_run == row["iterations_per_run"]
    overlap = check([ResultRow.from_dict(r) for r in rows])
    assert overlap.builds == 1 and overlap.ok, overlap
    (sweep,) = res.sweep_dirs
    log = "".join(p.read_text() for p in sweep.glob("*/benchflow.log"))  # the jobs' logs
    assert log.count("model built once for its jobs") == 2
    for pid in builders.values():  # each closed after its last process, in the sweep
        assert f"no later job forks from the built model (pid {pid})" in log


def _row(name: str, spans: list[list[Any]], **timing: Any) -> tuple[str, Timing]:
    return name, Timing(spans=spans, **timing)


def test_the_check_finds_a_build_that_ran_over_a_compile() -> None:
    """The check can fail: a build whose holds leave out part of a job's compile."""
    build = {"shared_build_pid": 7, "shared_build_at": [10.0, 20.0]}
    held = [{"region": "compile", "at": [11.0, 12.0], "pids": [7], "cpu_s": 0.0}]
    spans = [["compile", 11.0, 12.5], ["child", 10.5, 13.0]]
    found = check_timings(
        [_row("a", spans, held=held), _row("b", [["child", 14.0, 15.0]], **build)]
    )
    assert not found.ok
    assert found.violations == ["a: its compile ran 0.500000 s beside build 7"]
    assert found.beside_s == (13.0 - 10.5 - 1.0) + 1.0
    assert "1 exclusive region(s) met" in found.summary()
    whole = [{"region": "compile", "at": [11.0, 12.6], "pids": [7], "cpu_s": 0.0}]
    fixed = check_timings([_row("a", spans, held=whole), _row("b", [], **build)])
    assert fixed.ok and fixed.held_s == pytest.approx(1.6)
    assert fixed.summary().endswith("none of it in a compile, warm-up, timed or profile region")
    used = [{**whole[0], "cpu_s": 0.01}]
    assert not check_timings([_row("a", spans, held=used), _row("b", [], **build)]).ok
    for region in ("warmup", "profile"):  # every exclusive region is checked, not two
        late = [*spans, [region, 12.5, 12.8]]  # past the hold that covered the compile
        found = check_timings([_row("a", late, held=whole), _row("b", [], **build)])
        assert found.violations == [f"a: its {region} ran 0.200000 s beside build 7"]


def _status(proc: psutil.Process) -> str:
    time.sleep(0.05)  # a SIGCONT, or its absence, has landed
    return str(proc.status())


def test_a_hold_stops_the_work_beside_until_its_last_holder_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two jobs hold one busy process: it stays stopped until both have left, uses no CPU
    meanwhile, and runs on once unregistered; a file whose start time is another
    process's (a reused pid) stops nothing."""
    monkeypatch.setenv(ENV_LOCK_DIR, str(tmp_path))
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        proc = psutil.Process(busy.pid)
        register(busy.pid)
        first, second = Hold(), Hold()
        with first.exclusive("compile"):
            assert _status(proc) == psutil.STATUS_STOPPED
            with second.exclusive("timed"):
                assert _status(proc) == psutil.STATUS_STOPPED
            assert _status(proc) == psutil.STATUS_STOPPED  # the first still holds it
        assert _status(proc) != psutil.STATUS_STOPPED
        for hold in (first, second):
            (held,) = hold.held
            assert held["pids"] == [busy.pid] and held["stopped"] and held["cpu_s"] == 0
        assert first.held[0]["at"][0] < second.held[0]["at"][0]
        assert second.held[0]["at"][1] < first.held[0]["at"][1]
        unregister(busy.pid)
        with Hold().exclusive("compile"):
            assert _status(proc) != psutil.STATUS_STOPPED
        (folder() / str(busy.pid)).write_text("0.0")  # another process's start time
        other = Hold()
        with other.exclusive("compile"):
            assert _status(proc) != psutil.STATUS_STOPPED
        assert other.held == []
        assert not (folder() / str(busy.pid)).exists()  # a stale entry is removed
    finally:
        busy.kill()
        busy.wait()
