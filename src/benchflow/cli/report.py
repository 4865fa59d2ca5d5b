"""`benchflow report`: tables, files, plots, gate."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchflow import backends
from benchflow.cli import command_parser, refuse
from benchflow.config.schema import DEFAULT_BASELINE, THRESHOLD
from benchflow.report.output import FORMATS
from benchflow.report.sources import SourceError, Sweep, describe, load, meta_of
from benchflow.results.environment import Difference, between_rows, speed_warning

if TYPE_CHECKING:
    from benchflow.report.compare import Change
    from benchflow.report.model import Report
    from benchflow.results.row import ResultRow

DESCRIPTION = """\
Compare backends, sweeps and commits from benchflow results.

SOURCE is a sweep folder (multirun/<date>/<time>), a run folder, a results.jsonl,
an MLflow parent run id (the sweep), an MLflow job run id, or an MLflow
experiment name (`run:<id>` / `experiment:<name>` to be explicit). Several
sources are merged into one report (a later row for the same model and
configuration wins).

Prints the per-model table and the summary (passrate, geomean speedup, mean
compile time, memory compression ratio), writes report.md, report.csv,
summary.csv, report.html (+ speedup.png, times.png) and logs them to the
sweep's MLflow parent run.

With --compare BASE, SOURCE is the candidate, and each row gets a verdict from its
samples (Welch's t on the log process medians where both sides ran in several
processes, else Mann-Whitney U on the per-repeat samples): regression (significant
at 5% after Benjamini-Hochberg over the rows, and slower than --threshold),
improvement, no significant change (the change's 95% interval within ±threshold), or
insufficient data (the samples cannot tell). A regression, or a model that passed in
BASE and fails in SOURCE, makes the exit code 1; one measured on a busy host, or
while the host's own speed moved enough to account for it, is "suspicious" and does
not (docs/reports.md).
Each configuration is judged the same way on its geomean change over the models both
sides timed, and a configuration regression fails the gate too.

With --pair AXIS, the sources are one sweep of two values of AXIS (AXIS=A,B, e.g.
toolchain=main,mine or slowdown=null,0.05): B is judged against A, each model's
processes paired by round (a paired t-test on the rounds' log ratios), so the host's
drift between rounds drops out; the same verdicts and exit codes.
It first prints what differs between the two sides' environments (CPU features,
versions, lock, TorchBench checkout, speed settings): a slowdown may come from there.
--require-same-env makes such a difference an error (exit 2).
"""

EPILOG = """\
examples:
  benchflow report multirun/2026-11-22/10-06-10
  benchflow report multirun/2026-11-22/10-06-10 --baseline none
  benchflow report experiment:benchflow --tracking-uri http://127.0.0.1:5000
  benchflow report NEW_SWEEP --compare OLD_SWEEP --threshold 5%   # CI gate
  benchflow report NEW_SWEEP --compare OLD_SWEEP --require-same-env
  benchflow report AB_SWEEP --pair toolchain   # a sweep of toolchain=main,mine

exit codes: 0 done (no regression), 1 regression found (--compare, --pair), 2 bad input.
"""


def parse_threshold(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--threshold={text!r} is not a number; "
            "allowed: a fraction like 0.05 or a percentage like 5%"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--threshold={text!r} is negative; allowed: >= 0")
    return value


def _formats(text: str) -> list[str]:
    items = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in items if f not in FORMATS]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"--format={text!r}: unknown {', '.join(bad) or '(empty)'}; "
            f"allowed: a comma list of {', '.join(FORMATS)}"
        )
    return items


def parser() -> argparse.ArgumentParser:
    p = command_parser("report", DESCRIPTION, EPILOG)
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="results to report on (the candidate with --compare)",
    )
    p.add_argument(
        "--baseline-toolchain",
        metavar="NAME",
        help="speedups of each configuration over itself run with this toolchain (a "
        "release over another: conf/toolchain/NAME.yaml, `project` for benchflow's own "
        "environment), instead of over a backend",
    )
    p.add_argument(
        "--baseline",
        choices=backends.baseline_choices(),
        default=None,
        metavar="BACKEND",
        help="backend label speedups are over (default: the sweep's own baseline=, else "
        f"{DEFAULT_BASELINE}): %(choices)s; none = eager",
    )
    p.add_argument(
        "--compare",
        metavar="BASE",
        help="a baseline sweep (same kinds as SOURCE) to gate SOURCE against",
    )
    p.add_argument(
        "--pair",
        metavar="AXIS",
        help="judge one sweep's two values of AXIS (a sweep of AXIS=A,B: the value it ran "
        "first is A), B against A, each model's processes paired by round: the host's "
        "drift between rounds drops out (docs/reports.md)",
    )
    p.add_argument(
        "--threshold",
        type=parse_threshold,
        default=None,
        help="slowdown that counts as a regression (default 0.05 = 5%%; with --pair on a "
        "paired sweep, its pair_threshold)",
    )
    p.add_argument(
        "--require-same-env",
        action="store_true",
        help="with --compare: exit 2, before any report, when the two sides' environments "
        "differ in a fact that changes speed (docs/reproducibility.md)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="output folder (default: <sweep>/report, or <sweep>/compare with --compare; "
        "./reports/<name> for MLflow sources)",
    )
    p.add_argument(
        "--format",
        type=_formats,
        default=list(FORMATS),
        help="files to write: comma list of md,csv,html (default all)",
    )
    p.add_argument(
        "--tracking-uri",
        help="MLflow store for run/experiment sources and for logging "
        "(default: the sweep's, else ./mlflow.db)",
    )
    p.add_argument(
        "--no-mlflow",
        action="store_true",
        help="do not log the report to the sweep's MLflow parent run",
    )
    return p


def _merge(sweeps: Sequence[Sweep]) -> Sweep:
    if len(sweeps) == 1:
        return sweeps[0]
    baselines = {s.baseline for s in sweeps}
    return Sweep(
        label=" + ".join(s.label for s in sweeps),
        rows=[r for s in sweeps for r in s.rows],
        baseline=baselines.pop() if len(baselines) == 1 else None,  # theirs, if they agree
    )


def _default_out(sweep: Sweep, name: str) -> Path:
    if sweep.directory is not None:
        return sweep.directory / name
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", sweep.label).strip("_")[:80]
    return Path("reports") / f"{slug}-{name}"


def environment_lines(diffs: list[Difference]) -> str:
    """What a comparison prints up front about the two sides' environments."""
    if not diffs:
        return "environment: the same on both sides (every fact of docs/reproducibility.md)"
    lines = []
    speed = [d for d in diffs if d.speed]
    if speed:
        lines.append(f"environment: {len(speed)} difference(s) that can change speed:")
        lines += [f"  {d}" for d in speed]
        lines.append(f"  ({speed_warning(diffs)})")
    else:
        lines.append("environment: no difference that changes speed")
    if other := [d for d in diffs if not d.speed]:
        lines.append("  also different: " + "; ".join(map(str, other)))
    return "\n".join(lines)


def _refused(args: argparse.Namespace) -> str | None:
    """Why these flags cannot go together (None: they can)."""
    if args.require_same_env and not args.compare:
        return (
            "--require-same-env applies to a comparison; allowed: --compare BASE with it, "
            "or no --require-same-env"
        )
    if args.pair and args.compare:
        return (
            f"--pair {args.pair} compares within the sources, --compare {args.compare} "
            "against another sweep; allowed: one of them"
        )
    return None


@dataclasses.dataclass
class _Judged:
    """What the command reports on: the candidate's report and the changes it is judged
    by (None: a plain report), with its title, folder and what the changes are against."""

    report: Report
    changes: list[Change] | None
    title: str
    folder: str = "report"
    against: str = ""
    threshold: float = THRESHOLD  # what the changes were judged with


def _judge(args: argparse.Namespace, cand: Sweep, base: Sweep | None, baseline: str) -> _Judged:
    """The report, and with --pair or --compare its changes (raises PairError)."""
    from benchflow.report.compare import compare
    from benchflow.report.model import build_report

    def report_of(rows: Sequence[ResultRow]) -> Report:
        return build_report(rows, baseline, args.baseline_toolchain)

    if args.pair:
        from benchflow.report.pairs import split

        sides = split(cand.rows, args.pair)
        report = report_of(sides.cand)
        against = f"{sides.axis}={sides.a_value}"
        threshold = _first(args.threshold, sides.threshold, THRESHOLD)
        changes = compare(report_of(sides.base), report, threshold, True, sides.budget)
        return _Judged(
            report,
            changes,
            f"benchflow pair: {sides.axis}={sides.b_value} against {against} in {cand.label}",
            "pair",
            against,
            threshold,
        )
    report = report_of(cand.rows)
    if base is None:
        return _Judged(report, None, f"benchflow report: {cand.label}")
    threshold = _first(args.threshold, THRESHOLD)
    return _Judged(
        report,
        compare(report_of(base.rows), report, threshold),
        f"benchflow compare: {base.label} -> {cand.label}",
        "compare",
        base.label,
        threshold,
    )


def _first(*values: float | None) -> float:
    return next(v for v in values if v is not None)


def _environments(args: argparse.Namespace, base: Sweep, cand: Sweep) -> list[Difference] | None:
    """Print the two sides and what differs between their environments; None where
    --require-same-env refuses the comparison (said on stderr)."""
    print(f"baseline:  {base.label} ({describe(base)})")
    print(f"candidate: {cand.label} ({describe(cand)})")
    diffs = between_rows(base.rows, cand.rows)
    print(environment_lines(diffs))
    speed = [d for d in diffs if d.speed]
    if args.require_same_env and speed:
        refuse(
            "report",
            "--require-same-env: the sides' environments "
            f"differ in {', '.join(str(d) for d in speed)}; allowed: two sides whose "
            "rows share every speed fact (docs/reproducibility.md), or no --require-same-env",
        )
        return None
    return diffs


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if why := _refused(args):
        return refuse("report", why)
    from benchflow.report import output, terminal
    from benchflow.report.pairs import PairError

    try:
        cand = _merge([load(s, args.tracking_uri) for s in args.sources])
        base = load(args.compare, args.tracking_uri) if args.compare else None
        # One baseline for both sides: the user's, else the candidate's own.
        judged = _judge(args, cand, base, args.baseline or cand.baseline or DEFAULT_BASELINE)
    except (SourceError, PairError) as exc:
        return refuse("report", exc)
    report, changes, title = judged.report, judged.changes, judged.title
    diffs: list[Difference] = []
    if base is not None:
        if (found := _environments(args, base, cand)) is None:
            return 2
        diffs = found
    out = args.out or _default_out(cand, judged.folder)
    terminal.print_terminal(report, title, changes, full=output.full_report(out, args.format))

    meta = meta_of(cand, report.baseline)
    if base is not None:
        meta["compared against"] = f"{base.label} ({describe(base)})"
        meta["candidate"] = describe(cand)
        meta["environment"] = "; ".join(map(str, diffs)) or "the same"
    if args.pair:
        meta["paired"] = f"B: {title.split(': ', 1)[1]}; processes paired by round"
    if changes is not None:
        meta["threshold"] = f"{judged.threshold:.1%}"
    files = output.write(report, out, title, meta, changes, args.format)
    print(f"wrote {', '.join(str(f) for f in files)}")
    if not args.no_mlflow and cand.parent_run_id and cand.tracking_uri:
        try:
            output.log_to_mlflow(report, files, cand.tracking_uri, cand.parent_run_id)
            print(f"logged to MLflow parent run {cand.parent_run_id} at {cand.tracking_uri}")
        except Exception as exc:  # the files are written; tracking is best effort
            print(
                f"benchflow report: warning: MLflow logging failed: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
    if changes is None:
        return 0
    return _verdict(changes, judged.against, diffs, judged.threshold)


def _verdict(changes: list[Change], against: str, diffs: list[Difference], threshold: float) -> int:
    """A comparison's exit code (1: a row's or a configuration's regression), and last line."""
    from benchflow.report.compare import overall

    configurations = overall(changes)
    failing = [f"{c.model}/{c.config} ({c.verdict})" for c in changes if c.fails]
    failing += [
        f"{o.config} over {o.models} models ({o.verdict})" for o in configurations if o.fails
    ]
    if failing:
        print(
            f"benchflow report: {len(failing)} regression(s) against {against}: "
            + ", ".join(failing),
            file=sys.stderr,
        )
        if warning := speed_warning(diffs):
            print(f"benchflow report: note: {warning}", file=sys.stderr)
        return 1
    tally = Counter(c.verdict for c in changes)
    by_verdict = Counter(o.verdict for o in configurations)
    print(
        f"no regression against {against} (threshold {threshold:.1%}): "
        + ", ".join(f"{n} {verdict}" for verdict, n in tally.most_common())
        + "; configurations: "
        + (", ".join(f"{n} {verdict}" for verdict, n in by_verdict.most_common()) or "none")
    )
    return 0
