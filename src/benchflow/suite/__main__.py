"""`python -m benchflow.suite sync PATH [--out FILE]`: regenerate the torchbench.yaml mirror."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchflow.config.store import CONF_DIR
from benchflow.suite.mirror import sync


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchflow.suite",
        description="Mirror PyTorch's benchmarks/dynamo/torchbench.yaml into conf/suite/.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("sync", help="regenerate the mirror from an upstream torchbench.yaml")
    p.add_argument("path", type=Path, help="upstream torchbench.yaml (PyTorch's pin)")
    p.add_argument("--out", type=Path, default=CONF_DIR / "suite" / "torchbench.yaml")
    args = parser.parse_args(argv)
    if not args.path.is_file():
        parser.error(f"path={args.path} is not a file; give the upstream torchbench.yaml")
    unknown = sync(args.path, args.out)
    print(f"wrote {args.out}")
    for key in unknown:
        print(f"kept, not applied by benchflow: {key}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
