"""A row's arithmetic (docs/flops.md): the FLOPs of one step, counted by torch's own
counter on the eager module (harness/flops.py); the device's matrix-multiply peak it is
judged against, measured and cached (harness/peak.py); and, from the row's time, the
FLOP/s it reached and their share of that peak (`judged`), each with its interval.
No torch here: the parent, the report and MLflow read these.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from benchflow.core.files import pick

# What a count is of, as the row says it: the model's arithmetic, so the same figure
# for every backend that runs the model (a compiler's fusions and eliminations aside).
COUNTED = {
    "eval": "forward of the eager module, in its eval step's grad mode (every backend: the "
    "model's arithmetic)",
    "train": "forward and backward of the eager module (every backend: the model's arithmetic)",
}


@dataclass(frozen=True, kw_only=True)
class Peak:
    """The best matrix-multiply throughput the job's device reached in the job's dtype
    (with its threads, on a CPU): what the row's FLOP/s are a share of."""

    flop_per_s: float
    dtype: str  # the matmuls' dtype (an AMP job's: its autocast dtype)
    device: str  # the CPU's model name or the GPU's name
    threads: int | None  # torch's threads on a CPU (None on a GPU)
    matmul_precision: str  # torch's float32 matmul precision as the job set it
    key: str  # its cache key (harness/peak.peak_key: the one definition)
    measured_at: float  # epoch seconds
    method: str  # how it was measured, in words
    sizes: list[int] = field(default_factory=list)  # the square matrices' sizes tried
    # per size: each run's FLOP/s ([]: a size not tried, far behind at the one before)
    runs: list[list[float]] = field(default_factory=list)
    float32_runs: list[list[float]] = field(default_factory=list)  # a 16-bit dtype's, alike
    from_cache: bool = False  # read from benchflow's cache (measured by an earlier job)
    # what else ran on the host while it was measured (results/load.HostLoad, one window)
    host: dict[str, Any] | None = None
    quiet: bool = True  # measured on a quiet host (else, the best of `measures` busy ones)
    measures: int = 1  # how many times it was measured (harness/peak.MEASURES at most)
    # a GPU's dense peak in that dtype from its vendor's datasheet (None: not in the table)
    vendor_flop_per_s: float | None = None
    vendor: str | None = None  # which datasheet row

    @property
    def computed_in(self) -> str:
        """The dtype its best run computed in: the job's, or float32 where that was faster."""
        wide = max((x for each in self.float32_runs for x in each), default=0.0)
        return "float32" if wide >= self.flop_per_s > 0 else self.dtype

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Peak:
        return cls(**pick(cls, data))


@dataclass(frozen=True, kw_only=True)
class Flops:
    """The row's `flops`: the count the child made, the peak, and what `judged` adds."""

    per_step: float | None  # FLOPs of one step; None: not counted in full (`uncounted`, `error`)
    counted: str = ""  # what was counted (COUNTED)
    top: dict[str, float] = field(default_factory=dict)  # the operators with most FLOPs
    # operators that ran and do arithmetic but that the counter has no formula for
    uncounted: list[str] = field(default_factory=list)
    error: str | None = None  # why nothing was counted
    peak: Peak | None = None  # None: the device's peak could not be measured (error says why)
    peak_error: str | None = None
    # From the row's median time and its 95% interval (judged):
    per_s: float | None = None  # achieved FLOP/s
    per_s_ci_low: float | None = None
    per_s_ci_high: float | None = None
    share_of_peak: float | None = None  # per_s / peak.flop_per_s
    share_ci_low: float | None = None
    share_ci_high: float | None = None

    @property
    def why_none(self) -> str | None:
        """Why the row has no FLOP/s (None: it has them, or no time to judge them by)."""
        if self.error:
            return f"FLOPs not counted ({self.error})"
        if self.uncounted:
            unknown = ", ".join(self.uncounted)
            return f"FLOPs not counted in full: the counter does not know {unknown}"
        if not self.per_step:
            return "no FLOPs counted: the step ran no matmul, convolution or attention"
        return None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Flops | None:
        if not data:
            return None
        peak = data.get("peak")
        return cls(**{**pick(cls, data), "peak": Peak.from_dict(peak) if peak else None})


def judged(
    flops: Flops | None, time_s: float | None, ci: tuple[float, float] | None
) -> Flops | None:
    """`flops` with the FLOP/s of a step of median `time_s` and their share of the peak;
    their intervals from the time's 95% interval `ci` (a shorter time is more FLOP/s:
    the bounds swap). Unchanged where a figure is missing: no count, no time."""
    if flops is None or not flops.per_step or flops.uncounted or not time_s or time_s <= 0:
        return flops
    per_s = flops.per_step / time_s
    low = high = None
    if ci and ci[0] > 0 and ci[1] > 0:
        low, high = flops.per_step / ci[1], flops.per_step / ci[0]
    peak = flops.peak.flop_per_s if flops.peak and flops.peak.flop_per_s > 0 else None

    def share(value: float | None) -> float | None:
        return value / peak if value is not None and peak else None

    return dataclasses.replace(
        flops,
        per_s=per_s,
        per_s_ci_low=low,
        per_s_ci_high=high,
        share_of_peak=share(per_s),
        share_ci_low=share(low),
        share_ci_high=share(high),
    )
