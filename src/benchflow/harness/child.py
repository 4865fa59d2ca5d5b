"""Entry point of the isolated child process: it reads ``job.json`` (a JobSpec), builds and
times the model, and writes its ChildResult atomically. An exception becomes
``status=failed``; a crash leaves no result.json, and the parent reports its exit code.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchflow import backends
from benchflow.backends.base import Backend
from benchflow.config.schema import BenchConfig, settings_of
from benchflow.core.cpus import ENV_CPUS, pin_self, span
from benchflow.core.files import write_json_atomic
from benchflow.core.job import JobSpec
from benchflow.core.layout import JobDir, SweepDir
from benchflow.core.status import Status
from benchflow.harness.process import (
    ENV_MACHINE_CHECKS,
    die_with_parent,
    limit_memory,
    seed_everything,
    set_host_allocator,
)
from benchflow.models.errors import ModelSkipped
from benchflow.results.child import ChildResult, ChildTimings, Digest, Timing
from benchflow.results.flops import Flops
from benchflow.results.provenance import gpu_info, job_env, versions

if TYPE_CHECKING:
    from benchflow.harness.prebuilt import Prebuilt
    from benchflow.models.step import TimedStep

log = logging.getLogger("benchflow.child")

AMP_DTYPES = {"amp": None, "amp_bf16": "bfloat16", "amp_fp16": "float16"}


def preload() -> None:
    """What every job's child imports after torch, for a zygote to import before it forks."""
    import numpy.random  # noqa: F401  (seed_everything)

    import benchflow.backends.probes
    import benchflow.harness.profiling
    import benchflow.harness.signals
    import benchflow.harness.timing
    import benchflow.harness.verify
    import benchflow.models.registry
    import benchflow.models.step
    import benchflow.results.digest
    import benchflow.suite.tolerance  # noqa: F401
    from benchflow.models import bert, dlrm, llama, resnet  # noqa: F401  (the built-ins)


def _start(
    cfg: BenchConfig, backend: type[Backend], prebuilt: Prebuilt | None, records: bool = True
) -> tuple[_Job, float]:
    """The job's device and threads, set up; the seconds its imports took."""
    t_import = time.perf_counter()
    import torch

    import benchflow.harness.load
    import benchflow.harness.timing  # noqa: F401

    device = backend.make_device(cfg.accelerator.name)
    import_s = time.perf_counter() - t_import
    device.set_matmul_precision(cfg.matmul_precision)
    # A forked child loaded OpenMP before it got OMP_NUM_THREADS: the slot's size, set here.
    threads = cfg.num_threads or (len(os.sched_getaffinity(0)) if os.environ.get(ENV_CPUS) else 0)
    if threads:
        torch.set_num_threads(threads)
    job = _Job(cfg, backend, device, Precision(cfg.dtype, device.kind), prebuilt, records)
    return job, import_s


def run(
    cfg: BenchConfig,
    backend: type[Backend],
    out_dir: Path,
    prebuilt: Prebuilt | None,
    process: int = 0,
) -> ChildResult:
    """Build, prepare and time one job (`process`: which of its processes). Returns the
    child's part of the result row."""
    job, import_s = _start(cfg, backend, prebuilt)  # first: what import_s times
    import torch

    from benchflow.harness.signals import Reader
    from benchflow.harness.verify import outputs
    from benchflow.results.digest import digest

    device = job.device
    timed, build_s = _build_timed(job, out_dir)

    def step() -> Any:
        return job.run_step(timed, device.autocast_type)

    first: list[Digest] = []
    result: list[Any] = []  # timing=false: the first step's outputs, for the check
    checked_here = not cfg.timing and not job.called  # (its first call is here)

    def on_first(out: Any) -> None:
        from benchflow.harness.accuracy import leaves

        found = leaves(out)  # on the host, once
        first.append(digest(found, of=backend.label))
        if checked_here:
            result.append(outputs(timed, cfg.test.name, found))

    if checked_here:
        seed_everything(cfg.seed)  # as each of the check's runs starts (harness/verify.py)
    signals = Reader(backend).start()
    t_measure = time.perf_counter()
    m = _measure(cfg, backend, device, step, on_first)
    measure_s = time.perf_counter() - t_measure
    read = signals.read(m, cfg.timing)  # before the accuracy check and profile compile again

    checked, code, detail, profile_s, verify_s = _profile_and_verify(
        job, step, out_dir, result[0] if result else None
    )
    metrics = _metrics(m, timed.batch_size, cfg.timing) | checked  # (RSS: before the count)
    # last: the count leaves the model as it leaves it (docs/flops.md); a later process's
    # row is the first's but for its samples (results/pooled.py); untimed, no FLOP/s to judge
    t_flops = time.perf_counter()
    flops = job.flops(timed) if process == 0 and cfg.timing else None
    flops_s = time.perf_counter() - t_flops

    return ChildResult(
        model_source=cfg.model.source,
        batch_size=timed.batch_size,
        dtype=job.prec.name,
        accelerator_model=device.model_name(),
        num_threads=torch.get_num_threads(),
        metrics=metrics,
        summary=m.summary(),
        timing=_timing(cfg, m, job.shared) if cfg.timing else None,
        child_timings=ChildTimings(
            import_s=import_s,
            build_s=build_s,
            move_s=job.move_s,
            compile_s=m.first_iter_time_s,
            warmup_s=m.warmup_time_s,
            # the timed repeats, with the loop's own syncs and counter reads
            timed_s=max(measure_s - m.first_iter_time_s - m.warmup_time_s, 0.0),
            profile_s=profile_s,
            verify_s=verify_s,
            flops_s=flops_s,
        ),
        verification_code=code,
        verification_detail=detail,
        gpu=gpu_info() if cfg.accelerator.name == "cuda" else None,
        digest=first[0] if first else None,
        flops=flops,
        signals=read,
    )


def _build_timed(job: _Job, out_dir: Path) -> tuple[Any, float]:
    """The job's model for its step, and the seconds its build took less its move to the
    device (job.move_s). timing=false: the step is the accuracy check's backend run, at
    the check's batch size. First, where the check's references are (they decide whether
    the build is kept for the check)."""
    from benchflow.harness.verify import batch_size

    cfg = job.cfg
    job.references = _references_file(cfg, out_dir)
    t_build = time.perf_counter()
    batch = cfg.batch_size if cfg.timing else batch_size(cfg)
    timed = job.build(job.device.torch_device, job.prec.model_dtype, True, batch)
    return timed, time.perf_counter() - t_build - job.move_s


def _profile_and_verify(
    job: _Job, step: Callable[[], Any], out_dir: Path, checked: Any
) -> tuple[dict[str, Any], str, str | None, float, float]:
    """After the timed repeats: the profile and the accuracy check (of `checked`, the
    first step's outputs, where the job is untimed). Their metrics, the check's code and
    detail, and the seconds each took."""
    cfg = job.cfg
    _dump_counters(cfg, job.backend, out_dir)  # the timed run's counters, before profiling adds
    t_profile = time.perf_counter()
    profiled = job.profile(step, out_dir / "profile")
    profile_s = time.perf_counter() - t_profile if profiled is not None else 0.0
    t_verify = time.perf_counter()
    code, accuracy, detail = job.verify(checked)
    verify_s = time.perf_counter() - t_verify if cfg.checks_accuracy else 0.0
    return accuracy | (profiled or {}), code, detail, profile_s, verify_s


def _measure(
    cfg: BenchConfig,
    backend: type[Backend],
    device: Any,
    step: Callable[[], Any],
    on_first: Callable[[Any], None],
) -> Any:
    """The step timed (harness/timing.measure), or run twice untimed (timing=false); the
    first step's output given to `on_first`, outside every timed region."""
    from benchflow.backends.inductor import stop_compile_workers
    from benchflow.harness.gpu_load import gpu_probe
    from benchflow.harness.load import LoadProbe
    from benchflow.harness.timing import Sampling, measure, untimed

    if not cfg.timing:
        return untimed(step, device, probes=backend.probes(), on_first=on_first)
    return measure(
        step,
        device,
        sampling=Sampling.of(cfg),
        warmup=cfg.warmup,
        probes=[*backend.probes(), LoadProbe(), *gpu_probe(device.kind)],
        trace_time=backend.on_xla,
        adaptive_warmup=cfg.adaptive_warmup,
        max_warmup=cfg.max_warmup,
        on_first=on_first,
        before_timed=stop_compile_workers,
    )


@dataclasses.dataclass
class _Job:
    """What the child's passes share, and how a pass builds the model's step and runs it."""

    cfg: BenchConfig
    backend: type[Backend]
    device: Any  # backends/device.Device
    prec: Precision
    prebuilt: Prebuilt | None = None
    records: bool = True  # its first build is recorded (prebuilt.record)
    shared: Prebuilt | None = None  # the one taken, as the row tells it (no model)
    move_s: float = 0.0  # the last build's cast and move
    called: bool = False  # its step was called before the fork (prebuilt.warm_here)
    # (batch size, the first build before its cast and move: None where it cannot be copied,
    # or once the last build took it)
    kept: tuple[int | None, Any] | None = None
    references: Path | None = None  # the check's eager and float64 runs, kept by the sweep

    def build(
        self, target: Any, dtype: Any, compiled: bool, batch_size: int | None, last: bool = False
    ) -> TimedStep:
        """A fresh model (same seed: same weights and inputs) and its timed step, `compiled`
        or not; the first build takes what was built before the fork for this config. A job
        that checks its accuracy keeps its first build, before the cast and move, and a
        later build at that batch size is a copy of it (`copy.deepcopy`, as PyTorch's
        dynamo benchmarks copy the model for each run of their accuracy check); the `last`
        build takes the kept one itself."""
        from benchflow.harness import prebuilt
        from benchflow.models.step import TimedStep

        cfg = dataclasses.replace(self.cfg, batch_size=batch_size)
        found, self.prebuilt = self.prebuilt, None
        taken = found.for_(cfg) if found is not None else None
        first, self.records = self.records, False
        if taken is not None:
            self.shared = dataclasses.replace(taken, model=None, step=None)
        if taken is not None and taken.step is not None and compiled:
            log.info("step of %s compiled before the fork", cfg.model.name)
            if first:
                prebuilt.record(taken.step.model, True)
            self.move_s = 0.0
            self.called = True
            return taken.step  # (placed, prepared and called: prebuilt.warm_here)
        built = self._built(cfg, taken, last)
        start = time.perf_counter()
        model = built.place(target, dtype)
        self.move_s = time.perf_counter() - start
        if first:
            prebuilt.record(model, taken is not None)
        prepare = (lambda fn: self.backend.prepare(fn, cfg.dynamo)) if compiled else None
        step = TimedStep(
            model,
            name=cfg.model.name,
            kind=cfg.model.step,
            test=cfg.test.name,
            prepare=prepare,
            exports=self.backend.exports,
        )
        if compiled and cfg.dynamo.dynamic_batch:
            step.mark_batch_dynamic()
        return step

    def _built(self, cfg: BenchConfig, taken: Prebuilt | None, last: bool = False) -> Any:
        """The model as built, before its cast and move: taken from before the fork, a copy
        of the one kept (`last`: the kept one, which no later build then copies), or built
        here from the seed."""
        from benchflow.models.registry import build_model

        if taken is not None and taken.model is not None:
            log.info("model %s built before the fork (%.2f s)", cfg.model.name, taken.build_s)
            built = taken.model
        elif self.kept is not None and self.kept[0] == cfg.batch_size and self.kept[1] is not None:
            if last:
                built, self.kept = self.kept[1], (cfg.batch_size, None)
                return built
            return copy.deepcopy(self.kept[1])
        else:
            m = cfg.model
            log.info("model %s from %s, batch size %s", m.name, m.source, cfg.batch_size)
            seed_everything(cfg.seed)
            built = build_model(cfg)
        # untimed, with the check's references already in the sweep, no later build comes
        refs = self.references
        once = not self.cfg.timing and refs is not None and refs.is_file()
        if self.kept is None and self.cfg.checks_accuracy and not once:
            try:
                self.kept = (cfg.batch_size, copy.deepcopy(built))
            except Exception as exc:  # then each build of the check builds again
                log.warning("the model cannot be copied (%s: %s)", type(exc).__name__, exc)
                self.kept = (cfg.batch_size, None)
        return built

    def compiled_step(self) -> TimedStep:
        """A fresh build's compiled step, at the job's batch size on its device."""
        return self.build(
            self.device.torch_device, self.prec.model_dtype, True, self.cfg.batch_size
        )

    def run_step(self, s: TimedStep, autocast_type: str | None) -> Any:
        return self.prec.step(s, autocast_type)

    def call(self, step: TimedStep, times: int) -> float:
        """`step` called `times` times, each cut and synchronized: the seconds they took."""
        start = time.perf_counter()
        for _ in range(times):
            out = self.run_step(step, self.device.autocast_type)
            self.device.mark_step()
            self.device.synchronize()
            del out
        return time.perf_counter() - start

    def profile(self, step: Callable[[], Any], out: Path) -> dict[str, float] | None:
        """profile=torch: the profiled pass (and the compile's, where asked); else None."""
        if self.cfg.profile.name != "torch":
            return None
        from benchflow.harness.profiling import profile_compile, profile_pass

        cfg, device = self.cfg, self.device
        profiled = profile_pass(step, device, cfg.profile, out)
        if cfg.profile.compile and self.backend.compiles:
            profiled |= profile_compile(
                self.compiled_step,
                lambda built: self.run_step(built, device.autocast_type),
                device,
                cfg.model.name,
                cfg.dynamo.name,
                out,
            )
        return profiled

    def flops(self, step: TimedStep) -> Flops:
        """The FLOPs of one step (harness/flops.py) and the device's peak in the dtype its
        matmuls run in (harness/peak.py); neither ever fails the job."""
        from benchflow.harness import flops, peak

        counted = flops.count(step, self.prec.autocast(self.device.autocast_type))
        try:
            cfg = self.cfg
            measured = peak.device_peak(
                cfg.accelerator.name, self.prec.matmul_dtype, cfg.matmul_precision
            )
        except Exception as exc:
            log.warning("no matmul peak: %s: %s", type(exc).__name__, exc)
            return dataclasses.replace(counted, peak_error=f"{type(exc).__name__}: {exc}")
        return dataclasses.replace(counted, peak=measured)

    def verify(self, result: Any = None) -> tuple[str, dict[str, float], str | None]:
        """verify=true (or timing=false): the verification code, the accuracy metrics
        and the detail; `result`: the backend's outputs, where the job's step gave them."""
        if not self.cfg.checks_accuracy:
            return "VERIFIER_SKIPPED", {}, None
        from benchflow.harness.verify import verify

        dtype, refs = self.prec.model_dtype, self.references
        return verify(self.cfg, self.build, self.run_step, self.device, dtype, result, refs)


def _references_file(cfg: BenchConfig, out_dir: Path) -> Path | None:
    """The file where a sweep's jobs keep the accuracy check's eager and float64 runs,
    keyed by what they depend on (None: no check, or a single run, whose folder is its job's)."""
    from benchflow.harness.verify import batch_size
    from benchflow.models.sharing import reference_key

    sweep = SweepDir(out_dir.parent)
    if not cfg.checks_accuracy or not sweep.plan.is_file():
        return None
    key = reference_key(dataclasses.replace(cfg, batch_size=batch_size(cfg)))
    return sweep.references / f"{key}.pt" if key else None


def _metrics(m: Any, batch_size: int, timed: bool) -> dict[str, Any]:
    """The row's metrics from the timing loop (`m`: harness/timing.Measurement); untimed,
    the first step's probe deltas and the host's peak RSS."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if not timed:
        return {"peak_host_rss_bytes": rss, **{f"cold_{k}": v for k, v in m.cold.items()}}
    per_iter = m.summary()["per_iter_time_s"]["median"]
    return {
        **m.per_repeat,
        "first_iter_time_s": m.first_iter_time_s,
        "warmup_time_s": m.warmup_time_s,
        **({"host_reference_s": m.host_reference_s} if m.host_reference_s else {}),
        "throughput_samples_per_s": batch_size / per_iter if per_iter > 0 else 0.0,
        "peak_host_rss_bytes": rss,
        **{f"cold_{k}": v for k, v in m.cold.items()},
    }


def _timing(cfg: BenchConfig, m: Any, shared: Prebuilt | None) -> Timing:
    """The row's `timing`: the timing loop's, the launch's and the shared build's."""
    from benchflow.results.load import host_load

    load = host_load(m.per_repeat, len(os.sched_getaffinity(0)))  # on this job's cores
    return Timing(
        steady_state=not m.unsteady,
        unsteady_repeats=m.unsteady,
        warmup_steps=m.warmup_steps,
        warmup_settled=m.warmup_settled,
        repeats=len(m.per_repeat.get("per_iter_time_s", [])),
        adaptive=cfg.repeat is None or cfg.adaptive_repeat,
        stop=m.stop,
        ci_rel=m.ci_rel,
        iterations_per_run=m.iterations_per_run,
        calibrated=m.calibrated,
        calibration_steps=m.calibration_steps,
        host=load.to_dict() if load else None,  # what else ran over the timed repeats
        compile_cache=cfg.compile_cache,
        launch=os.environ.get("BENCHFLOW_LAUNCH", "spawn"),
        preloaded=[m for m in os.environ.get("BENCHFLOW_PRELOADED", "").split(",") if m],
        machine_checks=json.loads(os.environ.get(ENV_MACHINE_CHECKS) or "{}"),
        shared_build_s=shared.build_s if shared else None,
        shared_build_pid=shared.pid if shared else None,
        shared_step_s=shared.step_s if shared else None,
        timer_resolution_s=time.get_clock_info("perf_counter").resolution,
        compile_workers_stopped_s=m.before_timed_s,
    )


def _dump_counters(cfg: BenchConfig, backend: type[Backend], out_dir: Path) -> None:
    """The runner's --dump-pytorch-xla-metrics and --dump-dynamo-counters, as files."""
    files = JobDir(out_dir)
    if cfg.profile.dump_xla_metrics and backend.on_xla:
        import torch_xla.debug.metrics as met

        files.xla_metrics.write_text(met.metrics_report())
    if cfg.profile.dump_dynamo_counters:
        from torch._dynamo.utils import counters

        data = {group: dict(values) for group, values in counters.items()}
        files.dynamo_counters.write_text(json.dumps(data, indent=2, default=str))


class Precision:
    """The job's dtype: `model_dtype` to cast the model to, or autocast (AMP) in `step`."""

    def __init__(self, dtype: str | None, device_kind: str) -> None:
        import torch

        self.name = dtype or "float32"
        amp = self.name in AMP_DTYPES
        self.model_dtype = None if amp or self.name == "float32" else getattr(torch, self.name)
        self.amp_dtype = None
        if amp:  # plain `amp`: the device's usual low-precision type
            name = AMP_DTYPES[self.name] or ("float16" if device_kind == "cuda" else "bfloat16")
            self.amp_dtype = getattr(torch, name)

    @property
    def matmul_dtype(self) -> Any:
        """The dtype the step's matmuls run in: autocast's, the model's, else float32."""
        import torch

        return self.amp_dtype or self.model_dtype or torch.float32

    def autocast(self, autocast_type: str | None) -> AbstractContextManager[Any]:
        """Autocast on `autocast_type` for AMP (None: never), else nothing."""
        import torch

        if self.amp_dtype is None or autocast_type is None:
            return nullcontext()
        return torch.autocast(device_type=autocast_type, dtype=self.amp_dtype)

    def step(self, step: TimedStep, autocast_type: str | None) -> Any:
        """One step, under autocast on `autocast_type` for AMP."""
        with self.autocast(autocast_type):
            return step()


# A model may change its own state in its first call (llama's KV cache cast): a second recompiles.
FIRST_CALLS = 2


def first_call_step(cfg: BenchConfig, prebuilt: Prebuilt | None) -> tuple[TimedStep, float]:
    """The job's step, built and called FIRST_CALLS times as its child would; their seconds."""
    import torch

    threads = torch.get_num_threads()  # (the process's, as it was, after)
    try:
        backend = backends.of_row(cfg.dynamo.name, cfg.xla.name)
        job, _ = _start(cfg, backend, prebuilt, records=False)
        with compiler_settings(cfg):
            step = job.compiled_step()
            return step, job.call(step, FIRST_CALLS)
    finally:
        torch.set_num_threads(threads)


def _out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    # torch's CPU allocator, CUDA's caching allocator (torch.OutOfMemoryError), XLA's
    text, markers = str(exc), ("can't allocate memory", "out of memory", "RESOURCE_EXHAUSTED")
    return any(m in text for m in markers) or type(exc).__name__ == "OutOfMemoryError"


def compiler_settings(cfg: BenchConfig) -> AbstractContextManager[Any]:
    """The job's `inductor.<key>=` settings (runner/knobs.py) over all the child compiles."""
    settings = settings_of(cfg.inductor)
    if not settings:
        return nullcontext()
    from torch._inductor import config

    log.info("torch._inductor.config: %s", settings)
    return config.patch(settings)


def main(
    argv: list[str], prebuilt: Prebuilt | None = None, environ: dict[str, str] | None = None
) -> int:
    """The child: run the job file argv[0] (`prebuilt`: its warm process's) and write its result."""
    if len(argv) != 1:
        print("usage: python -m benchflow.harness JOB.json", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    die_with_parent()  # a job whose sweep (or worker) was killed does not run on
    cores = pin_self()  # the job's CPU slot, before torch starts its thread pools
    job = JobSpec.from_dict(json.loads(Path(argv[0]).read_text()))
    logging.basicConfig(  # force: torch_xla's import, in a zygote, gave the root a handler
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(asctime)s [{job.name}] %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    log.info("pid %d, job %s, CPUs %s", os.getpid(), argv[0], cores or "all")
    cfg = job.config
    if not set_host_allocator(cfg.host_allocator):
        log.warning("no glibc mallopt: host allocations may page-fault on every step")
    log.info("host allocator: %s", cfg.host_allocator)
    result = ChildResult(
        versions=versions(cfg.model.source, list(cfg.toolchain.pins)),
        env=job_env(settings_of(cfg.env), environ),  # as it started: before imports set any
        affinity=span(sorted(os.sched_getaffinity(0))),
    )
    try:
        backend = backends.of_row(cfg.dynamo.name, cfg.xla.name)  # the config is resolved
        if cfg.memory_limit_gb:
            limit_memory(cfg.memory_limit_gb)
        with compiler_settings(cfg):
            if job.ir:  # two steps: the first compiles, the second is the steady-state graph
                ir, _ = _start(cfg, backend, None, records=False)
                ir.call(ir.compiled_step(), 2)
            else:
                ran = run(cfg, backend, Path(job.result_path).parent, prebuilt, job.process)
                result = dataclasses.replace(
                    ran, versions=result.versions, env=result.env, affinity=result.affinity
                )
    except ModelSkipped as exc:
        result.status, result.error = Status.SKIPPED, str(exc)
        log.info("skipped: %s", exc)
    except Exception as exc:
        result.status = Status.OOM if _out_of_memory(exc) else Status.FAILED
        result.error = f"{type(exc).__name__}: {exc}"
        log.error("job %s:\n%s", result.status, traceback.format_exc())
    result.child_wall_s = time.perf_counter() - t0
    if result.child_timings is not None:  # the parent splits its wall with these
        done = time.perf_counter()
        result.child_timings = dataclasses.replace(result.child_timings, entered=t0, done=done)
    write_json_atomic(Path(job.result_path), result.to_dict())
    return 0 if result.status is not Status.FAILED else 1
