"""One sweep's A and B: the rows of the two values of one of its axes, as the two sides
of a comparison whose processes pair by round (`benchflow report SWEEP --pair AXIS`).

An interleaved sweep runs both values' processes round by round, so the host's drift
drops out of each pair's ratio. A is the value the sweep ran first; both sides' rows
lose the axis, and report/compare.py judges B against A with the paired tests
(docs/reports.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from benchflow.report.model import TOOLCHAIN_AXIS, row_axes, varying_axes
from benchflow.results.row import ResultRow


class PairError(ValueError):
    """The axis cannot split these rows into an A and a B (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Split:
    axis: str
    a: str  # A's value, as the report writes it ("-": not set)
    b: str
    base: list[ResultRow]  # A's rows, less the axis
    cand: list[ResultRow]
    # Where the sweep was a paired sweep (pair=AXIS): its budget of rounds and its
    # threshold, which judged its pairs as it ran (sweep/pairs.py); else None
    budget: int | None = None
    threshold: float | None = None

    @property
    def a_value(self) -> str:
        """A's value as the command line writes it (null: not set)."""
        return "null" if self.a == "-" else self.a

    @property
    def b_value(self) -> str:
        return "null" if self.b == "-" else self.b


def split(rows: Sequence[ResultRow], axis: str) -> Split:
    """The rows of the axis's two values, A (the sweep's first) and B, each less it."""
    if untimed := sum(r.untimed for r in rows):
        raise PairError(
            f"--pair {axis}: {untimed} row(s) ran with timing=false, which times nothing; "
            "allowed: the rows of a timed sweep (timing=true, the default)"
        )
    axes = varying_axes(rows)
    if axis not in axes:
        allowed = ", ".join(axes) or "none: every row has the same settings"
        raise PairError(f"--pair {axis}: not an axis of these rows; allowed: {allowed}")
    ordered = sorted(rows, key=lambda r: (r.job.num, r.timestamp))
    valued = [(row_axes(r).get(axis, "-"), r) for r in ordered]
    values = list(dict.fromkeys(value for value, _ in valued))
    if len(values) != 2:
        raise PairError(
            f"--pair {axis}: the rows have {len(values)} values of it ({', '.join(values)}); "
            f"allowed: a sweep of two ({axis}=A,B)"
        )
    a, b = values
    sides: dict[str, list[ResultRow]] = {a: [], b: []}
    for value, row in valued:
        sides[value].append(_without(row, axis))
    paired = next((r.job.paired for r in ordered if r.job.paired), None) or {}
    budget, threshold = paired.get("rounds"), paired.get("threshold")
    return Split(axis, a, b, sides[a], sides[b], budget, threshold)


def _without(row: ResultRow, axis: str) -> ResultRow:
    """The row less the axis's setting (the toolchain axis: all its keys)."""
    if row.config is None:
        return row
    prefix = f"{TOOLCHAIN_AXIS}." if axis == TOOLCHAIN_AXIS else f"{axis}."
    kept = {k: v for k, v in row.config.items() if k != axis and not k.startswith(prefix)}
    return dataclasses.replace(row, config=kept)
