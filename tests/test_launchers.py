"""Fan-out on Hydra's real launchers: the same 4-job sweep under joblib (n_jobs=2),
submitit's local executor and a local Ray instance on 127.0.0.1 gives the rows its plan
says (the same jobs, outcomes and errors as Hydra's basic launcher gives them: every
other sweep of the suite runs on that one), every job's MLflow run exactly once in one
SQLite store written by concurrent workers, and jobs that ran at the same time never
shared a core (CPU slots)."""

from __future__ import annotations

import itertools
import os
import platform
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import (
    REPO,
    SEARCHPATH,
    CliResult,
    EarlySweeps,
    early,
    run_cli,
    start_cli,
    sweep_runs,
)
from tests.early import environ

from benchflow.core import cpus
from benchflow.core.layout import SweepDir
from benchflow.results.headline import median_time
from benchflow.results.row import ResultRow
from benchflow.tracking.sync import LOGGED_TAG

# 4 jobs: 2 that time a model and 2 that fail in their step (a failure must be the same
# row whichever launcher ran it). cpus_per_job=1: two jobs at a time on 2 cores.
SWEEP = [
    "-m",
    SEARCHPATH,
    "model=sleepy,fault_raise",
    "model.size=tiny",
    "repeat=2,3",
    # sleepy sleeps 0.25 s a step: 12.5-18.5 s per ok job (cold step, warm-up, 2-3
    # repeats of 24) on any CPU and under any load, long enough that jobs given to two
    # workers at once overlap in time (the check that they never share a core). A
    # compute-bound step is not: bfloat16 matmuls took ~1 s on a VM without AVX-512 and
    # 0.2 s with it. joblib's second worker starts its job late while the suite's other
    # runs import (its zygotes start in its first job's gap): at 1.5-2 s a job it once
    # started (3.05 s) after the first ended (2.72 s), at 3.5-5 s a job 6.2 s after the
    # first started (it had ended at 3.7 s), and at 6.5-9.5 s a job 7.3 s after (7.0 s).
    "iterations_per_run=24",
    "warmup=1",
    "cpus_per_job=1",
]
LAUNCHERS = {
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "submitit_local": ["hydra/launcher=submitit_local"],
    "ray": ["hydra/launcher=ray_local"],
    # A real Ray cluster of two nodes on this host (services/ray_cluster.py), joined.
    "ray_cluster": ["hydra/launcher=ray_cluster", "hydra.launcher.ray.init.address={}"],
}
# joblib runs in the default suite; submitit's and Ray's sweeps (2-3 min each on 2 CPUs:
# one process per job at once, a Ray instance or cluster) in `make test-full`.
SLOW = {"submitit_local", "ray", "ray_cluster"}
RAY = ("ray", "ray_cluster")


def each(names: list[str]) -> list[Any]:
    return [pytest.param(n, marks=[pytest.mark.full] if n in SLOW else []) for n in names]


TWO_CORES = len(os.sched_getaffinity(0)) >= 2


def _run(name: str, root: Path) -> CliResult:
    cwd = root / name
    cwd.mkdir(exist_ok=True)
    # Its own CPU locks: the check that two jobs ran at once, each on its own core,
    # must not depend on which cores the session sweeps hold meanwhile.
    locks = str(cwd / "cpu-locks")
    if name == "ray_cluster":
        return _on_a_ray_cluster(cwd, locks)
    result = run_cli([*SWEEP, *LAUNCHERS[name]], cwd, timeout=600, BENCHFLOW_CPU_LOCK_DIR=locks)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def _on_a_ray_cluster(cwd: Path, locks: str) -> CliResult:
    """The sweep on a two-node Ray cluster started for it (its nodes' workers get the
    CPU lock folder from the cluster's environment, as on machines of their own)."""
    from services import ray_cluster

    # as docs/launchers.md shows it; the nodes get the CPU lock folder from its env
    env = {**environ(), "BENCHFLOW_CPU_LOCK_DIR": locks}
    subprocess.run(["make", "-s", "ray-up"], cwd=REPO, env=env, check=True)
    cluster = ray_cluster.up()  # (it runs: its address and nodes)
    try:
        RAY_NODES[str(cwd)] = {n["node_id"] for n in cluster["nodes"]}
        address = f"hydra.launcher.ray.init.address={cluster['address']}"
        result = run_cli([*SWEEP, "hydra/launcher=ray_cluster", address], cwd, timeout=600)
    finally:
        subprocess.run(["make", "-s", "ray-down"], cwd=REPO, check=True)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


RAY_NODES: dict[str, set[str]] = {}  # a Ray cluster sweep's folder -> its nodes' ids


# Not niced: joblib's second worker must import and take its job while the first
# worker's job runs (the check that jobs ran at once); niced among the suite's other
# runs, a fresh clone's once started 8 s late, after the first job had ended.
@early("launchers", niced=False)
def _default_launchers(root: Path) -> dict[str, CliResult]:
    """The default suite's launchers, one after another, from the first test on."""
    return {name: _run(name, root) for name in LAUNCHERS if name not in SLOW}


class Sweeps:
    """Each launcher's sweep, once per session, in its own folder and store."""

    def __init__(self, early_sweeps: EarlySweeps, root: Path) -> None:
        self.early, self.root, self.slow = early_sweeps, root, dict[str, CliResult]()

    def __call__(self, name: str) -> CliResult:
        if name not in SLOW:
            done: dict[str, CliResult] = self.early.result("launchers")
            return done[name]
        if name not in self.slow:
            self.slow[name] = _run(name, self.root)
        return self.slow[name]


@pytest.fixture(scope="module")
def sweep(early_sweeps: EarlySweeps, tmp_path_factory: pytest.TempPathFactory) -> Sweeps:
    return Sweeps(early_sweeps, tmp_path_factory.mktemp("launchers"))


def identity(row: dict[str, Any]) -> tuple[str, str, str, str | None]:
    """What must not depend on the launcher: the job, its outcome and its error."""
    return (row["job"]["fingerprint"], row["job"]["name"], row["status"], row["error"])


def planned(result: CliResult) -> list[tuple[str, str, str, str | None]]:
    """Each job of the plan with the outcome its model has on any launcher (the basic
    one gives exactly these rows): sleepy times, fault_raise fails in its step."""
    (sweep_dir,) = result.sweep_dirs
    plan = SweepDir(sweep_dir).read_plan()
    assert plan is not None and plan.total == 4
    out = []
    for num in range(plan.total):
        job = plan.job(num)
        assert job is not None
        fails = job.config.model.name == "fault_raise"
        error = "RuntimeError: injected failure in eval step" if fails else None
        out.append((job.fingerprint, job.name, "failed" if fails else "ok", error))
    return out


@pytest.mark.parametrize("launcher", each(list(LAUNCHERS)))
def test_same_rows_under_every_launcher(launcher: str, sweep: Sweeps) -> None:
    result = sweep(launcher)
    rows = result.rows()
    assert len(rows) == 4 and not any(r.get("superseded_by") for r in rows)
    assert Counter(r["status"] for r in rows) == {"ok": 2, "failed": 2}
    assert len({r["job"]["fingerprint"] for r in rows}) == 4
    assert sorted(map(identity, rows)) == sorted(planned(result))
    for row in rows:
        if row["status"] == "ok":
            # Pinned to one core, the child ran one thread, whatever the launcher's
            # worker environment said (Ray sets OMP_NUM_THREADS=1, joblib its own).
            assert row["experiment"]["num_threads"] == 1
            assert (median_time(ResultRow.from_dict(row)) or 0) > 0
        assert row["job"]["cpus"] in ("0", "1") or not TWO_CORES
        # where it ran: the launcher's node (Ray's node id), else this host
        node = row["job"]["node"]
        assert node.startswith("ray:") if launcher in RAY else node == platform.node()
    if launcher == "ray_cluster":  # jobs on both nodes of the cluster
        nodes = {r["job"]["node"].removeprefix("ray:") for r in rows}
        assert nodes == RAY_NODES[str(result.cwd)], nodes


@pytest.mark.parametrize("launcher", each(list(LAUNCHERS)))
def test_every_job_has_one_mlflow_run(launcher: str, sweep: Sweeps) -> None:
    result = sweep(launcher)
    rows = result.rows()
    parents, children = sweep_runs(f"sqlite:///{result.cwd / 'mlflow.db'}")
    (parent,) = parents
    assert len(children) == 4
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    # A job run is complete when its last tag, benchflow.logged = the row's id, is set.
    logged = Counter(c.data.tags.get(LOGGED_TAG) for c in children)
    assert logged == Counter(r["row_id"] for r in rows)
    by_run = {c.info.run_id: c for c in children}
    for row in rows:
        run = by_run[row["job"]["mlflow_run_id"]]
        assert run.info.status == ("FINISHED" if row["status"] == "ok" else "FAILED")
    assert parent.info.status == "FINISHED"


@pytest.mark.skipif(not TWO_CORES, reason="needs 2 CPUs to run two pinned jobs at once")
@pytest.mark.parametrize("launcher", each(list(LAUNCHERS)))
def test_jobs_ran_at_once_but_never_on_the_same_core(launcher: str, sweep: Sweeps) -> None:
    rows = sweep(launcher).rows()
    spans = [
        (r["job"]["started_at"], r["job"]["started_at"] + r["job"]["wall_time_s"], r["job"]["cpus"])
        for r in rows
    ]
    overlapping = [
        (a, b) for a, b in itertools.combinations(spans, 2) if a[0] < b[1] and b[0] < a[1]
    ]
    assert overlapping, f"{launcher} ran the 4 jobs one after another: {spans}"
    assert all(a[2] != b[2] for a, b in overlapping), overlapping


# --- CPU slots ------------------------------------------------------------------------


def test_slots_cut_the_cores_into_disjoint_runs() -> None:
    assert cpus.slots(2, [0, 1, 2, 3, 4]) == [[0, 1], [2, 3]]
    assert cpus.slots(None, [0, 1, 2]) == [[0, 1, 2]]
    assert cpus.slots(1, [3, 7]) == [[3], [7]]
    assert cpus.span([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    with pytest.raises(ValueError, match=r"cpus_per_job=3, but this host gives benchflow 2 CPUs"):
        cpus.slots(3, [0, 1])


def test_a_job_waits_while_another_process_holds_its_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real second process (another sweep on this host, with cpus_per_job=1) holds one
    core; a job that wants all of them waits, says who holds what, and goes on the
    moment the holder exits: slots of different sizes exclude each other."""
    monkeypatch.setenv(cpus.ENV_LOCK_DIR, str(tmp_path))
    holder = another_sweep_holds("cpus", "cpu_slot(1, 'the other sweep')", 3)
    said: list[str] = []
    start = time.monotonic()
    with cpu_slot_of(None, said) as cores:
        waited = time.monotonic() - start  # the holder keeps its core for 3 s
    holder.wait(timeout=30)
    assert cores == cpus.available()
    assert 2.0 < waited < 30, waited
    (line,) = said
    assert "waiting for a free CPU slot (cpus_per_job=None)" in line
    assert f"pid {holder.pid}: the other sweep" in line


def another_sweep_holds(module: str, slot: str, seconds: float) -> subprocess.Popen[str]:
    """A real second process that holds `slot` (a call of benchflow.core.<module>) for
    `seconds`, returned once it holds it; in this test's lock folder
    (BENCHFLOW_CPU_LOCK_DIR, set before)."""
    code = (
        f"import time\nfrom benchflow.core.{module} import *\n"
        f"with {slot}:\n"
        f"    print('held', flush=True); time.sleep({seconds})\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], env=dict(os.environ), stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def cpu_slot_of(n: int | None, said: list[str]) -> Any:
    return cpus.cpu_slot(n, "test", said.append)


@pytest.mark.skipif(not TWO_CORES, reason="needs 2 CPUs")
def test_concurrent_jobs_get_disjoint_slots_and_a_third_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cpus.ENV_LOCK_DIR, str(tmp_path))
    n_slots = len(cpus.slots(1))
    got: list[list[int]] = []
    release = threading.Event()
    all_in = threading.Barrier(n_slots + 1)

    def job() -> None:
        with cpu_slot_of(1, []) as cores:
            got.append(cores)
            all_in.wait()
            release.wait()

    threads = [threading.Thread(target=job) for _ in range(n_slots)]
    for t in threads:
        t.start()
    all_in.wait(timeout=30)
    assert sorted(c for (c,) in got) == cpus.available()  # one core each, none shared
    said: list[str] = []

    def late_job() -> None:
        with cpu_slot_of(1, said):
            pass

    late = threading.Thread(target=late_job, daemon=True)
    late.start()
    time.sleep(1.0)
    assert said and "waiting for a free CPU slot (cpus_per_job=1)" in said[0]
    release.set()
    for t in threads:
        t.join(timeout=30)
    late.join(timeout=30)
    assert not late.is_alive()  # it got a slot once the others let go


def test_child_env_sizes_thread_pools_to_the_slot() -> None:
    assert cpus.child_env([2, 3], None) == {
        "BENCHFLOW_CPUS": "2,3",
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
    }
    assert cpus.child_env([2, 3], 1)["OMP_NUM_THREADS"] == "1"


# --- SQLite under concurrent writers ----------------------------------------------------

LOCK_DB = (
    "import sqlite3, sys, time\n"
    "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "db.execute('BEGIN EXCLUSIVE')\n"
    "print('locked', flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
    "db.execute('COMMIT')\n"
)


def hold_write_lock(db: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process that holds SQLite's write lock, as a second job logging would."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCK_DB, str(db), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.full  # holds the lock past MLflow's own 20 s wait: ~26 s
def test_sqlite_store_waits_out_a_locked_database(tmp_path: Path) -> None:
    """MLflow asks SQLite to wait 20 s for a write lock (PRAGMA busy_timeout), then
    raises "database is locked"; the tracker tries the call again, and nothing is lost.
    The lock here outlasts MLflow's wait, so the retry is what saves the metric."""
    from mlflow.tracking import MlflowClient

    from benchflow.config.schema import MlflowConfig
    from benchflow.tracking.mlflow_runs import Tracker

    tracker = Tracker(MlflowConfig(), tmp_path)
    run_id = tracker.start_run("job")
    holder = hold_write_lock(tmp_path / "mlflow.db", 25)
    start = time.monotonic()
    tracker.log_batch(run_id, metrics={"per_iter_time_s": 0.25})
    assert holder.wait(timeout=60) == 0
    assert tracker.client.lock_retries >= 1  # MLflow alone raised once
    assert time.monotonic() - start >= 20
    run = MlflowClient(tracker.uri).get_run(run_id)
    assert run.data.metrics == {"per_iter_time_s": 0.25}


@pytest.mark.full
def test_a_ray_worker_node_killed_mid_sweep_loses_no_row(tmp_path: Path) -> None:
    """A real two-node Ray cluster; its worker node SIGKILLed (every process of it, as a
    lost machine) while it runs a job: Ray runs that task again on the head, the sweep
    ends with one ok row per job and no MLflow run left RUNNING, and `resume=true` finds
    nothing left to run."""
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient
    from services import ray_cluster

    cluster = ray_cluster.up()
    try:
        sweep = [*SWEEP[:2], "model=sleepy", *SWEEP[3:], "seed=0,1,2"]  # 6 ok jobs
        args = [
            *sweep,
            "hydra/launcher=ray_cluster",
            f"hydra.launcher.ray.init.address={cluster['address']}",
        ]
        err = tmp_path / "stderr.log"
        proc = start_cli(args, tmp_path, err)
        worker_cwd = Path(cluster["folder"]) / "worker-cwd"  # its workers' folder
        deadline = time.monotonic() + 300
        while not _job_running_in(worker_cwd):  # a job of the sweep on the worker node
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(1.0)
        ray_cluster.kill_worker()
        code = proc.wait(timeout=600)
        assert code == 0, err.read_text()[-3000:]
        again = run_cli([*args, "resume=true"], tmp_path, timeout=600)
    finally:
        ray_cluster.down()
    assert again.returncode == 0, again.stderr[-3000:]
    rows = again.rows()
    assert len(rows) == 6 and {r["status"] for r in rows} == {"ok"}
    assert again.stderr.count("kept ok") == 6  # the resume ran nothing again
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], run_view_type=ViewType.ALL
    )
    assert not [r.info.run_id for r in runs if r.info.status == "RUNNING"]


def _job_running_in(cwd: Path) -> bool:
    """A job's process (a launcher's worker spawns each: `python -m benchflow.harness
    JOB`) works in `cwd`."""
    import psutil

    for proc in psutil.process_iter(["cwd", "cmdline"]):
        command = proc.info["cmdline"] or []
        if proc.info["cwd"] == str(cwd) and "benchflow.harness" in command:
            return True
    return False
