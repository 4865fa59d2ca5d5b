"""How sure benchflow's numbers are, measured (issue 25; benchmarks/RESULTS.md).

    .venv/bin/python benchmarks/uncertainty.py --work /tmp/bf-uncertainty \
        [--out benchmarks/RESULTS.md]
        [--parts aa,busy,ab,calibration,series,processes,process_series,round_series,
                 torchbench]

Run it on an otherwise idle host: it times things. Parts:

- aa: the built-in grid (llama, dlrm, bert, resnet small x eager, inductor, openxla)
  run twice with the defaults, then `report --compare`: the verdicts of an A/A.
- busy: the grid again while another process keeps core 0 busy, compared with the
  first run: what the rows say about the host, and what the verdicts say.
- ab: the grid with slowdown=0.05, 0.20 and 1.0 (every timed step made 5%, 20%, twice
  as slow), compared with the first run: is each known slowdown found?
- calibration: how long a repeat must last: dlrm (a sub-millisecond step) and llama
  timed with fixed iterations_per_run, 40 repeats each; per repeat length, the spread
  of the per-step time and the median's 95% interval.
- series: long per-repeat series (300 repeats) of four jobs, written to
  tests/data/long_series.json for the coverage test (tests/test_intervals.py).
- processes: one Inductor job with processes=1 and processes=3, compile caches cold
  and warm: what pooling processes costs.
- process_series: four jobs timed in 45 processes each, every process as a default
  job's; each process's median, in time order, written to
  tests/data/process_series.json for the coverage test over processes.
- round_series: the built-in grid in 15 interleaved rounds, each process as a default
  job's; each job's process medians, in round order, written to
  tests/data/round_series.json for the coverage test over interleaved processes.
- torchbench: the A/A on TorchBench's llama, dlrm, BERT_pytorch and lennard_jones
  (TORCHBENCH_ROOT=<pytorch/benchmark checkout>; `make setup EXTRAS="ray suites
  torchbench"` first).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from results_md import publish

ROOT = Path(__file__).resolve().parents[1]
BENCHFLOW = ROOT / ".venv" / "bin" / "benchflow"
GRID = [
    "model=llama,dlrm,bert,resnet",
    "model.size=small",
    "dynamo=none,inductor,openxla",
    "dtype=float32",
    "mlflow.enabled=false",
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(
        [str(BENCHFLOW), *args], cwd=cwd, env=_env(), capture_output=True, text=True
    )
    return time.perf_counter() - start, done


def sweep(work: Path, name: str, extra: list[str] = (), grid: list[str] = GRID) -> Path:  # type: ignore[assignment]
    folder = work / "multirun" / name
    if (folder / "results.jsonl").exists():
        print(f"  {name}: kept from an earlier run", file=sys.stderr)
        return folder
    wall, done = run(["-m", *grid, *extra, f"hydra.sweep.dir={folder}"], work)
    if done.returncode != 0 and not (folder / "results.jsonl").exists():
        sys.exit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    if done.returncode != 0:  # some job did not pass: its row says why
        print(f"  {name}: exit {done.returncode}", file=sys.stderr)
    (folder / "wall_s.txt").write_text(f"{wall:.1f}\n")
    print(f"  {name}: {wall:.0f} s", file=sys.stderr)
    return folder


def rows(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if x.strip()]


def compare(work: Path, cand: Path, base: Path) -> tuple[int, list[dict[str, str]]]:
    _, done = run(["report", str(cand), "--compare", str(base), "--no-mlflow"], work)
    table = list(csv.DictReader((cand / "compare" / "compare.csv").open()))
    return done.returncode, table


def _pct(v: str) -> str:
    return f"{float(v) - 1:+.1%}" if v else "-"


def compare_section(title: str, code: int, table: list[dict[str, str]], cand: Path) -> str:
    tally = Counter(c["verdict"] for c in table)
    host = {
        r["job"]["name"]: (r.get("timing") or {}).get("host") or {}
        for r in rows(cand)
        if r["status"] == "ok"
    }
    lines = [
        f"**{title}**: exit {code}; "
        + ", ".join(f"{n} {v}" for v, n in sorted(tally.items(), key=lambda x: -x[1])),
        "",
        "| model | config | change | 95% CI of the ratio | p (BH) | verdict "
        "| candidate host quiet |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in table:
        name = next((n for n in host if n.startswith(f"{c['model']}·{c['config']}")), "")
        quiet = host.get(name, {}).get("quiet")
        ci = (
            f"{_pct(c['ratio_ci_low'])} to {_pct(c['ratio_ci_high'])}" if c["ratio_ci_low"] else "-"
        )
        q = f"{float(c['q_value']):.2g}" if c["q_value"] else "-"
        lines.append(
            f"| {c['model']} | {c['config']} | {_pct(c['ratio'])} | {ci} | {q} | {c['verdict']} "
            f"| {'-' if quiet is None else ('yes' if quiet else 'no')} |"
        )
    return "\n".join(lines) + "\n"


def rows_section(title: str, folder: Path) -> str:
    out = [
        f"**{title}** (wall {(folder / 'wall_s.txt').read_text().strip()} s)",
        "",
        "| job | median ms | 95% CI ms | ±% | repeats | iters/repeat | stop | host quiet "
        "| each process's median ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows(folder):
        if r["status"] != "ok":
            out.append(f"| {r['job']['name']} | {r['status']} | | | | | | | |")
            continue
        s, t = r["summary"]["per_iter_time_s"], r.get("timing") or {}
        med = s["median"]
        ci = f"{s['ci_low'] * 1e3:.3f}-{s['ci_high'] * 1e3:.3f}" if "ci_low" in s else "-"
        rel = f"{t['ci_rel']:.1%}" if t.get("ci_rel") is not None else "-"
        quiet = (t.get("host") or {}).get("quiet")
        each = " ".join(f"{p['median_s'] * 1e3:.3f}" for p in t.get("processes") or [])
        out.append(
            f"| {r['job']['name']} | {med * 1e3:.3f} | {ci} | {rel} | {t.get('repeats')} "
            f"| {t.get('iterations_per_run')} | {t.get('stop')} | {quiet} "
            f"| {each} |"
        )
    return "\n".join(out) + "\n"


def summary_lines(folder: Path) -> str:
    md = (folder / "report" / "report.md").read_text()
    part = md.split("## Summary")[1].split("## Per model")[0].strip()
    return part + "\n"


def aa_section(title: str, work: Path, first: Path, second: Path) -> str:
    """An A/A: the first run's rows and summary, then the second compared with it."""
    code, table = compare(work, second, first)
    return (
        title
        + "\n\n"
        + rows_section("first run", first)
        + "\n"
        + summary_lines(first)
        + "\n"
        + compare_section("second against first", code, table, second)
    )


def part_aa(work: Path) -> str:
    a1, a2 = sweep(work, "aa1"), sweep(work, "aa2")
    return aa_section(
        "(a) A/A: the grid twice, `" + " ".join(["benchflow -m", *GRID]) + "`", work, a1, a2
    )


def part_busy(work: Path) -> str:
    a1 = sweep(work, "aa1")
    hog = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, "-c", "while True: pass"], env=_env()
    )
    try:
        busy = sweep(work, "busy")
    finally:
        hog.kill()
        hog.wait()
    code, table = compare(work, busy, a1)
    return (
        "(b) A/A with a busy neighbour: the grid again while `taskset -c 0 python -c "
        "'while True: pass'` keeps core 0 busy\n\n"
        + rows_section("busy run", busy)
        + "\n"
        + compare_section("busy run against the first", code, table, busy)
    )


def part_ab(work: Path) -> str:
    a1 = sweep(work, "aa1")
    out = ["(c) A/B: a known slowdown (`slowdown=F`: every timed step made F slower)\n"]
    for name, frac in (("slow05", "0.05"), ("slow20", "0.20"), ("slow100", "1.0")):
        folder = sweep(work, name, [f"slowdown={frac}"])
        code, table = compare(work, folder, a1)
        out.append(compare_section(f"slowdown={frac} against the first run", code, table, folder))
    return "\n".join(out)


def part_calibration(work: Path) -> str:
    out = [
        "(d) How long a repeat must last: 40 repeats at each fixed iterations_per_run "
        "(eager, small, float32); the spread of the per-step time over repeats, and the "
        "median's 95% interval as ± of the median\n",
        "| job | iters/repeat | repeat ms | CV | 95% CI ± | timer ticks/repeat |",
        "|---|---|---|---|---|---|",
    ]
    grid = ["model=dlrm,llama", "model.size=small", "dynamo=none", "dtype=float32",
            "mlflow.enabled=false", "repeat=40", "iterations_per_run=1,4,16,64"]  # fmt: skip
    folder = sweep(work, "calibration", grid=grid)
    for r in sorted(rows(folder), key=lambda r: (r["job"]["name"], r["iterations_per_run"])):
        t, s = r["timing"], r["summary"]
        repeat_ms = s["total_time_s"]["median"] * 1e3
        cv = s["per_iter_time_s"]["std"] / s["per_iter_time_s"]["mean"]
        ticks = s["total_time_s"]["median"] / (t.get("timer_resolution_s") or 1e-9)
        out.append(
            f"| {r['job']['name']} | {r['iterations_per_run']} | {repeat_ms:.2f} | {cv:.1%} "
            f"| {t['ci_rel']:.1%} | {ticks:.0f} |"
        )
    return "\n".join(out) + "\n"


def part_series(work: Path) -> str:
    grid = ["model=dlrm,llama", "model.size=small", "dynamo=none,openxla", "dtype=float32",
            "mlflow.enabled=false", "repeat=300"]  # fmt: skip
    folder = sweep(work, "series", grid=grid)
    series = {
        r["job"]["name"]: r["metrics"]["per_iter_time_s"]
        for r in rows(folder)
        if r["status"] == "ok"
    }
    target = ROOT / "tests" / "data" / "long_series.json"
    first = rows(folder)[0]
    target.write_text(
        json.dumps(
            {
                "about": "per-repeat seconds per step, in time order, of long benchflow jobs "
                "(benchmarks/uncertainty.py --parts series)",
                "command": "benchflow -m " + " ".join(grid),
                "cpu": first["provenance"].get("cpu_model"),
                "recorded": time.strftime("%Y-%m-%d"),
                "series": series,
            },
            indent=1,
        )
        + "\n"
    )
    from benchflow.results.intervals import median_ci

    out = [
        "(e) Coverage of the median's 95% interval on long recorded series (windows of 20)\n",
        "| job | repeats | their times ms (min, median, max) | windows | covered |",
        "|---|---|---|---|---|",
    ]
    return "\n".join([*out, *_coverage_rows(series, 20, median_ci, target)]) + "\n"


def _coverage_rows(
    series: dict[str, list[float]], size: int, interval: Any, target: Path
) -> list[str]:
    """Per series: cut in time order into windows of `size`, how many windows' interval
    holds the whole series' median; then the total."""
    out, total, hits = [], 0, 0
    for name, values in series.items():
        med = statistics.median(values)
        w = h = 0
        for i in range(0, len(values) - size + 1, size):
            ci = interval(values[i : i + size])
            w, h = w + 1, h + bool(ci and ci.contains(med))
        total, hits = total + w, hits + h
        spread = f"{min(values) * 1e3:.3f}, {med * 1e3:.3f}, {max(values) * 1e3:.3f}"
        out.append(f"| {name} | {len(values)} | {spread} | {w} | {h} ({h / w:.0%}) |")
    where = target.relative_to(ROOT)
    out.append(f"\nAll: {hits} of {total} windows ({hits / total:.0%}); written to {where}.")
    return out


# Many processes of a few jobs, each process timed as a default job's are (3 processes
# share timed_budget_s=5 and max_repeat=50: 1.67 s and 17 repeats each).
PROCESS_SERIES = 45
PROCESS_GRIDS = {
    "pseries_eager": ["model=dlrm,resnet,llama", "dynamo=none"],
    "pseries_inductor": ["model=llama", "dynamo=inductor"],
}


def part_process_series(work: Path) -> str:
    n = PROCESS_SERIES
    medians: dict[str, list[float]] = {}
    commands = []
    for name, axes in PROCESS_GRIDS.items():
        per_process = [f"processes={n}", f"timed_budget_s={5 / 3 * n:g}", f"max_repeat={17 * n}"]
        grid = [*axes, "model.size=small", "dtype=float32", "mlflow.enabled=false", *per_process,
                "interleave=false"]  # fmt: skip
        commands.append("benchflow -m " + " ".join(grid))
        for r in rows(sweep(work, name, grid=grid)):
            if r["status"] == "ok":
                medians[r["job"]["name"]] = [p["median_s"] for p in r["timing"]["processes"]]
    about = (
        f"each process's median seconds per step, in time order, of jobs timed in {n} "
        "processes one after another, each process as a default job's "
        "(benchmarks/uncertainty.py --parts process_series)"
    )
    first = rows(work / "multirun" / "pseries_eager")[0]
    title = (
        f"(g) Coverage of a job's 95% interval over processes: {n} processes of each job, "
        "cut in time order into windows of {k} (what a default job times); does the "
        "window's interval hold the median of all its processes' medians?"
    )
    return _process_coverage("process_series.json", about, commands, first, medians, title)


def _process_coverage(
    name: str,
    about: str,
    commands: list[str],
    first: dict[str, Any],
    medians: dict[str, list[float]],
    title: str,
) -> str:
    """Writes each job's process medians to tests/data/NAME (for the coverage tests) and
    returns the table of their windows' coverage; `title` has {k} for the window."""
    target = ROOT / "tests" / "data" / name
    data = {
        "about": about,
        "commands": commands,
        "cpu": first["provenance"].get("cpu_model"),
        "recorded": time.strftime("%Y-%m-%d"),
        "medians": medians,
    }
    target.write_text(json.dumps(data, indent=1) + "\n")
    from benchflow.config.schema import DEFAULT_PROCESSES
    from benchflow.results.intervals import log_t_interval

    k = DEFAULT_PROCESSES
    out = [
        title.format(k=k) + "\n",
        "| job | processes | their medians ms (min, median, max) | windows | covered |",
        "|---|---|---|---|---|",
    ]
    return "\n".join([*out, *_coverage_rows(medians, k, log_t_interval, target)]) + "\n"


# The built-in grid in 15 rounds: each job's processes as a default sweep of the grid
# spaces them (one a round), each process timed as a default job's (6 repeats, 5/3 s).
ROUND_SERIES = 15


def part_round_series(work: Path) -> str:
    n = ROUND_SERIES
    per_process = [f"processes={n}", f"timed_budget_s={5 / 3 * n:g}", f"max_repeat={6 * n}"]
    folder = sweep(work, "rseries", per_process)
    medians = {
        r["job"]["name"]: [p["median_s"] for p in r["timing"]["processes"]]
        for r in rows(folder)
        if r["status"] == "ok"
    }
    wall = float((folder / "wall_s.txt").read_text())
    about = (
        f"each process's median seconds per step of the jobs of one sweep timed in {n} "
        f"interleaved rounds (one process of every job a round, {wall / n:.0f} s a round), "
        "each process as a default job's (benchmarks/uncertainty.py --parts round_series)"
    )
    title = (
        f"(i) Coverage of a job's 95% interval over interleaved processes: the grid in {n} "
        f"rounds ({wall:.0f} s, {wall / n:.0f} s a round), each job's processes cut in "
        "round order into windows of {k} (a default sweep of the grid's job); does the "
        "window's interval hold the median of all that job's processes' medians?"
    )
    command = "benchflow -m " + " ".join([*GRID, *per_process])
    return _process_coverage("round_series.json", about, [command], rows(folder)[0], medians, title)


# The real TorchBench grid of the issue (its models from a pytorch/benchmark checkout,
# $TORCHBENCH_ROOT, as `make compare-xr` takes it), with benchflow's defaults.
TORCHBENCH_GRID = [
    "model=llama,dlrm,BERT_pytorch,lennard_jones",
    "model.source=torchbench",
    "dynamo=none,inductor,openxla",
    "xla=auto,PJRT",
    "mlflow.enabled=false",
]


def part_torchbench(work: Path) -> str:
    root = os.environ.get("TORCHBENCH_ROOT")
    if not root:
        sys.exit("the torchbench part needs TORCHBENCH_ROOT=<pytorch/benchmark checkout>")
    grid = [*TORCHBENCH_GRID, f"suite.torchbench_root={root}"]
    t1, t2 = sweep(work, "tb_aa1", grid=grid), sweep(work, "tb_aa2", grid=grid)
    command = " ".join(["benchflow -m", *TORCHBENCH_GRID, "suite.torchbench_root=..."])
    return aa_section(f"(h) A/A on the real TorchBench grid: `{command}`, twice", work, t1, t2)


def part_processes(work: Path) -> str:
    out = ["(f) processes=N: one Inductor job (llama small), timed in 1 or 3 processes\n",
           "| processes | compile cache | wall s | repeats | median ms | 95% CI ± |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    for n in (1, 3):
        for cache in ("cold", "warm"):
            name = f"proc{n}_{cache}"
            cache_dir = work / "cache"
            if cache == "warm" and n == 1:
                shutil.rmtree(cache_dir, ignore_errors=True)
            grid = ["model=llama", "model.size=small", "dynamo=inductor", "dtype=float32",
                    "mlflow.enabled=false", f"processes={n}", f"compile_cache={cache}"]  # fmt: skip
            os.environ["BENCHFLOW_CACHE_DIR"] = str(cache_dir)
            if cache == "warm":  # a first run fills the cache
                sweep(work, name + "_fill", grid=grid)
            folder = sweep(work, name, grid=grid)
            (r,) = rows(folder)
            t = r["timing"]
            out.append(
                f"| {n} | {cache} | {r['job']['wall_time_s']:.1f} | {t['repeats']} "
                f"| {r['summary']['per_iter_time_s']['median'] * 1e3:.3f} | {t['ci_rel']:.1%} |"
            )
    return "\n".join(out) + "\n"


PARTS = {
    "aa": part_aa,
    "busy": part_busy,
    "ab": part_ab,
    "calibration": part_calibration,
    "series": part_series,
    "processes": part_processes,
    "process_series": part_process_series,
    "round_series": part_round_series,
    "torchbench": part_torchbench,
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="a scratch folder for the sweeps")
    p.add_argument("--out", type=Path, help="append the section to this file (RESULTS.md)")
    p.add_argument("--parts", default=",".join(PARTS), help="which parts, comma-separated")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    sections = []
    for name in args.parts.split(","):
        print(f"{name} ...", file=sys.stderr)
        sections.append(PARTS[name](args.work))
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
         if ln.startswith("model name")), "?",
    )  # fmt: skip
    text = (
        f"\n## {time.strftime('%Y-%m-%d %H:%M')} uncertainty (issue 25) on {cpu}, "
        f"{os.cpu_count()} cores\n\n" + "\n".join(sections)
    )
    publish(text, args.out)


if __name__ == "__main__":
    main()
