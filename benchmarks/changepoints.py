"""How well the change-point detector (benchflow.results.changepoints) finds known steps
in synthetic series (issue 26; docs/history.md holds the tables).

    .venv/bin/python benchmarks/changepoints.py [--trials 200] [--penalty 3.0]   # ~1 min

Each series is a job's time, one point a sweep: a level of 1.0, one step of +S at a
random place (at least 3 points from either end), and noise of one of three kinds:

- normal noise of the logs, 1% and 3% (a quiet machine);
- host: each point the median of 3 draws from the process medians recorded on this
  kind of VM in interleaved rounds (tests/data/round_series.json, each over its job's
  median): what a default sweep's time of one job does from sweep to sweep, with the
  host's slow minutes (processes up to 1.9x their job's median).

It prints, per noise, length and step: the share of series where a change point was
found within 2 points of the true one, in its direction (detection rate); the mean
distance of those from the true one; and, on series without a step, false change
points per 100 points.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from benchflow.results import changepoints

ROOT = Path(__file__).resolve().parents[1]
STEPS = (0.03, 0.05, 0.10, 0.30)
LENGTHS = (10, 30, 100, 200)
EDGE = 3  # a step this near either end has too few points on one side to show


def _host_deviations() -> np.ndarray:
    data = json.loads((ROOT / "tests" / "data" / "round_series.json").read_text())
    out = []
    for values in data["medians"].values():
        mid = statistics.median(values)
        out += [v / mid for v in values]
    return np.asarray(out)


def noise(kind: str, n: int, rng: np.random.Generator, host: np.ndarray) -> np.ndarray:
    if kind == "host":
        return np.median(rng.choice(host, size=(n, 3)), axis=1)
    sigma = {"normal 1%": 0.01, "normal 3%": 0.03}[kind]
    return np.exp(rng.normal(0.0, sigma, n))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--penalty", type=float, default=changepoints.PENALTY)
    args = p.parse_args()
    rng = np.random.default_rng(2026)
    host = _host_deviations()
    kinds = ("normal 1%", "normal 3%", "host")
    print(f"penalty {args.penalty} x log(n), {args.trials} series per cell\n")
    print("| noise | length | false per 100 flat points | " + " | ".join(
        f"step {s:.0%}: found (mean distance)" for s in STEPS) + " |")  # fmt: skip
    print("|---|---|---|" + "---|" * len(STEPS))
    for kind in kinds:
        for n in LENGTHS:
            false = 0
            for _ in range(args.trials):
                found = changepoints.find(list(noise(kind, n, rng, host)), penalty=args.penalty)
                false += len(found)
            cells = []
            for step in STEPS:
                hits, dists = 0, []
                for _ in range(args.trials):
                    at = int(rng.integers(EDGE, n - EDGE + 1))
                    values = noise(kind, n, rng, host)
                    values[at:] *= 1 + step
                    near = [c for c in changepoints.find(list(values), penalty=args.penalty)
                            if abs(c.index - at) <= 2 and c.change > 0]  # fmt: skip
                    if near:
                        hits += 1
                        dists.append(min(abs(c.index - at) for c in near))
                dist = f"{statistics.fmean(dists):.2f}" if dists else "-"
                cells.append(f"{hits / args.trials:.0%} ({dist})")
            per100 = 100 * false / (args.trials * n)
            print(f"| {kind} | {n} | {per100:.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
