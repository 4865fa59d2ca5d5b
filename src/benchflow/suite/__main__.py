"""`python -m benchflow.suite sync PATH [--suite NAME] [--models-list FILE] [--out FILE]`:
regenerate a suite's mirror (suite/mirrors/<suite>.yaml) from PyTorch's benchmarks/dynamo."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchflow.suite.mirror import sync
from benchflow.suite.suites import SUITES, by_upstream


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchflow.suite",
        description="Mirror a suite file of PyTorch's benchmarks/dynamo into benchflow.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("sync", help="regenerate a mirror from its upstream file")
    upstreams = ", ".join(s.upstream for s in SUITES.values())
    p.add_argument("path", type=Path, help=f"the upstream file ({upstreams})")
    p.add_argument(
        "--suite", choices=sorted(SUITES), help="which suite PATH is (default: by its name)"
    )
    p.add_argument(
        "--models-list",
        type=Path,
        help="the suite's models list (default: the file of that name beside PATH)",
    )
    p.add_argument(
        "--out", type=Path, help="the mirror (default: benchflow/suite/mirrors/<suite>.yaml)"
    )
    args = parser.parse_args(argv)
    if not args.path.is_file():
        parser.error(f"path={args.path} is not a file; give the upstream {upstreams}")
    suite = SUITES[args.suite] if args.suite else by_upstream(args.path)
    if suite is None:
        parser.error(
            f"path={args.path}: its name is no suite's upstream file; allowed names: "
            f"{upstreams}, or say which with --suite ({', '.join(sorted(SUITES))})"
        )
    models_list = None
    if suite.models_list:
        models_list = args.models_list or args.path.parent / suite.models_list
        if not models_list.is_file():
            parser.error(
                f"--models-list={models_list} is not a file; suite {suite.name} needs "
                f"PyTorch's {suite.models_list}"
            )
    out = args.out or suite.mirror
    unknown = sync(args.path, out, suite, models_list)
    print(f"wrote {out}")
    for key in unknown:
        print(f"kept, not applied by benchflow: {key}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
