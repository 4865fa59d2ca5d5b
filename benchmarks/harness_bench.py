"""`make bench`: measure the harness itself, not the models.

(a) Orchestration overhead per job: a real sweep through the CLI; for each job,
    its wall time in the parent minus the in-child model work (setup + timed
    loop). The rest is interpreter start, imports, and result/MLflow handling.
(b) Timing fidelity: benchflow's per-iteration median for a CPU model, eager and
    compiled by Inductor, against torch.utils.benchmark.Timer's median for the same
    callable, in one process, interleaved over a few rounds.

Writes a dated section to --out (benchmarks/RESULTS.md) and prints it.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# 4 models x 4 configurations (eager, inductor, openxla, lazy XLA): dynamo x xla, the
# two invalid pairs (inductor or eager-dynamo on the XLA device) are recorded as skipped.
SWEEP = [
    "-m",
    "model=llama,dlrm,bert,resnet",
    "dynamo=none,inductor,openxla",
    "xla=auto,PJRT",
    "model.size=tiny",
    "dtype=float32",
    "repeat=3",
    "iterations_per_run=5",
    "warmup=2",
]
QUICK = [*SWEEP[:1], "model=llama,dlrm", "dynamo=none", "xla=auto,PJRT", *SWEEP[4:]]
# The experiment runner's figure (issue 7): 536 s of sweep for 235 s of model time over
# 4 models x 4 configs x 3 repeats, about 19 s of orchestration per experiment.
RUNNER_OVERHEAD_PER_JOB_S = 19.0
FIDELITY_MODELS = [
    ("llama", "benchflow.models.llama:Llama"),
    ("resnet", "benchflow.models.resnet:ResNet"),
]
FIDELITY_BACKENDS = ["none", "inductor"]
FIDELITY_ROUNDS = 5


def overhead(sweep: list[str], prefork: bool) -> tuple[list[str], dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "benchflow", *sweep, f"prefork={str(prefork).lower()}"],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        sweep_wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        (results,) = Path(tmp).glob("multirun/*/*/results.jsonl")
        rows_all = [json.loads(line) for line in results.read_text().splitlines()]
    rows = [r for r in rows_all if r["status"] != "skipped"]
    lines = [
        "| job | status | wall s | in-child model work s | overhead s | child import s |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        j = r["job"]
        lines.append(
            f"| {j['name']} | {r['status']} | {j['wall_time_s']:.2f} | "
            f"{j['model_work_s']:.2f} | {j['overhead_s'] or 0:.2f} | "
            f"{j.get('child_import_s', 0):.2f} |"
        )
    overheads = [r["job"]["overhead_s"] for r in rows if r["job"]["overhead_s"] is not None]
    # The basic launcher runs jobs one after another: the gap before a job is the
    # parent's per-job work (the previous job's row and MLflow run, this job's setup).
    spans = sorted((r["job"]["started_at"], r["job"]["wall_time_s"], r) for r in rows)
    gaps = [b[0] - (a[0] + a[1]) for a, b in itertools.pairwise(spans)]
    marginal = [g + (b[2]["job"]["overhead_s"] or 0) for g, b in zip(gaps, spans[1:], strict=True)]
    work = sum(r["job"]["model_work_s"] for r in rows)
    figures = {
        "jobs": len(rows),
        "median_overhead_s": statistics.median(overheads),
        "sweep_wall_s": sweep_wall,
        "sum_model_work_s": work,
        "parent_only_s": sweep_wall - sum(r["job"]["wall_time_s"] for r in rows),
        # Everything that is not model work, spread over the jobs that ran: start-up,
        # validation, imports, MLflow logging, the report (the runner's definition).
        "sweep_overhead_per_job_s": (sweep_wall - work) / len(rows),
        "not_run": len(rows_all) - len(rows),
        "marginal_per_job_s": statistics.median(marginal),
        # What a sweep pays once: interpreter and Hydra start, validation, the MLflow
        # store and parent run, the zygotes' imports, the report.
        "one_off_s": sweep_wall - sum(r["job"]["wall_time_s"] for r in rows) - sum(gaps),
    }
    return lines, figures


def fidelity() -> list[str]:
    os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count()))
    import torch
    import torch.utils.benchmark as tb

    from benchflow import backends
    from benchflow.backends.device import Device
    from benchflow.config.schema import BenchConfig, DynamoConfig, ModelConfig
    from benchflow.harness.timing import measure
    from benchflow.models.registry import load_model

    lines = [
        "| model | backend | benchflow median ms/iter | Timer median ms/iter | difference |",
        "|---|---|---|---|---|",
    ]
    for (name, path), backend in itertools.product(FIDELITY_MODELS, FIDELITY_BACKENDS):
        torch.manual_seed(0)
        torch._dynamo.reset()
        cfg = BenchConfig(model=ModelConfig(name=name, builtin=path, source="builtin"))
        model = load_model(cfg, torch.device("cpu"), None)
        module, _ = model.get_module()
        model.set_module(backends.of_row(backend, None).prepare(module, DynamoConfig(name=backend)))
        step = model.eval
        # benchflow's loop as a job runs it (cold start, adaptive warm-up, repeats) and
        # Timer, interleaved over rounds so that drift of the host (frequency, other
        # tenants) falls on both alike. Timer defaults to one thread; it gets the
        # threads benchflow's loop had. The step is compiled and warm after round 0.
        ours_s: list[float] = []
        theirs_s: list[float] = []
        for _ in range(FIDELITY_ROUNDS):
            m = measure(
                step,
                Device(),
                repeat=10,
                iterations_per_run=10,
                warmup=5,
                probes=[],
                trace_time=False,
                adaptive_warmup=True,
            )
            ours_s += m.per_repeat["per_iter_time_s"]
            timer = tb.Timer(
                stmt="step()", globals={"step": step}, num_threads=torch.get_num_threads()
            ).blocked_autorange(min_run_time=2.0)
            theirs_s += timer.times
        ours, theirs = statistics.median(ours_s), statistics.median(theirs_s)
        lines.append(
            f"| {name} (small, eval, cpu) | {backend} | {ours * 1e3:.3f} | {theirs * 1e3:.3f} | "
            f"{(ours - theirs) / theirs * 100:+.1f}% |"
        )
    return lines


def side_by_side(spawned: dict[str, float], forked: dict[str, float]) -> list[str]:
    rows = [
        ("jobs run (skipped combinations left out)", "jobs", "{:.0f}"),
        ("grid points recorded as skipped (invalid pairs)", "not_run", "{:.0f}"),
        ("median in-child overhead per job (wall - model work), s", "median_overhead_s", "{:.2f}"),
        (
            "marginal overhead per job (in-child + the parent's gap before it), s",
            "marginal_per_job_s",
            "{:.2f}",
        ),
        ("one-off per sweep (start-up, MLflow store, imports, report), s", "one_off_s", "{:.1f}"),
        ("(sweep wall - model work) / jobs, s", "sweep_overhead_per_job_s", "{:.2f}"),
        ("sweep wall, s", "sweep_wall_s", "{:.1f}"),
        ("sum of in-child model work, s", "sum_model_work_s", "{:.1f}"),
        ("parent-only time, s", "parent_only_s", "{:.1f}"),
    ]
    out = [
        "| figure | experiment runner (v2.9.0) | prefork=false (spawn) | prefork=true (fork) |",
        "|---|---|---|---|",
    ]
    for label, key, fmt in rows:
        runner = f"{RUNNER_OVERHEAD_PER_JOB_S:.1f}" if key == "sweep_overhead_per_job_s" else "-"
        out.append(
            f"| {label} | {runner} | {fmt.format(spawned[key])} | {fmt.format(forked[key])} |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="2 models x 2 configs (a smoke run)")
    args = ap.parse_args()
    sweep = QUICK if args.quick else SWEEP
    _, spawned = overhead(sweep, prefork=False)
    table_a, fig = overhead(sweep, prefork=True)
    table_b = fidelity()
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    text = "\n".join(
        [
            f"## {when} on {platform.node()} ({os.cpu_count()} cores)",
            "",
            f"(a) Orchestration overhead: `python -m benchflow {' '.join(sweep)}`, "
            "once with prefork=false and once with prefork=true",
            "",
            *side_by_side(spawned, fig),
            "",
            "Per job, prefork=true:",
            "",
            *table_a,
            "",
            f"Median overhead per job: **{fig['median_overhead_s']:.2f} s**. Sweep wall "
            f"{fig['sweep_wall_s']:.1f} s against {fig['sum_model_work_s']:.1f} s of in-child "
            "model work "
            f"({fig['jobs']} jobs); parent-only time (start-up, validation, MLflow, summary): "
            f"{fig['parent_only_s']:.1f} s.",
            "",
            "(b) Timing fidelity against torch.utils.benchmark.Timer.blocked_autorange "
            "(same callable, same process)",
            "",
            *table_b,
            "",
        ]
    )
    print(text)
    if args.out:
        with args.out.open("a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
