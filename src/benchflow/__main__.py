"""`benchflow` (or `python -m benchflow`): the sweep, or one of the commands beside it.

`benchflow [-m] key=value ...` runs a sweep (benchflow.cli.sweep); `benchflow NAME ...`
runs the command NAME, each a module with main(argv) -> exit code. Nothing heavy is
imported here.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from benchflow.cli import COMMANDS, exit_refused


def main() -> None:
    import importlib

    first = sys.argv[1] if len(sys.argv) > 1 else ""
    if first in COMMANDS:
        command = importlib.import_module(COMMANDS[first][0])
        raise SystemExit(command.main(sys.argv[2:]))
    if first and "=" not in first and not first.startswith(("-", "+", "~")):
        # Neither a command nor an override: Hydra would say only "missing EQUAL".
        import difflib

        close = difflib.get_close_matches(first, COMMANDS, n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        exit_refused(
            f"no command {first!r}; {hint}allowed commands: "
            f"{', '.join(COMMANDS)}, or key=value overrides for a run (see --help)"
        )
    from benchflow.cli.sweep import main as sweep

    raise SystemExit(sweep(sys.argv[1:]))


def run() -> NoReturn:
    """The `benchflow` process: `main()`, then its exit without the interpreter's teardown
    of every module it imported (0.5 s after a sweep, 1.5 s with MLflow's, on a 2-core VM).
    What is registered to run at exit (MLflow's and logging's flushes) runs first. Where a
    thread of a library is still running (a launcher's pool), the exit is the
    interpreter's own, which stops such threads through hooks of their own first."""
    import atexit
    import os
    import threading

    try:
        main()
        code = 0
    except SystemExit as exc:
        if not isinstance(exc.code, int | None):
            raise
        code = exc.code or 0
    if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        raise SystemExit(code)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
