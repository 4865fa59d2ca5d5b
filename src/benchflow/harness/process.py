"""The job's process, set up alike wherever its model is built: the RNGs seeded, the
host allocator made steady, and the memory limit. The child (child.py) and a model's
zygote (prebuilt.py) both call these before they build a model. And the child's tie
to the process that started it (die_with_parent)."""

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


def steady_host_allocator() -> bool:
    """Make the host's malloc reuse freed memory instead of handing it back each step.

    torch's CPU allocator asks glibc's malloc for every tensor. By default glibc maps a
    block of 128 KiB or more anew (mmap) and unmaps it when freed, and gives back
    (trims) free memory above the heap's top; it raises both thresholds only after the
    process frees such a block, so whether a step's temporaries page-fault on every
    call depends on what the process allocated before. Measured on a 2-core VM: llama
    eval 106 ms/iter with 21k page faults a step, 88 ms with none;
    pyhpc_isoneutral_mixing on Inductor 431-448 ms against 367-375 ms. Fixed thresholds
    (blocks under 32 MiB come from the heap, which keeps up to 1 GiB free) give every
    job the steady state; blocks of 32 MiB or more are still mapped per use. Returns
    False where the C library has no mallopt (not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def limit_memory(gb: float) -> None:
    """memory_limit_gb: RLIMIT_DATA caps the heap and every private anonymous mapping
    (Linux >= 4.7), which is where tensors live; compile workers inherit it."""
    limit = int(gb * 1024**3)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    log.info("memory limit: %.2f GiB of data (RLIMIT_DATA)", gb)


# Threads a process may hold and still fork jobs: allocator background threads of a
# library that registers its own fork handlers. jemalloc's (pyarrow bundles a jemalloc
# that starts one when pyarrow loads; scikit-learn loads pyarrow, and TorchBench's dlrm
# imports scikit-learn): jemalloc takes its locks around the fork and, in the child,
# sets its background threads to disabled (background_thread_postfork_child), so the
# child allocates without one. Any other thread may hold a lock the child then waits
# for forever (GNU OpenMP's pool, a PJRT client, compile workers).
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def threads_unsafe_to_fork() -> int:
    """This process's threads (Linux), but those of FORK_SAFE_THREADS' names."""
    return len(unsafe_threads())


def unsafe_threads() -> dict[int, str]:
    """This process's threads but those of FORK_SAFE_THREADS' names: each one's name by
    its id, Python's name for a Python thread, the kernel's (comm) for one a library
    started."""
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
# In a forked job: the machine checks its zygote ran, as JSON (runner/zygote.py _CHECKS)
ENV_MACHINE_CHECKS = "BENCHFLOW_MACHINE_CHECKS"
PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies


def die_with_parent() -> None:
    """SIGKILL this process when the process that waits for it dies (Linux's parent-death
    signal), and exit now if that has happened already. A job's child runs in a session
    of its own (so that a timeout kills its whole group), so nothing else ends it when
    its waiter is SIGKILLed (a sweep killed mid-job, a worker node lost): a hanging job
    would run forever. Its compile workers are its children, in its group."""
    expected = os.environ.get(ENV_PARENT)
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return  # not Linux: the parent's own timeout is the only limit
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if expected and os.getppid() != int(expected):
        os._exit(1)  # its waiter died before the signal was set: no one waits for it
