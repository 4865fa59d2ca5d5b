"""Commands beside the sweep (`benchflow <command>`), each a module with main(argv).

The top layer: a command may import any stage; no stage imports a command.
"""

import argparse
import sys
from typing import NoReturn

# `benchflow <name> ...`: each command's module and what it does (--help lists them).
COMMANDS = {
    "models": ("benchflow.cli.models", "which models can run on this machine"),
    "report": ("benchflow.cli.report", "tables, plots and the regression gate (--compare BASE)"),
    "expected": ("benchflow.cli.expected", "accuracy and graph breaks against a file (--update)"),
    "ui": ("benchflow.cli.ui", "the MLflow UI over the runs' store, on 127.0.0.1:5000"),
    "sync": ("benchflow.cli.sync", "upload to MLflow what a sweep could not log"),
    "rerun": ("benchflow.cli.rerun", "run recorded jobs again, from their records"),
    "history": ("benchflow.cli.history", "the same jobs over many sweeps: change points"),
    "bisect": ("benchflow.cli.bisect", "the first release between two toolchains that regressed"),
}


def command_parser(name: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """`benchflow NAME`'s parser, its description and epilog printed as written."""
    return argparse.ArgumentParser(
        prog=f"benchflow {name}",
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def refuse(name: str, message: object) -> int:
    """Bad input to `benchflow NAME`, said as argparse says it; its exit code, 2."""
    print(f"benchflow {name}: error: {message}", file=sys.stderr)
    return 2


def exit_refused(message: str, *more: str) -> NoReturn:
    """Bad input said as `benchflow: error: ...` (the sweep's command and Hydra's sweeper,
    `benchflow models`, a command that does not exist): the message and any lines after
    it, nothing run, exit 2."""
    print(f"benchflow: error: {message}", *more, sep="\n", file=sys.stderr)
    raise SystemExit(2)
