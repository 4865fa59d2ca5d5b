"""One job's numbers as a report shows them (an *entry*), and the configuration it
belongs to: the backend plus the values of the swept axes (report/model.py builds
both from result rows)."""

from __future__ import annotations

from dataclasses import dataclass, field

from benchflow.config.schema import is_knob
from benchflow.core.files import pick
from benchflow.core.status import Status
from benchflow.results.flops import Flops
from benchflow.results.headline import headline_of, timed_of
from benchflow.results.intervals import Interval, Timed
from benchflow.results.load import HostLoad
from benchflow.results.row import ResultRow

FAILED_CODES = (
    "FAIL",
    "EAGER_FAILED",
    "EXCEPTION_RAISED",
    "NONDETERMINISTIC_EAGER_RUN",
    "VERIFIER_DIDNT_RUN",
)


@dataclass(frozen=True)
class Config:
    """A backend plus the values of the varying axes: one column of the comparison."""

    backend: str
    axes: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """The backend and each axis's value; a compiler setting only where set
        (`inductor inductor.freezing=true` beside plain `inductor`)."""
        shown = (f"{k}={v}" for k, v in self.axes if not (v == "-" and is_knob(k)))
        return " ".join([self.backend, *shown])

    def axis(self, key: str) -> str | None:
        return next((v for k, v in self.axes if k == key), None)

    def with_axis(self, key: str, value: str) -> Config:
        return Config(self.backend, tuple((k, value if k == key else v) for k, v in self.axes))


@dataclass
class Entry:
    """One job's numbers as the report shows them."""

    model: str
    test: str
    config: Config
    row: ResultRow
    status: Status
    time_s: float | None  # median per-iteration time
    q1_s: float | None
    q3_s: float | None
    ci_low_s: float | None  # the median's 95% interval (None: under 6 repeats)
    ci_high_s: float | None
    repeats: int
    compile_s: float | None
    export_s: float | None  # of compile_s, the model's export (dynamo=aot_inductor)
    peak_bytes: float | None
    memory_kind: str | None  # "device" or "host RSS"
    verification: str
    cv: float | None = None  # coefficient of variation of the per-iteration times
    flags: list[str] = field(default_factory=list)  # why the median is biased: no geomean
    host: HostLoad | None = None  # what else ran while it timed (results/load.py)
    host_reference_s: float | None = None  # the host's reference step (results/headline.py)
    speedup: float | None = None
    speedup_ci: Interval | None = None  # the speedup's 95% interval
    baseline: Timed = field(default_factory=lambda: Timed(()))  # the speedup's reference
    memory_ratio: float | None = None
    in_geomean: bool = True  # False: left out of its summary's geomean (`note` says why)
    note: str = ""
    compiles: bool = True  # False: the backend compiles nothing, compile time is no number
    flops: Flops | None = None  # FLOPs per step, FLOP/s, share of peak (results/flops.py)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.model, self.test, self.config.label)

    @property
    def passed(self) -> bool:
        return self.status == Status.OK and self.verification not in FAILED_CODES

    @property
    def untimed(self) -> bool:
        """Its job ran with timing=false: accuracy and signals, no time to compare."""
        return self.row.untimed

    @property
    def timed(self) -> Timed:
        """Its times as a sample to reason from (results/intervals.py)."""
        return timed_of(self.row) if self.time_s is not None else Timed(())

    @property
    def error(self) -> str:
        err = self.row.error or ""
        return err.splitlines()[0][:160] if err else ""


def make_entry(row: ResultRow, config: Config) -> Entry:
    """The row's entry: its headline's numbers (results/headline.py), under the same names."""
    h = headline_of(row)
    return Entry(
        model=row.model_name,
        test=row.test,
        config=config,
        row=row,
        verification=row.verification_code or "VERIFIER_SKIPPED",
        flags=timing_flags(row) if h.status is Status.OK else [],
        **pick(Entry, vars(h)),
    )


# A median is biased, and kept out of the geomean, when a timed repeat compiled or lasted
# under this many timer ticks (noise is no flag: the interval carries it).
RESOLUTION_FACTOR = 1000


def timing_flags(row: ResultRow) -> list[str]:
    flags = []
    timing = row.timing
    if timing and timing.steady_state is False:
        first = timing.unsteady_repeats[0] if timing.unsteady_repeats else None
        where = f"{first.repeat} {first.reason}" if first else "None None"
        flags.append(f"not steady: repeat {where}")
    totals = row.series("total_time_s")
    resolution = timing.timer_resolution_s if timing else None
    if resolution and totals and min(totals) < RESOLUTION_FACTOR * resolution:
        flags.append(f"a repeat lasts under {RESOLUTION_FACTOR} timer ticks ({resolution:g} s)")
    return flags
