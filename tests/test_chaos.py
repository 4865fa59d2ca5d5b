"""Chaos: a sweep of tiny jobs on two joblib workers, about one job in ten crashing
(SIGSEGV, or os._exit without a result), hanging past timeout_s or allocating past
memory_limit_gb (tests/models/faults.Chaos: which, and how, is a function of the job's
seed), its own process SIGKILLed once mid-sweep, then resumed. Nothing is lost: one
current row per job with the status and cause its fault gives, one ended MLflow run per
job and none RUNNING, the parent run's counts equal to the rows, and no process of the
sweep left, by PID.

The default suite runs 40 jobs (seeds 0-39 hold one fault of each kind) on the local
store; `-m full` runs 1,000 on an MLflow server over PostgreSQL (services/postgres.py)."""

from __future__ import annotations

import contextlib
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest
from tests.conftest import SEARCHPATH, EarlySweeps, early, run_cli, start_cli
from tests.models.faults import chaos_fault

from benchflow.core.layout import SweepDir
from benchflow.results.io import current, read_rows

TIMEOUT_S = 8  # a tiny job's wall is under 2 s here, even beside the suite
# What each fault's row must say: its status, and its cause's first words.
EXPECTED = {
    None: ("ok", None),
    "segfault": ("crashed", "killed by SIGSEGV"),
    "exit": ("crashed", "exit code 3 without a result"),
    "hang": ("timeout", f"no result after timeout_s={TIMEOUT_S}"),
    "oom": ("oom", "RuntimeError"),
}
RUN_STATUS = {"ok": "FINISHED", "crashed": "FAILED", "timeout": "FAILED", "oom": "FAILED"}


def _sweep(jobs: int, *extra: str) -> list[str]:
    return [
        "-m",
        SEARCHPATH,
        "model=chaos",
        f"seed=range(0,{jobs})",
        "repeat=1",
        "iterations_per_run=1",
        "warmup=0",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "cpus_per_job=1",
        f"timeout_s={TIMEOUT_S}",
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


def chaos(root: Path, jobs: int, *extra: str) -> dict[str, Any]:
    """The sweep, SIGKILLed once 40% of its rows are in, then resumed: what each left."""
    cwd = root / "chaos"
    cwd.mkdir()
    err = cwd / "stderr.log"
    args = _sweep(jobs, *extra)
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
    resumed = time.monotonic()
    got["again"] = run_cli([*args, "resume=true"], cwd, timeout=3600)
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


@early("chaos", niced=False)  # its timeouts are the test's clock: not starved by others
def _chaos_40(root: Path) -> dict[str, Any]:
    return chaos(root, 40)


def test_chaos_nothing_lost(early_sweeps: EarlySweeps) -> None:
    got = early_sweeps.result("chaos")
    statuses = check(got, 40, f"sqlite:///{got['cwd'] / 'mlflow.db'}", "benchflow")
    assert statuses["FINISHED (active)"] == 35 and statuses["FAILED (active)"] == 5


@pytest.mark.full
def test_chaos_1000_jobs_on_a_postgresql_mlflow_server(tmp_path: Path) -> None:
    from services import postgres

    url = str(postgres.up()["tracking_uri"])
    try:
        got = chaos(tmp_path, 1000, f"mlflow.tracking_uri={url}", "mlflow.experiment=chaos")
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
