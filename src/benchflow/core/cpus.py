"""CPU slots: jobs that run at once on one host never time on the same cores.

This process's CPUs are cut into slots of ``cpus_per_job`` cores (``null``: one slot of
all). Before its child starts, a job takes a free slot with an ``flock`` on one lock
file per core in a host-wide folder (``$BENCHFLOW_CPU_LOCK_DIR``), waiting where none
is free, and its child is pinned to those cores; the kernel drops a dead holder's lock.
Hydra's launchers limit how many jobs run, not which cores they use: hence this module
(docs/launchers.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from benchflow.core.files import read_text

ENV_LOCK_DIR = "BENCHFLOW_CPU_LOCK_DIR"
ENV_CPUS = "BENCHFLOW_CPUS"  # the child's cores, "0,1": it pins itself before importing torch
POLL_S = 0.2


def available() -> list[int]:
    """The cores this process may run on."""
    return sorted(os.sched_getaffinity(0))


def slots(cpus_per_job: int | None, cores: list[int] | None = None) -> list[list[int]]:
    """Disjoint runs of `cpus_per_job` cores (the remainder is left idle)."""
    cores = available() if cores is None else cores
    n = cpus_per_job or len(cores)
    if n > len(cores):
        raise ValueError(
            f"cpus_per_job={n}, but this host gives benchflow {len(cores)} CPUs "
            f"({span(cores)}); allowed: 1..{len(cores)} or null (all of them)"
        )
    return [cores[i : i + n] for i in range(0, len(cores) - n + 1, n)]


def span(cores: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    parts: list[str] = []
    # a run of consecutive cores keeps core - index constant
    for _, group in itertools.groupby(enumerate(cores), lambda pair: pair[1] - pair[0]):
        run = [c for _, c in group]
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
    return ",".join(parts)


def lock_dir() -> Path:
    default = Path(tempfile.gettempdir()) / f"benchflow-cpus-{os.getuid()}"
    return Path(os.environ.get(ENV_LOCK_DIR) or default)


def _try_lock(folder: Path, names: list[str], owner: str) -> list[int] | None:
    """All of the lock files `names` or none: one per core, so slots of any size exclude
    each other."""
    fds: list[int] = []
    for name in names:
        fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            _release(fds)
            return None
        fds.append(fd)
    for fd in fds:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {owner}\n".encode(), 0)
    return fds


def _release(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def first_free(
    choices: list[list[str]],
    owner: str,
    waiting: str,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[int]:
    """Hold the first free one of `choices` (lock names, all or none) for the block,
    waiting for one; yields its index. `on_wait` is told once: `waiting`, who holds them."""
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    told = False
    while True:
        for index, names in enumerate(choices):
            fds = _try_lock(folder, names, owner)
            if fds is None:
                continue
            try:
                yield index
            finally:
                _release(fds)
            return
        if not told and on_wait is not None:
            names = sorted({n for choice in choices for n in choice})
            holders = sorted({read_text(folder / f"{n}.lock") or "another process" for n in names})
            on_wait(f"{waiting}: " + "; ".join(holders))
            told = True
        time.sleep(POLL_S)


@contextlib.contextmanager
def cpu_slot(
    cpus_per_job: int | None,
    owner: str,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[list[int]]:
    """Hold a free slot for the block (waiting for one if needed); yields its cores."""
    choices = slots(cpus_per_job)
    waiting = f"waiting for a free CPU slot (cpus_per_job={cpus_per_job})"
    locks = [[f"cpu{c}" for c in cores] for cores in choices]
    with first_free(locks, owner, waiting, on_wait) as index:
        yield choices[index]


def child_env(cores: list[int], num_threads: int | None) -> dict[str, str]:
    """Environment for a job's child: its cores, and thread pools sized to them (a
    launcher's worker may carry its own limits, such as Ray's OMP_NUM_THREADS=1)."""
    threads = str(num_threads or len(cores))
    return {
        ENV_CPUS: ",".join(map(str, cores)),
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }


def pin_self() -> list[int] | None:
    """In the child, before torch is imported: run on the cores the job was given."""
    value = os.environ.get(ENV_CPUS)
    if not value:
        return None
    cores = [int(c) for c in value.split(",")]
    os.sched_setaffinity(0, cores)
    return cores
