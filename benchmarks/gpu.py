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
    PYTHONPATH=$PWD/src:/tmp/benchflow-site python3 benchmarks/gpu.py --out $OUT/gpu.md

(docs/gpu.md). It prints the tables and appends them to --out (RESULTS.md's form).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import timer_fidelity
from results_md import publish
from timer_fidelity import MODELS

# The five configurations: two sweeps, since a mode applies to Inductor alone.
CONFIGS = {
    "plain": ["dynamo=none,inductor,cudagraphs"],
    "modes": ["dynamo=inductor", "dynamo.mode=reduce-overhead,max-autotune-no-cudagraphs"],
}


def sweep(args: list[str], cwd: Path, until: float) -> bool:
    """A benchflow sweep in `cwd` (a job that fails is a row that says why), stopped
    with its whole process group at `until` (time.monotonic()); False if stopped. The
    rows written by then are kept (see matrix: when a job writes its row)."""
    cmd = [sys.executable, "-m", "benchflow", "-m", *args]
    print("$", " ".join(cmd[1:]), flush=True)
    proc = subprocess.Popen(cmd, cwd=cwd, start_new_session=True)
    try:
        proc.wait(timeout=max(until - time.monotonic(), 1.0))
        return True
    except subprocess.TimeoutExpired:
        print(f"deadline: stopping the sweep (pid {proc.pid})", flush=True)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return False


def matrix(
    models: list[str],
    dtypes: list[str],
    tests: list[str],
    extra: list[str],
    accelerator: str,
    configs: list[str],
    workdir: Path | None = None,
    deadline_s: float = 1e9,
    sizes: dict[str, str] | None = None,
) -> list[str]:
    if workdir:
        workdir.mkdir(parents=True, exist_ok=True)
    cwd = Path(tempfile.mkdtemp(prefix="benchflow-gpu-", dir=workdir))
    sizes = sizes or {}
    # every cell runs: the built-in llama is in TorchBench's list of models not trained
    common = [f"accelerator={accelerator}", f"dtype={','.join(dtypes)}", "mlflow.enabled=false"]
    common.append("suite.skip_lists=false")
    started = time.perf_counter()
    until = time.monotonic() + deadline_s
    stopped = []
    # A deadline must lose no more than it stops. Jobs of several processes write their
    # rows at the sweep's last round: one sweep a model. A job of one process (repeat=N)
    # writes its row when it ends: one sweep a configuration and size, every test and
    # model in it (its zygotes started once for all), eval first.
    one_process = any(a.startswith("repeat=") for a in extra)
    by_size: dict[str, list[str]] = {}
    for model in models:
        by_size.setdefault(sizes.get(model, "small"), []).append(model)
    groups = [(size, ms) for size, group in by_size.items() for ms in _split(group, one_process)]
    sweeps = []
    for name, (size, group) in itertools.product(configs, groups):
        args = [f"test={','.join(tests)}", *CONFIGS[name], f"model={','.join(group)}"]
        args += [f"model.size={size}", *common, *extra]
        sweeps.append(" ".join(args))
        if time.monotonic() >= until or not sweep(args, cwd, until):
            stopped.append(f"{','.join(group)} {name}")
    wall = time.perf_counter() - started
    rows = _rows(cwd)
    lines = [
        "Sweeps: " + "; ".join(f"`benchflow -m {s}`" for s in sweeps),
        f"{len(rows)} rows in {wall:.0f} s"
        + (f" (stopped at the deadline: {', '.join(stopped)})" if stopped else ""),
        "",
        "| model | size | test | dtype | configuration | status | ms/iter (95% CI) | compile s "
        "| peak MiB (GPU: the allocator's) | TFLOP/s | of measured peak | of datasheet peak "
        "| SM MHz | throttled repeats |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    got = {cell: line for cell, line in map(_cells, rows)}
    for model, name, test, dtype in itertools.product(models, configs, tests, dtypes):
        for config in _names(name):
            cell = (model, test, dtype, config)
            line = got.pop(cell, None) or [
                *(model, sizes.get(model, "small"), test, dtype, config),
                "not run: the call's time ran out",  # a cell no sweep reached
            ]
            lines.append("| " + " | ".join(line) + " |")
    lines += ["| " + " | ".join(line) + " |" for line in got.values()]  # any other row
    return lines


def _split(group: list[str], one_process: bool) -> list[list[str]]:
    return [group] if one_process else [[m] for m in group]


def _names(config: str) -> list[str]:
    """The configurations a CONFIGS entry sweeps (its last override's values), as the
    table names them."""
    key, _, values = CONFIGS[config][-1].partition("=")
    return [f"inductor mode={v}" if key == "dynamo.mode" else v for v in values.split(",")]


def _cells(data: dict[str, Any]) -> tuple[tuple[str, str, str, str], list[str]]:
    """A row's cell (model, test, dtype, configuration) and its line of the table."""
    from benchflow.results.headline import headline_of
    from benchflow.results.row import ResultRow

    row = ResultRow.from_dict(data)
    h = headline_of(row)
    cfg = data.get("config") or {}  # the row's resolved config, by dotted key
    config = cfg.get("dynamo.name", row.backend)
    if cfg.get("dynamo.mode") not in (None, "default"):
        config += f" mode={cfg['dynamo.mode']}"
    time_ms = "" if h.time_s is None else f"{h.time_s * 1e3:.3f}"
    if time_ms and h.ci_low_s is not None and h.ci_high_s is not None:
        time_ms += f" ({h.ci_low_s * 1e3:.3f}-{h.ci_high_s * 1e3:.3f})"
    status = row.status.value if h.time_s is not None else f"{row.status.value}: {row.error}"
    host = h.host
    clock = host.gpu_sm_clock_mhz if host else None
    f = h.flops
    per_s = f.per_s if f else None
    vendor = f.peak.vendor_flop_per_s if f and f.peak else None
    cell = (
        str(cfg.get("model.name")),
        str(cfg.get("test.name")),
        str(cfg.get("dtype", "?")),
        config,
    )
    return cell, [
        cell[0],
        str(cfg.get("model.size")),
        cell[1],
        cell[2],
        config,
        status[:120].replace("|", "/").replace("\n", " "),
        time_ms,
        "" if h.compile_s is None else f"{h.compile_s:.1f}",
        "" if h.peak_bytes is None else f"{h.peak_bytes / 2**20:.0f} ({h.memory_kind})",
        "" if per_s is None else f"{per_s / 1e12:.3g}",
        "" if not f or f.share_of_peak is None else f"{f.share_of_peak:.1%}",
        "" if per_s is None or not vendor else f"{per_s / vendor:.1%}",
        "" if clock is None else f"{clock:.0f}",
        "" if not host or clock is None else str(len(host.throttled)),
    ]


def _rows(cwd: Path) -> list[dict[str, Any]]:
    rows = []
    for results in sorted(cwd.glob("multirun/*/*/results.jsonl")):
        rows += [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return rows


def fidelity(
    models: list[str], accelerator: str, rounds: int, sizes: dict[str, str], dtype: str
) -> list[str]:
    from benchflow.backends.device import native_device

    lines = [
        "| model | backend | benchflow median ms/iter | Timer | CUDA events | "
        "benchflow vs Timer | benchflow vs events | rounds within ±5% of Timer |",
        "|---|---|---|---|---|---|---|---|",
    ]
    device = native_device(accelerator)
    # each model and backend's lines printed as they come: a stop loses one; 5 repeats a
    # round each way, so that 20 rounds of a 10 ms step take about a minute
    for model, backend in itertools.product(models, timer_fidelity.BACKENDS):
        size = sizes.get(model, "small")
        for m in timer_fidelity.medians(
            [model], device, 0.25, rounds, size, dtype, repeats=5, backends_=(backend,)
        ):
            a, b, c = m.benchflow_s, m.timer_s, m.events_s
            close = sum(abs(r[0] - r[1]) <= 0.05 * r[1] for r in m.rounds)
            lines.append(
                f"| {m.model} ({size}, eval, {dtype}) | {m.backend} "
                f"| {a * 1e3:.3f} | {b * 1e3:.3f} "
                f"| {'' if c is None else f'{c * 1e3:.3f}'} | {(a - b) / b * 100:+.1f}% "
                f"| {'' if c is None else f'{(a - c) / c * 100:+.1f}%'} "
                f"| {close} of {len(m.rounds)} |"
            )
            print(lines[-1], flush=True)
            print(  # each round's medians, ms: benchflow / Timer / events
                "  rounds: "
                + ", ".join(
                    "/".join("-" if v is None else f"{v * 1e3:.3f}" for v in r) for r in m.rounds
                ),
                flush=True,
            )
    return lines


def _sizes(spec: str, models: list[str]) -> dict[str, str]:
    """--sizes' `base` (every model) or `llama=base,resnet=large` (small where not named)."""
    if "=" not in spec:
        return dict.fromkeys(models, spec)
    return dict(kv.split("=", 1) for kv in spec.split(","))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--models", default=",".join(MODELS), help="of " + ", ".join(MODELS))
    ap.add_argument("--dtypes", default="bfloat16,amp")
    ap.add_argument("--tests", default="eval,train")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="(a)'s sweeps, of plain, modes")
    ap.add_argument("--extra", nargs="*", default=[], help="more overrides for (a)'s sweeps")
    ap.add_argument("--workdir", type=Path, default=None, help="(a)'s sweeps' folder's parent")
    ap.add_argument(
        "--deadline-s", type=float, default=1e9, help="(a): stop its sweeps after this long"
    )
    ap.add_argument(
        "--sizes",
        default="small",
        help="(a)'s model.size: one for all, or model=size,... (small where not named)",
    )
    ap.add_argument("--fidelity-models", default=None, help="(b)'s models (default: --models)")
    ap.add_argument("--fidelity-sizes", default="small", help="(b)'s model.size, as --sizes")
    ap.add_argument("--rounds", type=int, default=timer_fidelity.ROUNDS, help="(b)'s rounds")
    ap.add_argument("--fidelity-dtype", default="bfloat16", help="(b)'s dtype, as the matrix's")
    ap.add_argument("--skip", choices=["matrix", "fidelity"], action="append", default=[])
    ap.add_argument(
        "--accelerator", default="cuda", help="cpu: (a) on the CPU, a dry run of the script"
    )
    args = ap.parse_args()
    models = args.models.split(",")
    fidelity_models = (args.fidelity_models or args.models).split(",")
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
                args.workdir,
                args.deadline_s,
                _sizes(args.sizes, models),
            ),
            "",
        ]
    if "fidelity" not in args.skip:
        parts += [
            "(b) Fidelity: one process, interleaved rounds",
            "",
            *fidelity(
                fidelity_models,
                args.accelerator,
                args.rounds,
                _sizes(args.fidelity_sizes, fidelity_models),
                args.fidelity_dtype,
            ),
            "",
        ]
    text = "\n".join(parts)
    publish(text, args.out)


if __name__ == "__main__":
    main()
