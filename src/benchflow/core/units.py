"""How numbers read to a person: one spelling of times, shared by the progress lines and
the reports."""

from __future__ import annotations

NOT_APPLICABLE = "–"  # a setting or number that does not apply (eager has no compile time)
MISSING = "-"  # a number that applies but is not there (the job did not run)


def format_interval(low: float | None, high: float | None) -> str:
    """A time's 95% interval, in each bound's unit: "1.20 ms to 1.31 ms"; "-" where there
    is none (under 6 repeats)."""
    if low is None or high is None:
        return "-"
    return f"{format_time(low)} to {format_time(high)}"


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.3f} s"
