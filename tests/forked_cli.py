"""Many `python -m benchflow ARGS` runs from one interpreter (tests/conftest.py:
run_cli_forked). It imports benchflow's command line once, then forks a child for each
run, which runs the entry point `python -m benchflow` runs (benchflow.__main__.main) in
its own working directory, with its own argv, stdout and stderr, and exits with its
code. Each run's state is its own, as in a process of its own, without each paying an
interpreter's start and the imports again: the 64 bad-input runs took 73 CPU-seconds
as 64 interpreters and 58 forked (2026-12-02; most of the rest is Hydra composing). One
refusal runs in the parent first, so that what Hydra does once a process (finding its
plugins, building the override grammar's parser) is inherited: ten refusals took 5.3
CPU-seconds forked from a cold parent and 2.7-3.3 from a warmed one.

`python tests/forked_cli.py SPEC`: SPEC is a JSON list of {"args", "cwd", "out", "err"};
the codes are written to SPEC + ".codes", in its order.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import traceback
from pathlib import Path

AT_ONCE = 2  # children at once: this host's cores


def _child(run: dict[str, object]) -> int:
    """In the forked child: the run, as `python -m benchflow ARGS` would do it."""
    code = _run(run)
    atexit._run_exitfuncs()
    return code


def _run(run: dict[str, object]) -> int:
    """`python -m benchflow ARGS` in this process: its exit code."""
    from benchflow.__main__ import main

    os.chdir(str(run["cwd"]))
    for fd, path in ((1, run["out"]), (2, run["err"])):
        os.dup2(os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    sys.argv = ["benchflow", *map(str, run["args"])]  # type: ignore[call-overload]
    try:
        main()
        code = 0
    except SystemExit as exc:  # as the interpreter treats it at its exit
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    return code


def _warm(cwd: Path) -> None:
    """One refusal in this process (its output dropped), then Hydra's global state cleared."""
    from hydra.core.global_hydra import GlobalHydra

    sys.stdout.flush()
    sys.stderr.flush()
    kept, here = (os.dup(1), os.dup(2)), os.getcwd()
    try:
        _run({"args": ["repeat=0"], "cwd": cwd, "out": os.devnull, "err": os.devnull})
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), kept, strict=True):
            os.dup2(saved, fd)
            os.close(saved)
        os.chdir(here)
    GlobalHydra.instance().clear()


def run_all(spec: Path) -> None:
    import benchflow.__main__  # the entry and what it imports, once
    import benchflow.cli.sweep  # noqa: F401  (the sweep's: Hydra, OmegaConf, the schema)

    _warm(spec.parent)
    runs = json.loads(spec.read_text())
    codes: list[int | None] = [None] * len(runs)
    running: dict[int, int] = {}  # pid: index
    pending = list(enumerate(runs))
    while pending or running:
        while pending and len(running) < AT_ONCE:
            index, run = pending.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = _child(run)
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            running[pid] = index
        pid, status = os.wait()
        codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    Path(f"{spec}.codes").write_text(json.dumps(codes))


if __name__ == "__main__":
    run_all(Path(sys.argv[1]))
