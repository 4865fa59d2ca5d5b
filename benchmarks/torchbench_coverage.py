"""`make coverage`: every TorchBench model this machine can run, by benchflow and by
PyTorch/XLA's experiment runner, side by side (benchmarks/compare_xr.py, one model and
test at a time), in one table.

For each model of the checkout (or --models) and each test (--tests: eval, train), it
runs compare_xr for that model alone: the runner, then benchflow, each compiling cold,
with the same rules (torchbench.yaml's dtype, batch size and skip lists), and keeps
its folder under --out/<model>/<test>. A model whose folder holds a result is not run
again (--again runs it again), so an interrupted coverage run goes on where it stopped.
Then it writes coverage.md and coverage.csv under --out: for every model, test and
backend, each tool's status and median, the ratio (benchflow / runner) and a note: why
a cell did not run (a package the model needs and this environment lacks, a download,
a GPU, the suite's skip list), or why a ratio is outside ±10% where that was measured
(--explained FILE: a CSV of model,test,backend,note, e.g. benchmarks/coverage_notes.csv).
With --passes N each model's test runs N times, one pass after the other (the second and
later under <model>/<test>/passK), and a cell's figures are each side's median over its
passes: on a 2-core VM one tool's processes are often further apart than ±10%.

    python benchmarks/torchbench_coverage.py --xla ~/src/xla --torchbench ~/src/benchmark \
        --models functorch_dp_cifar10,phlippe_resnet --tests eval --out /tmp/coverage
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import math
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_xr  # this folder's: the side-by-side run of one model

from benchflow.config.schema import SuiteConfig
from benchflow.suite.rules import skip_reason
from benchflow.suite.suites import with_rules

# The backends of each test: openxla for eval only (the runner does not train on XLA here).
BACKENDS = {"eval": ("eager", "inductor", "openxla"), "train": ("eager", "inductor")}

# Why a cell did not run, from the error it ended with: the first pattern that matches.
REASONS = [
    (re.compile(r"No module named '([\w.]+)'"), "needs the package {0}"),
    (re.compile(r"CUDA|cuda|GPU"), "needs a GPU"),
    (
        re.compile(r"HTTP|urlopen|Connection|offline|hub|Max retries|download|Errno -[23]"),
        "needs a download",
    ),
    (re.compile(r"NotImplementedError|not_implemented"), "not implemented for this test or device"),
]


def models_of(torchbench: Path) -> list[str]:
    root = torchbench / "torchbenchmark" / "models"
    return sorted(p.name for p in root.iterdir() if (p / "__init__.py").exists())


def missing_packages(torchbench: Path, model: str) -> list[str]:
    """The packages the model's requirements.txt names that this environment lacks
    (git URLs named by their repository)."""
    req = torchbench / "torchbenchmark" / "models" / model / "requirements.txt"
    missing = []
    for line in req.read_text().splitlines() if req.exists() else []:
        line = line.split("#")[0].strip()
        if not line:
            continue
        if line.startswith("git+"):
            missing.append(line.rstrip("/").split("/")[-1].split("@")[0].removesuffix(".git"))
            continue
        name = re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def listed_skip(model: str, test: str) -> str | None:
    """Why torchbench.yaml's skip lists skip the model's test on a CPU, for both tools (the
    runner reads the same file): benchflow's rule, on its mirror of it."""
    return skip_reason(with_rules(SuiteConfig(name="torchbench")), model, test, "cpu")


def reason(note: str) -> str:
    for pattern, why in REASONS:
        if m := pattern.search(note):
            return why.format(*m.groups())
    return ""


def pass_dirs(out: Path, passes: int) -> list[Path]:
    """Where each pass of a model's test keeps its results: the first in `out` itself."""
    return [out] + [out / f"pass{k}" for k in range(2, passes + 1)]


def run_one(args: argparse.Namespace, model: str, test: str, out: Path) -> Path:
    if (out / "compare_xr.csv").exists() and not args.again:
        return out
    argv = [
        f"--xla={args.xla}",
        f"--torchbench={args.torchbench}",
        f"--models={model}",
        f"--test={test}",
        f"--backends={','.join(b for b in BACKENDS[test] if b in args.backends)}",
        f"--repeat={args.repeat}",
        f"--iterations-per-run={args.iterations_per_run}",
        f"--out={out}",
        *([f"--timeout={args.timeout}"] if args.timeout else []),
        *(f"--set={s}" for s in args.set),
    ]
    started = time.perf_counter()
    compare_xr.main(argv)
    print(f"coverage: {model} {test} in {time.perf_counter() - started:.0f} s", flush=True)
    return out


def _outside(row: dict[str, str], tolerance: float = 0.10) -> bool:
    """Timed by both, the ratio outside ±tolerance."""
    return bool(row["ratio"]) and abs(math.log(float(row["ratio"]))) > math.log(1 + tolerance)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def run_ab(args: argparse.Namespace, model: str, test: str) -> None:
    """For each cell outside ±10%: the runner again, given benchflow's host settings
    (compare_xr --as-benchflow), under <model>/<test>/ab."""
    out = args.out / model / test
    flagged = [r["backend"] for r in pooled_rows(out, args.passes) if _outside(r)]
    if not flagged or ((out / "ab" / "compare_xr.csv").exists() and not args.again):
        return
    compare_xr.main(
        [
            f"--xla={args.xla}",
            f"--torchbench={args.torchbench}",
            f"--models={model}",
            f"--test={test}",
            f"--backends={','.join(flagged)}",
            f"--repeat={args.repeat}",
            f"--iterations-per-run={args.iterations_per_run}",
            f"--out={out / 'ab'}",
            "--only=runner",
            "--as-benchflow",
            *([f"--timeout={args.timeout}"] if args.timeout else []),
        ]
    )


def ab_note(row: dict[str, str], ab: dict[str, str] | None) -> tuple[str, bool]:
    """What the runner measured given benchflow's host settings, and whether that explains
    the difference (benchflow then within ±10% of it)."""
    if not ab or ab["runner_status"] != "ok" or not ab["runner_median_ms"]:
        return "", False
    again = float(ab["runner_median_ms"])
    ratio = float(row["benchflow_median_ms"]) / again
    within = abs(math.log(ratio)) <= math.log(1.10)
    verdict = "the difference is those settings" if within else "not only those settings"
    return (
        f"A/B: the runner given benchflow's malloc thresholds and one compile thread "
        f"measured {again:.4g} ms (benchflow / it: {ratio:.3f}): {verdict}",
        within,
    )


def cells(
    args: argparse.Namespace, model: str, test: str, explained: dict[tuple[str, ...], str]
) -> list[dict[str, Any]]:
    out = args.out / model / test
    rows = pooled_rows(out, args.passes)
    abs_ = (
        {r["backend"]: r for r in _rows(ab)}
        if (ab := out / "ab" / "compare_xr.csv").exists()
        else {}
    )
    found = []
    for row in rows:
        note = explained.get((model, test, row["backend"]), "")
        measured, explains = (
            ab_note(row, abs_.get(row["backend"])) if _outside(row) else ("", False)
        )
        if measured and (explains or not note):
            note = measured
        if not note and "ok" not in (row["runner_status"], row["benchflow_status"]):
            why = {reason(row["runner_note"]), reason(row["benchflow_note"])} - {""}
            skipped = "skipped" in (row["runner_status"], row["benchflow_status"])
            note = "; ".join(sorted(why)) or ("on the suite's skip list" if skipped else "")
            lacking = missing_packages(args.torchbench, model)
            if lacking and not why:
                note = "needs the package(s) " + ", ".join(lacking) + f" ({note or 'both fail'})"
            note = note or f"both fail: {row['runner_note']} / {row['benchflow_note']}"
        elif not note and row["runner_status"] != row["benchflow_status"]:
            side = "benchflow" if row["runner_status"] == "ok" else "runner"
            note = f"fails in {side} only: {row[f'{side}_note']}"
        elif not note and _outside(row):
            note = "outside ±10%: not explained yet"
        if row.get("passes"):
            note = "; ".join(n for n in (row["passes"], note) if n)
        found.append(
            {
                "model": model,
                "test": test,
                "backend": row["backend"],
                "batch_size": row["batch_size"],
                "runner": _cell(row["runner_status"], row["runner_median_ms"]),
                "benchflow": _cell(row["benchflow_status"], row["benchflow_median_ms"]),
                "ratio": row["ratio"],
                "note": note,
            }
        )
    return found


def pooled_rows(out: Path, passes: int) -> list[dict[str, str]]:
    """compare_xr's rows of a model's test, each backend's passes pooled (_pooled)."""
    runs = [_rows(d / "compare_xr.csv") for d in pass_dirs(out, passes)]
    runs = [run for run in runs if run] or [[]]
    return [
        _pooled([r for run in runs for r in run if r["backend"] == b["backend"]]) for b in runs[0]
    ]


def _pooled(rows: list[dict[str, str]]) -> dict[str, str]:
    """One cell's passes as one row: each side's median over the passes it timed, their
    ratio, and each pass's figures under "passes" (a tool's processes are often further
    apart than ±10% on a 2-core VM: docs/torchbench-coverage.md)."""
    if len(rows) < 2:
        return rows[0]
    pooled = dict(rows[0])
    for side in ("runner", "benchflow"):
        ok = [float(r[f"{side}_median_ms"]) for r in rows if _timed(r, side)]
        pooled[f"{side}_status"] = "ok" if ok else rows[0][f"{side}_status"]
        pooled[f"{side}_median_ms"] = f"{statistics.median(ok):.6g}" if ok else ""
    pooled["ratio"] = (
        f"{float(pooled['benchflow_median_ms']) / float(pooled['runner_median_ms']):.3f}"
        if _timed(pooled, "runner") and _timed(pooled, "benchflow")
        else ""
    )
    each = ", ".join(
        f"{_cell(r['runner_status'], r['runner_median_ms']).removesuffix(' ms')} / "
        f"{_cell(r['benchflow_status'], r['benchflow_median_ms'])}"
        for r in rows
    )
    pooled["passes"] = f"{len(rows)} passes (runner / benchflow): {each}; the ratio of the medians"
    return pooled


def _timed(row: dict[str, str], side: str) -> bool:
    """The side timed the cell: ok, with a median."""
    return row[f"{side}_status"] == "ok" and bool(row[f"{side}_median_ms"])


def _cell(status: str, median_ms: str) -> str:
    return f"{float(median_ms):.4g} ms" if status == "ok" and median_ms else status


def summary(table: list[dict[str, Any]], not_run: dict[str, str]) -> list[str]:
    both = [r for r in table if r["ratio"]]
    within = [r for r in both if not _outside(r)]
    unexplained = ("not explained", "not only those settings")
    explained = [r for r in both if _outside(r) and not any(u in r["note"] for u in unexplained)]
    ours = [r for r in table if r["runner"].endswith("ms") and not r["benchflow"].endswith("ms")]
    models_ok = {r["model"] for r in both}
    asked = {r["model"] for r in table} | {key.split()[0] for key in not_run}
    unrun = {key.split()[0] for key in not_run} - {r["model"] for r in table}
    return [
        f"- models: {len(asked)} asked; "
        f"{len(models_ok)} timed by both tools in at least one cell; "
        f"{len(unrun)} not run in any test (reasons below)",
        f"- cells timed by both: {len(both)}; within ±10%: {len(within)}"
        + (f" ({len(within) / len(both):.0%})" if both else "")
        + f"; outside it and explained (an A/B, benchmarks/coverage_notes.csv): {len(explained)}",
        f"- cells the runner times and benchflow does not: {len(ours)}"
        + "".join(f"\n  - {r['model']} {r['test']} {r['backend']}: {r['note']}" for r in ours),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--xla", type=Path, required=True, help="pytorch/xla checkout (v2.9.0)")
    p.add_argument("--torchbench", type=Path, required=True, help="pytorch/benchmark checkout")
    p.add_argument("--models", default="", help="comma-separated (default: every model)")
    p.add_argument("--tests", default="eval,train")
    p.add_argument(
        "--backends",
        default="eager,inductor,openxla",
        help="of each test's (eval: eager, inductor, openxla; train: eager, inductor)",
    )
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--iterations-per-run", type=int, default=10)
    p.add_argument(
        "--passes",
        type=int,
        default=1,
        help="run each model's test this many times, one pass after the other; a cell's\n"
        "figures are each side's median over its passes, and their ratio",
    )
    p.add_argument("--out", type=Path, default=Path("coverage"))
    p.add_argument("--timeout", type=int, default=900, help="seconds a job may take, each side")
    p.add_argument("--again", action="store_true", help="run models that have results again")
    p.add_argument("--explained", type=Path, help="CSV of model,test,backend,note")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--report-only", action="store_true", help="only write the table")
    p.add_argument(
        "--ab",
        action="store_true",
        help="for each cell outside ±10%%, run the runner again given benchflow's host\n"
        "settings (compare_xr --as-benchflow): its note says whether they explain it",
    )
    p.add_argument(
        "--skip-missing",
        action="store_true",
        help="list a model whose requirements.txt names a package this environment\n"
        "lacks, or that torchbench.yaml's skip lists skip, as not run, without running\n"
        "it (some run without their packages: dlrm)",
    )
    args = p.parse_args(argv)
    args.out = args.out.resolve()
    args.backends = [b for b in args.backends.split(",") if b]
    tests = [t for t in args.tests.split(",") if t]
    for t in tests:
        if t not in BACKENDS:
            p.error(f"--tests: {t!r} is not allowed; allowed values: {', '.join(BACKENDS)}")
    everything = models_of(args.torchbench)
    models = [m for m in args.models.split(",") if m] or everything
    for m in models:
        if m not in everything:
            p.error(f"--models: {m!r} is not a model of {args.torchbench}")
    explained: dict[tuple[str, ...], str] = {}
    if args.explained:
        with args.explained.open() as f:
            rows = csv.DictReader(f)
            explained = {(r["model"], r["test"], r["backend"]): r["note"] for r in rows}

    table: list[dict[str, Any]] = []
    not_run: dict[str, str] = {}
    for model in models:
        lacking = missing_packages(args.torchbench, model)
        ran = any((args.out / model / t / "compare_xr.csv").exists() for t in tests)
        if lacking and args.skip_missing and not ran:  # (one that ran without them is shown)
            not_run[model] = "needs the package(s) " + ", ".join(lacking)
            continue
        for test in tests:
            if (why := listed_skip(model, test)) is not None and args.skip_missing:
                not_run[f"{model} {test}"] = f"on both tools' skip list: {why}"
                continue
            if not args.report_only:
                for out in pass_dirs(args.out / model / test, args.passes):
                    run_one(args, model, test, out)
                if args.ab:
                    run_ab(args, model, test)
            if (args.out / model / test / "compare_xr.csv").exists():
                table += cells(args, model, test, explained)
            else:  # (--report-only, or a run stopped before it)
                not_run[f"{model} {test}"] = "not run yet: make coverage runs it"

    cols = ["model", "test", "backend", "batch_size", "runner", "benchflow", "ratio", "note"]
    lines = [
        f"# TorchBench coverage: benchflow and the experiment runner ({time.strftime('%Y-%m-%d')})",
        "",
        f"- machine: {compare_xr.machine()}",
        f"- each tool compiling cold; --repeat {args.repeat} --iterations-per-run "
        f"{args.iterations_per_run} on both (the runner: one repeat more, its first left out)"
        + (f"; {args.passes} passes, each side's median over them" if args.passes > 1 else ""),
        *summary(table, not_run),
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
        *("| " + " | ".join(str(r[c]) for c in cols) + " |" for r in table),
        "",
        "Not run:",
        "",
        *(f"- {m}: {why}" for m, why in sorted(not_run.items())),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "coverage.md").write_text("\n".join(lines) + "\n")
    with (args.out / "coverage.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=cols)
        writer.writeheader()
        writer.writerows(table)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
