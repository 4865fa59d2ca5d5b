"""benchflow on a CUDA GPU: the figures issue 41 asks for, in one run on the GPU machine.

(a) The matrix: the built-in models x the five CUDA configurations (eager, Inductor,
    cudagraphs, Inductor with mode=reduce-overhead and with max-autotune-no-cudagraphs),
    eval and train, in each of --dtypes: benchflow's own sweeps, their rows as a table
    (median ms/iter and its interval, compile s, the GPU allocator's peak, the GPU's
    SM clock and throttled repeats), every job ok or the row's status and error.
(b) Fidelity: for each built-in model on eager and Inductor, benchflow's timed loop
    (harness/timing.measure, CudaDevice) against torch.utils.benchmark.Timer and CUDA
    events around the same steps, in this process, interleaved over rounds.

On the GPU machine, from the checkout, with the wheels `make gpu-wheels` made:

    python3 -m pip install -q --no-index --no-deps --target /tmp/benchflow-site .whl/*.whl
    PYTHONPATH=src:/tmp/benchflow-site python3 benchmarks/gpu.py --out $OUT/gpu.md

(docs/gpu.md). It prints the tables and appends them to --out (RESULTS.md's form).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from results_md import publish

# The built-in models, as conf/model names them (name -> the class, `builtin:`)
CONF_MODELS = Path(__file__).resolve().parents[1] / "conf" / "model"
MODELS = {
    p.stem: yaml.safe_load(p.read_text())["builtin"]
    for p in sorted(CONF_MODELS.glob("*.yaml"))
    if "builtin" in (yaml.safe_load(p.read_text()) or {})
}
# The five configurations: two sweeps, since a mode applies to Inductor alone.
CONFIGS = {
    "plain": ["dynamo=none,inductor,cudagraphs"],
    "modes": ["dynamo=inductor", "dynamo.mode=reduce-overhead,max-autotune-no-cudagraphs"],
}
FIDELITY_ROUNDS = 5


def sweep(args: list[str], cwd: Path) -> None:
    """A benchflow sweep in `cwd` (a job that fails is a row that says why)."""
    cmd = [sys.executable, "-m", "benchflow", "-m", *args]
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, cwd=cwd, check=False)


def matrix(
    models: list[str],
    dtypes: list[str],
    tests: list[str],
    extra: list[str],
    accelerator: str,
    configs: list[str],
) -> list[str]:
    from benchflow.results.headline import headline_of
    from benchflow.results.row import ResultRow

    cwd = Path(tempfile.mkdtemp(prefix="benchflow-gpu-"))
    common = [
        f"model={','.join(models)}",
        "model.size=small",
        f"accelerator={accelerator}",
        f"test={','.join(tests)}",
        f"dtype={','.join(dtypes)}",
        "mlflow.enabled=false",
        *extra,
    ]
    started = time.perf_counter()
    for name in configs:
        sweep([*common, *CONFIGS[name]], cwd)
    wall = time.perf_counter() - started
    rows = _rows(cwd)
    lines = [
        f"Sweeps: `benchflow -m {' '.join(common)}` with each of "
        + ", ".join(f"`{' '.join(CONFIGS[c])}`" for c in configs)
        + f"; {len(rows)} rows in {wall:.0f} s",
        "",
        "| model | test | dtype | configuration | status | ms/iter (95% CI) | compile s "
        "| peak MiB (GPU: the allocator's) | SM MHz | throttled repeats |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for data in sorted(rows, key=lambda r: r["job"]["name"]):
        row = ResultRow.from_dict(data)
        h = headline_of(row)
        cfg = data.get("config") or {}  # the row's resolved config, by dotted key
        config = cfg.get("dynamo.name", row.backend)
        if cfg.get("dynamo.mode") not in (None, "default"):
            config += f" mode={cfg['dynamo.mode']}"
        time_ms = (
            f"{h.time_s * 1e3:.3f} ({h.ci_low_s * 1e3:.3f}-{h.ci_high_s * 1e3:.3f})"
            if h.time_s is not None and h.ci_low_s is not None and h.ci_high_s is not None
            else (f"{h.time_s * 1e3:.3f}" if h.time_s is not None else "")
        )
        status = row.status.value if h.time_s is not None else f"{row.status.value}: {row.error}"
        host = h.host
        clock = host.gpu_sm_clock_mhz if host else None
        lines.append(
            f"| {cfg.get('model.name')} | {cfg.get('test.name')} "
            f"| {cfg.get('dtype', '?')} | {config} | {status[:120]} | {time_ms} "
            f"| {'' if h.compile_s is None else f'{h.compile_s:.1f}'} "
            f"| {'' if h.peak_bytes is None else f'{h.peak_bytes / 2**20:.0f} ({h.memory_kind})'} "
            f"| {'' if clock is None else f'{clock:.0f}'} "
            f"| {'' if not host or clock is None else len(host.throttled)} |"
        )
    return lines


def _rows(cwd: Path) -> list[dict[str, Any]]:
    rows = []
    for results in sorted(cwd.glob("multirun/*/*/results.jsonl")):
        rows += [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return rows


def fidelity(models: list[str], accelerator: str) -> list[str]:
    import torch
    import torch.utils.benchmark as tb

    from benchflow import backends
    from benchflow.backends.device import native_device
    from benchflow.config.schema import BenchConfig, DynamoConfig, ModelConfig
    from benchflow.harness.timing import Sampling, measure
    from benchflow.models.registry import load_model

    device = native_device(accelerator)
    on_gpu = device.kind == "cuda"
    lines = [
        "| model | backend | benchflow median ms/iter | Timer | CUDA events | "
        "benchflow vs Timer | benchflow vs events |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, backend in itertools.product(models, ["none", "inductor"]):
        torch.manual_seed(0)
        torch._dynamo.reset()
        cfg = BenchConfig(model=ModelConfig(name=name, builtin=MODELS[name], source="builtin"))
        model = load_model(cfg, device.torch_device, None)
        module, _ = model.get_module()
        model.set_module(backends.of_row(backend, None).prepare(module, DynamoConfig(name=backend)))
        step = model.eval
        ours: list[float] = []
        timer: list[float] = []
        events: list[float] = []
        for _ in range(FIDELITY_ROUNDS):
            m = measure(
                step,
                device,
                sampling=Sampling(repeat=10, iterations_per_run=10),
                warmup=5,
                probes=[],
                trace_time=False,
                adaptive_warmup=True,
            )
            ours += m.per_repeat["per_iter_time_s"]
            # Timer synchronizes CUDA around each block it times; on a CPU it runs one
            # thread unless told, so it gets the threads benchflow's loop had
            threads = torch.get_num_threads()
            timed = tb.Timer(stmt="step()", globals={"step": step}, num_threads=threads)
            timer += timed.blocked_autorange(min_run_time=1.0).times
            for _ in range(10 if on_gpu else 0):  # events around 10 steps, as a repeat
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(True)
                torch.cuda.synchronize()
                start.record()
                for _ in range(10):
                    step()
                end.record()
                end.synchronize()
                events.append(start.elapsed_time(end) / 1e3 / 10)
        a, b = statistics.median(ours), statistics.median(timer)
        c = statistics.median(events) if events else None
        lines.append(
            f"| {name} (small, eval) | {backend} | {a * 1e3:.3f} | {b * 1e3:.3f} "
            f"| {'' if c is None else f'{c * 1e3:.3f}'} | {(a - b) / b * 100:+.1f}% "
            f"| {'' if c is None else f'{(a - c) / c * 100:+.1f}%'} |"
        )
        del model, module, step
        if on_gpu:
            torch.cuda.empty_cache()
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--models", default=",".join(MODELS), help="of " + ", ".join(MODELS))
    ap.add_argument("--dtypes", default="bfloat16,amp")
    ap.add_argument("--tests", default="eval,train")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="(a)'s sweeps, of plain, modes")
    ap.add_argument("--extra", nargs="*", default=[], help="more overrides for (a)'s sweeps")
    ap.add_argument("--skip", choices=["matrix", "fidelity"], action="append", default=[])
    ap.add_argument(
        "--accelerator", default="cuda", help="cpu: (a) on the CPU, a dry run of the script"
    )
    args = ap.parse_args()
    models = args.models.split(",")
    parts = [
        f"## {datetime.datetime.now():%Y-%m-%d %H:%M} on {os.uname().nodename}: on the GPU",
        "",
    ]
    if "matrix" not in args.skip:
        parts += [
            "(a) The matrix",
            "",
            *matrix(
                models,
                args.dtypes.split(","),
                args.tests.split(","),
                args.extra,
                args.accelerator,
                args.configs.split(","),
            ),
            "",
        ]
    if "fidelity" not in args.skip:
        parts += [
            "(b) Fidelity: one process, interleaved rounds",
            "",
            *fidelity(models, args.accelerator),
            "",
        ]
    text = "\n".join(parts)
    publish(text, args.out)


if __name__ == "__main__":
    main()
