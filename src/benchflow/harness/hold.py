"""Work that runs beside a job, and the job's hold on it: no such work runs while a job
compiles or times.

The one kind of such work today is a model's shared build made ahead of its jobs
(runner/pool.py, ``build_ahead``): it runs while the sweep's jobs before it
build, move or verify, and is stopped whenever one of them is in an exclusive region
(results/regions.py, their one definition): its cold first call (``compile``), its
warm-up steps (``warmup``: they may still compile, and an adaptive warm-up's stop rule
reads step times), its calibration and timed repeats (``timed``, with the host's
reference steps around them) and the profiler's passes (``profile``). Each region's
clocks are in the row's ``timing.spans``. Outside those it runs under
SCHED_IDLE (``lowest_priority``): only on a core the job leaves idle.

Each such process is registered in a host-wide folder (next to the CPU slots' locks:
core/cpus.py), one file per process, named by its pid and holding its start time, so
that a reused pid is never stopped by mistake. A job's child holds every registered
process for each exclusive region: it takes a shared ``flock`` on the process's file,
sends SIGSTOP, and waits until the kernel reports the process stopped; the region
starts after that. On leaving, it tries to turn its shared lock exclusive, without
waiting, and sends SIGCONT only if that succeeds, that is when no other job (of this
sweep or another on the host) still holds the process; it does so through its lock's
own descriptor, so a process that unregistered meanwhile is let go all the same. A
holder that dies drops its lock with it; the parent that started the work releases it
after every job (``release``).

The child records each hold in its row (``timing.held``): which region, when it began
and ended (CLOCK_MONOTONIC, the clock of every process on the host), the processes
held, and the CPU time they used meanwhile by the kernel's count (0 when the hold
worked). results/overlap.py checks a sweep's rows with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import resource
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from benchflow.core.cpus import lock_dir

log = logging.getLogger(__name__)

# The longest a hold waits for the kernel to report a stop. A process takes SIGSTOP
# when it next runs, and the work beside a job runs under SCHED_IDLE: on a busy host it
# may not run for seconds (the suite saw one 2 s wait run out with no CPU used).
STOPPED_WAIT_S = 10.0


def folder() -> Path:
    return lock_dir() / "beside"


def register(pid: int) -> Path:
    """Register process `pid` as work beside the jobs (its file: unregister)."""
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    path = where / str(pid)
    partial = where / f".{pid}"  # written whole, then renamed: no reader sees half of it
    partial.write_text(repr(psutil.Process(pid).create_time()))
    os.replace(partial, path)
    return path


def unregister(pid: int) -> None:
    """`pid`'s work beside the jobs is done (the process says so itself, so that it is
    running): jobs no longer hold it."""
    (folder() / str(pid)).unlink(missing_ok=True)


def lowest_priority() -> bool:
    """Put the calling thread under SCHED_IDLE (it runs only on a core nothing else
    wants), where it may switch back (`normal_priority`): as root, or where RLIMIT_NICE
    lets it. Returns whether it did."""
    if os.geteuid() != 0 and resource.getrlimit(resource.RLIMIT_NICE)[0] < 20:
        return False
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    return True


def normal_priority(pid: int = 0) -> None:
    """Back to SCHED_OTHER: the calling thread (before it forks jobs, which would inherit
    SCHED_IDLE), or process `pid`'s main thread (its build's, once a job waits for it).
    Raises OSError where the kernel refuses."""
    os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))


def release(pid: int) -> None:
    """From outside a hold (the process that started the work, after each job): SIGCONT
    `pid` if it is registered and no job holds it (a job that died mid-hold dropped its
    lock with it). An unregistered process left stopped is let go by its holders."""
    path = folder() / str(pid)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        proc = psutil.Process(pid) if _same(pid, path) else None
    except psutil.NoSuchProcess:
        proc = None
    if proc is None:
        os.close(fd)
        return
    _let_go(fd, proc)


def _same(pid: int, path: Path) -> bool:
    """`pid` is still the process registered at `path` (not a reused pid)."""
    try:
        return repr(psutil.Process(pid).create_time()) == path.read_text().strip()
    except (psutil.NoSuchProcess, OSError):
        return False


def _cpu_s(proc: psutil.Process) -> float:
    try:
        times = proc.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)


@dataclass
class Hold:
    """A job's holds on the work beside it, and their record."""

    held: list[dict[str, Any]] = field(default_factory=list)

    @contextlib.contextmanager
    def exclusive(self, region: str) -> Iterator[None]:
        """No registered work runs while the block runs."""
        try:
            names = sorted(n for n in os.listdir(folder()) if n.isdigit())
        except FileNotFoundError:
            names = []
        held: list[tuple[int, psutil.Process]] = []  # (our lock's fd, the process)
        try:
            for name in names:
                path = folder() / name
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                fcntl.flock(fd, fcntl.LOCK_SH)
                if not _same(int(name), path):  # its process is gone (killed mid-build)
                    path.unlink(missing_ok=True)
                    os.close(fd)
                    continue
                try:
                    proc = psutil.Process(int(name))
                    os.kill(proc.pid, signal.SIGSTOP)
                except (ProcessLookupError, psutil.NoSuchProcess):
                    os.close(fd)
                    continue
                held.append((fd, proc))
            if not held:  # nothing registered, or nothing running that was
                yield
                return
            procs = [proc for _, proc in held]
            stopped = _wait_stopped(procs)
            before = {p.pid: _cpu_s(p) for p in procs}
            start = time.perf_counter()
            try:
                yield
            finally:
                end = time.perf_counter()
                used = sum(_cpu_s(p) - before[p.pid] for p in procs)
                self.held.append(
                    {
                        "region": region,
                        "at": [start, end],
                        "pids": [p.pid for p in procs],
                        "stopped": stopped,
                        "cpu_s": round(used, 3),
                    }
                )
        finally:
            for fd, proc in held:
                _let_go(fd, proc)


def _let_go(fd: int, proc: psutil.Process) -> None:
    """Let `proc` go: SIGCONT it if no job holds it (the lock on `fd`, its file's, turns
    exclusive), then close `fd`. A job leaving its hold calls it with its own lock's
    descriptor, so that a file unregistered meanwhile (a build done) still lets its
    process go; `release` with a descriptor of its own."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pass
    else:
        if proc.is_running():  # the same process (is_running compares its start time)
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                proc.send_signal(signal.SIGCONT)
    finally:
        os.close(fd)


def _wait_stopped(procs: list[psutil.Process]) -> bool:
    """Wait until the kernel reports each process stopped (or gone); False if one was
    not, after STOPPED_WAIT_S."""
    deadline = time.monotonic() + STOPPED_WAIT_S
    for proc in procs:
        while True:
            try:
                if proc.status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE):
                    break
            except psutil.NoSuchProcess:
                break
            if time.monotonic() > deadline:
                log.warning("pid %d did not stop within %.1f s", proc.pid, STOPPED_WAIT_S)
                return False
            time.sleep(0.0005)
    return True


HOLD = Hold()  # this process's (a job's child's) holds
