"""How numbers read to a person: one spelling of times, shared by the progress lines and
the reports."""

from __future__ import annotations

NOT_APPLICABLE = "–"  # a setting or number that does not apply (eager has no compile time)
MISSING = "-"  # a number that applies but is not there (the job did not run)


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.3f} s"
