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


def format_rate(
    flop_per_s: float | None,
    low: float | None = None,
    high: float | None = None,
    unit: str = "FLOP/s",
) -> str:
    """FLOP/s (or, with unit="FLOP", a count) with an SI prefix, and its interval in the
    same prefix where given: "14.4 GFLOP/s (13.9-15.0)"; "-" where there is none."""
    if flop_per_s is None:
        return MISSING
    scales = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
    prefix, scale = next(((p, s) for p, s in scales if abs(flop_per_s) >= s), ("", 1.0))

    # the value's three significant digits, its bounds to the same decimal place
    shown = abs(flop_per_s / scale)
    places = 0 if shown >= 100 else 1 if shown >= 10 else 2

    def number(value: float) -> str:
        return f"{value / scale:.{places}f}"

    span = f" ({number(low)}-{number(high)})" if low is not None and high is not None else ""
    return f"{number(flop_per_s)} {prefix}{unit}{span}"


def format_share(share: float | None, low: float | None = None, high: float | None = None) -> str:
    """A share in percent, with its interval where given: "7.0% (6.8-7.3%)"."""
    if share is None:
        return MISSING
    span = f" ({low:.1%}-{high:.1%})" if low is not None and high is not None else ""
    return f"{share:.1%}{span}"
