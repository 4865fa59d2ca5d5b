"""A job a scheduler runs as a job of its own (SLURM, through submitit) and stops with
SIGTERM or SIGUSR2. submitit lets SIGTERM pass and raises on SIGUSR2 mid-job, so either
would leave no row: `catch_stop` makes them the interruption a Ctrl-C is, and `cause` asks
SLURM which stop it was (docs/launchers.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

from benchflow.core.interrupts import raise_stop
from benchflow.core.status import Status

ENV_SLURM_JOB = "SLURM_JOB_ID"  # set by SLURM in each of its jobs


def slurm_job() -> str | None:
    """This process's SLURM job id, where it runs as one."""
    return os.environ.get(ENV_SLURM_JOB) or None


@dataclass
class Stop:
    """The signal that stopped the job, once one did."""

    signum: int | None = None


@contextlib.contextmanager
def catch_stop() -> Iterator[Stop]:
    """In a SLURM job: SIGTERM and SIGUSR2 (the time limit's warning) raise KeyboardInterrupt
    while the job runs, so that the runner kills the child. Elsewhere, nothing."""
    stop = Stop()
    if slurm_job() is None:
        yield stop
        return

    def stopped(signum: int, frame: object) -> None:
        if stop.signum is None:  # once: SLURM may send both at the limit
            stop.signum = signum
            raise_stop(signum)  # the runner kills the child, and says `interrupted`

    before = {sig: signal.signal(sig, stopped) for sig in (signal.SIGTERM, signal.SIGUSR2)}
    try:
        yield stop
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def cause(job_id: str, signum: int | None) -> tuple[Status, str]:
    """Why SLURM stopped job `job_id`: its time limit, or else interrupted (a resume reruns it)."""
    fields = _job_fields(job_id)
    limit = fields.get("TimeLimit", "?")
    if signum == signal.SIGUSR2:
        return Status.TIMEOUT, (
            f"SLURM's time limit was near (job {job_id}, TimeLimit={limit}; its warning, "
            "SIGUSR2, comes hydra.launcher.signal_delay_s before it)"
        )
    if fields.get("Reason") == "TimeLimit":
        return Status.TIMEOUT, f"SLURM's time limit ended the job (job {job_id}, TimeLimit={limit})"
    state = fields.get("JobState", "unknown")
    return (
        Status.INTERRUPTED,
        f"SLURM stopped the job (job {job_id}, JobState={state}): scancel, or a preemption",
    )


def _job_fields(job_id: str) -> dict[str, str]:
    """`scontrol show job -o`'s KEY=VALUE fields ({} where scontrol cannot answer)."""
    try:
        done = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    pairs = (part.partition("=") for part in done.stdout.split())
    return {key: value for key, sep, value in pairs if sep}
