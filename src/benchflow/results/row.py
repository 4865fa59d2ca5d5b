"""One job's result row (:class:`ResultRow`): the experiment runner's schema, plus
status and provenance. What result.json holds, and each line of results.jsonl:

{schema_version, row_id,
 model: {suite_name, model_name, model_source},                         ModelId
 experiment: {accelerator, accelerator_model, xla, dynamo, test, step, batch_size,
              dtype, model_size, matmul_precision, num_threads,
              dtype_source, batch_size_source},                         Experiment
 backend, config: {measured setting: value, flat},                      Settings
 repeat, iterations_per_run, warmup,  (as taken: adaptive, calibrated)
 metrics: {name: value, or per repeat [values]},                        Metrics
 summary: {name: {median, min, max, mean, std, iqr, cv, ci_low, ci_high}}, Summary
 timing: {steady_state, unsteady_repeats, warmup_steps, repeats, adaptive,
          stop, ci_rel, iterations_per_run, calibrated, ...} or {},     Timing
 timestamp, verification_code, verification_detail, status, error,
 job: {name, num, overrides, dir, notes, cpus, ..., fingerprint,
       rerun_of, rerun_env, rerun_digest (a rerun's)},                  JobInfo
 provenance: {host, cpu_model, platform, git_sha, command, versions,
              hardware: {cpu_vendor, cpu_features, ..., affinity, gpu},
              lock_sha256, packages_sha256, torchbench_sha, env},       Provenance
 digest: {of, leaves: [{shape, dtype, mean, ...}]} (a job that timed),  Digest
 flops: {per_step, counted, top, uncounted, error, per_s, per_s_ci_low,
         per_s_ci_high, share_of_peak, share_ci_low, share_ci_high,
         peak: {flop_per_s, dtype, device, threads, key, method, ...}}   Flops
 signals: {steps, graphs, graph_breaks, recompiles, xla_repeat_compiles,
           xla_executions_per_step, inductor_kernels,
           breaks: [{reason, frame, count}], guards: [{guard, frame, count}]} Signals
 superseded_by (only once a later attempt of the same job replaced it)}

The child writes its part (results/child.py) and the parent adds the rest (`build_row`);
a field the run never reached is left out. `from_dict` reads older rows as these:
2 added `backend`, `config` and the `invalid` status (from `skipped` + its error's
prefix: core/status.status_of); 3 added `experiment.step` (older rows: "torchbench");
4 made repeats adaptive and calibrated (older rows' `ci_rel` is ignored); 5 took out
`timing.spans`, `held`, `shared_build_at` and `shared_builds` (skipped in older rows);
6 added `flops` (results/flops.py) and the child's `flops` phase (older rows: none);
7 added `signals` (results/signals.py; older rows': from their cold and timed counters,
without reasons) and the `timing` setting (false: an untimed job, `ResultRow.untimed`).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeVar

from benchflow import backends
from benchflow.config.schema import UNTIMED_KEY, Settings
from benchflow.core.files import pick
from benchflow.core.job import Job
from benchflow.core.machine import node_name
from benchflow.core.status import Status, status_of
from benchflow.results.child import (
    SCHEMA_VERSION,
    ChildResult,
    Digest,
    Metrics,
    Summary,
    Timing,
    Versions,
)
from benchflow.results.flops import Flops, judged
from benchflow.results.signals import Signals, from_metrics

__all__ = [
    "SCHEMA_VERSION",
    "Experiment",
    "JobInfo",
    "ModelId",
    "Provenance",
    "ResultRow",
    "RowError",
    "build_row",
]


class RowError(ValueError):
    """A JSON object that is not a readable result row."""


@dataclass(frozen=True, kw_only=True)
class ModelId:
    suite_name: str = ""
    model_name: str
    model_source: str | None = None  # builtin | torchbench | huggingface | timm (None: unknown)


@dataclass(frozen=True, kw_only=True)
class Experiment:
    """The runner's experiment keys; the child's own values where it reported them."""

    accelerator: str = ""
    accelerator_model: str | None = None
    xla: str | None = None  # None: no XLA device
    dynamo: str | None = None  # None: no dynamo
    test: str
    step: str = "module"  # model.step: what was timed (benchflow.models.step)
    batch_size: int | None = None
    dtype: str | None = None
    model_size: str = ""
    matmul_precision: str = ""
    num_threads: int | None = None
    dtype_source: str | None = None  # who chose the dtype: the suite's rules, the user...
    batch_size_source: str | None = None  # (neither: an invalid job, never resolved)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("dtype_source", "batch_size_source"):
            if out[key] is None:
                del out[key]
        return out


# Job keys written even when null; every other one is left out until the run gets there.
_NULLABLE = ("mlflow_run_id", "overhead_s", "returncode")


@dataclass(kw_only=True)
class JobInfo:
    """The row's `job`: which job, and what the parent saw of its run (filled in as it goes)."""

    name: str = ""
    num: int = 0
    overrides: list[str] = field(default_factory=list)
    dir: str | None = None  # the job's folder
    notes: list[str] = field(default_factory=list)  # settings that do not apply, IR passes
    cpus: str | None = None  # the CPU slot it ran on, e.g. "0-1"
    gpu: str | None = None  # the GPU slot it ran on (core/gpus.py): its CUDA_VISIBLE_DEVICES
    # the node its processes ran on (core/machine.node_name; a comma between several)
    node: str | None = None
    cpu_wait_s: float | None = None  # waiting for that slot
    started_at: float | None = None  # epoch seconds when the child started
    ir_files: list[str] | None = None  # an ok job's IR dumps, relative to dir
    attempt: int | None = None  # 1 + earlier rows of the same job in the sweep folder
    mlflow_run_id: str | None = None
    wall_time_s: float | None = None  # the child's, as the parent saw it
    model_work_s: float | None = None  # the model's phases (results/phases.MODEL_WORK)
    overhead_s: float | None = None  # wall_time_s - model_work_s (None: no child result)
    returncode: int | None = None
    # Where the job's time went, in seconds, by results/phases.PHASES: from the previous
    # job's end (`gap`) to this one's, every second in one phase.
    phases: dict[str, float] | None = None
    fingerprint: str = ""  # the job's identity (core/job.py)
    rerun_of: str | None = None  # `benchflow rerun`: the row_id this job reran
    rerun_env: list[str] | None = None  # speed facts that differ from that row's
    rerun_digest: str | None = None  # whether it reproduced that row's output digest
    # A paired sweep's (pair=AXIS): {"axis", "rounds" (its budget), "threshold"}, what
    # `report --pair` judges its rows by; None elsewhere
    paired: dict[str, Any] | None = None

    @classmethod
    def of(cls, job: Job, dir: str | None = None) -> JobInfo:
        cfg = job.config
        return cls(
            name=job.name,
            num=job.num,
            overrides=list(job.overrides),
            dir=dir,
            notes=list(job.notes),
            fingerprint=job.fingerprint,
            node=node_name(),
            paired=None
            if cfg.pair is None
            else {"axis": cfg.pair, "rounds": cfg.process_count, "threshold": cfg.pair_threshold},
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        return {k: v for k, v in out.items() if v is not None or k in _NULLABLE}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobInfo:
        return cls(**pick(cls, data))


@dataclass(frozen=True, kw_only=True)
class Gpu:
    """The job's GPU, as its child saw it (None on the row where there is none)."""

    name: str | None = None
    capability: str | None = None  # compute capability, "9.0"
    driver: str | None = None
    cuda: str | None = None  # the CUDA torch was built with
    cudnn: str | None = None


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """The machine (core/machine.py), and the CPUs the job's child ran on."""

    cpu_vendor: str | None = None
    cpu_features: list[str] = field(default_factory=list)  # machine.KERNEL_FEATURES it has
    physical_cores: int | None = None
    logical_cores: int | None = None
    memory_bytes: int | None = None
    affinity: str | None = None  # the child's CPU affinity, "0-1"
    gpu: Gpu | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hardware:
        gpu = data.get("gpu")
        return cls(**{**pick(cls, data), "gpu": Gpu(**pick(Gpu, gpu)) if gpu else None})


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Where and how the row was made (results/provenance.py): the parent's part (host,
    code, packages) and the child's (versions, hardware, speed-relevant environment)."""

    host: str | None = None
    cpu_model: str | None = None
    platform: str | None = None
    git_sha: str | None = None
    command: str | None = None
    versions: Versions = field(default_factory=dict)
    hardware: Hardware | None = None  # None: a row from before it was recorded
    lock_sha256: str | None = None  # uv.lock's (results/provenance.py: which one)
    packages_sha256: str | None = None  # the installed distributions, name==version
    torchbench_sha: str | None = None  # the TorchBench checkout's commit ("-dirty")
    env: dict[str, str] = field(default_factory=dict)  # the child's speed settings

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance:
        hardware = data.get("hardware")
        return cls(
            **{
                **pick(cls, data),
                "hardware": Hardware.from_dict(hardware) if hardware else None,
                "env": {str(k): str(v) for k, v in (data.get("env") or {}).items()},
            }
        )

    def with_child(self, child: ChildResult) -> Provenance:
        """This (the parent's) with what the child saw of its run."""
        hardware = self.hardware or Hardware()
        return dataclasses.replace(
            self,
            versions=child.versions,
            env=child.env,
            hardware=dataclasses.replace(
                hardware,
                affinity=child.affinity,
                gpu=Gpu(**pick(Gpu, child.gpu)) if child.gpu else None,
            ),
        )


@dataclass(frozen=True, kw_only=True)
class ResultRow:
    """One attempt of one job, as written to result.json and results.jsonl."""

    schema_version: int = SCHEMA_VERSION
    row_id: str = ""
    model: ModelId
    experiment: Experiment
    backend: str  # the backend's label (benchflow.backends)
    config: Settings | None = None  # the measured settings, flat (None: a schema 1 row)
    repeat: int = 0
    iterations_per_run: int = 0
    warmup: int = 0
    metrics: Metrics = field(default_factory=dict)
    summary: Summary = field(default_factory=dict)
    timing: Timing | None = None  # None: nothing was timed (`{}` in the file)
    timestamp: float = 0.0
    verification_code: str = "VERIFIER_SKIPPED"
    verification_detail: str | None = None
    status: Status
    error: str | None = None
    job: JobInfo = field(default_factory=JobInfo)
    provenance: Provenance = field(default_factory=Provenance)
    superseded_by: str | None = None  # the row_id of the attempt that replaced this one
    digest: Digest | None = None  # the first step's output, summarized (results/digest.py)
    flops: Flops | None = None  # a step's FLOPs, FLOP/s and share of peak (results/flops.py)
    signals: Signals | None = None  # graph breaks, recompiles, ... (results/signals.py)

    @property
    def model_name(self) -> str:
        return self.model.model_name

    @property
    def test(self) -> str:
        return self.experiment.test

    @property
    def untimed(self) -> bool:
        """A job of timing=false: its accuracy and signals, no time to compare."""
        return bool(self.config) and self.config.get(UNTIMED_KEY) is False  # type: ignore[union-attr]

    def series(self, name: str) -> list[float]:
        """A per-repeat metric's values ([] when absent or a single value)."""
        value = self.metrics.get(name)
        return [float(v) for v in value if v is not None] if isinstance(value, list) else []

    def scalar(self, name: str) -> float | None:
        """A single-valued metric (None when absent or per repeat)."""
        value = self.metrics.get(name)
        return float(value) if isinstance(value, (int, float)) else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": self.schema_version,
            "row_id": self.row_id,
            "model": dataclasses.asdict(self.model),
            "experiment": self.experiment.to_dict(),
            "backend": self.backend,
            "config": self.config,
            "repeat": self.repeat,
            "iterations_per_run": self.iterations_per_run,
            "warmup": self.warmup,
            "metrics": self.metrics,
            "summary": self.summary,
            "timing": self.timing.to_dict() if self.timing else {},
            "timestamp": self.timestamp,
            "verification_code": self.verification_code,
            "verification_detail": self.verification_detail,
            "status": self.status.value,
            "error": self.error,
            "job": self.job.to_dict(),
            "provenance": dataclasses.asdict(self.provenance),
        }
        if self.config is None:
            del out["config"]
        if self.superseded_by:
            out["superseded_by"] = self.superseded_by
        if self.digest:
            out["digest"] = self.digest
        if self.flops:
            out["flops"] = self.flops.to_dict()
        if self.signals:
            out["signals"] = self.signals.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResultRow:
        """A row of schema 1 or 2; keys a row lacks take their defaults. Raises RowError
        for a JSON object that is not a row (no model name, test or known status)."""
        try:
            exp = data["experiment"]
            config = data.get("config")
            if int(data.get("schema_version", 1)) < 3:  # the only step there was
                exp = {**exp, "step": "torchbench"}
                if isinstance(config, dict):
                    config = {**config, "model.step": "torchbench"}
            return cls(
                schema_version=int(data.get("schema_version", 1)),
                row_id=str(data.get("row_id", "")),
                model=ModelId(**pick(ModelId, data["model"])),
                experiment=Experiment(**pick(Experiment, exp)),
                backend=str(
                    data.get("backend") or backends.of_row(exp.get("dynamo"), exp.get("xla")).label
                ),
                config=dict(config) if isinstance(config, dict) else None,
                repeat=int(data.get("repeat") or 0),
                iterations_per_run=int(data.get("iterations_per_run") or 0),
                warmup=int(data.get("warmup") or 0),
                metrics=dict(data.get("metrics") or {}),
                summary=dict(data.get("summary") or {}),
                timing=Timing.from_dict(data.get("timing") or {}),
                timestamp=float(data.get("timestamp") or 0.0),
                verification_code=str(data.get("verification_code") or "VERIFIER_SKIPPED"),
                verification_detail=data.get("verification_detail"),
                status=status_of(data["status"], data.get("error")),
                error=data.get("error"),
                job=JobInfo.from_dict(data.get("job") or {}),
                provenance=Provenance.from_dict(data.get("provenance") or {}),
                superseded_by=data.get("superseded_by"),
                digest=data.get("digest"),
                flops=Flops.from_dict(data.get("flops")),
                signals=_signals(data),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RowError(f"not a result row ({type(exc).__name__}: {exc})") from None


def _signals(data: dict[str, Any]) -> Signals | None:
    """A row's signals: its own, or (schema < 7) those its counters give."""
    if int(data.get("schema_version", 1)) >= 7 or data.get("signals"):
        return Signals.from_dict(data.get("signals"))
    return from_metrics(data.get("metrics") or {}, int(data.get("iterations_per_run") or 0))


def build_row(
    job: Job,
    *,
    status: Status,
    error: str | None,
    info: JobInfo | None = None,
    provenance: Provenance | None = None,
    child: ChildResult | None = None,
) -> ResultRow:
    """Assemble a row; `child` is the child's result.json when it wrote one, `info`
    what the parent knows of the run (times, CPUs, files; default: the job alone)."""
    cfg = job.config
    child = child or ChildResult()
    timing = child.timing
    return ResultRow(
        row_id=uuid.uuid4().hex,
        model=ModelId(
            suite_name=cfg.suite.name, model_name=cfg.model.name, model_source=child.model_source
        ),
        experiment=Experiment(
            accelerator=cfg.accelerator.name,
            accelerator_model=child.accelerator_model,
            xla=None if cfg.xla.name in ("none", "auto") else cfg.xla.name,
            dynamo=None if cfg.dynamo.name == "none" else cfg.dynamo.name,
            test=cfg.test.name,
            step=cfg.model.step,
            batch_size=_either(child.batch_size, cfg.batch_size),
            dtype=_either(child.dtype, cfg.dtype),
            model_size=cfg.model.size,
            matmul_precision=cfg.matmul_precision,
            num_threads=_either(child.num_threads, cfg.num_threads),
            dtype_source=job.sources.get("dtype_source"),
            batch_size_source=job.sources.get("batch_size_source"),
        ),
        backend=job.backend,
        config=job.settings,
        # as taken (an adaptive job's count, a calibrated one's steps); 0: nothing timed
        repeat=_either(timing.repeats if timing else None, cfg.repeat) or 0,
        iterations_per_run=_either(
            timing.iterations_per_run if timing else None, cfg.iterations_per_run
        )
        or 0,
        warmup=cfg.warmup if cfg.timing else 0,
        metrics=child.metrics,
        summary=child.summary,
        timing=child.timing,
        timestamp=time.time(),
        verification_code=child.verification_code
        or (
            "VERIFIER_DIDNT_RUN"
            if cfg.checks_accuracy and status.counts_in_passrate
            else "VERIFIER_SKIPPED"
        ),
        verification_detail=child.verification_detail,
        status=status,
        error=error,
        job=info or JobInfo.of(job),
        provenance=(provenance or Provenance()).with_child(child),
        digest=child.digest,
        flops=judged(child.flops, *_time_and_interval(child.summary)),
        signals=child.signals,
    )


def _time_and_interval(
    summary: Summary,
) -> tuple[float | None, tuple[float, float] | None]:
    """The step's median time and its 95% interval, as the child (or the pool) summarized them."""
    stats = summary.get("per_iter_time_s") or {}
    median = stats.get("median")
    ci = (float(stats["ci_low"]), float(stats["ci_high"])) if "ci_low" in stats else None
    return (float(median) if median is not None else None), ci


T = TypeVar("T")


def _either(reported: T | None, configured: T | None) -> T | None:
    """The child's value where it reported one, else the config's."""
    return configured if reported is None else reported
