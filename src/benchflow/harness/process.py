"""The job's process, set up alike wherever its model is built (child.py, prebuilt.py):
the RNGs seeded, the host allocator made steady, the memory limit; the child's tie to
the process that waits for it (die_with_parent); and what it leaves as it ends."""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import signal

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# glibc's mallopt parameters (malloc.h) and the values a job's child sets.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 * 1024**2  # glibc's own ceiling for it on 64-bit
TRIM_THRESHOLD = 1024**3


def set_host_allocator(setting: str) -> bool:
    """`host_allocator`: steady: make the host's malloc reuse freed memory instead of handing
    it back each step; glibc: leave glibc's thresholds to the process's history.

    glibc raises its thresholds only after a large free, so a step's page faults would depend on
    what ran before (docs/timing.md). False where steady has no mallopt (not glibc)."""
    if setting != "steady":
        return True
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def limit_memory(gb: float) -> None:
    """memory_limit_gb: RLIMIT_DATA caps the heap and private mappings, where tensors live."""
    limit = int(gb * 1024**3)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    log.info("memory limit: %.2f GiB of data (RLIMIT_DATA)", gb)


# Threads a process may hold and still fork: jemalloc's (pyarrow's) handles the fork itself.
# Any other thread may hold a lock the child then waits for forever.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def threads_unsafe_to_fork() -> int:
    """This process's threads (Linux), but those of FORK_SAFE_THREADS' names."""
    return len(unsafe_threads())


def unsafe_threads() -> dict[int, str]:
    """This process's threads but FORK_SAFE_THREADS, each one's name by its id."""
    import threading

    python = {t.native_id: t.name for t in threading.enumerate()}
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:  # it ended meanwhile
            continue
        if comm not in FORK_SAFE_THREADS:
            found[int(tid)] = python.get(int(tid), comm)
    return found


ENV_PARENT = "BENCHFLOW_PARENT_PID"  # the process that waits for this job's child
ENV_MACHINE_CHECKS = "BENCHFLOW_MACHINE_CHECKS"
PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies


def die_with_parent() -> None:
    """SIGKILL this process when its waiter dies (exit now if it has): in a session of its
    own, nothing else would end a hanging job."""
    expected = os.environ.get(ENV_PARENT)
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return  # not Linux: the parent's own timeout is the only limit
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if expected and os.getppid() != int(expected):
        os._exit(1)  # its waiter died before the signal was set: no one waits for it


# The module whose import makes a temporary folder that only an atexit of torch's removes.
TORCH_SCRATCH = "torch.distributed.nn.jit.instantiator"


def remove_torch_scratch() -> None:
    """Before an os._exit (a job's child, a zygote: no interpreter teardown): the temporary
    folder torch.distributed.nn makes as the compile stack imports it, which only an atexit
    of torch's removes (every sweep left one in TMPDIR, and every spawned compiled job)."""
    import shutil
    import sys

    made = sys.modules.get(TORCH_SCRATCH)
    if made is not None:
        shutil.rmtree(made.INSTANTIATED_TEMPLATE_DIR_PATH, ignore_errors=True)
