"""`benchflow sync SWEEP_DIR`: upload to MLflow what a sweep could not log."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchflow.cli import refuse
from benchflow.core.layout import SweepDir
from benchflow.tracking.sync import sync


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchflow sync",
        description="Upload to MLflow what a sweep could not log (its results are on disk). "
        "Idempotent: jobs whose run is complete are left alone.",
    )
    p.add_argument("sweep_dir", type=Path, help="the sweep folder (multirun/<date>/<time>)")
    p.add_argument("--tracking-uri", help="the store (default: the one the sweep used)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not SweepDir(args.sweep_dir).results.exists():
        return refuse("sync", f"{args.sweep_dir} has no results.jsonl")
    try:
        counts = sync(args.sweep_dir, args.tracking_uri)
    except Exception as exc:  # the server is still down, or the store is wrong
        print(f"benchflow sync: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(
        f"benchflow sync: {counts['logged']} job run(s) logged, "
        f"{counts['complete']} already complete"
    )
    return 0
