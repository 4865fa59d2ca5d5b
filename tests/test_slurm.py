"""SLURM for real: a single-host cluster from Debian's packages (munged, slurmctld,
slurmd; services/slurm.py), started here and stopped by PID. A sweep through Hydra's
submitit_slurm launcher gives the basic launcher's rows, each job a SLURM job of its
own; a job cancelled with `scancel` is a row that says so, and the sweep
ends; a job stopped by SLURM's time limit (its SIGUSR2 warning, or its SIGTERM at the
limit, which SLURM checks every 30 s, so a one-minute limit takes 60-90 s) is a
timeout row that says so. All in -m full: the default suite had no room left for
them (docs/tests.md)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import REPO, SEARCHPATH, CliResult, EarlySweeps, early, run_cli, start_cli
from tests.early import environ
from tests.test_launchers import SWEEP, identity, planned

from benchflow.core.layout import SweepDir
from benchflow.results.io import read_rows

LAUNCHER = ["hydra/launcher=submitit_slurm", "cpus_per_job=1"]
HANG = [SEARCHPATH, "model=fault_hang", "model.size=tiny", "timeout_s=600", "processes=1",
        "mlflow.enabled=false"]  # fmt: skip


@contextlib.contextmanager
def _slurm() -> Iterator[dict[str, Any]]:
    """The cluster, brought up and down by the Make targets docs/launchers.md shows (in
    the session's services folder, $BENCHFLOW_SERVICES_DIR); its description."""
    from services import slurm

    subprocess.run(["make", "-s", "slurm-up"], cwd=REPO, check=True)
    try:
        yield slurm.up()  # (it runs: its description)
    finally:
        subprocess.run(["make", "-s", "slurm-down"], cwd=REPO, check=True)


@early("slurm", long=True)  # mostly waiting (SLURM and submitit poll): beside the others
def _on_slurm(root: Path) -> dict[str, Any]:
    """The launchers' sweep on a cluster brought up for it."""
    with _slurm() as cluster:
        got = run_cli(["-m", *SWEEP[1:], *LAUNCHER], root, timeout=600, **_env(cluster))
        return {"cluster": cluster, "sweep": got}


def _env(cluster: dict[str, Any]) -> dict[str, str]:
    return dict(cluster["env"])


@pytest.mark.full  # the default suite had no room left for it (docs/tests.md)
def test_a_sweep_on_slurm_gives_the_basic_launchers_rows(early_sweeps: EarlySweeps) -> None:
    ran = early_sweeps.result("slurm")
    got, cluster = ran["sweep"], ran["cluster"]
    assert got.returncode == 0, got.stderr[-3000:]
    rows = got.rows()
    assert sorted(map(identity, rows)) == sorted(planned(got))
    # each job a SLURM job of its own, on the cluster's node, on a core of its own
    assert {r["job"]["node"] for r in rows} == {f"slurm:{cluster['node']}"}
    (sweep_dir,) = got.sweep_dirs
    jobs = [p.name for p in (sweep_dir / ".submitit").iterdir() if re.fullmatch(r"\d+_\d", p.name)]
    assert len(jobs) == 4  # one SLURM job (of an array) per benchflow job


def _hang_until(
    cluster: dict[str, Any], cwd: Path, args: list[str]
) -> tuple[subprocess.Popen[bytes], str, Path]:
    """A sweep of one hanging job on SLURM, started; its SLURM job id once the job's
    child hangs."""
    err = cwd / "stderr.log"
    proc = start_cli(["-m", *args, *LAUNCHER], cwd, err, **_env(cluster))
    deadline = time.monotonic() + 120
    while not list(cwd.glob("multirun/*/*/0/stdout.log")):
        assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
        time.sleep(0.2)
    time.sleep(2.0)  # the child is in its hang
    queue = subprocess.run(
        ["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=_full_env(cluster)
    )
    (job_id,) = queue.stdout.split()
    return proc, job_id.split("_")[0], err


def _full_env(cluster: dict[str, Any]) -> dict[str, str]:

    return {**environ(), **_env(cluster)}


def _finished(proc: subprocess.Popen[bytes], cwd: Path, err: Path) -> CliResult:
    code = proc.wait(timeout=180)
    return CliResult(code, "", err.read_text(), cwd)


@pytest.mark.full
def test_scancel_makes_a_row_with_its_cause_and_the_sweep_ends(
    tmp_path: Path, early_sweeps: EarlySweeps
) -> None:
    early_sweeps.result("slurm")  # (one SLURM cluster a host: after the early run's)
    with _slurm() as cluster:
        proc, job_id, err = _hang_until(cluster, tmp_path, HANG)
        cancelled = time.monotonic()
        subprocess.run(["scancel", job_id], check=True, env=_full_env(cluster))
        got = _finished(proc, tmp_path, err)
    assert got.returncode == 0, got.stderr[-3000:]
    assert time.monotonic() - cancelled < 60  # not a hang
    (sweep,) = got.sweep_dirs
    (row,) = read_rows(SweepDir(sweep).results)
    assert row.status.value == "interrupted"
    assert row.error == (
        f"SLURM stopped the job (job {job_id}, JobState=COMPLETING): scancel, or a preemption"
    )


def _timed_out(cluster: dict[str, Any], cwd: Path, *launcher: str) -> tuple[str, Any]:
    """A hanging job's sweep under a one-minute SLURM time limit: its job id and row."""
    args = [*HANG, "hydra.launcher.timeout_min=1", *launcher]
    proc, job_id, err = _hang_until(cluster, cwd, args)
    got = _finished(proc, cwd, err)
    assert got.returncode == 0, got.stderr[-3000:]
    (sweep,) = got.sweep_dirs
    (row,) = read_rows(SweepDir(sweep).results)
    return job_id, row


@pytest.mark.full
def test_the_time_limits_warning_makes_a_timeout_row(
    tmp_path: Path, early_sweeps: EarlySweeps
) -> None:
    """submitit asks SLURM for SIGUSR2 signal_delay_s (120 s by default) before the time
    limit, so with one minute it comes at once: the job stops then, a timeout."""
    early_sweeps.result("slurm")
    with _slurm() as cluster:
        job_id, row = _timed_out(cluster, tmp_path)
    assert row.status.value == "timeout"
    assert row.error == (
        f"SLURM's time limit was near (job {job_id}, TimeLimit=00:01:00; its warning, "
        "SIGUSR2, comes hydra.launcher.signal_delay_s before it)"
    )


@pytest.mark.full
def test_slurms_time_limit_makes_a_timeout_row(tmp_path: Path, early_sweeps: EarlySweeps) -> None:
    """No warning before the limit (signal_delay_s=0): SIGUSR2 and SIGTERM at it, 60-90 s
    in (whichever comes first names the cause). On a cluster of its own, once the early
    run's is down (one SLURM cluster a host)."""
    early_sweeps.result("slurm")
    with _slurm() as cluster:
        job_id, row = _timed_out(cluster, tmp_path, "hydra.launcher.signal_delay_s=0")
    assert row.status.value == "timeout"
    assert row.error is not None and row.error.startswith(
        (
            f"SLURM's time limit ended the job (job {job_id}, TimeLimit=00:01:00)",
            f"SLURM's time limit was near (job {job_id}, TimeLimit=00:01:00;",
        )
    ), row.error
