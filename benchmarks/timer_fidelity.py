"""benchflow's timed loop against torch.utils.benchmark.Timer (and, on a GPU, CUDA
events) on the same step in one process: the medians behind harness_bench.py's (b) and
gpu.py's fidelity table.

For each built-in model (small, eval) on eager and Inductor: benchflow's loop as a job
runs it (cold start, adaptive warm-up, repeats), then Timer, then on a GPU CUDA events
around 10 steps at a time, interleaved over ROUNDS rounds so that drift of the host
(frequency, other tenants) falls on each alike. Timer runs one thread on a CPU unless
told; it gets the threads benchflow's loop had. The step is compiled and warm after
round 0, and Inductor's compile workers stopped, as in a job. Timer synchronizes CUDA
around each block it times.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# The built-in models, as conf/model names them (name -> the class, `builtin:`)
CONF_MODELS = Path(__file__).resolve().parents[1] / "conf" / "model"
MODELS = {
    p.stem: yaml.safe_load(p.read_text())["builtin"]
    for p in sorted(CONF_MODELS.glob("*.yaml"))
    if "builtin" in (yaml.safe_load(p.read_text()) or {})
}
BACKENDS = ("none", "inductor")
ROUNDS = 5


@dataclass(frozen=True)
class Medians:
    """One model and backend's median seconds a step, each way of timing it."""

    model: str
    backend: str
    benchflow_s: float
    timer_s: float
    events_s: float | None  # None: not on a GPU
    # each round's medians (benchflow, Timer, events): where a difference comes from
    rounds: tuple[tuple[float, float, float | None], ...] = ()


def medians(
    models: list[str],
    device: Any,
    timer_min_run_s: float,
    rounds: int = ROUNDS,
    size: str = "small",
    dtype: str | None = None,
    repeats: int = 10,
    backends_: tuple[str, ...] = BACKENDS,
) -> list[Medians]:
    """Each of `models` (names in MODELS, of `size`, in `dtype`: None keeps the model's)
    x `backends_` on `device` (backends/device.py), over `rounds` rounds of `repeats`
    repeats of 10 steps each way."""
    import torch
    import torch.utils.benchmark as tb

    from benchflow import backends
    from benchflow.backends.inductor import stop_compile_workers
    from benchflow.config.schema import BenchConfig, DynamoConfig, ModelConfig
    from benchflow.harness.timing import Sampling, measure
    from benchflow.models.registry import build_model

    on_gpu = device.kind == "cuda"
    out = []
    for name, backend in itertools.product(models, backends_):
        torch.manual_seed(0)
        torch._dynamo.reset()
        model_cfg = ModelConfig(name=name, builtin=MODELS[name], source="builtin", size=size)
        cfg = BenchConfig(model=model_cfg)
        model = build_model(cfg).place(
            device.torch_device, getattr(torch, dtype) if dtype else None
        )
        module, _ = model.get_module()
        model.set_module(backends.of_row(backend, None).prepare(module, DynamoConfig(name=backend)))
        step = model.eval
        ours: list[float] = []
        timer: list[float] = []
        events: list[float] = []
        each = []
        for _ in range(rounds):
            at = len(ours), len(timer), len(events)
            m = measure(
                step,
                device,
                sampling=Sampling(repeat=repeats, iterations_per_run=10),
                warmup=5,
                probes=[],
                trace_time=False,
                adaptive_warmup=True,
                before_timed=stop_compile_workers,  # as a job's child does
            )
            ours += m.per_repeat["per_iter_time_s"]
            threads = torch.get_num_threads()
            timed = tb.Timer(stmt="step()", globals={"step": step}, num_threads=threads)
            timer += timed.blocked_autorange(min_run_time=timer_min_run_s).times
            for _ in range(repeats if on_gpu else 0):  # events around 10 steps, as a repeat
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(True)
                torch.cuda.synchronize()
                start.record()
                for _ in range(10):
                    step()
                end.record()
                end.synchronize()
                events.append(start.elapsed_time(end) / 1e3 / 10)
            each.append(
                (
                    statistics.median(ours[at[0] :]),
                    statistics.median(timer[at[1] :]),
                    statistics.median(events[at[2] :]) if on_gpu else None,
                )
            )
        out.append(
            Medians(
                name,
                backend,
                statistics.median(ours),
                statistics.median(timer),
                statistics.median(events) if events else None,
                tuple(each),
            )
        )
        del model, module, step
        if on_gpu:
            torch.cuda.empty_cache()
    return out
