"""The profiled pass: torch.profiler over a few steps *after* the timed pass, so that its
overhead never reaches the reported times. Each cycle writes a trace and a key_averages
table; the last cycle's numbers, and a trace analysis (compiled regions, graph breaks,
GPU idle gaps), become metrics (docs/profiling.md).
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchflow.backends.device import Device
from benchflow.config.schema import ProfileConfig

log = logging.getLogger(__name__)

REGION = "Torch-Compiled Region"
TOP_OPS = 5


def analyze_trace(trace: Path, steps: int) -> dict[str, float]:
    """Compiled regions, graph breaks and (GPU) kernel gaps from a Chrome trace."""
    opener: Any = gzip.open if trace.suffix == ".gz" else open
    with opener(trace, "rt") as f:
        data = json.load(f)
    events = [e for e in data.get("traceEvents", []) if e.get("ph") == "X"]
    regions = sorted(
        (e for e in events if str(e.get("name", "")).startswith(REGION)),
        key=lambda e: (e.get("tid"), e["ts"]),
    )
    # A region inside another on the same thread is a graph break's continuation.
    top_level, open_until = 0, dict[Any, float]()
    for e in regions:
        tid = e.get("tid")
        if e["ts"] >= open_until.get(tid, -1.0):
            top_level += 1
            open_until[tid] = e["ts"] + e.get("dur", 0)
    compiled_fn = sum(1 for e in events if e.get("name") == "CompiledFunction")
    out = {
        "trace_compiled_regions_per_step": len(regions) / steps,
        "trace_graph_breaks_per_step": (len(regions) - top_level) / steps,
        "trace_compiled_functions_per_step": compiled_fn / steps,
    }
    kernels = sorted(
        (e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
        key=lambda e: e["ts"],
    )
    if kernels:
        window = kernels[-1]["ts"] + kernels[-1].get("dur", 0) - kernels[0]["ts"]
        gaps, end = 0.0, kernels[0]["ts"]
        for k in kernels:
            gaps += max(0.0, k["ts"] - end)
            end = max(end, k["ts"] + k.get("dur", 0))
        out["device_idle_gap_s"] = gaps / 1e6
        out["device_idle_gap_share"] = gaps / window if window > 0 else 0.0
    return out


def _op_metrics(averages: Any, names: list[str] | None, device_kind: str) -> dict[str, float]:
    """Per-op self/total time and calls: the given ops (XLA fallbacks) or the top aten ops."""
    rows = [a for a in averages if str(a.key).startswith("aten::")]
    if names is not None:
        rows, prefix = [a for a in rows if a.key in names], "fallback"
    else:
        rows.sort(key=lambda a: a.self_cpu_time_total, reverse=True)
        rows, prefix = rows[:TOP_OPS], "op"
    out: dict[str, float] = {}
    for a in rows:
        base = f"{prefix}.{a.key}"
        out[f"{base}.self_cpu_time_s"] = a.self_cpu_time_total / 1e6
        out[f"{base}.total_cpu_time_s"] = a.cpu_time_total / 1e6
        out[f"{base}.num_of_calls"] = float(a.count)
        if device_kind == "cuda":
            out[f"{base}.self_cuda_time_s"] = a.self_device_time_total / 1e6
            out[f"{base}.total_cuda_time_s"] = a.device_time_total / 1e6
    return out


def profile_pass(
    step: Callable[[], Any], device: Device, cfg: ProfileConfig, out_dir: Path
) -> dict[str, float]:
    """Profile `step` on its own, write traces and tables to out_dir, return metrics."""
    from torch.profiler import ProfilerActivity, profile, schedule

    out_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.kind == "cuda" else [])
    sort_by = "self_cuda_time_total" if device.kind == "cuda" else "self_cpu_time_total"
    metrics: dict[str, float] = {}
    written: list[Path] = []

    def on_trace_ready(prof: Any) -> None:
        n = len(written)
        trace = out_dir / (f"trace_{n}.json.gz" if cfg.gzip else f"trace_{n}.json")
        prof.export_chrome_trace(str(trace))
        averages = prof.key_averages()
        (out_dir / f"ops_{n}.txt").write_text(averages.table(sort_by=sort_by, row_limit=60))
        written.append(trace)
        cpu_s = sum(a.self_cpu_time_total for a in averages) / 1e6
        metrics.clear()
        metrics.update(total_cpu_time_s=cpu_s, per_iter_cpu_time_s=cpu_s / cfg.active)
        if device.kind == "cuda":
            dev_s = sum(a.self_device_time_total for a in averages) / 1e6
            metrics.update(total_cuda_time_s=dev_s, per_iter_cuda_time_s=dev_s / cfg.active)
        fallbacks = None
        if device.kind == "xla":
            import torch_xla.debug.metrics as met

            fallbacks = list(met.executed_fallback_ops())
            metrics["xla_fallback_ops"] = float(len(fallbacks))
        metrics.update(_op_metrics(averages, fallbacks, device.kind))

    steps = (cfg.wait + cfg.warmup + cfg.active) * cfg.repeat
    with profile(
        activities=activities,
        schedule=schedule(wait=cfg.wait, warmup=cfg.warmup, active=cfg.active, repeat=cfg.repeat),
        on_trace_ready=on_trace_ready,
        record_shapes=cfg.record_shapes,
        profile_memory=cfg.profile_memory,
        with_stack=cfg.with_stack,
        with_flops=cfg.with_flops,
    ) as prof:
        for _ in range(steps):
            out = step()
            device.mark_step()
            device.synchronize()  # align host events with device work, as seed 004 advises
            del out
            prof.step()
    if written:
        metrics.update(analyze_trace(written[-1], cfg.active))
        summary = [f"{k}: {v:.6g}" for k, v in sorted(metrics.items())]
        (out_dir / "summary.txt").write_text("\n".join(summary) + "\n")
    log.info("profiled %d steps, %d trace(s) in %s", steps, len(written), out_dir)
    return {f"profile.{k}": v for k, v in metrics.items()}


def profile_compile(
    build_compiled: Callable[[], Any],
    run: Callable[[Any], Any],
    device: Device,
    name: str,
    backend: str,
    out_dir: Path,
) -> dict[str, float]:
    """Profile a fresh model's first call (after a tiny warm-up compile), and compile_times()."""
    import time

    from torch._dynamo.utils import compile_times
    from torch.profiler import ProfilerActivity, profile, record_function

    out_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.kind == "cuda" else [])
    # Forget compiled code, or the fresh model would reuse the timed model's graphs.
    torch._dynamo.reset()
    model = build_compiled()
    with profile(activities=activities) as prof:
        with record_function("warmup compile"):
            x = torch.rand(2, 2, device=device.torch_device, requires_grad=True)
            torch.compile(lambda t: t.sin().relu(), backend=backend)(x).sum().backward()
            device.mark_step()
            device.synchronize()
        with record_function(f"{name} compile"):
            start = time.perf_counter()
            out = run(model)
            device.mark_step()
            device.synchronize()
            first_call_s = time.perf_counter() - start
            del out
    prof.export_chrome_trace(str(out_dir / "compile_trace.json"))
    (out_dir / "compile_times.txt").write_text(str(compile_times(repr="str", aggregate=True)))
    return {"profile.compile_first_call_s": first_call_s}
