"""Resume and retry: which recorded jobs a sweep run into the same folder runs again
(docs/resume.md). A job is its fingerprint (core/job.py); whether one with a row runs again
is its status's answer (core/status.py). Torch- and Hydra-free: the CLI calls `find_sweep`
before Hydra starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchflow.config.schema import is_measured
from benchflow.core.layout import SweepDir
from benchflow.results.row import ResultRow

# Config groups that are not settings of a job but choose its jobs (a named sweep).
_GROUPS = ("experiment",)


def current_row(rows: Sequence[ResultRow], fingerprint: str) -> ResultRow | None:
    for row in reversed(rows):
        if row.job.fingerprint == fingerprint and not row.superseded_by:
            return row
    return None


def defining(args: Sequence[str]) -> list[str]:
    """The overrides that define a sweep's jobs (sorted: order does not change the set)."""
    keep = []
    for arg in args:
        key = arg.lstrip("+~").split("=", 1)[0]
        if arg.startswith("-") or key.startswith("hydra.") or key.startswith("hydra/"):
            continue
        if key not in _GROUPS and not is_measured(key):
            continue  # how the jobs run or report, not which jobs there are
        keep.append(arg)
    return sorted(keep)


def find_sweep(root: Path, args: Sequence[str]) -> tuple[Path | None, list[Path]]:
    """(the newest sweep folder under root that defines the same jobs, every one seen)."""
    want = defining(args)
    seen = sorted(root.glob("*/*/plan.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for plan_file in seen:
        plan = SweepDir(plan_file.parent).read_plan()
        if plan is not None and defining(plan.sweep_args) == want:
            return plan_file.parent, [p.parent for p in seen]
    return None, [p.parent for p in seen]
