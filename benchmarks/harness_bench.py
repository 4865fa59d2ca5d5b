"""`make bench`: measure the harness itself, not the models.

(a) Where the time goes: a real 16-job sweep through the CLI, spawned and forked;
    each job's phases (results/phases.py: the parent's gap, start, build, move,
    compile, warm-up, timed, checks, teardown), and the sweep's figures from them.
(b) Timing fidelity: benchflow's per-iteration median for a CPU model, eager and
    compiled by Inductor, against torch.utils.benchmark.Timer's median for the same
    callable, in one process, interleaved over a few rounds.
(c) A 1,000-job tiny eager sweep with MLflow on (--jobs): when the first job starts,
    the marginal cost of a job, whether the gap between jobs grows, and everything
    outside the jobs (issue 16's targets beside each).
(d) With --xla and --torchbench: the TorchBench grid (llama, dlrm, BERT_pytorch,
    lennard_jones x eager, lazy XLA, inductor, openxla; eval) run by the experiment
    runner and by benchflow on this machine (benchmarks/compare_xr.py): both walls,
    and benchflow's time per job and phase.

Writes a dated section to --out (benchmarks/RESULTS.md) and prints it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import timer_fidelity
from results_md import publish

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
FIDELITY_MODELS = ["llama", "resnet"]  # (b), on eager and Inductor (timer_fidelity.py)


def run_sweep(sweep: list[str], cwd: str) -> tuple[list[dict], float, float]:
    """Run a sweep through the CLI in `cwd`; (its rows, its command's start and end as
    epoch seconds, the clock the rows' `job.started_at` use)."""
    # benchflow's own models: with $TORCHBENCH_ROOT set (make bench's (d) sets it), a
    # model that TorchBench also has would be TorchBench's
    env = {k: v for k, v in os.environ.items() if k != "TORCHBENCH_ROOT"}
    start = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "benchflow", *sweep],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    )
    end = time.time()
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    (results,) = Path(cwd).glob("multirun/*/*/results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    return rows, start, end


def breakdown(rows: list[dict]) -> list[str]:
    """Every job's phases (results/phases.py), with the sweep's totals first: the
    report's own table."""
    from benchflow.report.model import build_report
    from benchflow.report.render import TIME_HEADER, markdown_table, time_rows
    from benchflow.results.row import ResultRow

    report = build_report([ResultRow.from_dict(r) for r in rows])
    return markdown_table(TIME_HEADER, time_rows(report)).splitlines()


def figures(rows_all: list[dict], start: float, end: float) -> dict[str, float]:
    """A sweep's figures from its rows' phases: the basic launcher runs one job after
    another, so a job's `gap` is the parent's work since the previous one ended."""
    from benchflow.results.phases import overhead

    rows = sorted(
        (r for r in rows_all if r["job"].get("phases") and r["status"] not in ("skipped",)),
        key=lambda r: r["job"]["started_at"],
    )
    phases = [r["job"]["phases"] for r in rows]
    spans = [sum(p.values()) - p["gap"] for p in phases]  # each job's children
    first_start = rows[0]["job"]["started_at"]
    last_end = rows[-1]["job"]["started_at"] + spans[-1]
    gaps = [p["gap"] for p in phases[1:]]
    k = max(1, min(100, len(gaps) // 2))
    ends = [r["job"]["started_at"] + s for r, s in zip(rows, spans, strict=True)]
    work = sum(r["job"]["model_work_s"] or 0.0 for r in rows)
    return {
        "jobs": len(rows),
        "not_run": len(rows_all) - len(rows),
        "sweep_wall_s": end - start,
        "first_job_start_s": first_start - start,
        # the slope of the jobs' ends: what one more job adds to the sweep
        "marginal_per_job_s": (ends[-1] - ends[0]) / max(len(ends) - 1, 1),
        "gap_first_s": statistics.mean(gaps[:k]) if gaps else 0.0,
        "gap_last_s": statistics.mean(gaps[-k:]) if gaps else 0.0,
        "gap_ratio": statistics.mean(gaps[-k:]) / statistics.mean(gaps[:k]) if gaps else 1.0,
        "gap_window": k,
        # start-up, planning, the first zygote, and the report: not between two jobs
        "outside_jobs_s": (first_start - start) + (end - last_end),
        # in the child: start (imports), teardown, other
        "median_overhead_s": statistics.median(overhead(p) for p in phases),
        "sum_model_work_s": work,
        "sweep_overhead_per_job_s": (end - start - work) / len(rows),
    }


def orchestration(sweep: list[str], prefork: bool) -> tuple[list[str], dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        rows, start, end = run_sweep([*sweep, f"prefork={str(prefork).lower()}"], tmp)
    return breakdown(rows), figures(rows, start, end)


def big_sweep(jobs: int) -> tuple[list[str], dict[str, float]]:
    """Issue 16's figure: a sweep of `jobs` tiny eager jobs, MLflow on (the project's
    SQLite store)."""
    sweep = [
        "-m",
        "model=llama",
        "model.size=tiny",
        "dynamo=none",
        f"seed=range(0,{jobs})",
        "repeat=1",
        "iterations_per_run=1",
        "warmup=0",
        "progress=false",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        rows, start, end = run_sweep(sweep, tmp)
    fig = figures(rows, start, end)
    totals = breakdown(rows)[:4]  # the header and the sweep's totals and shares
    lines = [
        f"`python -m benchflow {' '.join(sweep)}`",
        "",
        "| figure | value | target |",
        "|---|---|---|",
        f"| jobs | {fig['jobs']} | |",
        f"| first job started after the command, s | {fig['first_job_start_s']:.2f} | <= 10 |",
        f"| marginal cost per job, s | {fig['marginal_per_job_s']:.3f} | <= 0.25 |",
        f"| mean gap, first {fig['gap_window']} jobs, s | {fig['gap_first_s']:.3f} | |",
        f"| mean gap, last {fig['gap_window']} jobs, s | {fig['gap_last_s']:.3f} | |",
        f"| last / first | {fig['gap_ratio']:.2f} | <= 1.2 |",
        f"| outside the jobs (start-up, planning, report), s | {fig['outside_jobs_s']:.1f} "
        "| <= 15 |",
        f"| sweep wall, s | {fig['sweep_wall_s']:.1f} | |",
        "",
        "Where the time went (s):",
        "",
        *totals,
    ]
    return lines, fig


def fidelity() -> list[str]:
    os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count()))
    from benchflow.backends.device import Device

    lines = [
        "| model | backend | benchflow median ms/iter | Timer median ms/iter | difference |",
        "|---|---|---|---|---|",
    ]
    for m in timer_fidelity.medians(FIDELITY_MODELS, Device(), timer_min_run_s=2.0):
        ours, theirs = m.benchflow_s, m.timer_s
        lines.append(
            f"| {m.model} (small, eval, cpu) | {m.backend} | {ours * 1e3:.3f} | "
            f"{theirs * 1e3:.3f} | {(ours - theirs) / theirs * 100:+.1f}% |"
        )
    return lines


def side_by_side(spawned: dict[str, float], forked: dict[str, float]) -> list[str]:
    rows = [
        ("jobs run (skipped combinations left out)", "jobs", "{:.0f}"),
        ("grid points recorded as skipped (invalid pairs)", "not_run", "{:.0f}"),
        (
            "median in-child overhead per job (start, teardown, other), s",
            "median_overhead_s",
            "{:.2f}",
        ),
        ("marginal cost per job (slope of the jobs' ends), s", "marginal_per_job_s", "{:.2f}"),
        ("outside the jobs (start-up, planning, report), s", "outside_jobs_s", "{:.1f}"),
        ("(sweep wall - model work) / jobs, s", "sweep_overhead_per_job_s", "{:.2f}"),
        ("sweep wall, s", "sweep_wall_s", "{:.1f}"),
        (
            "sum of model work (build, move, compile, warm-up, timed, checks), s",
            "sum_model_work_s",
            "{:.1f}",
        ),
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


def grid(xla: Path, torchbench: Path) -> list[str]:
    """Issue 16's TorchBench grid, both tools on this machine (benchmarks/compare_xr.py):
    the runner with --repeat=3 (its first repeat compiles), benchflow with its cold call,
    1 warm-up and 3 timed repeats, each job with a cold compile."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        cmd = [
            sys.executable,
            str(Path(__file__).with_name("compare_xr.py")),
            f"--xla={xla}",
            f"--torchbench={torchbench}",
            f"--models={GRID_MODELS}",
            "--repeat=3",
            "--runner-repeat=3",
            "--iterations-per-run=1",
            "--warmup=1",
            f"--out={out}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)  # 1: some rows flagged
        if not (out / "walls.json").exists():
            raise SystemExit(f"compare_xr.py failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        walls = json.loads((out / "walls.json").read_text())
        rows = [
            json.loads(line)
            for f in sorted(out.glob("benchflow/*/results.jsonl"))
            for line in f.read_text().splitlines()
        ]
        compare = (out / "compare_xr.md").read_text().splitlines()
    ran = [r for r in rows if r["status"] != "skipped"]
    runner, ours = walls["runner"], walls["benchflow"]
    return [
        f"Models {GRID_MODELS} x eager, lazy XLA, inductor, openxla; eval; "
        "`benchmarks/compare_xr.py --repeat=3 --runner-repeat=3 --iterations-per-run=1 "
        "--warmup=1`.",
        "",
        "| | experiment runner v2.9.0 | benchflow |",
        "|---|---|---|",
        f"| sweep wall, s | {runner:.0f} | {ours:.0f} ({ours / runner:.2f}x) |",
        f"| jobs ok | {walls.get('runner_ok', '-')} of {len(GRID_MODELS.split(',')) * 4} | "
        f"{sum(r['status'] == 'ok' for r in ran)} of {len(ran)} |",
        "| steps timed per job | 3 (the first compiles) | 5 (cold + 1 warm-up + 3) |",
        "",
        "Where benchflow's time went, per job (s):",
        "",
        *breakdown(rows),
        "",
        "Per-iteration medians, side by side:",
        "",
        *[line for line in compare if line.startswith("|")],
    ]


GRID_MODELS = "llama,dlrm,BERT_pytorch,lennard_jones"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="2 models x 2 configs (a smoke run)")
    ap.add_argument("--jobs", type=int, default=1000, help="(c)'s sweep size; 0: skip it")
    ap.add_argument("--xla", type=Path, help="(d): a pytorch/xla checkout at v2.9.0")
    ap.add_argument("--torchbench", type=Path, help="(d): a pytorch/benchmark checkout")
    args = ap.parse_args()
    sweep = QUICK if args.quick else SWEEP
    _, spawned = orchestration(sweep, prefork=False)
    table_a, fig = orchestration(sweep, prefork=True)
    # (c) and (d) before (b): (b) runs torch in this process, and the sweeps after it
    # once ran several times slower (its threads or compile workers were still there)
    table_c = big_sweep(args.jobs)[0] if args.jobs else []
    table_d = grid(args.xla, args.torchbench) if args.xla and args.torchbench else []
    table_b = fidelity()
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    parts = [
        f"## {when} on {platform.node()} ({os.cpu_count()} cores)",
        "",
        f"(a) Orchestration overhead: `python -m benchflow {' '.join(sweep)}`, "
        "once with prefork=false and once with prefork=true",
        "",
        *side_by_side(spawned, fig),
        "",
        "Where the time went per job, prefork=true (s):",
        "",
        *table_a,
        "",
        "(b) Timing fidelity against torch.utils.benchmark.Timer.blocked_autorange "
        "(same callable, same process)",
        "",
        *table_b,
        "",
    ]
    if table_c:
        parts += [f"(c) A {args.jobs}-job sweep:", "", *table_c, ""]
    if table_d:
        parts += ["(d) The TorchBench grid against the experiment runner", "", *table_d, ""]
    text = "\n".join(parts)
    publish(text, args.out)


if __name__ == "__main__":
    main()
