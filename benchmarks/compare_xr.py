"""`make compare-xr`: benchflow and PyTorch/XLA's experiment runner, side by side.

Runs both tools on the same TorchBench models x backends on this machine, one job at
a time each (every job has the whole machine, as the runner's children do), and
prints, per model x backend, both steady-state medians of the per-iteration time,
their ratio (benchflow / runner), and each side's status. It flags every ratio outside
+-10% (--tolerance) and every model that fails on one side only.

Reading it: the runner has no warm-up. Its first repeat includes tracing and
compiling, so its steady state is the median of repeats 2..N; benchflow's median is
over its timed repeats, after its cold call and warm-up. The first-repeat columns
(runner: repeat 1; benchflow: the cold call) are for information only.

Both tools are given the same settings, and each tool's own rules for dtype and
batch size agree (both read PyTorch's torchbench.yaml: this script writes the runner's
copy from benchflow's mirror, so the rules are the same data):
- eval runs in bfloat16 (float16 or AMP for the models the suite lists), at the
  suite's batch size or the model's default;
- train: float32 on both sides, each by its own rule: the runner never uses AMP on a
  CPU, and benchflow trains in float32 on a CPU unless dtype= is given (its report and
  this script's header say the rule);
- matmul precision: the runner sets torch's and torch_xla's to high (only with
  --disable-tf32 does it take its --matmul-precision, else highest); benchflow's
  matmul_precision sets both too and defaults to high. The script passes
  matmul_precision=high all the same;
- compiles: cold on both sides (--compile-cache cold, the default). benchflow's
  compile_cache=cold gives each job an empty Inductor cache; the runner, left to
  itself, keeps one in /tmp/torchinductor_<user> for good, so its second run of a grid
  compiles from it (here its Inductor cold calls took 83 s on a fresh machine and 33 s
  the next run). The script gives it a fresh TORCHINDUCTOR_CACHE_DIR for each run;
- functionalization: the runner turns torch_xla's off unless told otherwise
  (XLA_DISABLE_FUNCTIONALIZATION=1; TorchBench's llama then fails on XLA, and
  pyhpc_isoneutral_mixing on openxla measured 2.4x slower here); benchflow keeps
  torch_xla's default, on. The script gives the runner --enable-functionalization
  (--functionalization=off gives benchflow the runner's default instead).

Needs a pytorch/xla checkout at the torch_xla version installed (v2.9.0 here) and a
TorchBench (pytorch/benchmark) checkout, both outside this project:

    python benchmarks/compare_xr.py --xla ~/src/xla --torchbench ~/src/benchmark \
        --models lennard_jones,BERT_pytorch,llama,dlrm --out /tmp/compare_xr

It lays out what the runner expects (<work>/pytorch/xla, <work>/benchmark and
<work>/pytorch/benchmarks/dynamo/torchbench.yaml, as links) under --out, runs it from
<work>/pytorch, then runs benchflow, and writes compare_xr.csv and compare_xr.md there.
--reuse reads results already in --out instead of running a side again.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from benchflow import backends  # noqa: E402
from benchflow.harness.process import MMAP_THRESHOLD, TRIM_THRESHOLD  # noqa: E402
from benchflow.results.io import read_rows  # noqa: E402
from benchflow.results.phases import PHASES  # noqa: E402
from benchflow.suite.rules import DTYPE_RULE  # noqa: E402
from benchflow.suite.suites import SUITES, rules  # noqa: E402

BACKENDS = ("eager", "lazy_xla", "inductor", "openxla")
# The runner's --xla/--dynamo values per backend; it runs the valid pairs of their product.
RUNNER_FLAGS = {
    "eager": ("None", "None"),
    "lazy_xla": ("PJRT", "None"),
    "inductor": ("None", "inductor"),
    "openxla": ("PJRT", "openxla"),
}


# What benchflow's timed repeats have and the runner's do not, as the runner's environment:
# glibc's malloc thresholds (benchflow's child sets them with mallopt) and no Inductor
# compile workers beside the repeats (benchflow stops them after warm-up). --as-benchflow.
AS_BENCHFLOW = {
    "GLIBC_TUNABLES": f"glibc.malloc.mmap_threshold={MMAP_THRESHOLD}"
    f":glibc.malloc.trim_threshold={TRIM_THRESHOLD}",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
}


@dataclass
class Side:
    status: str  # ok | failed | skipped | missing
    median_s: float | None = None
    first_s: float | None = None  # runner: its first repeat; benchflow: its cold call
    batch_size: int | None = None
    note: str = ""


def _short(text: str, limit: int = 160) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if "Error" in ln or "error" in ln), None)
    return (last or (lines[-1] if lines else ""))[:limit]


def layout(out: Path, xla: Path, torchbench: Path, suite_yaml: Path | None) -> Path:
    """The folders the runner looks for near its working directory; returns <work>/pytorch."""
    work = out / "xr_root"
    dynamo = work / "pytorch" / "benchmarks" / "dynamo"
    dynamo.mkdir(parents=True, exist_ok=True)
    for link, target in ((work / "pytorch" / "xla", xla), (work / "benchmark", torchbench)):
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target.resolve(), target_is_directory=True)
    if suite_yaml is not None:
        text = suite_yaml.read_text()
    else:  # benchflow's mirror of the same file: the same rules for both tools
        text = yaml.safe_dump(rules(SUITES["torchbench"]), sort_keys=False)
    (dynamo / "torchbench.yaml").write_text(text)
    return work / "pytorch"


INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"


def runner_cache(args: argparse.Namespace, out: Path) -> Path:
    """The runner's Inductor cache. Left to itself it keeps one in /tmp/torchinductor_<user>
    for good, so that its second run of a grid compiles from it (here its Inductor cold
    calls took 83 s on a fresh machine and 33 s the next run). --compile-cache cold (the
    default): a fresh folder for each run, as benchflow's compile_cache=cold gives each
    job; warm: one kept under --out, as benchflow's compile_cache=warm keeps its own."""
    if args.compile_cache == "warm":
        return out / "xr_inductor_cache_warm"
    folder = out / "xr_inductor_cache"
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def run_runner(args: argparse.Namespace, out: Path) -> Path:
    """The runner on the asked backends only: it runs every valid pair of its --xla and
    --dynamo values, so one run per --xla value (eager and Inductor asked with openxla
    would add lazy XLA, minutes a model here); the later runs append (its resume)."""
    cwd = layout(out, args.xla, args.torchbench, args.torchbench_yaml)
    results = out / "xr"
    by_xla: dict[str, set[str]] = {}
    for b in args.backends:
        xla, dynamo = RUNNER_FLAGS[b]
        by_xla.setdefault(xla, set()).add(dynamo)
    env = {**os.environ, "PJRT_DEVICE": "CPU", INDUCTOR_CACHE: str(runner_cache(args, out))}
    if args.as_benchflow:
        env.update(AS_BENCHFLOW)
    for n, (xla, dynamos) in enumerate(sorted(by_xla.items())):
        cmd = [
            sys.executable,
            "xla/benchmarks/experiment_runner.py",
            "--suite-name=torchbench",
            "--accelerator=cpu",
            f"--xla={xla}",
            *(f"--dynamo={d}" for d in sorted(dynamos)),
            f"--test={args.test}",
            f"--filter=^({'|'.join(args.models)})$",
            f"--output-dirname={results}",
            *(["--no-resume"] if n == 0 else []),
            *([f"--subprocess-timeout={args.timeout}"] if args.timeout else []),
        ]
        if not args.defaults:
            cmd.append(f"--repeat={args.runner_repeat or args.repeat + 1}")  # + the compiling one
            cmd.append(f"--iterations-per-run={args.iterations_per_run}")
        if args.functionalization == "on":
            cmd.append("--enable-functionalization")
        print("runner:", " ".join(cmd), f"(in {cwd})", flush=True)
        with (out / "xr.log").open("a" if n else "w") as log:
            subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    return results / "results.jsonl"


def run_benchflow(args: argparse.Namespace, out: Path) -> list[Path]:
    common = [
        f"model={','.join(args.models)}",
        f"test={args.test}",
        f"model.step={args.step}",
        f"suite.torchbench_root={args.torchbench.resolve()}",
        "matmul_precision=high",  # the runner's, unless --disable-tf32
        "mlflow.enabled=false",
        "progress=false",
        f"compile_cache={args.compile_cache}",
    ]
    # The backends `xla=auto` picks for their dynamo= option, and lazy XLA (dynamo=none
    # on xla=PJRT). With eager among them, one sweep over `xla=auto,PJRT`, as a user
    # would type it: inductor on PJRT is an invalid pair (no job), openxla on PJRT the
    # same job as on auto (run once), and every job of a model in the same sweep (one
    # build of it, share_build). Otherwise two sweeps, so no backend runs unasked.
    auto = [backends.REGISTRY[b].dynamo for b in args.backends if b != "lazy_xla"]
    lazy = "lazy_xla" in args.backends
    if lazy and "eager" in args.backends:
        groups: dict[str, list[str] | None] = {
            "grid": ["dynamo=" + ",".join(auto), "xla=auto,PJRT"]
        }
    else:
        groups = {
            "native": ["dynamo=" + ",".join(auto)] if auto else None,
            "lazy": ["dynamo=none", "xla=PJRT"] if lazy else None,
        }
    if not args.defaults:
        common += [
            f"repeat={args.repeat}",
            f"iterations_per_run={args.iterations_per_run}",
            f"warmup={args.warmup}",
        ]
    if args.timeout:
        common.append(f"timeout_s={args.timeout}")
    env = dict(os.environ)
    if args.functionalization == "off":  # what the runner does unless told otherwise
        env["XLA_DISABLE_FUNCTIONALIZATION"] = "1"
    files = []
    for name, extra in groups.items():
        if extra is None:
            continue
        sweep_dir = out / "benchflow" / name
        cmd = [
            sys.executable,
            "-m",
            "benchflow",
            "-m",
            *common,
            *extra,
            *args.set,
            f"hydra.sweep.dir={sweep_dir}",
        ]
        print("benchflow:", " ".join(cmd[3:]), flush=True)
        with (out / f"benchflow_{name}.log").open("w") as log:
            subprocess.run(cmd, cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        files.append(sweep_dir / "results.jsonl")
    return files


def read_runner(path: Path) -> dict[tuple[str, str], Side]:
    sides: dict[tuple[str, str], Side] = {}
    if not path.exists():
        return sides
    for line in path.read_text().splitlines():
        data = json.loads(line)
        exp, metrics = data["experiment"], data["metrics"]
        backend = backends.of_row(exp.get("dynamo"), exp.get("xla")).label
        key = (data["model"]["model_name"], backend)
        if "error" in metrics:
            skipped = metrics["error"] == "SKIP"
            sides[key] = Side("skipped" if skipped else "failed", note=_short(metrics["error"]))
            continue
        times = metrics["per_iter_time"]
        steady = times[1:] or times
        sides[key] = Side(
            "ok", median_s=statistics.median(steady), first_s=times[0], batch_size=exp["batch_size"]
        )
    return sides


def read_benchflow(paths: list[Path]) -> dict[tuple[str, str], Side]:
    sides: dict[tuple[str, str], Side] = {}
    for path in paths:
        if not path.exists():
            continue
        for row in read_rows(path):
            if row.superseded_by:
                continue
            key = (row.model_name, row.backend)
            if row.status.value == "invalid" and key in sides:
                continue  # inductor on xla=PJRT: the grid's invalid pair, not inductor's row
            if row.status.value != "ok":
                sides[key] = Side(row.status.value, note=_short(row.error or ""))
                continue
            summary = row.summary.get("per_iter_time_s", {})
            first = row.metrics.get("first_iter_time_s")
            sides[key] = Side(
                "ok",
                median_s=summary.get("median"),
                first_s=float(first) if isinstance(first, (int, float)) else None,
                batch_size=row.experiment.batch_size,
                note=f"{row.experiment.dtype}, step {row.experiment.step}",
            )
    return sides


def compare(
    models: list[str],
    wanted: list[str],
    xr: dict[tuple[str, str], Side],
    bf: dict[tuple[str, str], Side],
    tolerance: float,
) -> list[dict[str, Any]]:
    rows = []
    for model in models:
        for backend in wanted:
            a = xr.get((model, backend), Side("missing"))
            b = bf.get((model, backend), Side("missing"))
            ratio = b.median_s / a.median_s if a.median_s and b.median_s else None
            if a.batch_size and b.batch_size and a.batch_size != b.batch_size:
                flag = f"batch sizes differ ({a.batch_size} vs {b.batch_size})"
            elif a.status == "ok" and b.status == "ok" and ratio is not None:
                flag = "" if abs(ratio - 1) <= tolerance else f"outside +-{tolerance:.0%}"
            elif (a.status == "ok") != (b.status == "ok"):
                flag = "fails on one side only"
            else:
                flag = ""
            rows.append(
                {
                    "model": model,
                    "backend": backend,
                    "batch_size": b.batch_size or a.batch_size or "",
                    "runner_status": a.status,
                    "benchflow_status": b.status,
                    "runner_median_ms": _ms(a.median_s),
                    "benchflow_median_ms": _ms(b.median_s),
                    "ratio": f"{ratio:.3f}" if ratio is not None else "",
                    "flag": flag,
                    "runner_first_ms": _ms(a.first_s),
                    "benchflow_cold_ms": _ms(b.first_s),
                    "runner_note": a.note,
                    "benchflow_note": b.note,
                }
            )
    return rows


def _ms(value: float | None) -> str:
    return f"{value * 1e3:.2f}" if value is not None else ""


def markdown(rows: list[dict[str, Any]], header: list[str]) -> str:
    cols = [
        "model",
        "backend",
        "batch_size",
        "runner_median_ms",
        "benchflow_median_ms",
        "ratio",
        "runner_status",
        "benchflow_status",
        "flag",
    ]
    lines = [*header, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    notes = [
        f"- {r['model']}/{r['backend']}: runner: {r['runner_note'] or '-'}; "
        f"benchflow: {r['benchflow_note'] or '-'}"
        for r in rows
        if r["flag"]
    ]
    return "\n".join(lines + (["", *notes] if notes else [])) + "\n"


def phase_table(paths: list[Path]) -> str:
    """benchflow's seconds by phase (results/phases.PHASES), summed over its rows: where
    its sweep's wall went (the sweeps' own summary and report come after)."""
    rows = [r for p in paths if p.exists() for r in read_rows(p)]
    phased = [r.job.phases for r in rows if r.job.phases]
    if not phased:
        return ""
    totals = {k: sum(ph.get(k, 0.0) for ph in phased) for k in PHASES}
    shown = [k for k in PHASES if totals[k] >= 0.05]
    lines = [
        "",
        f"benchflow's time by phase, over its {len(phased)} rows (seconds):",
        "",
        "| " + " | ".join([*shown, "total"]) + " |",
        "|" + "---|" * (len(shown) + 1),
        "| "
        + " | ".join([*(f"{totals[k]:.1f}" for k in shown), f"{sum(totals.values()):.1f}"])
        + " |",
    ]
    return "\n".join(lines) + "\n"


def machine() -> str:
    flags = ""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = re.search(r"model name\s*:\s*(.*)", cpuinfo)
        have = set(re.search(r"flags\s*:\s*(.*)", cpuinfo).group(1).split())  # type: ignore[union-attr]
        isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16") if f in have]
        flags = f"{model.group(1) if model else platform.processor()}, {os.cpu_count()} CPUs, "
        flags += "ISA " + (" ".join(isa) or "none of avx2/avx512/amx")
    except (OSError, AttributeError):
        flags = f"{platform.processor()}, {os.cpu_count()} CPUs"
    return flags


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--xla", type=Path, required=True, help="pytorch/xla checkout (v2.9.0)")
    p.add_argument("--torchbench", type=Path, required=True, help="pytorch/benchmark checkout")
    p.add_argument("--torchbench-yaml", type=Path, help="PyTorch's torchbench.yaml for the runner")
    p.add_argument("--models", default="lennard_jones,BERT_pytorch,llama,dlrm")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--test", choices=("eval", "train"), default="eval")
    p.add_argument("--step", choices=("module", "torchbench"), default="module")
    p.add_argument(
        "--functionalization",
        choices=("on", "off"),
        default="on",
        help="torch_xla's functionalization on both sides: on (torch_xla's default, and\n"
        "benchflow's: the runner is given --enable-functionalization) or off (the\n"
        "runner's own default: benchflow is given XLA_DISABLE_FUNCTIONALIZATION=1)",
    )
    p.add_argument(
        "--defaults",
        action="store_true",
        help="each tool's own repeats, iterations and warm-up (the runner's --repeat 10;\n"
        "benchflow's adaptive repeats in 3 interleaved processes): --repeat,\n"
        "--runner-repeat, --iterations-per-run and --warmup are not given",
    )
    p.add_argument("--repeat", type=int, default=5, help="steady repeats on each side")
    p.add_argument(
        "--runner-repeat",
        type=int,
        help="the runner's --repeat, its compiling first repeat included (default: --repeat + 1)",
    )
    p.add_argument("--iterations-per-run", type=int, default=10)
    p.add_argument("--warmup", type=int, default=1, help="benchflow's warm-up steps")
    p.add_argument(
        "--compile-cache",
        choices=("cold", "warm"),
        default="cold",
        help="cold: every compile on both sides from an empty Inductor cache (the runner\n"
        "gets a fresh TORCHINDUCTOR_CACHE_DIR); warm: each side's cache kept between runs",
    )
    p.add_argument(
        "--timeout",
        type=int,
        help="seconds each job may take on either side (the runner's --subprocess-timeout,\n"
        "benchflow's timeout_s); default: each tool's own",
    )
    p.add_argument("--tolerance", type=float, default=0.10)
    p.add_argument("--out", type=Path, default=Path("compare_xr"))
    p.add_argument("--reuse", action="store_true", help="read results already in --out")
    p.add_argument("--only", choices=("runner", "benchflow"), help="run one side only")
    p.add_argument(
        "--as-benchflow",
        action="store_true",
        help="give the runner what benchflow's timed repeats have: its malloc thresholds\n"
        "(GLIBC_TUNABLES) and no compile workers beside them (TORCHINDUCTOR_COMPILE_THREADS=1):\n"
        "an A/B that tells a difference of those two from the rest",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override for benchflow's sweep (repeatable), e.g. --set share_build=false",
    )
    args = p.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.backends = [b for b in args.backends.split(",") if b]
    for b in args.backends:
        if b not in BACKENDS:
            p.error(f"--backends: {b!r} is not allowed; allowed values: {', '.join(BACKENDS)}")
    for path, what in (
        (args.xla, "benchmarks/experiment_runner.py"),
        (args.torchbench, "torchbenchmark"),
    ):
        if not (path / what).exists():
            p.error(f"{path} has no {what}: give the checkout's root")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    xr_file = out / "xr" / "results.jsonl"
    bf_files = [out / "benchflow" / g / "results.jsonl" for g in ("grid", "native", "lazy")]
    walls = {}
    if not args.reuse and args.only != "benchflow":
        t = time.perf_counter()
        xr_file = run_runner(args, out)
        walls["runner"] = time.perf_counter() - t
    if not args.reuse and args.only != "runner":
        t = time.perf_counter()
        bf_files = run_benchflow(args, out)
        walls["benchflow"] = time.perf_counter() - t
    runner_sides, bf_sides = read_runner(xr_file), read_benchflow(bf_files)
    rows = compare(args.models, args.backends, runner_sides, bf_sides, args.tolerance)
    if walls:  # for make bench: both walls, and how many jobs each side ran ok
        ok = {"runner": runner_sides, "benchflow": bf_sides}
        counts = {f"{k}_ok": sum(s.status == "ok" for s in v.values()) for k, v in ok.items()}
        (out / "walls.json").write_text(json.dumps({**walls, **counts}))
    header = [
        f"# benchflow vs the experiment runner ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"- machine: {machine()}",
        f"- test {args.test}, model.step={args.step}; "
        + (
            "each tool's defaults for repeats, iterations and warm-up; "
            if args.defaults
            else f"runner --repeat={args.runner_repeat or args.repeat + 1} "
            f"(its first repeat compiles, left out), benchflow repeat={args.repeat} "
            f"warmup={args.warmup}; --iterations-per-run={args.iterations_per_run} on both; "
        )
        + f"XLA functionalization {args.functionalization} on both",
        "- ratio: benchflow median / runner median of the per-iteration time (> 1: "
        "benchflow measured longer)",
    ]
    header.append(f"- dtype rule: {DTYPE_RULE} (the runner: the same, with no AMP on a CPU)")
    header.append(
        "- compiles: cold on both sides (the runner: a fresh TORCHINDUCTOR_CACHE_DIR for its run)"
        if args.compile_cache == "cold"
        else "- compiles: warm on both sides (each keeps its Inductor cache between runs)"
    )
    if walls:
        header.append("- sweep wall: " + ", ".join(f"{k} {v:.0f} s" for k, v in walls.items()))
    if args.set:
        header.append("- benchflow overrides: " + " ".join(args.set))
    if args.as_benchflow:
        header.append(
            "- the runner given benchflow's host settings: "
            + " ".join(f"{k}={v}" for k, v in AS_BENCHFLOW.items())
        )
    (out / "compare_xr.md").write_text(markdown(rows, header) + phase_table(bf_files))
    with (out / "compare_xr.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["model"])
        writer.writeheader()
        writer.writerows(rows)
    print((out / "compare_xr.md").read_text())
    flagged = [r for r in rows if r["flag"]]
    print(
        f"{len(flagged)} of {len(rows)} row(s) flagged; written to {out} "
        f"in {time.perf_counter() - started:.0f} s"
    )
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
