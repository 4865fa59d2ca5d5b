"""The smallest change each way of comparing can tell, measured (issue 42).

For each planted slowdown (`slowdown=`: every timed repeat made that fraction longer,
after the device finished) and each trial, on the grid below:

- two sweeps: A, then B with the slowdown, `benchflow report B --compare A`: the way a
  CI gate compares two commits run apart;
- one paired sweep, `slowdown=null,S pair=slowdown`: both variants' processes
  alternating round by round, each pair stopped once decided (at most --budget rounds),
  `benchflow report SWEEP --pair slowdown`;
- (`--ways fixed`) the same sweep without stopping: `processes=--budget`, no `pair=`.

The threshold (--threshold, 5% by default) is the report's and the paired sweep's: a
planted change equal to it is called only where its estimate lands above it, about
half the time by construction; to ask whether a way can tell 5%, judge at 2%.

A change is detected when the report exits 1 (a row or a configuration called a
regression past the threshold); at size 0 (A/A) an exit 1 is a false alarm. Each
trial first runs the grid once as a default sweep (the yardstick: issue 42 asks a
paired sweep for at most twice its wall; --no-yardstick skips it). Prints a
markdown table (detections per trial, rows called regressions, the wall of a trial
and its multiple of the default sweep's)
and, with --out, appends it to that file as a dated section; --keep DIR keeps each
trial's sweeps there, to look into a verdict afterwards.

    .venv/bin/python benchmarks/detect.py --sizes 0,0.05 --trials 2 --threshold 0.02 \
        --out benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import json
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from results_md import publish

# The grid of issue 42: two models, eager and Inductor, float32 (4 rows).
GRID = [
    "-m",
    "model=resnet,llama",
    "model.size=small",
    "dynamo=none,inductor",
    "dtype=float32",
    "mlflow.enabled=false",
    "progress=false",
]


@dataclass
class Way:
    name: str
    detected: int = 0
    trials: int = 0
    rows_called: list[int] = field(default_factory=list)  # rows called regression, a trial
    improved: list[int] = field(default_factory=list)  # rows called improvement, a trial
    walls: list[float] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)  # the rows' mean processes, a trial


def _benchflow(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchflow", *args], cwd=cwd, capture_output=True, text=True
    )


EXTRA: list[str] = []  # --extra: settings every sweep of the run takes


def _sweep(extra: list[str], folder: Path, cwd: Path) -> None:
    done = _benchflow([*GRID, *EXTRA, *extra, f"hydra.sweep.dir={folder}"], cwd)
    if done.returncode != 0:
        raise SystemExit(f"sweep {extra} failed:\n{done.stderr[-3000:]}")


@dataclass(frozen=True)
class Trial:
    """What one trial of a way gave: the report's exit was 1, the rows it called a
    regression, those it called an improvement, the rows' mean processes (rounds, in
    one sweep)."""

    hit: bool
    rows: int
    improved: int
    rounds: float


def _judge(args: list[str], table: Path, cwd: Path, threshold: float) -> Trial:
    done = _benchflow(
        ["report", *args, "--no-mlflow", "--format", "csv", "--threshold", f"{threshold:g}"], cwd
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"report {args} failed:\n{done.stderr[-3000:]}")
    rows = list(csv.DictReader(table.open()))
    for row in rows:  # what each call rests on: a false alarm can be looked into after
        if row["verdict"] in ("regression", "improvement"):
            print(f"  {row['model']} {row['config']}: {row['verdict']}, {row['detail']}")
    sweep = Path(args[0])
    ran = [len(r["timing"]["processes"]) for r in map(json.loads, (sweep / "results.jsonl").open())]
    return Trial(
        done.returncode == 1,
        sum(r["verdict"] == "regression" for r in rows),
        sum(r["verdict"] == "improvement" for r in rows),
        sum(ran) / len(ran),
    )


def _slowdown(size: float) -> str:
    return "null" if size == 0 else f"{size:g}"


def two_sweeps(size: float, work: Path, budget: int, threshold: float) -> Trial:
    a, b = work / "A", work / "B"
    _sweep([], a, work)
    _sweep([f"slowdown={_slowdown(size)}"], b, work)
    return _judge([str(b), "--compare", str(a)], b / "compare" / "compare.csv", work, threshold)


def _one_sweep(size: float, work: Path, more: list[str], threshold: float) -> Trial:
    # A/A: two jobs that differ only by a setting that changes nothing (0 is a value)
    other = "0" if size == 0 else f"{size:g}"
    sweep = work / "AB"
    _sweep([*more, f"slowdown=null,{other}"], sweep, work)
    table = sweep / "pair" / "compare.csv"
    return _judge([str(sweep), "--pair", "slowdown"], table, work, threshold)


def paired(size: float, work: Path, budget: int, threshold: float) -> Trial:
    more = ["pair=slowdown", f"pair_threshold={threshold:g}", f"processes={budget}"]
    return _one_sweep(size, work, more, threshold)


def fixed(size: float, work: Path, budget: int, threshold: float) -> Trial:
    return _one_sweep(size, work, [f"processes={budget}"], threshold)


def default_sweep(work: Path) -> float:
    """The grid once as a default sweep (the yardstick); its wall."""
    t0 = time.monotonic()
    _sweep([], work / "default", work)
    return time.monotonic() - t0


def _work(keep: Path | None, name: str) -> contextlib.AbstractContextManager[str]:
    """A trial's folder: under --keep, kept; else a temporary one."""
    if keep is None:
        return tempfile.TemporaryDirectory(prefix="detect-")
    (keep / name).mkdir(parents=True, exist_ok=True)
    return contextlib.nullcontext(str(keep / name))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="0,0.02,0.05,0.1,0.2", help="planted slowdowns")
    p.add_argument("--trials", type=int, default=1)
    p.add_argument("--budget", type=int, default=8, help="a paired sweep's rounds, at most")
    p.add_argument("--threshold", type=float, default=0.05, help="the smallest change counted")
    p.add_argument(
        "--ways",
        default="two,paired",
        help="which ways of comparing: two (sweeps), paired (stopping), fixed (rounds)",
    )
    p.add_argument(
        "--extra", default="", help="settings every sweep takes, space-separated (max_repeat=48)"
    )
    p.add_argument("--out", type=Path, help="append the section to this file")
    p.add_argument("--keep", type=Path, help="keep each trial's sweeps in this folder")
    p.add_argument(
        "--yardstick",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time the grid as a default sweep in each trial, and each way's wall against it",
    )
    args = p.parse_args()
    EXTRA.extend(args.extra.split())
    sizes = [float(s) for s in args.sizes.split(",")]
    chosen = args.ways.split(",")
    known = {
        "two": (two_sweeps, "two sweeps, --compare (3 processes)"),
        "paired": (paired, f"one paired sweep, pair=slowdown (at most {args.budget} rounds)"),
        "fixed": (fixed, f"one sweep, {args.budget} rounds, --pair"),
    }
    if bad := [w for w in chosen if w not in known]:
        p.error(f"--ways: unknown {', '.join(bad)}; allowed: {', '.join(known)}")
    runs = [known[w][0] for w in chosen]
    ways = {size: [Way(known[w][1]) for w in chosen] for size in sizes}
    started = datetime.datetime.now()
    yard: list[float] = []  # the default sweep's wall, a trial
    for trial in range(args.trials):
        if args.yardstick:
            with _work(args.keep, f"trial{trial + 1}-default") as tmp:
                yard.append(default_sweep(Path(tmp)))
            print(f"trial {trial + 1}: a default sweep of the grid, {yard[-1]:.0f} s", flush=True)
        for size in sizes:
            for way, run, key in zip(ways[size], runs, chosen, strict=True):
                name = f"trial{trial + 1}-{size:g}-{key}"
                with _work(args.keep, name) as tmp:
                    t0 = time.monotonic()
                    got = run(size, Path(tmp), args.budget, args.threshold)
                    way.walls.append(time.monotonic() - t0)
                way.trials += 1
                way.detected += got.hit
                way.rows_called.append(got.rows)
                way.improved.append(got.improved)
                way.rounds.append(got.rounds)
                print(
                    f"trial {trial + 1} size {size:.0%} {way.name}: exit {int(got.hit)}, "
                    f"{got.rows} of 4 rows called regression, {got.improved} improvement, "
                    f"{got.rounds:.1f} processes a "
                    f"row, {way.walls[-1]:.0f} s",
                    flush=True,
                )
    lines = [
        f"## {started:%Y-%m-%d %H:%M}: what a comparison can tell (benchmarks/detect.py), "
        f"on {platform.node()} ({platform.processor() or platform.machine()})",
        "",
        f"`{' '.join([*GRID, *EXTRA])}`; {args.trials} trial(s) a size; threshold "
        f"{args.threshold:.0%}. Detected: the report exited 1 (at 0%, a false alarm).",
        "",
        "| planted | way | detected | rows called regression (of 4, each trial) "
        "| rows called improvement | processes a row | wall a trial |",
        "|---|---|---|---|---|---|---|",
    ]
    mean_yard = sum(yard) / len(yard) if yard else None
    for size in sizes:
        for way in ways[size]:
            wall = sum(way.walls) / len(way.walls)
            rounds = sum(way.rounds) / len(way.rounds)
            times = f" ({wall / mean_yard:.1f}x a default sweep)" if mean_yard else ""
            lines.append(
                f"| {size:.0%} | {way.name} | {way.detected}/{way.trials} | "
                f"{', '.join(map(str, way.rows_called))} | {sum(way.improved)} | "
                f"{rounds:.1f} | {wall:.0f} s{times} |"
            )
    if yard:
        lines += [
            "",
            f"A default sweep of the grid (the yardstick), each trial: "
            f"{', '.join(f'{w:.0f}' for w in yard)} s.",
        ]
    text = "\n".join(lines) + "\n"
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
