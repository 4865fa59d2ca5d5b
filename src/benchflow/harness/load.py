"""What else ran while a job timed: a probe read around every timed repeat (others' CPU time
on the host and on the job's cores, steal, the job's run delay), and a reference step timed
before and after, since a VM can run slower with none of those counted (docs/timing.md).
/proc/stat counts in clock ticks, so a short repeat's figures are coarse. Linux only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from benchflow.results.load import TICK_S

# /proc/stat's cpuN line: user nice system idle iowait irq softirq steal ...
_BUSY = (0, 1, 2, 5, 6)
_STEAL = 7


# The reference step: a float32 matmul on the job's threads; the median block kept.
REFERENCE_SHAPE = (128, 512, 512)
REFERENCE_BLOCKS, REFERENCE_STEPS = 5, 4


def reference_step_s() -> float:
    """Seconds one reference step takes now (torch imported: a job's child)."""
    import statistics

    import torch

    m, k, n = REFERENCE_SHAPE
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
    a @ b  # its first call sets up the kernel
    blocks = []
    for _ in range(REFERENCE_BLOCKS):
        start = time.perf_counter()
        for _ in range(REFERENCE_STEPS):
            a @ b
        blocks.append((time.perf_counter() - start) / REFERENCE_STEPS)
    return statistics.median(blocks)


@dataclass(frozen=True)
class Snapshot:
    busy: dict[str, int]  # cpuN -> busy ticks
    steal: dict[str, int]
    own_cpu_s: float  # this process's CPU time, every thread
    wait_ns: int  # this process's threads' run delay


def _siblings(core: int) -> set[int]:
    """The core and its hyper-thread siblings (they share its execution units)."""
    path = Path(f"/sys/devices/system/cpu/cpu{core}/topology/thread_siblings_list")
    try:
        text = path.read_text().strip()
    except OSError:
        return {core}
    found: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        found.update(range(int(lo), int(hi or lo) + 1))
    return found | {core}


class LoadProbe:
    """Other processes' CPU time, steal and the job's own wait, per timed region."""

    def __init__(self) -> None:
        cores = os.sched_getaffinity(0)
        self.own = {f"cpu{c}" for core in cores for c in _siblings(core)}
        self.available = Path("/proc/stat").exists() and Path("/proc/self/task").is_dir()

    def snapshot(self) -> Snapshot | None:
        if not self.available:
            return None
        busy: dict[str, int] = {}
        steal: dict[str, int] = {}
        with open("/proc/stat") as f:
            for line in f:
                name, _, rest = line.partition(" ")
                if not name.startswith("cpu") or name == "cpu":
                    continue
                ticks = rest.split()
                busy[name] = sum(int(ticks[i]) for i in _BUSY)
                steal[name] = int(ticks[_STEAL]) if len(ticks) > _STEAL else 0
        wait = 0
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/schedstat") as f:
                    wait += int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended, or no schedstat
        return Snapshot(busy, steal, time.process_time(), wait)

    def delta(self, before: Snapshot | None, after: Snapshot | None) -> dict[str, float]:
        if before is None or after is None:
            return {}
        own_cpu = after.own_cpu_s - before.own_cpu_s
        busy = {k: (after.busy[k] - before.busy.get(k, after.busy[k])) * TICK_S for k in after.busy}
        on_own = sum(v for k, v in busy.items() if k in self.own)
        steal = sum(after.steal[k] - before.steal.get(k, after.steal[k]) for k in self.own)
        return {
            "host_other_cpu_s": max(0.0, sum(busy.values()) - own_cpu),
            "host_other_cpu_own_s": max(0.0, on_own - own_cpu),
            "host_steal_s": steal * TICK_S,
            "host_wait_s": (after.wait_ns - before.wait_ns) / 1e9,
        }
