"""What the child writes to its result.json (``child_result.json``) and the parent reads
back: :class:`ChildResult`, the child's part of the row (results/row.py).

A child that did not time its model writes only status, error, versions and
child_wall_s; one that died writes nothing, and the parent says why from its exit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from benchflow.core.files import pick
from benchflow.core.status import Status
from benchflow.results.flops import Flops
from benchflow.results.signals import Signals

# Of the row and of the child's part of it (the child and the parent are one checkout).
SCHEMA_VERSION = 7

# Per-repeat series (`per_iter_time_s`: one value per repeat) and scalars (the cold
# call's counters, accuracy, profile numbers): what `metrics` holds.
Metrics = dict[str, float | list[float]]
# One metric's statistics over the repeats: {"per_iter_time_s": {"median": ..., "iqr": ...}}.
Summary = dict[str, dict[str, float]]
Versions = dict[str, str | None]  # python, torch, torch_xla, benchflow (+ the suite's library)
# A step's output, summarized: {"of": the backend, "leaves": [{shape, dtype, mean, ...}]}.
Digest = dict[str, Any]


@dataclass(frozen=True)
class Unsteady:
    """A timed repeat in which something compiled: it is not steady-state timing."""

    repeat: int
    reason: str


@dataclass(kw_only=True)
class Timing:
    """How the timing went (harness/timing.py): the row's `timing`."""

    steady_state: bool | None = None
    unsteady_repeats: list[Unsteady] = field(default_factory=list)
    warmup_steps: int | None = None
    warmup_settled: bool | None = None  # adaptive warm-up: settled before its cap
    repeats: int | None = None
    adaptive: bool | None = None  # repeats added until a stop rule (repeat=null), or counted
    stop: str | None = None  # why they stopped: count | precision | budget | cap
    # The median's 95% interval (order statistics): its larger half-width / the median
    # (null: too few repeats for one).
    ci_rel: float | None = None
    iterations_per_run: int | None = None  # steps per repeat, as used
    calibrated: bool | None = None  # iterations_per_run calibrated to min_run_time_s
    calibration_steps: int | None = None  # untimed steps the calibration took
    host: dict[str, Any] | None = None  # what else ran meanwhile (results/load.py HostLoad)
    # processes=N: each process's repeats, median, stop and cold call (results/pooled.py)
    processes: list[dict[str, Any]] | None = None
    compile_cache: str | None = None
    launch: str | None = None  # spawn | fork
    preloaded: list[str] = field(default_factory=list)  # forked: what the zygote imported
    # forked: the machine checks the zygote ran before it (Inductor's vector-ISA check),
    # each {"from_cache": answered from the machine's cache, "s": seconds it took}
    machine_checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    # share_build: seconds the model's build took in the interpreter the job forked from
    # (null: the job built its own model)
    shared_build_s: float | None = None
    # ... and the pid of the interpreter that built it
    shared_build_pid: int | None = None
    # a job's later process: seconds the step it forked with took to compile in the job's
    # own interpreter (harness/prebuilt.warm_here; null: it compiled its own)
    shared_step_s: float | None = None
    timer_resolution_s: float | None = None
    # seconds Inductor's compile workers took to stop before the timed repeats (null: none)
    compile_workers_stopped_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timing | None:
        """None for `{}`: the job timed nothing."""
        if not data:
            return None
        repeats = data.get("unsteady_repeats") or []
        unsteady = [Unsteady(int(u["repeat"]), str(u["reason"])) for u in repeats]
        return cls(**{**pick(cls, data), "unsteady_repeats": unsteady})


def process_values(
    processes: list[dict[str, Any]] | None, key: str = "median_s"
) -> tuple[float, ...]:
    """Each process's `key` from `Timing.processes`; () unless every process has one."""
    values = [p.get(key) for p in processes or ()]
    return tuple(float(v) for v in values if v) if all(values) else ()


def process_facts(processes: list[dict[str, Any]] | None) -> tuple[tuple[float, bool], ...]:
    """Each process's reference step time and whether its host was quiet, from
    `Timing.processes`; () unless every process has both."""
    facts = [(p.get("host_reference_s"), p.get("quiet")) for p in processes or ()]
    kept = tuple((float(ref), bool(quiet)) for ref, quiet in facts if ref and quiet is not None)
    return kept if len(kept) == len(facts) else ()


@dataclass(frozen=True)
class ChildTimings:
    """Where the child's time went, in seconds (results/phases.py), and its monotonic
    clock (the parent's too) when it started and when it wrote its result."""

    import_s: float = 0.0
    build_s: float = 0.0
    move_s: float = 0.0
    compile_s: float = 0.0
    warmup_s: float = 0.0
    timed_s: float = 0.0
    profile_s: float = 0.0
    verify_s: float = 0.0
    flops_s: float = 0.0  # the step's FLOPs counted, the device's matmul peak read or measured
    entered: float | None = None
    done: float | None = None

    def phases(self) -> dict[str, float]:
        """{phase: seconds} for results.phases.breakdown."""
        return {
            name.removesuffix("_s"): value
            for name, value in dataclasses.asdict(self).items()
            if name.endswith("_s")
        }


# Written even when null: a reader tells "no error" from an old file without the key.
_ALWAYS = ("schema_version", "status", "error", "versions")


@dataclass(kw_only=True)
class ChildResult:
    """The child's result.json: how it ended, and what it measured when it timed."""

    schema_version: int = SCHEMA_VERSION
    status: Status = Status.OK
    error: str | None = None
    versions: Versions = field(default_factory=dict)
    model_source: str | None = None
    batch_size: int | None = None
    dtype: str | None = None
    accelerator_model: str | None = None
    num_threads: int | None = None
    metrics: Metrics = field(default_factory=dict)
    summary: Summary = field(default_factory=dict)
    timing: Timing | None = None
    child_timings: ChildTimings | None = None
    verification_code: str | None = None
    verification_detail: str | None = None
    child_wall_s: float | None = None
    # What the child ran with: its environment's speed settings, its CPUs, its GPU.
    env: dict[str, str] = field(default_factory=dict)
    affinity: str | None = None
    gpu: dict[str, str | None] | None = None
    digest: Digest | None = None  # the first step's output, summarized (results/digest.py)
    flops: Flops | None = None  # a step's FLOPs and the device's peak (results/flops.py)
    signals: Signals | None = None  # graph breaks, recompiles, ... (results/signals.py)

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON; what the child did not get to is left out."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name not in _ALWAYS and value in (None, {}):
                continue
            if isinstance(value, (Timing, ChildTimings, Flops, Signals)):
                value = dataclasses.asdict(value)
            out[f.name] = value.value if isinstance(value, Status) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChildResult:
        """Raises KeyError, TypeError or ValueError for what is no child result."""
        timings = data.get("child_timings")
        return cls(
            **{
                **pick(cls, data),
                "schema_version": int(data.get("schema_version", 1)),
                "status": Status(data["status"]),
                "versions": data.get("versions") or {},
                "timing": Timing.from_dict(data.get("timing") or {}),
                "child_timings": ChildTimings(**pick(ChildTimings, timings)) if timings else None,
                "flops": Flops.from_dict(data.get("flops")),
                "signals": Signals.from_dict(data.get("signals")),
            }
        )
