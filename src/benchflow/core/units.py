"""How numbers read to a person: one spelling of times, shared by the progress lines and
the reports."""

from __future__ import annotations

NOT_APPLICABLE = "–"  # a setting or number that does not apply (eager has no compile time)
MISSING = "-"  # a number that applies but is not there (the job did not run)


def format_interval(low: float | None, high: float | None) -> str:
    """A time's 95% interval, in each bound's unit: "1.20 ms to 1.31 ms"; "-" where none."""
    if low is None or high is None:
        return "-"
    return f"{format_time(low)} to {format_time(high)}"


def format_span(low: float | None, high: float | None) -> str:
    """A time's 95% interval in few columns, its unit once where both bounds share it:
    "1.20-1.31 ms", "998.0 µs-1.02 ms"; "-" where there is none."""
    if low is None or high is None:
        return MISSING
    (low_value, low_unit), (high_value, high_unit) = (
        format_time(t).split(" ") for t in (low, high)
    )
    if low_unit == high_unit:
        return f"{low_value}-{high_value} {high_unit}"
    return f"{format_time(low)}-{format_time(high)}"


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.3f} s"
