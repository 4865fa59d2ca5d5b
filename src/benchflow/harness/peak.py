"""The device's peak, measured: the best throughput torch.mm reaches on square matrices
in a dtype, on the job's threads (a CPU) or on its GPU (docs/flops.md). Measured once per
host, torch build, device, dtype, thread count and float32 matmul precision (`peak_key`),
kept in benchflow's cache with how it was measured, and read back by every later job;
one measured while other processes used the job's cores (the timed repeats' rule,
results/load.py) is measured again by the next jobs, up to MEASURES times in all.

On a GPU benchflow knows, the vendor's dense peak for that dtype goes beside it
(VENDOR_PEAKS): what the hardware is sold at, where the measured one is what torch's
kernels reach on it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from benchflow.core.files import read_json, write_json_atomic
from benchflow.core.layout import cache_root
from benchflow.core.machine import node_name
from benchflow.harness.load import LoadProbe
from benchflow.results.flops import Peak
from benchflow.results.load import host_load

log = logging.getLogger(__name__)

# Square sizes tried, the best kept: big enough to reach a device's peak, small enough
# that the probe takes well under 2 s per dtype on a 2-core VM (about 0.4 s)
SIZES = {"cpu": (256, 512, 1024), "cuda": (2048, 4096, 8192)}
RUNS = 3  # timed runs per size
RUN_S = 0.04  # each run: as many calls as last about this long
# A peak measured while others used the job's cores is measured again by later jobs, the
# best kept, until one measures it on a quiet host or it has been measured this often.
MEASURES = 3
METHOD = (
    "torch.mm of two n x n matrices into a third, for each n in `sizes`: one untimed call, "
    f"then {RUNS} runs of as many calls as last about {RUN_S} s each (synchronized before "
    "and after), FLOP/s = 2 n^3 calls / seconds; in the dtype, and for a 16-bit one in "
    "float32 too (its matmuls can always run as float32 ones), a dtype far behind at one "
    "size not tried at the next; the peak is the best run"
)

# Dense peaks in TFLOP/s (not the "with sparsity" figures, which are twice these), by
# the name torch.cuda.get_device_name() gives, the first match wins. From NVIDIA's
# datasheets: "NVIDIA H200 Tensor Core GPU" (H200 SXM, H200 NVL), "NVIDIA H100 Tensor
# Core GPU" (H100 SXM, H100 NVL, H100 PCIe), "NVIDIA A100 Tensor Core GPU" (A100
# SXM/PCIe 80GB). fp32: without tensor cores (matmul_precision=highest); tf32: float32
# matmuls on tensor cores (high, medium).
VENDOR_PEAKS: tuple[tuple[str, str, dict[str, float]], ...] = (
    ("H200 NVL", "H200 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    ("H200", "H200 SXM", {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
    ("H100 NVL", "H100 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    ("H100 PCIe", "H100 PCIe", {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5}),
    ("H100", "H100 SXM", {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
    ("A100", "A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
)


def peak_facts(
    device: str, dtype: str, threads: int | None, matmul_precision: str
) -> dict[str, Any]:
    """What a measured peak holds for: the one definition of its cache key (`device`: the
    CPU's model or the GPU's name; `threads`: None on a GPU; `matmul_precision`: torch's
    float32 one, as the job set it)."""
    import torch

    return {
        "host": node_name(),
        "torch": torch.__version__,
        "torch_git": torch.version.git_version,
        "device": device,
        "dtype": dtype,
        "threads": threads,
        "matmul_precision": matmul_precision,
        "method": METHOD,  # a peak measured another way is measured again
    }


def peak_key(facts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def peak_file(facts: dict[str, Any]) -> Path:
    """Where the peak of `facts` is kept (benchflow's cache: $BENCHFLOW_CACHE_DIR)."""
    return cache_root() / "machine" / f"matmul-peak-{peak_key(facts)}.json"


def device_peak(accelerator: str, dtype: Any, matmul_precision: str) -> Peak:
    """The peak of the job's device (the host's CPU, or its CUDA GPU for accelerator=cuda,
    XLA's jobs too) in `dtype`, on torch's current threads and float32 matmul precision
    (the job's, set before): from the cache, else measured and kept there."""
    import torch

    from benchflow.backends.device import native_device

    device = native_device(accelerator)
    on_gpu = device.kind == "cuda"
    name = str(dtype).removeprefix("torch.")
    threads = None if on_gpu else torch.get_num_threads()
    facts = peak_facts(device.model_name(), name, threads, matmul_precision)
    path = peak_file(facts)
    known = _kept(path, facts)
    if known is not None and (known.quiet or known.measures >= MEASURES):
        return _with_vendor(dataclasses.replace(known, from_cache=True), facts)
    measured = _measure(device, dtype, facts)
    # a quiet measurement is the peak; a busy one, the best of the busy ones so far
    best = measured if measured.quiet or known is None else max(known, measured, key=_rate)
    measures = (known.measures if known else 0) + 1
    peak = dataclasses.replace(best, measures=measures, from_cache=best is known)
    write_json_atomic(path, {"facts": facts, "peak": dataclasses.asdict(peak)})
    log.log(
        logging.INFO if measured.quiet else logging.WARNING,
        "matmul peak of %s in %s measured: %.3g FLOP/s%s",
        facts["device"],
        name,
        measured.flop_per_s,
        "" if measured.quiet else " on a busy host (measured again by a later job)",
    )
    return _with_vendor(peak, facts)


def _rate(peak: Peak) -> float:
    return peak.flop_per_s


def _kept(path: Path, facts: dict[str, Any]) -> Peak | None:
    """The peak kept for `facts` (None: none yet, or unreadable)."""
    kept = read_json(path)
    if not isinstance(kept, dict) or kept.get("facts") != facts:
        return None
    try:
        return Peak.from_dict(kept["peak"])
    except (KeyError, TypeError, ValueError):
        return None


def _measure(device: Any, dtype: Any, facts: dict[str, Any]) -> Peak:
    """Each size's runs, and what else ran on the job's cores meanwhile."""
    import torch

    sizes = SIZES[device.kind]
    # A 16-bit matmul can run as a float32 one (XLA's CPU backend runs bfloat16 dots so):
    # on a CPU without native 16-bit arithmetic float32 is its best (an AVX2-only AMD EPYC:
    # 65 GFLOP/s in float32, 1.4 in bfloat16), so the peak is the better of the two.
    wide = [torch.float32] if dtype in (torch.bfloat16, torch.float16) else []
    runs: dict[Any, list[list[float]]] = {d: [] for d in (dtype, *wide)}
    probe = LoadProbe()
    before, start = probe.snapshot(), time.perf_counter()
    best = 0.0
    for n in sizes:
        for d, done in runs.items():
            behind = bool(done) and max(done[-1], default=0.0) < best / 2  # (not tried larger)
            done.append([] if behind else _runs(n, d, device))
            best = max(best, *done[-1], 0.0)
    seen = {k: [v] for k, v in probe.delta(before, probe.snapshot()).items()}
    window = {"total_time_s": [time.perf_counter() - start], **seen}  # one window: all runs
    load = host_load(window, len(os.sched_getaffinity(0)))  # the timed repeats' rule
    return Peak(
        flop_per_s=best,
        dtype=facts["dtype"],
        device=facts["device"],
        threads=facts["threads"],
        matmul_precision=facts["matmul_precision"],
        key=peak_key(facts),
        measured_at=time.time(),
        method=METHOD,
        sizes=list(sizes),
        runs=runs[dtype],
        float32_runs=runs[wide[0]] if wide else [],
        host=load.to_dict() if load else None,
        quiet=load is None or load.quiet,
    )


def _runs(n: int, dtype: Any, device: Any) -> list[float]:
    """Each run's FLOP/s of n x n matmuls (device: backends/device.Device)."""
    import torch

    where = device.torch_device
    a, b = (torch.randn(n, n, device=where).to(dtype) for _ in range(2))
    out = torch.empty(n, n, device=where, dtype=dtype)
    device.synchronize()
    start = time.perf_counter()
    torch.mm(a, b, out=out)  # the first call: its kernel chosen and its memory touched
    device.synchronize()
    calls = max(1, round(RUN_S / max(time.perf_counter() - start, 1e-6)))
    each = []
    for _ in range(RUNS):
        device.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            torch.mm(a, b, out=out)
        device.synchronize()
        each.append(2.0 * n**3 * calls / (time.perf_counter() - start))
    return each


def vendor_peak(gpu: str, dtype: str, matmul_precision: str) -> tuple[str, float] | None:
    """The datasheet row and dense FLOP/s of `gpu` in `dtype` (None: not in VENDOR_PEAKS)."""
    kind = {"bfloat16": "bf16", "float16": "fp16"}.get(dtype)
    if dtype == "float32":
        kind = "fp32" if matmul_precision == "highest" else "tf32"
    for part, row, peaks in VENDOR_PEAKS:
        if part in gpu and kind in peaks:
            return f"{row} {kind} dense (NVIDIA's datasheet)", peaks[kind] * 1e12
    return None


def _with_vendor(peak: Peak, facts: dict[str, Any]) -> Peak:
    if facts["threads"] is not None:  # a CPU: no datasheet
        return peak
    found = vendor_peak(peak.device, peak.dtype, peak.matmul_precision)
    if found is None:
        return peak
    return dataclasses.replace(peak, vendor=found[0], vendor_flop_per_s=found[1])
