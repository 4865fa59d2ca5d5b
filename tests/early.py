"""A test module's own sweeps, started with the first test of the session.

A module registers a function with ``@early(name)``: ``fn(cwd)`` runs its sweeps (real
CLI runs) and returns what its tests read. Each runs in a thread of a pool started
with the first test when a selected test of that module uses the ``early_sweeps``
fixture (conftest.py), AT_ONCE of them at a time, the long ones first, in the
background meanwhile; ``early_sweeps.result(name)`` waits for it.

Its own module, so that the registry is one object: pytest loads conftest.py as
``conftest``, while test modules import it as ``tests.conftest``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple


class _Early(NamedTuple):
    fn: Callable[[Path], Any]
    niced: bool
    long: bool  # a chain of runs outlasting the others': started ahead of them


_EARLY: dict[str, _Early] = {}

# Where the suite's time goes: with BENCHFLOW_TEST_CPU_LOG=FILE, each CLI run a test
# waits for appends a JSON line (its arguments, wall seconds, and the CPU seconds of it
# and every process it reaped: its jobs, zygotes, servers), each test its start, each
# early run its start and end, and the session its end with the test process's own CPU
# and all it reaped (conftest.py).
CPU_LOG = os.environ.get("BENCHFLOW_TEST_CPU_LOG")


def log_cpu(line: dict[str, Any]) -> None:
    """One line of the CPU log (none without BENCHFLOW_TEST_CPU_LOG)."""
    if CPU_LOG:
        with open(CPU_LOG, "a") as f:
            f.write(json.dumps(line) + "\n")


# Most early runs yield the CPU to the session's critical lanes: the two session sweeps
# (the cases, one job after another, and the grid, with its Inductor compiles: the
# longest), the tests that run in order, and the early runs whose signal must land at
# a point of a job. They fill the cores those leave idle.
# A sweep whose times are compared with each other's is not niced: a niced job is
# preempted whenever a lane wants its core, and its times spread.
BACKGROUND_NICE = 10
# Early runs at once (the others wait their turn, long ones first). With every one at
# once, the tests that run in order got about a fifth of a core while they did, ended
# last, and the other core idled behind them; see docs/tests.md.
AT_ONCE = int(os.environ.get("EARLY_AT_ONCE", "4"))
_thread = threading.local()

# The session sweeps' runs (conftest.py: _session_sweeps), by name, once started: an
# early run may start something beside one of them (the UI over the grid's store).
SESSION_RUNS: dict[str, Any] = {}


@contextlib.contextmanager
def niced() -> Iterator[None]:
    """Within an early run that started un-niced (a signal had to land at a point), the
    runs after that part yield the CPU like the others."""
    before = getattr(_thread, "background", False)
    _thread.background = True
    try:
        yield
    finally:
        _thread.background = before


def in_background() -> bool:
    """True in a niced early sweep's thread: the CLI processes it starts run niced."""
    return bool(getattr(_thread, "background", False))


def environ() -> Mapping[str, str]:
    """The environment a test's subprocess starts from: in an early run's thread, the
    session's as it was when the early runs started; elsewhere os.environ. A test that
    sets a variable with monkeypatch sets it for every thread of the process, so an
    early run starting a sweep meanwhile took it too (once a planted sitecustomize on
    PYTHONPATH: a zygote refused to fork and the jobs lost the repository root)."""
    return getattr(_thread, "env", None) or os.environ


def _run(fn: Callable[[Path], Any], root: Path, niced: bool, env: dict[str, str]) -> Any:
    _thread.background = niced
    _thread.env = env
    started = time.time()
    try:
        return fn(root)
    finally:
        log_cpu({"early": root.name, "start": started, "end": time.time()})


def early(
    name: str, niced: bool = True, long: bool = False
) -> Callable[[Callable[[Path], Any]], Callable[[Path], Any]]:
    """Register `fn` as the early run `name`; `long`: a chain of runs that one after
    another outlast the others', started ahead of them."""

    def register(fn: Callable[[Path], Any]) -> Callable[[Path], Any]:
        _EARLY[name] = _Early(fn, niced, long)
        return fn

    return register


def nice_prefix(background: bool | None = None) -> list[str]:
    """The prefix of a command run in the background (by default: from a niced early
    run's thread), `nice -n BACKGROUND_NICE`; none otherwise."""
    on = in_background() if background is None else background
    return ["nice", "-n", str(BACKGROUND_NICE)] if on else []


def python_c(
    code: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`python -c code args` in an early run's thread, niced as its CLI runs are, from
    the session's environment (`env` adds to it); its output captured as text."""
    return subprocess.run(
        [*nice_prefix(), sys.executable, "-c", code, *args],
        env={**environ(), **(env or {})}, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


class EarlySweeps:
    """The early sweeps of the selected modules, each running in its own thread."""

    def __init__(self, modules: set[str], mktemp: Callable[[str], Path]) -> None:
        # By the module's own name: pytest imports a test file as `test_x`, and another
        # test file that imports from it makes a second copy, `tests.test_x`, whose
        # registration of the same early run may be the one kept.
        selected = {m.rpartition(".")[2] for m in modules}
        wanted = {n: e for n, e in _EARLY.items() if e.fn.__module__.rpartition(".")[2] in selected}
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(AT_ONCE, len(wanted))))
        env = dict(os.environ)  # with the first test: no test has set anything yet
        in_order = sorted(wanted.items(), key=lambda item: not item[1].long)  # long ones first
        self._futures: dict[str, Future[Any]] = {
            n: self._pool.submit(_run, fn, mktemp(n), niced, env) for n, (fn, niced, _) in in_order
        }

    def result(self, name: str, timeout: float = 1200) -> Any:
        return self._futures[name].result(timeout=timeout)
