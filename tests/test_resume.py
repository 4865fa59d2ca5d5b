"""Resume and retry: a sweep run again into its folder keeps what its policy keeps, an
interrupted sweep (SIGTERM) resumes to exactly the rows of an uninterrupted one, a
killed one (SIGKILL) leaves no process behind, and results.jsonl and MLflow end with
one current result per job and no run left RUNNING."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import psutil
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

from benchflow.config.schema import BenchConfig, IrConfig, ModelConfig, ProfileConfig
from benchflow.core.job import Job, fingerprint
from benchflow.core.layout import SweepDir
from benchflow.results.io import current, record_row
from benchflow.results.io import read_rows as read_typed_rows
from benchflow.results.row import ResultRow

SWEEP = [
    "-m",
    SEARCHPATH,
    # The SIGTERM must land while job 2 runs: sleepy's steps sleep 0.25 s, so its jobs
    # take 1.5 s and 2 s (a warm-up and 2 or 3 repeats of 2) on any machine and under
    # any load; fault_raise fails at its first step.
    "model=sleepy,fault_raise",
    "model.size=tiny",
    "dtype=float32",
    "repeat=2,3",
    "iterations_per_run=2",
    "warmup=1",
]


def _cfg(**kw: Any) -> BenchConfig:
    return BenchConfig(**{"model": ModelConfig(name="llama"), **kw})


@pytest.mark.parametrize(
    "change",
    [
        {"model": ModelConfig(name="dlrm")},
        {"model": ModelConfig(name="llama", size="tiny")},
        {"dtype": "float32"},
        {"batch_size": 4},
        {"repeat": 6},
        {"iterations_per_run": 6},
        {"warmup": 3},
        {"verify": True},
        {"seed": 1},
        {"num_threads": 1},
        {"matmul_precision": "highest"},
        {"host_allocator": "glibc"},
        {"profile": ProfileConfig(name="torch", active=True)},
        {"ir": IrConfig(formats=["hlo"])},
    ],
)
def test_fingerprint_changes_with_what_is_measured(change: dict[str, Any]) -> None:
    assert fingerprint(_cfg(**change)) != fingerprint(_cfg())


@pytest.mark.parametrize(
    "change",
    [
        {"timeout_s": 5.0},
        {"fail_fast": True},
        {"progress": False},
        {"baseline": "eager"},
        {"resume": True},
        {"retry": "all"},
    ],
)
def test_fingerprint_ignores_how_a_job_is_run(change: dict[str, Any]) -> None:
    assert fingerprint(_cfg(**change)) == fingerprint(_cfg())


def test_record_row_supersedes_and_keeps_history(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"

    def row(fp: str, status: str) -> ResultRow:
        return ResultRow.from_dict(
            {
                "row_id": f"{fp}-{status}",
                "model": {"model_name": "m"},
                "experiment": {"test": "eval"},
                "status": status,
                "job": {"fingerprint": fp},
            }
        )

    assert record_row(path, row("a", "crashed")) == []
    record_row(path, row("b", "ok"))
    with path.open("a") as f:
        f.write('{"torn": \n')  # a half-written line from a killed writer
    replaced = record_row(path, row("a", "ok"))
    assert [r.row_id for r in replaced] == ["a-crashed"]
    assert replaced[0].superseded_by == "a-ok"
    rows = read_typed_rows(path)  # the torn line is reported and skipped, not lost
    assert '{"torn": ' in path.read_text()
    assert [(r.row_id, r.superseded_by) for r in rows] == [
        ("a-crashed", "a-ok"),
        ("b-ok", None),
        ("a-ok", None),
    ]
    assert [r.row_id for r in current(rows)] == ["b-ok", "a-ok"]


def _current_outcomes(sweep_dir: Path) -> dict[str, str]:
    rows = current(read_typed_rows(SweepDir(sweep_dir).results))
    fps = [r.job.fingerprint for r in rows]
    assert len(fps) == len(set(fps)), "more than one current row for a job"
    return {r.job.fingerprint: r.status.value for r in rows}


def _mlflow_runs(cwd: Path) -> tuple[list[Any], list[Any]]:
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{cwd / 'mlflow.db'}")
    exp = client.get_experiment_by_name("benchflow")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], run_view_type=ViewType.ALL)
    jobs = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    active = [r for r in jobs if r.info.lifecycle_stage == "active"]
    deleted = [r for r in jobs if r.info.lifecycle_stage == "deleted"]
    return active, deleted


def _running_in(folder: Path) -> list[str]:
    """Processes working in `folder` (a sweep's zygotes and job children do)."""
    found = []
    for proc in psutil.process_iter(["pid", "cwd", "cmdline"]):
        if (proc.info["cwd"] or "").startswith(str(folder)):
            found.append(f"{proc.info['pid']}: {' '.join(proc.info['cmdline'] or [])}")
    return found


def _processes_gone(folder: Path, within_s: float) -> list[str]:
    deadline = time.monotonic() + within_s
    while (left := _running_in(folder)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@early("sigterm_resume", niced=False)  # the SIGTERM must land inside job 2's steps
def _sigterm_then_resume(root: Path) -> dict[str, Any]:
    """A sweep SIGTERMed while its second job runs, then the same command with
    resume=true: what each left."""
    cwd = root / "interrupted"
    cwd.mkdir()
    err = cwd / "stderr.log"
    proc = start_cli(SWEEP, cwd, err)
    try:
        wait_for_text(err, "[2/4] sleepy", proc)  # the second job's child is starting
        code = sigterm_once_started(proc, cwd, "multirun/*/*/1/stderr.log", err)
    finally:
        if proc.poll() is None:
            proc.kill()
    got: dict[str, Any] = {"cwd": cwd, "code": code, "err": err.read_text()}
    sweeps = [p for p in (cwd / "multirun").glob("*/*") if p.is_dir()]
    got["sweeps"] = sweeps
    got["first"] = read_rows(sweeps[0]) if len(sweeps) == 1 else []
    # a process SIGKILLed as the sweep exits can still be ending (no command line left:
    # CI's fresh clone saw one once); one still there after 5 s was left behind
    got["running"] = _processes_gone(cwd, 5)
    if code == 143:
        got["again"] = run_cli([*SWEEP, "resume=true"], cwd)
    return got


def test_sigterm_then_resume_equals_an_uninterrupted_sweep(early_sweeps: EarlySweeps) -> None:
    got = early_sweeps.result("sigterm_resume")
    cwd = got["cwd"]
    assert got["code"] == 143, got["err"][-3000:]
    assert "resume=true" in got["err"]
    (sweep,) = got["sweeps"]
    assert [r["status"] for r in got["first"]] == ["ok", "interrupted"]
    assert not got["running"]  # no job's child (nor a zygote) is left

    # Uninterrupted, every planned job ends as its model does: sleepy ok, fault_raise
    # failed (in its step); plan.json holds every job, resolved, before any ran.
    plan = json.loads((sweep / "plan.json").read_text())
    expected = {
        Job.from_dict(j).fingerprint: "ok" if "model=sleepy" in j["overrides"] else "failed"
        for j in plan["jobs"]
    }
    assert sorted(expected.values()) == ["failed", "failed", "ok", "ok"]

    again = got["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming multirun/{sweep.parent.name}/{sweep.name}" in again.stderr
    assert "kept ok" in again.stderr  # job 1 was not run again
    assert _current_outcomes(sweep) == expected
    history = read_rows(sweep)
    assert len(history) == 5  # 4 current + the interrupted attempt, kept and marked
    (old,) = [r for r in history if r["status"] == "interrupted"]
    assert old["superseded_by"] and old["job"]["attempt"] == 1
    rerun = next(r for r in history if r["row_id"] == old["superseded_by"])
    assert rerun["job"]["attempt"] == 2 and rerun["status"] == "ok"

    active, deleted = _mlflow_runs(cwd)
    fps = sorted(r.data.tags["config_fingerprint"] for r in active)
    assert fps == sorted(expected)  # one current run per job
    (gone,) = deleted
    assert gone.info.status == "KILLED"
    assert gone.data.tags["benchflow.superseded_by"] == rerun["job"]["mlflow_run_id"]


KILLED = ["-m", SEARCHPATH, "model=sleepy,fault_hang", "model.size=tiny", "dtype=float32",
          "repeat=2", "iterations_per_run=2", "warmup=1", "timeout_s=10"]  # fmt: skip


def _sigkill_then_resume(root: Path) -> dict[str, Any]:
    """A sweep's own process SIGKILLed while its second job (a hang) runs, then the same
    command with resume=true. Between the two, the MLflow store is left as a kill in
    the middle of a job's logging leaves it, which no signal can be timed to hit: the
    first job's run RUNNING without its last tag (its row recorded), and a job run
    RUNNING with no row (killed between its run's start and its row)."""
    from mlflow.tracking import MlflowClient

    from benchflow.tracking.sync import LOGGED_TAG

    cwd = root / "killed"
    cwd.mkdir()
    err = cwd / "stderr.log"
    proc = start_cli(KILLED, cwd, err)
    try:
        wait_for_text(err, "[2/2] fault_hang", proc)
        time.sleep(2.0)  # its child is in the hang (timeout_s=10)
        proc.kill()
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    got: dict[str, Any] = {"cwd": cwd, "code": code, "err": err.read_text()}
    got["left"] = _processes_gone(cwd, 15.0)  # the zygotes end the job, then themselves
    (sweep,) = [p for p in (cwd / "multirun").glob("*/*") if p.is_dir()]
    got["sweep"], got["first"] = sweep, read_rows(sweep)
    client = MlflowClient(f"sqlite:///{cwd / 'mlflow.db'}")
    parent = SweepDir(sweep).parent_run_id()
    assert parent is not None
    exp = client.get_run(parent).info.experiment_id
    if len(got["first"]) == 1:
        logged = got["first"][0]["job"]["mlflow_run_id"]
        client.update_run(logged, status="RUNNING")
        client.delete_tag(logged, LOGGED_TAG)
        orphan = client.create_run(exp, run_name="sleepy", tags={"mlflow.parentRunId": parent})
        got["logged"], got["orphan"] = logged, orphan.info.run_id
    got["again"] = run_cli([*KILLED, "resume=true"], cwd)
    got["left_after"] = _processes_gone(cwd, 5.0)
    return got


@pytest.mark.full  # the default suite's chaos test (tests/test_chaos.py) kills and resumes
def test_a_sweep_sigkilled_mid_job_leaves_no_process_and_resume_ends_every_run(
    tmp_path: Path,
) -> None:
    """The kill lands while a job hangs, for certain (the chaos test's kill lands where
    it may)."""
    got = _sigkill_then_resume(tmp_path)
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    from benchflow.tracking.sync import KILLED_TAG, LOGGED_TAG

    assert got["code"] == -signal.SIGKILL, got["err"][-3000:]
    # its zygotes saw it go: each ended the job it ran (the hang and its grandchild)
    # and exited; nothing of the sweep runs on
    assert got["left"] == []
    assert [r["status"] for r in got["first"]] == ["ok"]  # the hang had no row yet
    again = got["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    # the MLflow repair is the machinery's: the sweep's log says it, not the terminal
    said = (got["sweep"] / "benchflow.log").read_text()
    assert "1 logged from their rows, 1 ended KILLED" in said
    assert "ended KILLED" not in again.stdout + again.stderr
    assert got["left_after"] == []
    rows = current(read_typed_rows(SweepDir(got["sweep"]).results))
    assert sorted(r.status.value for r in rows) == ["ok", "timeout"]
    assert len({r.job.fingerprint for r in rows}) == 2
    client = MlflowClient(f"sqlite:///{got['cwd'] / 'mlflow.db'}")
    parent = client.get_run(SweepDir(got["sweep"]).parent_run_id() or "")
    runs = client.search_runs([parent.info.experiment_id], run_view_type=ViewType.ALL)
    assert [r.info.run_id for r in runs if r.info.status == "RUNNING"] == []
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    active = [r for r in jobs if r.info.lifecycle_stage == "active"]
    # one ended run per job, each its current row's, complete
    assert sorted(r.info.run_id for r in active) == sorted(r.job.mlflow_run_id for r in rows)
    for run in active:
        (row,) = [r for r in rows if r.job.mlflow_run_id == run.info.run_id]
        assert run.data.tags[LOGGED_TAG] == row.row_id
        assert run.info.status == ("FINISHED" if row.status.value == "ok" else "FAILED")
    logged = client.get_run(got["logged"])
    assert logged.info.status == "FINISHED" and "per_iter_time_s" in str(logged.data.metrics)
    orphan = client.get_run(got["orphan"])
    assert orphan.info.status == "KILLED" and orphan.info.lifecycle_stage == "deleted"
    assert "before this job's row was recorded" in orphan.data.tags[KILLED_TAG]
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["jobs.ok"] == "1" and parent.data.tags["jobs.timeout"] == "1"


SINGLE = [SEARCHPATH, "model=sleepy", "model.size=tiny", "dtype=float32", "repeat=3",
          "iterations_per_run=2", "warmup=1", "mlflow.enabled=false"]  # fmt: skip


@early("sigterm_single", niced=False)  # the SIGTERM must land inside the job's steps
def _sigterm_single_then_resume(root: Path) -> dict[str, Any]:
    """A single run (no -m) SIGTERMed while its job runs, then the command its hint
    gives (the same with resume=true), then that once more."""
    err = root / "stderr.log"
    proc = start_cli(SINGLE, root, err)
    try:
        wait_for_text(err, "[1/1] sleepy", proc)  # its child is starting
        code = sigterm_once_started(proc, root, "runs/*/*/stderr.log", err)
    finally:
        if proc.poll() is None:
            proc.kill()
    got: dict[str, Any] = {"cwd": root, "code": code, "err": err.read_text()}
    got["folders"] = [p for p in (root / "runs").glob("*/*") if p.is_dir()]
    got["first"] = [r["status"] for f in got["folders"] for r in read_rows(f)]
    if code == 143:
        got["again"] = run_cli([*SINGLE, "resume=true"], root)
        got["once_more"] = run_cli([*SINGLE, "resume=true"], root)
    return got


def test_a_single_run_sigtermed_finishes_with_its_hint(early_sweeps: EarlySweeps) -> None:
    got = early_sweeps.result("sigterm_single")
    assert got["code"] == 143, got["err"][-3000:]
    assert "Run the same command with resume=true to finish the run." in got["err"]
    (folder,) = got["folders"]
    assert got["first"] == ["interrupted"]
    assert len(json.loads((folder / "plan.json").read_text())["jobs"]) == 1

    again = got["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming runs/{folder.parent.name}/{folder.name}" in again.stderr
    assert not (got["cwd"] / "multirun").exists()
    assert [p for p in (got["cwd"] / "runs").glob("*/*")] == [folder]  # no new folder
    first, second = read_rows(folder)
    assert first["status"] == "interrupted" and first["superseded_by"] == second["row_id"]
    assert second["status"] == "ok" and second["job"]["attempt"] == 2
    assert second["job"]["fingerprint"] == first["job"]["fingerprint"]

    # Its row is ok now: resume=true says so, runs nothing, and exits 0.
    done = got["once_more"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kept ok" in done.stderr and len(read_rows(folder)) == 2


# Four sweeps into one folder (~80 s). The default suite keeps the policy's decision
# (test_core: each status under each retry value) and its wiring end to end (the
# SIGTERM test above: a kept job, a rerun one, its superseded MLflow run).
@pytest.mark.full
def test_retry_policy(tmp_path: Path) -> None:
    sweep = ["-m", SEARCHPATH, "model=matmul_chain,fault_raise", "model.size=tiny", "dtype=float32",
             "repeat=2", "iterations_per_run=2", "warmup=1", "hydra.sweep.dir=s"]  # fmt: skip
    assert run_cli(sweep, tmp_path).returncode == 0
    assert [r["status"] for r in read_rows(tmp_path / "s")] == ["ok", "failed"]

    kept = run_cli([*sweep, "retry=none"], tmp_path)
    assert kept.returncode == 0 and kept.stderr.count("kept ") == 2
    assert len(read_rows(tmp_path / "s")) == 2  # nothing ran, nothing written

    retried = run_cli(sweep, tmp_path)  # retry=failed is the default
    assert retried.returncode == 0
    rows = read_rows(tmp_path / "s")
    assert [
        (r["model"]["model_name"], r["status"], bool(r.get("superseded_by"))) for r in rows
    ] == [
        ("matmul_chain", "ok", False),
        ("fault_raise", "failed", True),
        ("fault_raise", "failed", False),
    ]
    # results.jsonl and MLflow show one current result per job
    assert sorted(_current_outcomes(tmp_path / "s").values()) == ["failed", "ok"]
    active, deleted = _mlflow_runs(tmp_path)
    assert len(active) == 2 and len(deleted) == 1

    everything = run_cli([*sweep, "retry=all"], tmp_path)
    assert everything.returncode == 0 and "kept " not in everything.stderr
    assert len(read_rows(tmp_path / "s")) == 5
    assert len(current(read_typed_rows(SweepDir(tmp_path / "s").results))) == 2


def test_resume_needs_a_matching_sweep(tmp_path: Path) -> None:
    res = run_cli(["-m", "model=llama", "resume=true"], tmp_path)
    assert res.returncode == 2 and "resume=true found no sweep under multirun/" in res.stderr
    assert not (tmp_path / "multirun").exists() or not any((tmp_path / "multirun").iterdir())
    res = run_cli(["model=llama", "resume=true"], tmp_path)
    assert res.returncode == 2 and "resume=true found no run under runs/" in res.stderr
    assert not (tmp_path / "runs").exists()
    res = run_cli(["-m", "model=llama", "retry=sometimes"], tmp_path)
    assert res.returncode == 2 and "retry" in res.stderr and "failed, none, all" in res.stderr
