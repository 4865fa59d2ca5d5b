"""End to end: a real Hydra multirun where jobs crash (abort, segfault), raise (in a
step, while loading), run out of memory and hang (with a grandchild).

Each job's child is a real Python process; the store is a real MLflow SQLite
store. A bad job must get the right status and leave every other row intact. The jobs
are cases of the session's shared sweep (tests/conftest.py: cases_sweep).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import psutil
from mlflow.tracking import MlflowClient
from tests.conftest import CASES, DUPLICATE, SessionSweep, sweep_runs

HANG_MARKER = "import time; time.sleep(3600)"  # the Hang model's grandchild


FAULTS = ("fault_crash", "fault_segfault", "fault_raise", "fault_raise_on_load", "fault_oom")
ISOLATION = (*FAULTS, "fault_hang", "good")  # cases of the session sweep, in this order


def by_model(sweep: SessionSweep) -> dict[str, dict]:
    """The isolation cases' rows by model (`good` is matmul_chain)."""
    rows = [sweep.case(name) for name in ISOLATION]
    return {row["model"]["model_name"]: row for row in rows}


def test_each_fault_gets_its_status(cases_sweep: SessionSweep) -> None:
    rows = by_model(cases_sweep)
    assert set(rows) == {
        "fault_crash",
        "fault_segfault",
        "fault_raise",
        "fault_raise_on_load",
        "fault_oom",
        "fault_hang",
        "matmul_chain",
    }
    assert rows["fault_crash"]["status"] == "crashed"
    assert "SIGABRT" in rows["fault_crash"]["error"]
    assert rows["fault_segfault"]["status"] == "crashed"
    assert "SIGSEGV" in rows["fault_segfault"]["error"]
    assert rows["fault_raise_on_load"]["status"] == "failed"
    assert "while loading the model" in rows["fault_raise_on_load"]["error"]
    assert rows["fault_oom"]["status"] == "oom"
    assert "can't allocate memory" in rows["fault_oom"]["error"]
    assert rows["fault_raise"]["status"] == "failed"
    assert rows["fault_raise"]["error"] == "RuntimeError: injected failure in eval step"
    assert rows["fault_hang"]["status"] == "timeout"
    assert "timeout_s=5" in rows["fault_hang"]["error"]
    # The hang was cut at the timeout, not left to run.
    assert 5 <= rows["fault_hang"]["job"]["wall_time_s"] < 25


def test_the_good_job_after_the_bad_ones_is_intact(cases_sweep: SessionSweep) -> None:
    row = by_model(cases_sweep)["matmul_chain"]
    assert row["status"] == "ok" and row["error"] is None
    assert len(row["metrics"]["per_iter_time_s"]) == 2
    assert row["summary"]["per_iter_time_s"]["median"] > 0
    assert row["model"]["model_source"] == "builtin"
    assert row["provenance"]["versions"]["torch"] == "2.9.0"
    assert len(row["job"]["fingerprint"]) == 64


def test_a_job_planned_twice_runs_once_though_it_failed(cases_sweep: SessionSweep) -> None:
    """Two grid points of one fingerprint are one job: the sweep launches the first only,
    and says so before it starts; its failure does not make the second run it again
    (retry=failed is for a resumed sweep's jobs)."""
    first, second = DUPLICATE
    assert CASES[first] == CASES[second] == "fault_raise"
    row = cases_sweep.case("fault_raise")  # exactly one row of it
    assert row["status"] == "failed" and row["job"]["num"] == first
    total = len(CASES)
    (said,) = [
        line
        for line in cases_sweep.result.stderr.splitlines()
        if line.startswith(f"[{second + 1}/{total}] ") and "the same job as" in line
    ]
    # the same overrides on both sides: the job by its name alone
    name = row["job"]["name"]
    own, earlier = f"[{second + 1}/{total}]", f"[{first + 1}/{total}]"
    assert said == f"{own} {name}: the same job as {earlier}, run once as it"
    (sweep,) = cases_sweep.result.sweep_dirs
    assert (sweep / str(first)).is_dir() and not (sweep / str(second)).exists()
    _, children = sweep_runs(cases_sweep.tracking_uri)
    fingerprint = row["job"]["fingerprint"]
    runs = [c for c in children if c.data.tags.get("config_fingerprint") == fingerprint]
    assert [c.info.run_id for c in runs] == [row["job"]["mlflow_run_id"]]


def test_job_folders_hold_config_result_and_logs(cases_sweep: SessionSweep) -> None:
    (sweep,) = cases_sweep.result.sweep_dirs
    for row in by_model(cases_sweep).values():
        job_dir = Path(row["job"]["dir"])
        assert job_dir.parent == sweep.resolve() or job_dir.parent == sweep
        for name in (
            "result.json",
            "config.yaml",
            "stderr.log",
            "stdout.log",
        ):
            assert (job_dir / name).exists(), f"{job_dir.name}/{name} missing"
    # the sweep's own log (the machinery's lines), in its folder, not in each job's
    assert (sweep / "benchflow.log").is_file() and not (job_dir / "benchflow.log").exists()
    raise_dir = Path(by_model(cases_sweep)["fault_raise"]["job"]["dir"])
    # The traceback is kept in the job's log.
    assert "Traceback" in (raise_dir / "stderr.log").read_text()


def test_timeout_killed_the_grandchild_too(cases_sweep: SessionSweep) -> None:
    time.sleep(0.5)
    leftovers = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if HANG_MARKER in cmd or ("benchflow.harness" in cmd and str(cases_sweep.cwd) in cmd):
            leftovers.append((proc.pid, cmd))
    assert leftovers == []


def test_mlflow_has_one_parent_and_a_child_run_per_job(cases_sweep: SessionSweep) -> None:
    client = MlflowClient(cases_sweep.tracking_uri)
    parents, children = sweep_runs(cases_sweep.tracking_uri)
    assert len(parents) == 1 and len(children) == len(cases_sweep.rows())
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    ids = {r["job"]["mlflow_run_id"] for r in by_model(cases_sweep).values()}
    children = [c for c in children if c.info.run_id in ids]
    assert len(children) == 7
    status = {c.info.run_name: (c.info.status, c.data.tags["status"]) for c in children}
    assert status["fault_crash·eager·eval·float32"] == ("FAILED", "crashed")
    assert status["fault_hang·eager·eval·float32"] == ("FAILED", "timeout")
    assert status["fault_oom·eager·eval·float32"] == ("FAILED", "oom")
    assert status["fault_segfault·eager·eval·float32"] == ("FAILED", "crashed")
    assert status["matmul_chain·eager·eval·float32"] == ("FINISHED", "ok")
    crashed = next(c for c in children if c.data.tags["status"] == "crashed")
    logs = [a.path for a in client.list_artifacts(crashed.info.run_id, "logs")]
    assert "logs/stderr.log" in logs
    ok = next(c for c in children if c.data.tags["status"] == "ok")
    assert ok.data.params["model.name"] == "matmul_chain"
    assert ok.data.metrics["headline.per_iter_time_s"] > 0
    assert ok.data.tags["model_source"] == "builtin"
    history = client.get_metric_history(ok.info.run_id, "per_iter_time_s")
    assert sorted(m.step for m in history) == [0, 1]
    top = {a.path for a in client.list_artifacts(ok.info.run_id)}
    assert {"config.yaml", "result.json"} <= top


def test_the_basic_launcher_runs_one_job_at_a_time(cases_sweep: SessionSweep) -> None:
    """Hydra's default launcher: each job's child ran after the one before it ended."""
    spans = sorted(
        (r["job"]["started_at"], r["job"]["started_at"] + r["job"]["wall_time_s"])
        for r in cases_sweep.rows()
        if r["job"].get("started_at")  # invalid and skipped jobs start no child
    )
    assert len(spans) > 30
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans
