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
import gc
import json
import os
import select
import shutil
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

AT_ONCE = 2  # children at once: this host's cores
# sys.argv[0] as `python -m benchflow` sets it (provenance records the command from it)
MAIN = str(Path(__file__).resolve().parents[1] / "src" / "benchflow" / "__main__.py")


def _child(run: dict[str, Any]) -> int:
    """In the forked child: the run, as `python -m benchflow ARGS` would do it."""
    code = _run(run)
    _at_exit()
    return code


def _forked(work: Callable[[], int]) -> int:
    """A child that runs `work` and exits with what it returns: the child's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = work()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _at_exit() -> None:
    """What the interpreter runs as it exits: threading's exit hooks (joblib's pool shuts
    its workers down there) and the wait for threads, then the atexit functions."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()


def _run(run: dict[str, Any]) -> int:
    """`python -m benchflow ARGS` in this process: its exit code."""
    os.chdir(str(run["cwd"]))
    for fd, path in ((1, run["out"]), (2, run["err"])):
        os.dup2(os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    return _main([str(a) for a in run["args"]])


def _main(args: list[str]) -> int:
    """benchflow's entry with `args`: its exit code, as the interpreter gives it."""
    from benchflow.__main__ import main

    sys.argv = [MAIN, *args]
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
    gc.collect()
    gc.freeze()  # (serve's reason)
    runs = json.loads(spec.read_text())
    codes: list[int | None] = [None] * len(runs)
    running: dict[int, int] = {}  # pid: index
    pending = list(enumerate(runs))
    while pending or running:
        while pending and len(running) < AT_ONCE:
            index, run = pending.pop(0)
            running[_forked(lambda run=run: _child(run))] = index
        pid, status = os.wait()
        codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    Path(f"{spec}.codes").write_text(json.dumps(codes))


# --- every run_cli forked from one warm interpreter (tests/conftest.py) ---------------
# What a sweep's command imports, lazily, as it runs: MLflow (about 2 CPU-seconds),
# matplotlib for the report's plots, scipy.stats for intervals. A run forked from here
# skips those imports and the interpreter's start: a one-job sweep with MLflow took 7.6
# CPU-seconds as `python -m benchflow` and 4.4 forked from here (2026-12-03).
PRELOAD = (
    "benchflow.__main__",
    "benchflow.cli.sweep",
    "benchflow.cli.rerun",
    "benchflow.sweep.run",
    "benchflow.sweep.record",
    "benchflow.sweep.rerun",
    "benchflow.tracking.recorded",
    "benchflow.sweep.steps",
    "benchflow.sweep.toolchains",
    "benchflow.runner.knobs",
    "benchflow.models.sharing",
    "benchflow.results.digest",
    "benchflow.suite.tolerance",
    "benchflow.tracking.mlflow_runs",
    "benchflow.report.output",
    "benchflow.report.plots",
    "benchflow.report.sources",
    "benchflow.report.terminal",
    "mlflow.tracking",
    "mlflow.store.tracking.sqlalchemy_store",
    "mlflow.store.tracking.sqlalchemy_workspace_store",
    "mlflow.utils.search_logged_model_utils",
    "alembic.command",
    "sqlalchemy.dialects.sqlite",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "PIL.Image",
    "scipy.stats",
)
# Variables an interpreter reads as it starts, or a preloaded module as it is imported: a
# run whose values differ (a planted sitecustomize on PYTHONPATH) starts an interpreter.
START_VARIABLES = ("PYTHON", "LD_", "MPL", "MALLOC")


def start_variables(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(START_VARIABLES)}


def serve(path: Path) -> None:
    """Accept runs on the Unix socket `path` (each a JSON line with the run's stdout and
    stderr as file descriptors), fork each, answer its pid, then its exit code and CPU
    seconds (its own and all it reaped). Ends when the process that started it does."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    sys.modules["PIL.Image"].init()  # its file formats, which a first savefig loads
    _warm(path.parent)
    # What is imported now is out of every later collection, here and in each run
    # forked from here: a full collection scans it all (0.18 CPU-s for about 350,000
    # objects), and a run's own collections otherwise did, as often as it allocated.
    gc.collect()
    gc.freeze()
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"{path}.new")
    listener.listen(64)
    os.replace(f"{path}.new", path)  # the path appears once a run can connect
    waiting: dict[int, socket.socket] = {}
    while os.getppid() == parent:
        if select.select([listener], [], [], 0.05)[0]:
            conn, _ = listener.accept()
            waiting[_fork(conn, listener, waiting)] = conn
        while waiting:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not pid:
                break
            if conn := waiting.pop(pid, None):
                code, cpu_s = os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
                done = {"code": code, "cpu_s": cpu_s}
                conn.sendall(json.dumps(done).encode() + b"\n")
                conn.close()
    shutil.rmtree(path.parent, ignore_errors=True)  # its folder: the socket and its log


def _fork(conn: socket.socket, listener: socket.socket, others: dict[int, socket.socket]) -> int:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
    while not data.endswith(b"\n"):
        data += conn.recv(1 << 20)
    run = json.loads(data)

    def work() -> int:
        for sock in (listener, conn, *others.values()):
            sock.close()
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        return _served(run)

    pid = _forked(work)
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    return pid


def _served(run: dict[str, Any]) -> int:
    """In the forked child: the run, in its folder, with its variables and priority."""
    os.environ.clear()
    os.environ.update(run["env"])
    if run["nice"]:
        os.nice(run["nice"])
    os.chdir(run["cwd"])
    sys.path[0] = run["cwd"]  # what `python -m` puts first: its working folder
    code = _main(run["args"])
    _at_exit()
    return code


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(Path(sys.argv[2]))
    else:
        run_all(Path(sys.argv[1]))
