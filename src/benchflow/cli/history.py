"""`benchflow history SOURCE...`: the same jobs over many sweeps, their change points,
and what changed with them (docs/history.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchflow.cli import command_parser, refuse
from benchflow.cli.report import parse_threshold

if TYPE_CHECKING:
    from benchflow.history.changes import Change
    from benchflow.history.series import Series
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
  benchflow history multirun                              # and history/history.html
  benchflow history multirun --fail-on-new --window 5     # nightly CI
  benchflow history multirun --order-by version.torch     # one sweep per torch release

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
    from benchflow.config.schema import THRESHOLD
    from benchflow.history.changes import WINDOW
    from benchflow.history.series import BY_TIME, order_choices

    p = command_parser("history", DESCRIPTION, EPILOG)
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
    p.add_argument(
        "--order-by",
        choices=order_choices(),
        default=BY_TIME,
        metavar="AXIS",
        help="the sweeps' order: time (when they ran, the default), a package's version "
        "(version.torch, ...), or a commit (git_sha, torchbench_sha: its place in --repo's "
        f"history); choices: {', '.join(order_choices())}",
    )
    p.add_argument(
        "--repo",
        type=Path,
        default=Path("."),
        help="with --order-by git_sha or torchbench_sha: the git checkout whose history "
        "orders the commits (default: .)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("history"),
        help="folder for the dashboard, history.html (default: ./history)",
    )
    p.add_argument(
        "--tracking-uri",
        help="MLflow store for run and experiment sources and for the `history` run "
        "(default: the sources' store, else ./mlflow.db)",
    )
    p.add_argument(
        "--no-mlflow",
        action="store_true",
        help="do not log the dashboard to MLflow as a `history` run",
    )
    return p


def sweeps_of(specs: Sequence[str], tracking_uri: str | None) -> list[Sweep]:
    """Each SOURCE as sweeps: every one under a folder, or in an MLflow experiment."""
    from benchflow.core.layout import SweepDir
    from benchflow.report.sources import experiment_name, experiment_sweeps, load, split
    from benchflow.tracking.mlflow_runs import default_tracking_uri

    out: list[Sweep] = []
    for spec in specs:
        path = Path(spec).expanduser()
        if path.is_dir() and not SweepDir(path).results.exists():
            inside = sorted({p.parent for p in path.glob("**/results.jsonl")})
            if inside:
                out += [load(str(p), tracking_uri) for p in inside]
                continue
        if (name := experiment_name(spec)) is not None:
            out += experiment_sweeps(name, tracking_uri or default_tracking_uri(Path.cwd()))
            continue
        out += split(load(spec, tracking_uri))
    return out


def write_dashboard(
    sweeps: Sequence[Sweep], series: Sequence[Series], found: Sequence[Change], out: Path
) -> Path:
    """The dashboard (history/dashboard.py) as out/history.html."""
    from benchflow.config.schema import DEFAULT_BASELINE
    from benchflow.history.dashboard import to_html

    out.mkdir(parents=True, exist_ok=True)
    page = out / "history.html"
    title = f"benchflow history: {len(sweeps)} sweep(s)"
    page.write_text(to_html(sweeps, series, found, DEFAULT_BASELINE, title))
    return page


def log_history(
    page: Path,
    uri: str | None,
    sweeps: Sequence[Sweep],
    series: Sequence[Series],
    found: Sequence[Change],
) -> None:
    """A `history` run in the store's benchflow experiment: the dashboard as its
    artifact, its counts as metrics. Best effort: the file is written either way."""
    from benchflow.config.schema import MlflowConfig
    from benchflow.history.dashboard import open_changes
    from benchflow.tracking.mlflow_runs import KIND_HISTORY, KIND_TAG, Tracker

    try:
        tracker = Tracker(MlflowConfig(tracking_uri=uri), Path.cwd())
        run_id = tracker.start_run("history", tags={KIND_TAG: KIND_HISTORY})
        tracker.log_files(run_id, [page], "history")
        counts: dict[str, float] = {
            "history.sweeps": len(sweeps),
            "history.jobs": len(series),
            "history.change_points": len(found),
            "history.open_change_points": len(open_changes(found)),
        }
        tracker.log_batch(run_id, metrics=counts)
        tracker.end_run(run_id, "ok")
        print(f"logged to MLflow run {run_id} (history) at {tracker.uri}")
    except Exception as exc:  # the page is written; tracking is best effort
        print(
            f"benchflow history: warning: MLflow logging failed: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from benchflow.history import changes as history_changes
    from benchflow.history.render import print_changes
    from benchflow.history.series import OrderError, build
    from benchflow.report.sources import SourceError
    from benchflow.results.io import bulk

    try:
        with bulk():  # many sweeps, from folders or MLflow: many rows
            sweeps = sweeps_of(args.sources, args.tracking_uri)
        ordered, series = build(sweeps, args.order_by, args.repo)
    except (SourceError, OrderError) as exc:
        return refuse("history", exc)
    found = history_changes.find(series, len(ordered), args.threshold)
    print_changes(ordered, series, found)
    page = write_dashboard(ordered, series, found, args.out)
    print(f"wrote {page}")
    uri = args.tracking_uri or next((s.tracking_uri for s in ordered if s.tracking_uri), None)
    if not args.no_mlflow:
        log_history(page, uri, ordered, series, found)
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
