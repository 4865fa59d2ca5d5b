"""Chaos: a sweep of tiny jobs, about one job in ten crashing
(SIGSEGV, or os._exit without a result), hanging past timeout_s or allocating past
memory_limit_gb (tests/models/faults.Chaos: which, and how, is a function of the job's
seed), its own process SIGKILLed once mid-sweep, then resumed. Nothing is lost: one
current row per job with the status and cause its fault gives, one ended MLflow run per
job and none RUNNING, the parent run's counts equal to the rows, and no process of the
sweep left, by PID.

`-m full` runs it twice. First 12 jobs (seeds 0-11 hold one fault of each kind) on
two joblib workers and the local store, resumed with retry=none (the faults' rows kept:
their reruns would cost minutes of waiting), and between the kill and the resume leaves
the store as a kill in the middle of a job's logging leaves it (no signal can be timed
to hit that): one job's run RUNNING without its last tag (its row recorded), and a job
run RUNNING with no row. Then 1,000 jobs in the sweep's own process on an MLflow server
over PostgreSQL (services/postgres.py). Neither fits in the default suite's six minutes
(docs/tests.md)."""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from tests.conftest import SEARCHPATH, EarlySweeps, early, run_cli, start_cli
from tests.models.faults import chaos_fault

from benchflow.core.layout import SweepDir
from benchflow.results.io import current, read_rows

# A tiny job's wall is under 2 s here alone. The default suite's sweep runs niced beside
# its tests, where a job's share of a busy core can be a tenth: room for that; the
# 1,000 jobs of -m full run alone (each hang costs its timeout, twice: the resume runs
# failures again).
TIMEOUT_S = 30
FULL_TIMEOUT_S = 8
# What each fault's row must say: its status, and its cause's first words.
EXPECTED = {
    None: ("ok", None),
    "segfault": ("crashed", "killed by SIGSEGV"),
    "exit": ("crashed", "exit code 3 without a result"),
    "hang": ("timeout", "no result after timeout_s="),
    "oom": ("oom", "RuntimeError"),
}
RUN_STATUS = {"ok": "FINISHED", "crashed": "FAILED", "timeout": "FAILED", "oom": "FAILED"}


# Two joblib workers, the sweep's rows written as each batch of 4 is back (a batch's
# processes, in their jobs' journals as they end, are kept by a resume all the same).
JOBLIB = ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.sweeper.max_batch_size=4")


def _sweep(jobs: int, *extra: str, timeout_s: int = TIMEOUT_S) -> list[str]:
    return [
        "-m",
        SEARCHPATH,
        "model=chaos",
        f"seed=range(0,{jobs})",
        "repeat=1",
        "iterations_per_run=1",
        "warmup=0",
        "cpus_per_job=1",
        f"timeout_s={timeout_s}",
        "memory_limit_gb=3",
        "progress=false",
        *extra,
    ]


def _family(proc: psutil.Process, folder: Path) -> dict[int, float]:
    """The sweep's processes now: its descendants (workers, zygotes, jobs) and whatever
    works in its folder (zygotes forked from another belong to no one), by PID and
    start time."""
    found = {}
    candidates = [proc, *proc.children(recursive=True)]
    for p in psutil.process_iter(["cwd"]):
        if (p.info["cwd"] or "").startswith(str(folder)):
            candidates.append(p)
    for p in candidates:
        with contextlib.suppress(psutil.NoSuchProcess):
            found[p.pid] = p.create_time()
    return found


def _alive(pids: dict[int, float]) -> list[int]:
    """Those of `pids` still running (the same PID and start time, not a zombie)."""
    left = []
    for pid, created in pids.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            pass
    return left


def chaos(
    root: Path,
    jobs: int,
    *extra: str,
    between: Callable[[Path, Path], dict[str, Any]] | None = None,
    timeout_s: int = TIMEOUT_S,
    resume: tuple[str, ...] = ("resume=true",),
) -> dict[str, Any]:
    """The sweep, SIGKILLed once 40% of its rows are in, then resumed: what each left.
    `between(folder, sweep folder)`: done after the kill, before the resume."""
    cwd = root / "chaos"
    cwd.mkdir()
    err = cwd / "stderr.log"
    args = _sweep(jobs, *extra, timeout_s=timeout_s)
    started = time.monotonic()
    proc = start_cli(args, cwd, err)
    seen: dict[int, float] = {}
    try:
        sweep = None
        while proc.poll() is None:
            seen |= _family(psutil.Process(proc.pid), cwd)
            sweeps = list(cwd.glob("multirun/*/*/results.jsonl"))
            if sweeps and len(sweeps[0].read_bytes().splitlines()) >= jobs * 0.4:
                sweep = sweeps[0].parent
                break
            time.sleep(0.2)
        seen |= _family(psutil.Process(proc.pid), cwd)
        proc.send_signal(signal.SIGKILL)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    got: dict[str, Any] = {"code": code, "err": err.read_text(), "sweep": sweep, "cwd": cwd}
    got["killed_after_s"] = time.monotonic() - started
    assert sweep is not None, got["err"][-3000:]
    got["rows_at_kill"] = len(read_rows(SweepDir(sweep).results))
    deadline = time.monotonic() + 20
    while (left := _alive(seen)) and time.monotonic() < deadline:
        time.sleep(0.2)
    got["left_after_kill"], got["processes_seen"] = left, len(seen)
    if between is not None:
        got |= between(cwd, sweep)
    resumed = time.monotonic()
    got["again"] = run_cli([*args, *resume], cwd, timeout=3600)
    got["resume_s"] = time.monotonic() - resumed
    deadline = time.monotonic() + 10
    while (left := [p.pid for p in psutil.process_iter(["cwd"]) if _works_in(p, cwd)]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.2)
    got["left_after_resume"] = left
    return got


def _works_in(proc: psutil.Process, folder: Path) -> bool:
    return (proc.info["cwd"] or "").startswith(str(folder))


def check(got: dict[str, Any], jobs: int, tracking_uri: str, experiment: str) -> Counter[str]:
    """Every claim of the module's docstring, on one chaos sweep; the MLflow runs'
    statuses, counted."""
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    from benchflow.tracking.sync import KILLED_TAG

    assert got["code"] == -signal.SIGKILL, got["err"][-3000:]
    assert got["rows_at_kill"] < jobs  # killed mid-sweep
    assert got["left_after_kill"] == [], f"still running after the kill: {got['left_after_kill']}"
    again = got["again"]
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert got["left_after_resume"] == []
    sweep = SweepDir(got["sweep"])
    rows = current(read_rows(sweep.results))
    assert len(rows) == jobs and len({r.job.fingerprint for r in rows}) == jobs
    for row in rows:
        status, cause = EXPECTED[chaos_fault(_seed(row))]
        assert row.status.value == status, (_seed(row), row.status, row.error)
        assert cause is None or (row.error or "").startswith(cause), (_seed(row), row.error)

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], run_view_type=ViewType.ALL, max_results=5000)
    assert not [r for r in runs if r.info.status == "RUNNING"]
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    jobs_runs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    statuses = Counter(f"{r.info.status} ({r.info.lifecycle_stage})" for r in jobs_runs)
    active = {r.info.run_id: r for r in jobs_runs if r.info.lifecycle_stage == "active"}
    assert sorted(active) == sorted(r.job.mlflow_run_id or "" for r in rows)  # one per job
    for row in rows:
        assert active[row.job.mlflow_run_id or ""].info.status == RUN_STATUS[row.status.value]
    # the others, deleted: an attempt the kill cut short (ended KILLED by the resume), or
    # one the resume ran again (retry=failed: a fault's first row, superseded)
    for run in jobs_runs:
        if run.info.lifecycle_stage == "deleted":
            tags = run.data.tags
            killed = run.info.status == "KILLED" and KILLED_TAG in tags
            assert killed or "benchflow.superseded_by" in tags, (run.info.status, tags)
    assert parent.info.status == "FINISHED"
    tags = {k[5:]: int(v) for k, v in parent.data.tags.items() if k.startswith("jobs.")}
    assert tags == Counter(r.status.value for r in rows)
    return statuses


@early("chaos")
def _chaos_12(root: Path) -> dict[str, Any]:
    resume = ("resume=true", "retry=none")
    return chaos(root, 12, *JOBLIB, between=_runs_a_kill_mid_logging_leaves, resume=resume)


def _runs_a_kill_mid_logging_leaves(cwd: Path, sweep: Path) -> dict[str, Any]:
    """One recorded job's run back to RUNNING without its last tag, and a job run
    RUNNING with no row: what a kill between a run's start and its end leaves."""
    from mlflow.tracking import MlflowClient

    from benchflow.tracking.sync import LOGGED_TAG

    client = MlflowClient(f"sqlite:///{cwd / 'mlflow.db'}")
    parent = SweepDir(sweep).parent_run_id()
    assert parent is not None
    exp = client.get_run(parent).info.experiment_id
    logged = next(r for r in read_rows(SweepDir(sweep).results) if r.status.value == "ok")
    run_id = logged.job.mlflow_run_id or ""
    client.update_run(run_id, status="RUNNING")
    client.delete_tag(run_id, LOGGED_TAG)
    orphan = client.create_run(exp, run_name="chaos", tags={"mlflow.parentRunId": parent})
    return {"logged": run_id, "orphan": orphan.info.run_id}


@pytest.mark.full  # the default suite had no room left for it (docs/tests.md)
def test_chaos_nothing_lost(early_sweeps: EarlySweeps) -> None:
    got = early_sweeps.result("chaos")
    statuses = check(got, 12, f"sqlite:///{got['cwd'] / 'mlflow.db'}", "benchflow")
    assert statuses["FINISHED (active)"] == 8 and statuses["FAILED (active)"] == 4


@pytest.mark.full
def test_a_resume_ends_the_runs_a_kill_left_running(early_sweeps: EarlySweeps) -> None:
    """The run whose row was recorded is logged in full from it and ends FINISHED; the
    one with no row ends KILLED, says why, and is deleted (restorable)."""
    got = early_sweeps.result("chaos")  # (its thread imports MLflow too: first)
    from mlflow.tracking import MlflowClient

    from benchflow.tracking.sync import KILLED_TAG, LOGGED_TAG

    log = (got["sweep"] / "benchflow.log").read_text()  # the sweep's log
    said = re.search(r"(\d+) logged from their rows, (\d+) ended KILLED", log)
    assert said and int(said[1]) >= 1 and int(said[2]) >= 1, log[-3000:]
    client = MlflowClient(f"sqlite:///{got['cwd'] / 'mlflow.db'}")
    logged = client.get_run(got["logged"])
    assert logged.info.status == "FINISHED" and LOGGED_TAG in logged.data.tags
    assert "headline.per_iter_time_s" in logged.data.metrics
    orphan = client.get_run(got["orphan"])
    assert orphan.info.status == "KILLED" and orphan.info.lifecycle_stage == "deleted"
    assert "before this job's row was recorded" in orphan.data.tags[KILLED_TAG]


@pytest.mark.full
@pytest.mark.timeout(1800)
def test_chaos_1000_jobs_on_a_postgresql_mlflow_server(tmp_path: Path) -> None:
    """On the default launcher: a launcher of Hydra's spawns each process (about 3.7 s a
    tiny job here, against a few tenths forked), which would take 1,000 jobs an hour."""
    from services import postgres

    url = str(postgres.up()["tracking_uri"])
    try:
        got = chaos(
            tmp_path,
            1000,
            f"mlflow.tracking_uri={url}",
            "mlflow.experiment=chaos",
            timeout_s=FULL_TIMEOUT_S,
        )
        statuses = check(got, 1000, url, "chaos")
    finally:
        postgres.down()
    rows = current(read_rows(SweepDir(got["sweep"]).results))
    faults = Counter((chaos_fault(_seed(r)) or "none", r.status.value) for r in rows)
    print(f"\nchaos 1000: killed after {got['killed_after_s']:.1f} s at {got['rows_at_kill']} rows")
    print(f"resume: {got['resume_s']:.1f} s; processes seen: {got['processes_seen']}")
    print(f"faults -> statuses: {dict(faults)}")
    print(f"MLflow runs: {dict(statuses)}")


def _seed(row: Any) -> int:
    return int(next(o for o in row.job.overrides if o.startswith("seed=")).split("=")[1])
