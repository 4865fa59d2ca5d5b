"""`benchflow history SOURCE...`: the same jobs over many sweeps, their change points,
and what changed with them (docs/history.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchflow.cli.report import parse_threshold

if TYPE_CHECKING:
    from benchflow.report.sources import Sweep

DESCRIPTION = """\
The history of the same jobs over many sweeps: one series per job (its fingerprint),
the sweeps in the order they ran, and where each job's time stepped to another level
and stayed (a change point: a penalized piecewise-constant fit, each candidate kept
where Welch's t on either side is significant after Benjamini-Hochberg and the step is
past --threshold; docs/history.md).

SOURCE is a sweep folder, a folder that holds sweeps (multirun/: every sweep under
it), a results.jsonl, or anything `benchflow report` reads (an MLflow experiment's
rows are split into their sweeps by their job folders). For each change point it
prints the level before and after with their 95% intervals, the change, its p-value,
the environment facts that differ between the run just before and the run just after
(or "nothing recorded changed"), and the `benchflow rerun` commands of those two runs.
"""

EPILOG = """\
examples:
  benchflow history multirun
  benchflow history multirun --fail-on-new --window 5     # nightly CI

exit codes: 0 done, 1 a regression change point in the last --window sweeps
(--fail-on-new), 2 bad input.
"""


def _window(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--window={text!r}; allowed: an integer >= 1")
    return value


def parser() -> argparse.ArgumentParser:
    from benchflow.history.changes import WINDOW
    from benchflow.results.changepoints import THRESHOLD

    p = argparse.ArgumentParser(
        prog="benchflow history",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="sweeps, or folders of them")
    p.add_argument(
        "--threshold",
        type=parse_threshold,
        default=THRESHOLD,
        help=f"the smallest step reported (default {THRESHOLD:g} = {THRESHOLD * 100:g}%%)",
    )
    p.add_argument(
        "--fail-on-new",
        action="store_true",
        help="exit 1 when a regression change point lies in the last --window sweeps",
    )
    p.add_argument(
        "--window",
        type=_window,
        default=WINDOW,
        help=f"with --fail-on-new: how many of the newest sweeps count as new (default {WINDOW})",
    )
    p.add_argument("--tracking-uri", help="MLflow store for run and experiment sources")
    return p


def sweeps_of(specs: Sequence[str], tracking_uri: str | None) -> list[Sweep]:
    """Each SOURCE as sweeps: a folder that holds sweeps gives every one under it."""
    from benchflow.core.layout import SweepDir
    from benchflow.history.series import split
    from benchflow.report.sources import load

    out: list[Sweep] = []
    for spec in specs:
        path = Path(spec).expanduser()
        if path.is_dir() and not SweepDir(path).results.exists():
            inside = sorted({p.parent for p in path.glob("**/results.jsonl")})
            if inside:
                out += [load(str(p), tracking_uri) for p in inside]
                continue
        out += split(load(spec, tracking_uri))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from benchflow.history import changes as history_changes
    from benchflow.history.render import print_changes
    from benchflow.history.series import build
    from benchflow.report.sources import SourceError

    try:
        sweeps = sweeps_of(args.sources, args.tracking_uri)
    except SourceError as exc:
        print(f"benchflow history: error: {exc}", file=sys.stderr)
        return 2
    ordered, series = build(sweeps)
    found = history_changes.find(series, len(ordered), args.threshold)
    print_changes(ordered, series, found)
    if args.fail_on_new:
        new = history_changes.new_regressions(found, args.window)
        for c in new:
            print(
                f"benchflow history: new regression: {c.series.name} {c.point.change:+.1%} "
                f"from {c.after.sweep} ({c.explained})",
                file=sys.stderr,
            )
        return 1 if new else 0
    return 0
