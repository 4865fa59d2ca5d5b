"""A job's status: the one definition of each outcome and of what follows from it.

Every other module asks a :class:`Status` (does it run again? is it a failure? how
does MLflow close its run? how is it shown?) instead of keeping its own list.
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """How a job ended. A ``str`` enum: rows store the plain value (``"ok"``)."""

    OK = "ok"  # the child timed the model (accuracy is a separate verdict)
    FAILED = "failed"  # the child raised: the model, the backend or the step failed
    OOM = "oom"  # out of memory: the allocator (or memory_limit_gb) refused
    CRASHED = "crashed"  # the child died with no result: a signal, a segfault, an abort
    TIMEOUT = "timeout"  # no result after timeout_s (or the scheduler's time limit)
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM to the sweep while it ran, or scancel
    SKIPPED = "skipped"  # not run on purpose: a suite skip list, the model's own refusal
    INVALID = "invalid"  # never ran: the combination cannot exist (dynamo=inductor xla=PJRT)

    def __str__(self) -> str:
        return self.value

    @property
    def meaning(self) -> str:
        return _MEANING[self]

    @property
    def is_failure(self) -> bool:
        """Ran and did not produce a number through its own fault (or the machine's)."""
        return self in (Status.FAILED, Status.OOM, Status.CRASHED, Status.TIMEOUT)

    @property
    def counts_as_configuration(self) -> bool:
        """Stands for a configuration in a report (an invalid combination stands for none)."""
        return self is not Status.INVALID

    @property
    def counts_in_passrate(self) -> bool:
        """Part of a passrate's denominator: the HUD leaves skipped models out."""
        return self not in (Status.SKIPPED, Status.INVALID)

    @property
    def went_wrong(self) -> bool:
        """A failure or an interruption: a single run exits non-zero, fail_fast stops the sweep."""
        return self.is_failure or self is Status.INTERRUPTED

    def runs_again(self, retry: str) -> bool:
        """Does a job whose current row has this status run again under ``retry``
        (failed | none | all) when its sweep is resumed?"""
        if retry == "all" or self in (Status.INTERRUPTED, Status.SKIPPED, Status.INVALID):
            return True  # never finished, or cheap to decide again
        if self is Status.OK:
            return False
        return retry == "failed" and self.is_failure

    @property
    def mlflow_run_status(self) -> str:
        """How the job's MLflow run is closed."""
        if self is Status.INTERRUPTED:
            return "KILLED"
        return "FAILED" if self.is_failure else "FINISHED"

    @property
    def style(self) -> str:
        """rich style in the terminal."""
        if self is Status.OK:
            return "green"
        if self in (Status.SKIPPED, Status.INVALID):
            return "yellow"
        return "magenta" if self is Status.INTERRUPTED else "red"


_MEANING = {
    Status.OK: "the model was timed",
    Status.FAILED: "the child raised an exception (model, backend or step)",
    Status.OOM: "out of memory (the allocator, or memory_limit_gb, refused)",
    Status.CRASHED: "the child died without a result (signal, segfault, abort)",
    Status.TIMEOUT: "no result after timeout_s, or the scheduler's time limit (SLURM); "
    "its process group was killed",
    Status.INTERRUPTED: "Ctrl-C or SIGTERM to the sweep while the job ran, or the "
    "scheduler stopped its job (scancel, a preemption)",
    Status.SKIPPED: "not run on purpose (a suite skip list, or the model refused)",
    Status.INVALID: "never ran: the combination of settings cannot exist",
}

# The prefix of an invalid job's error; rows written before `invalid` existed said
# status=skipped with this prefix, and readers take them as invalid.
INVALID_PREFIX = "invalid combination: "


def status_of(row_status: str, error: str | None = None) -> Status:
    """A stored row's status (older rows: an invalid combination was `skipped`)."""
    status = Status(row_status)
    if status is Status.SKIPPED and (error or "").startswith(INVALID_PREFIX):
        return Status.INVALID
    return status
