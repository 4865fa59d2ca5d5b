"""A test module's own sweeps, started with the first test of the session.

A module registers a function with ``@early(name)``: ``fn(cwd)`` runs its sweeps (real
CLI runs) and returns what its tests read. Each starts in a thread with the first test
when a selected test of that module uses the ``early_sweeps`` fixture (conftest.py),
runs in the background meanwhile, and ``early_sweeps.result(name)`` waits for it.

Its own module, so that the registry is one object: pytest loads conftest.py as
``conftest``, while test modules import it as ``tests.conftest``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

_EARLY: dict[str, tuple[Callable[[Path], Any], bool]] = {}

# Most early runs yield the CPU to the session's critical lanes: the two session sweeps
# (the cases, one job after another, and the grid, with its Inductor compiles: the
# longest), the tests that run in order, and the early runs whose signal must land at
# a point of a job. They fill the cores those leave idle.
# A sweep whose times are compared with each other's is not niced: a niced job is
# preempted whenever a lane wants its core, and its times spread.
BACKGROUND_NICE = 10
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
    return fn(root)


def early(
    name: str, niced: bool = True
) -> Callable[[Callable[[Path], Any]], Callable[[Path], Any]]:
    def register(fn: Callable[[Path], Any]) -> Callable[[Path], Any]:
        _EARLY[name] = (fn, niced)
        return fn

    return register


class EarlySweeps:
    """The early sweeps of the selected modules, each running in its own thread."""

    def __init__(self, modules: set[str], mktemp: Callable[[str], Path]) -> None:
        # By the module's own name: pytest imports a test file as `test_x`, and another
        # test file that imports from it makes a second copy, `tests.test_x`, whose
        # registration of the same early run may be the one kept.
        selected = {m.rpartition(".")[2] for m in modules}
        wanted = {n: e for n, e in _EARLY.items() if e[0].__module__.rpartition(".")[2] in selected}
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(wanted)))
        env = dict(os.environ)  # with the first test: no test has set anything yet
        self._futures: dict[str, Future[Any]] = {
            n: self._pool.submit(_run, fn, mktemp(n), niced, env)
            for n, (fn, niced) in wanted.items()
        }

    def result(self, name: str, timeout: float = 1200) -> Any:
        return self._futures[name].result(timeout=timeout)
