"""A job that a scheduler runs as a job of its own (SLURM, through Hydra's submitit
launcher) and stops with SIGTERM: at its time limit, or at `scancel` (or a preemption).

There, nothing of benchflow's sweep process catches the signal (that is another
process, on the login node), and submitit's own handler lets SIGTERM pass, so
SLURM's SIGKILL `KillWait` seconds later would leave no row, and the sweep's process
would wait for a result that never comes; on SIGUSR2, the time limit's warning that
submitit asks SLURM for, submitit raises in the middle of the job, and the sweep's
process gets that error instead of a row. `catch_stop` turns the SIGTERM into the
interruption a Ctrl-C is in a sweep's own process: the job's child is killed and the
job is recorded, and `cause` says which stop it was, from SLURM itself:
`scontrol show job` gives `Reason=TimeLimit` while a job ends at its time limit (the
state is COMPLETING then, TIMEOUT after), and no reason for a cancellation.
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
    """In a SLURM job: SIGTERM (a stop) and SIGUSR2 (submitit's warning that the time
    limit is `signal_delay_s` away, on which submitit itself would raise in the middle
    of the job) raise KeyboardInterrupt while the job runs: the runner kills the child
    and says `interrupted`, and `cause` says why. Elsewhere, nothing."""
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
    """Why SLURM stopped job `job_id` (`signum`: the signal it sent): its time limit,
    reached or announced (a timeout), or anything else (scancel, a preemption:
    interrupted, so a resume runs it again)."""
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
