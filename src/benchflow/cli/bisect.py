"""`benchflow bisect --good A --bad B key=value ...`: the first release between two
toolchains where a job's time regressed (history/bisect.py, docs/toolchains.md)."""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchflow.cli import command_parser, refuse
from benchflow.cli.report import parse_threshold
from benchflow.core.status import Status
from benchflow.history.bisect import Step, releases_between, search
from benchflow.results.row import ResultRow

DESCRIPTION = """\
The first release of a package (torch by default) between a good and a bad toolchain
where one job's time regressed: the job (key=value ..., as for a single run) runs on
the good toolchain and on the bad one; where the bad one is a significant regression
past --threshold (as `report --compare` judges a row), the releases between the two
pins are searched by halves, each step a real job in its release's environment. It
ends with the last good and the first bad release, what differs between their runs,
and their rerun commands; or says that no release regressed beyond the threshold.
"""

EPILOG = """\
examples:
  benchflow bisect --good torch-2.8 --bad torch-2.15 model=llama dynamo=inductor
  benchflow bisect --good torch-2.8 --bad torch-2.15 --releases 2.9.0,2.10.0 model=dlrm

exit codes: 0 no release regressed, 1 a regression's first release found, 2 bad input.
"""


def parser() -> argparse.ArgumentParser:
    from benchflow.config.schema import THRESHOLD

    p = command_parser("bisect", DESCRIPTION, EPILOG)
    p.add_argument("--good", required=True, metavar="TOOLCHAIN", help="where the job was fast")
    p.add_argument("--bad", required=True, metavar="TOOLCHAIN", help="where it is slow")
    p.add_argument("--package", default="torch", help="whose releases to search (torch)")
    p.add_argument(
        "--releases",
        help="comma list of the releases between the two to search (default: the package's "
        "final releases on PyPI between the two pins, with a wheel for this interpreter)",
    )
    p.add_argument(
        "--threshold",
        type=parse_threshold,
        default=THRESHOLD,
        help=f"the smallest slowdown that counts (default {THRESHOLD:g})",
    )
    p.add_argument("--config-dir", type=Path, help="your config folder (its toolchain/ options)")
    p.add_argument("--out", type=Path, help="folder for the steps' runs (bisect/<date>/<time>)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="the job, e.g. model=llama")
    return p


def _toolchain(name: str, config_dir: Path | None) -> dict[str, str]:
    """The pins of toolchain option `name` (the user's folder first, then benchflow's)."""
    from benchflow.config.schema import read_yaml
    from benchflow.config.store import CONF_DIR

    for folder in [config_dir, CONF_DIR]:
        if folder and (path := folder / "toolchain" / f"{name}.yaml").is_file():
            data = read_yaml(path.read_text()) or {}
            return {str(k): str(v) for k, v in (data.get("pins") or {}).items()}
    known = sorted(
        p.stem
        for folder in (config_dir, CONF_DIR)
        if folder
        for p in (folder / "toolchain").glob("*.yaml")
    )
    raise BisectError(f"toolchain {name!r} not found; allowed: {', '.join(known)}")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _bisect(parser().parse_args(argv))
    except BisectError as exc:
        return refuse("bisect", exc)


def _bisect(args: argparse.Namespace) -> int:
    good, bad = _toolchain(args.good, args.config_dir), _toolchain(args.bad, args.config_dir)
    package = args.package
    if package not in good or package not in bad:
        raise BisectError(
            f"--package {package} must be pinned by both toolchains "
            f"(--good {args.good}: {good or 'none'}; --bad {args.bad}: {bad or 'none'})"
        )
    if args.releases:
        releases = [r.strip() for r in args.releases.split(",") if r.strip()]
    else:
        releases = releases_between(package, good[package], bad[package])
    when = datetime.datetime.now().strftime("%Y-%m-%d/%H-%M-%S")
    out = (args.out or Path("bisect") / when).resolve()
    print(f"bisect {package}: {args.good} ({good[package]}) .. {args.bad} ({bad[package]}),")
    print(f"  {len(releases)} release(s) between: {', '.join(releases) or '(none)'}")
    base = _run(args, out, args.good, [f"toolchain={args.good}"])
    worst = _run(args, out, args.bad, [f"toolchain={args.bad}"])
    if base.status is not Status.OK:
        raise BisectError(f"the job did not run ok on --good {args.good}: {base.error}")
    first = _judge(base, worst, args.threshold)
    print(f"{args.bad}: {first.said}")
    if not first.bad:
        print(f"no release regressed beyond the threshold ({args.threshold:.0%})")
        if first.undecided:
            print(
                "  (the samples could not tell a change that size from the host's noise: "
                "time more processes, e.g. processes=5, to rule one out)"
            )
        return 0
    rows: dict[str, ResultRow] = {}

    def judge(release: str) -> Step:
        name = f"{package}-{release}"
        keys = [f"toolchain={args.bad}", f"toolchain.name={name}"]
        row = _run(args, out, name, [*keys, f"toolchain.pins.{package}={release}"])
        rows[release] = row
        step = _judge(base, row, args.threshold, release)
        print(f"{name}: {step.said}")
        return step

    low, high, _ = search(releases, judge)
    last_good = rows[releases[low]] if low >= 0 else base
    first_bad = rows[releases[high]] if high < len(releases) else worst
    name_of = {-1: args.good, len(releases): args.bad}
    before = name_of.get(low) or f"{package}-{releases[low]}"
    after = name_of.get(high) or f"{package}-{releases[high]}"
    print(f"the first release that regressed: {after} (the last good one: {before})")
    from benchflow.results.environment import differences

    diffs = differences([last_good.provenance], [first_bad.provenance])
    print("what changed: " + ("; ".join(str(d) for d in diffs) or "nothing recorded changed"))
    print(f"rerun the last good: benchflow rerun {last_good.job.dir}")
    print(f"rerun the first bad: benchflow rerun {first_bad.job.dir}")
    return 1


class BisectError(Exception):
    """A step that could not run (its message says why): bad input, exit 2."""


def _run(args: argparse.Namespace, out: Path, name: str, toolchain: list[str]) -> ResultRow:
    """A step: a real single run (`python -m benchflow`) into out/<name>."""
    from benchflow.results.io import current, read_rows

    folder = out / name
    cmd = [sys.executable, "-m", "benchflow"]
    if args.config_dir:
        cmd += ["--config-dir", str(args.config_dir)]
    cmd += [*args.overrides, *toolchain, f"hydra.run.dir={folder}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    rows = current(read_rows(folder / "results.jsonl"))
    if done.returncode == 2 or not rows:
        tail = done.stderr.strip().splitlines()[-3:]
        raise BisectError(f"{name}: {' '.join(tail)}")
    print(f"  ran {name}: {rows[0].job.dir} (benchflow rerun {rows[0].job.dir})")
    return rows[0]


def _judge(base: ResultRow, row: ResultRow, threshold: float, release: str = "") -> Step:
    """A step's verdict: the row against the good toolchain's, as report --compare."""
    from benchflow.report.compare import BROKEN, INSUFFICIENT, REGRESSION, compare
    from benchflow.report.model import build_report

    (change,) = compare(build_report([base]), build_report([row]), threshold)
    bad = change.verdict in (REGRESSION, BROKEN)
    ratio = f" {change.ratio - 1:+.1%}" if change.ratio else ""
    said = f"{change.verdict}{ratio} ({change.detail})"
    return Step(release, bad, said, undecided=change.verdict == INSUFFICIENT)
