"""`benchflow expected SWEEP FILE [--update]`: a sweep's accuracy and signals against an
expected-results file kept in the user's repository (report/expected.py, docs/expected.md)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path

from benchflow.cli import command_parser, refuse

DESCRIPTION = """\
What a sweep ran that does not move with the host's speed, against an expected-results
file: for each model, test and configuration (as `benchflow report` names it), the
accuracy status (the accuracy check's code: verify=true, or timing=false), the graphs
dynamo made, its graph breaks, its recompiles, an XLA job's compilations in its timed
repeats and its graph executions per step, and the reasons of the breaks and the guards
of the recompiles. One CSV line each, sorted: checked into your repository, reviewed as
a diff (PyTorch's benchmarks/dynamo/ci_expected_accuracy, as a file of yours).

--update writes FILE from SWEEP. Without it, SWEEP is checked against FILE: each change
is listed as model, test, configuration, field, old -> new; a change for the worse (an
accuracy PASS that no longer passes, more graphs, graph breaks, recompiles, XLA
compilations or executions per step) is listed with the new breaks' reasons or guards
and makes the exit code 1; an improvement is listed with the command that updates the
file; a model, test or configuration on one side only is named.

SWEEP is anything `benchflow report` reads: a sweep folder, a results.jsonl, an MLflow
run id or experiment.
"""

EPILOG = """\
examples:
  benchflow -m model=llama,dlrm dynamo=none,inductor timing=false   # an accuracy sweep
  benchflow expected multirun/2026-12-02/10-00-00 expected/builtin.csv --update
  benchflow expected multirun/2026-12-02/11-00-00 expected/builtin.csv   # CI: the check

exit codes: 0 nothing got worse (the file's lines as the sweep's, or better), 1 a change
for the worse, 2 bad input (a missing or malformed file, a sweep with no rows, a file
of another suite).
"""


def parser() -> argparse.ArgumentParser:
    p = command_parser("expected", DESCRIPTION, EPILOG)
    p.add_argument("sweep", metavar="SWEEP", help="the sweep whose rows are checked, or written")
    p.add_argument("file", metavar="FILE", type=Path, help="the expected-results file (CSV)")
    p.add_argument("--update", action="store_true", help="write FILE from SWEEP's rows")
    p.add_argument(
        "--tracking-uri", help="MLflow store for run and experiment sources (default: ./mlflow.db)"
    )
    return p


def update_command(args: argparse.Namespace) -> str:
    """The command that writes FILE from this SWEEP, as the user would type it."""
    parts = ["benchflow", "expected", args.sweep, str(args.file), "--update"]
    if args.tracking_uri:
        parts += ["--tracking-uri", args.tracking_uri]
    return shlex.join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from benchflow.report.expected import (
        BETTER,
        OTHER,
        WORSE,
        ExpectedError,
        check,
        lines,
        read,
        to_csv,
    )
    from benchflow.report.sources import SourceError, load

    try:
        expected = None if args.update else read(args.file)  # first: a bad file costs no sweep
        sweep = load(args.sweep, args.tracking_uri)
        got = lines(sweep.rows)
        if not got:
            raise ExpectedError(
                f"{sweep.label}: no row of a job that ran (invalid combinations only); "
                "allowed: a sweep with at least one model that ran"
            )
        if args.update:
            args.file.parent.mkdir(parents=True, exist_ok=True)
            args.file.write_text(to_csv(got))
            print(f"wrote {args.file}: {len(got)} line(s) from {sweep.label}")
            return 0
        assert expected is not None
        checked = check(expected, got, str(args.file))
    except (SourceError, ExpectedError) as exc:
        return refuse("expected", exc)
    against = f"{sweep.label} against {args.file}"
    if checked.same:
        print(f"{against}: as expected ({len(got)} line(s))")
        return 0
    titles = {
        WORSE: "worse",
        BETTER: "better (update the file)",
        OTHER: "changed, neither worse nor better (update the file)",
    }
    for kind in (WORSE, BETTER, OTHER):
        if found := checked.of(kind):
            print(f"{titles[kind]}:")
            print("\n".join(f"  {c}" for c in found))
    for title, names in (
        (f"only in {args.file}", checked.only_in_file),
        (f"only in {sweep.label}", checked.only_in_sweep),
    ):
        if names:
            print(f"{title}: " + ", ".join(names))
    tally = ", ".join(f"{len(checked.of(k))} {k}" for k in (WORSE, BETTER, OTHER))
    print(f"{against}: {tally}")
    print(f"to take the sweep's lines as expected: {update_command(args)}")
    return 1 if checked.worse else 0
