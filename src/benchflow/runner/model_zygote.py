"""share_build (on by default): a model's own zygote, forked from the zygote its jobs
need (their kind's, or the union of their kinds': sweep/builds.py), that builds the
model once (benchflow.harness.prebuilt) and forks the jobs of its build key
(benchflow.models.sharing), each finishing its own copy.

A process that runs jobs keeps each model's zygote once built, so that a model whose
jobs come again (a sweep's later rounds: sweep/rounds.py) is built once per sweep: the
sweep closes it after the last job that forks from it (``done_with``), and where free
memory falls under a quarter of the machine's, the least recently used are closed
before another is built. With build_ahead, the next model's zygote is started while
the jobs before it run (``ahead``): it builds beside them, and every one of them stops
it over its exclusive regions (results/regions.py) (harness/hold.py). A build that
fails, outlives the job's timeout_s or leaves a thread running is not shared: the
zygote says why and exits, and the jobs of that build fork from the zygote it was
forked from and build their own, reporting what happens as their own.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import shutil
from pathlib import Path
from typing import Any

import psutil

from benchflow.core.cpus import ENV_CPUS
from benchflow.harness.hold import normal_priority, register, release, unregister
from benchflow.runner.zygote import Zygote, ZygoteError, shared

log = logging.getLogger(__name__)

# (kind, build key) -> the zygote that built that model, least recently used first
_built: dict[tuple[str, str], Zygote] = {}
MIN_FREE = 0.25  # of the machine's memory: under it, the least recently used are closed
_not_buildable: set[tuple[str, str]] = set()  # (kind, key) whose zygote could not build
# build_ahead: (kind, key) -> the zygote building that model beside the jobs, and its log
_ahead: dict[tuple[str, str], tuple[Zygote, str]] = {}


def build_request(key: str, job_file: Path, env: dict[str, str], log: Path) -> dict[str, Any]:
    """The request that makes a model's zygote build the model of `key` from the job file
    `job_file` in `env` and this process's folder, its output to `log`
    (runner/zygote.py's protocol)."""
    return {"key": key, "job": str(job_file), "env": env, "cwd": str(Path.cwd()), "log": str(log)}


def _start(kind: str, build: dict[str, Any]) -> Zygote:
    cores = [int(c) for c in build["env"].get(ENV_CPUS, "").split(",") if c]
    zygote = Zygote(kind, cores, base=shared(kind, cores), build=build)
    atexit.register(_let_go, zygote)
    return zygote


def _let_go(zygote: Zygote) -> None:
    release(zygote.pid)  # a job that died holding it left it stopped
    zygote.close()


def holding(kind: str | None, key: str) -> bool:
    """This process holds the built model of `key` (from the `kind` zygote) for its jobs."""
    return kind is not None and (kind, key) in _built


def wanted(kind: str, key: str) -> bool:
    """The model of `key` (from the `kind` zygote) is neither built nor being built."""
    return (kind, key) not in _ahead and (kind, key) not in _built


def done_with(kind: str, key: str) -> None:
    """No later job of this process forks from the model of `key`: its zygote goes."""
    if (zygote := _built.pop((kind, key), None)) is not None:
        log.info("no later job forks from the built model (pid %d): it goes", zygote.pid)
        _let_go(zygote)


def _make_room() -> None:
    """Before a build: the least recently used models go while memory is short."""
    while _built and psutil.virtual_memory().available < MIN_FREE * psutil.virtual_memory().total:
        zygote = _built.pop(next(iter(_built)))
        log.info("memory is short: the least recently used built model (pid %d) goes", zygote.pid)
        _let_go(zygote)


def ahead(kind: str, build: dict[str, Any]) -> None:
    """Start building the model of `build` now, in its zygote, beside the jobs that run
    before its own (registered as work they hold over their exclusive regions:
    harness/hold.py); `for_build` takes it when its first job comes."""
    key = (kind, build["key"])
    if not wanted(*key) or key in _not_buildable:
        return
    try:
        zygote = _start(kind, build | {"beside": True})
        # Registered here, before the next job starts (the build unregisters itself when
        # it is done), so that every job holds it from that job's start.
        register(zygote.pid)
        _ahead[key] = (zygote, build["log"])
    except (ZygoteError, OSError, psutil.Error) as exc:
        log.warning("could not start building a model ahead of its jobs (%s)", exc)


def release_ahead() -> None:
    """After a job's process: let every build ahead run on unless another job holds it
    (a job that died mid-hold left it stopped)."""
    for zygote, _ in _ahead.values():
        release(zygote.pid)


def for_build(kind: str, build: dict[str, Any], timeout_s: float) -> Zygote | None:
    """This process's zygote that built the model of `build` (its ``key``) from its
    `kind` zygote: kept from an earlier job, taken from those built ahead, or started now;
    None where it cannot build it (the job then forks from the `kind` zygote and builds
    its own)."""
    wanted = (kind, build["key"])
    zygote = _built.pop(wanted, None)
    if zygote is not None and zygote.alive():
        _built[wanted] = zygote  # the most recently used now
        return zygote
    if zygote is not None:
        _let_go(zygote)
    if wanted in _not_buildable:
        return None
    _make_room()
    zygote, log_path = _ahead.pop(wanted, (None, None))
    if zygote is not None:  # its job waits for it now: no longer on idle cores only
        with contextlib.suppress(OSError):
            normal_priority(zygote.pid)
        release(zygote.pid)
    try:
        if zygote is None:
            zygote = _start(kind, build)
        zygote.wait_ready(timeout_s)
        unregister(zygote.pid)  # (done: it unregistered itself, unless it was quicker)
        if log_path:  # the build's output, in its first job's folder as without ahead
            shutil.copyfile(log_path, build["log"])
    except (ZygoteError, OSError) as exc:
        log.warning("no shared build for this model (%s): its jobs build their own", exc)
        _not_buildable.add(wanted)
        if zygote is not None:
            _let_go(zygote)
        return None
    log.info("model built once for its jobs in %.2f s (pid %d)", zygote.build_s, zygote.pid)
    _built[wanted] = zygote
    return zygote
