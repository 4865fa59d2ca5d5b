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
) -> list[str]:
    from benchflow.results.headline import headline_of
    from benchflow.results.row import ResultRow

    if workdir:
        workdir.mkdir(parents=True, exist_ok=True)
    cwd = Path(tempfile.mkdtemp(prefix="benchflow-gpu-", dir=workdir))
    common = [
        "model.size=small",
        f"accelerator={accelerator}",
        f"dtype={','.join(dtypes)}",
        "mlflow.enabled=false",
        *extra,
    ]
    started = time.perf_counter()
    until = time.monotonic() + deadline_s
    stopped = []
    # A deadline must lose no more than it stops. Jobs of several processes write their
    # rows at the sweep's last round: one sweep a model and test. A job of one process
    # (repeat=N) writes its row when it ends: one sweep a configuration and test, which
    # starts its zygotes once for all the models.
    one_process = any(a.startswith("repeat=") for a in extra)
    each = [",".join(models)] if one_process else models
    for name, test, model in itertools.product(configs, tests, each):
        args = [f"model={model}", f"test={test}", *common, *CONFIGS[name]]
        if time.monotonic() >= until or not sweep(args, cwd, until):
            stopped.append(f"{model} {test} {name}")
    wall = time.perf_counter() - started
    rows = _rows(cwd)
    lines = [
        f"Sweeps: `benchflow -m model={each[0] if one_process else 'M'} test=T "
        f"{' '.join(common)}`, "
        + ("" if one_process else f"for M in {', '.join(models)}, ")
        + f"for T in {', '.join(tests)}, with each of "
        + ", ".join(f"`{' '.join(CONFIGS[c])}`" for c in configs)
        + f"; {len(rows)} rows in {wall:.0f} s"
        + (f" (stopped at the deadline: {', '.join(stopped)})" if stopped else ""),
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
    from benchflow.backends.device import native_device

    lines = [
        "| model | backend | benchflow median ms/iter | Timer | CUDA events | "
        "benchflow vs Timer | benchflow vs events |",
        "|---|---|---|---|---|---|---|",
    ]
    device = native_device(accelerator)
    for model in models:  # each model's lines printed as they come: a stop loses one
        for m in timer_fidelity.medians([model], device, timer_min_run_s=1.0):
            a, b, c = m.benchflow_s, m.timer_s, m.events_s
            lines.append(
                f"| {m.model} (small, eval) | {m.backend} | {a * 1e3:.3f} | {b * 1e3:.3f} "
                f"| {'' if c is None else f'{c * 1e3:.3f}'} | {(a - b) / b * 100:+.1f}% "
                f"| {'' if c is None else f'{(a - c) / c * 100:+.1f}%'} |"
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
                args.workdir,
                args.deadline_s,
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
