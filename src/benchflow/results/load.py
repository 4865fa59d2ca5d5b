"""Was the host quiet while a job timed? The rule, from the per-repeat figures the
child's load probe records (harness/load.py, harness/gpu_load.py; docs/timing.md).

A repeat is *contended* when other processes used more than a quarter of the job's own
cores over it, or the hypervisor stole more than a tenth, and more than the tick
/proc/stat counts in, on each of them; on a GPU, *throttled* when the driver slowed its
clocks. The host was *quiet* for the job when at most a tenth of its repeats were
either. The job's own threads' waits, load on other cores and the GPU's
clocks, temperature and power are recorded, not judged.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchflow.core.files import pick

OTHER_OWN_LIMIT = 0.25  # of the job's cores' time in a repeat (/proc/stat ticks: coarse)
# /proc/stat's clock tick: each core's busy and steal counts over a repeat may be a tick
# off, so a repeat is contended only past that too (a 12-ms repeat: a stray tick is not).
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
STEAL_LIMIT = 0.10
QUIET_SHARE = 0.10  # the most repeats that may be contended on a quiet host
# Two runs' host speeds differ when their reference steps (harness/load.py) are more
# than this apart (docs/timing.md).
SPEED_LIMIT = 0.10
# The most of a paired comparison's rounds that may be left out as disturbed (paired_rounds)
DISTURBED_SHARE = 0.25


def speed_spread(references_s: list[float]) -> float | None:
    """How far apart one job's processes found the host (slowest reference step over the
    fastest, less 1), where that is beyond SPEED_LIMIT; else None."""
    if len(references_s) < 2 or min(references_s) <= 0:
        return None
    spread = max(references_s) / min(references_s) - 1
    return spread if spread > SPEED_LIMIT else None


def paired_rounds(rounds: Sequence[tuple[bool, float]]) -> list[bool]:
    """Which rounds of a paired comparison count, from each round's (both processes
    found the host alike, candidate's reference step / baseline's): those where they did,
    at one speed (within SPEED_LIMIT of the median ratio, since two toolchains may run the
    reference step itself at different speeds); a load both share drops out of their
    ratio. At most DISTURBED_SHARE are left out; a host that treated more unevenly was
    unsettled throughout, and every round counts."""
    typical = statistics.median(ratio for _, ratio in rounds) if rounds else 1.0
    counted = [alike and abs(ratio / typical - 1) <= SPEED_LIMIT for alike, ratio in rounds]
    if counted.count(False) > int(len(rounds) * DISTURBED_SHARE):
        return [True] * len(rounds)
    return counted


def speed_change(base_s: float | None, cand_s: float | None) -> float | None:
    """How much slower (> 0) or faster the host ran the reference step on the candidate
    side than on the baseline's, where that is beyond SPEED_LIMIT; else None."""
    if not base_s or not cand_s:
        return None
    change = cand_s / base_s - 1
    return change if abs(change) > SPEED_LIMIT else None


@dataclass(frozen=True)
class HostLoad:
    """The row's `timing.host`: what else ran over the timed repeats."""

    quiet: bool
    contended: list[int] = field(default_factory=list)  # the contended repeats, by index
    other_cpu_cores: float = 0.0  # other processes, whole host: cores kept busy on average
    other_own_share: float = 0.0  # other processes on the job's cores: share of their time
    steal_share: float = 0.0  # the hypervisor's steal on the job's cores: share
    wait_share: float = 0.0  # the job's threads waiting for a CPU: seconds per second
    throttled: list[int] = field(default_factory=list)  # the GPU's throttled repeats, by index
    gpu_sm_clock_mhz: float | None = None  # median over the repeats (None: not on a GPU)
    gpu_temp_c: float | None = None  # the highest
    gpu_power_capped_share: float = 0.0  # of the repeats

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> HostLoad | None:
        return cls(**pick(cls, data)) if data else None

    @property
    def described(self) -> str:
        """In a sentence's words: '12 of 50 repeats contended (other processes on the
        job's cores 31%, steal 0%)'."""
        said = (
            f"{len(self.contended)} repeat(s) contended (other processes on the job's cores "
            f"{self.other_own_share:.0%}, steal {self.steal_share:.0%}, elsewhere "
            f"{self.other_cpu_cores:.1f} cores)"
        )
        if self.gpu_sm_clock_mhz is None:
            return said
        return (
            f"{said}; {len(self.throttled)} with the GPU throttled (SM clock "
            f"{self.gpu_sm_clock_mhz:.0f} MHz, up to {self.gpu_temp_c or 0:.0f} C)"
        )


def host_load(per_repeat: dict[str, list[float]], cores: int) -> HostLoad | None:
    """The rule applied to a job's per-repeat metrics; `cores`: the job's own cores
    (its CPU slot). None where the probe recorded nothing."""
    windows = per_repeat.get("total_time_s") or []
    own = per_repeat.get("host_other_cpu_own_s") or []
    if not windows or len(own) != len(windows) or cores < 1:
        return None
    steal = per_repeat.get("host_steal_s") or [0.0] * len(windows)
    other = per_repeat.get("host_other_cpu_s") or [0.0] * len(windows)
    wait = per_repeat.get("host_wait_s") or [0.0] * len(windows)
    # a repeat's counts may be a tick off on each core: within that, not contended
    contended = [
        i
        for i, w in enumerate(windows)
        if w > 0
        and (
            own[i] > max(OTHER_OWN_LIMIT * w, TICK_S) * cores
            or steal[i] > max(STEAL_LIMIT * w, TICK_S) * cores
        )
    ]
    total = sum(windows)
    gpu = _gpu(per_repeat, len(windows))
    throttled = gpu.get("throttled", [])
    return HostLoad(
        quiet=len({*contended, *throttled}) <= QUIET_SHARE * len(windows),
        contended=contended,
        other_cpu_cores=sum(other) / total if total else 0.0,
        other_own_share=sum(own) / (total * cores) if total else 0.0,
        steal_share=sum(steal) / (total * cores) if total else 0.0,
        wait_share=sum(wait) / total if total else 0.0,
        **gpu,
    )


def _gpu(per_repeat: dict[str, list[float]], repeats: int) -> dict[str, Any]:
    """The GPU's part of the rule (nothing where no GPU reading was recorded)."""
    clocks = per_repeat.get("gpu_sm_clock_mhz") or []
    flags = per_repeat.get("gpu_throttled") or []
    if len(flags) != repeats:
        return {}
    capped = per_repeat.get("gpu_power_capped") or []
    temps = per_repeat.get("gpu_temp_c") or []
    return {
        "throttled": [i for i, f in enumerate(flags) if f],
        "gpu_sm_clock_mhz": statistics.median(clocks) if clocks else None,
        "gpu_temp_c": max(temps) if temps else None,
        "gpu_power_capped_share": sum(1 for c in capped if c) / repeats,
    }
