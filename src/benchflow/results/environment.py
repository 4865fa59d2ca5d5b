"""Which facts of a row's provenance make two results comparable: the one definition.

Two results are comparable when every *speed* fact below matches (hardware, versions,
packages, speed settings); host names, benchflow's commit and the command may differ.
Each fact's name is also its MLflow tag; "not recorded" differs from any value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from benchflow.results.row import Gpu, Hardware, Provenance, ResultRow

NOT_RECORDED = "(not recorded)"


def _hw(get: Callable[[Hardware], object]) -> Callable[[Provenance], object]:
    return lambda p: get(p.hardware) if p.hardware else None


def _gpu(get: Callable[[Gpu], object]) -> Callable[[Provenance], object]:
    return lambda p: get(p.hardware.gpu) if p.hardware and p.hardware.gpu else None


def _cpus(affinity: str | None) -> int | None:
    """ "0-1,4" -> 3."""
    if not affinity:
        return None
    count = 0
    for part in affinity.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


@dataclass(frozen=True)
class Fact:
    name: str  # the MLflow tag, and how differences name it
    get: Callable[[Provenance], object]
    speed: bool  # a difference may change speed
    per_job: bool = False  # the child's: not known before a job runs


FACTS: tuple[Fact, ...] = (
    Fact("cpu.vendor", _hw(lambda h: h.cpu_vendor), speed=True),
    Fact("cpu.model", lambda p: p.cpu_model, speed=True),
    Fact("cpu.features", _hw(lambda h: ",".join(h.cpu_features)), speed=True),
    Fact("cpu.physical_cores", _hw(lambda h: h.physical_cores), speed=True),
    Fact("cpu.logical_cores", _hw(lambda h: h.logical_cores), speed=True),
    Fact("job.cpus", _hw(lambda h: _cpus(h.affinity)), speed=True, per_job=True),
    Fact("gpu.name", _gpu(lambda g: g.name), speed=True, per_job=True),
    Fact("gpu.capability", _gpu(lambda g: g.capability), speed=True, per_job=True),
    Fact("gpu.driver", _gpu(lambda g: g.driver), speed=True, per_job=True),
    Fact("gpu.cuda", _gpu(lambda g: g.cuda), speed=True, per_job=True),
    Fact("gpu.cudnn", _gpu(lambda g: g.cudnn), speed=True, per_job=True),
    Fact("version.python", lambda p: p.versions.get("python"), speed=True, per_job=True),
    Fact("version.torch", lambda p: p.versions.get("torch"), speed=True, per_job=True),
    Fact("version.torch_xla", lambda p: p.versions.get("torch_xla"), speed=True, per_job=True),
    Fact("version.transformers", lambda p: p.versions.get("transformers"), True, True),
    Fact("version.timm", lambda p: p.versions.get("timm"), speed=True, per_job=True),
    Fact("lock_sha256", lambda p: p.lock_sha256, speed=True),
    Fact("packages_sha256", lambda p: p.packages_sha256, speed=True),
    Fact("torchbench_sha", lambda p: p.torchbench_sha, speed=True),
    Fact("memory_bytes", _hw(lambda h: h.memory_bytes), speed=False),
    Fact("host", lambda p: p.host, speed=False),
    Fact("platform", lambda p: p.platform, speed=False),
    Fact("git_sha", lambda p: p.git_sha, speed=False),
    Fact("version.benchflow", lambda p: p.versions.get("benchflow"), speed=False, per_job=True),
)
ENV_PREFIX = "env."  # env.<NAME>: one speed fact per variable a row recorded
# version.<package>: one speed fact per other package whose version a row recorded (a
# toolchain's pins, harness/child.py)
VERSION_PREFIX = "version."
_NAMED = frozenset(f.name for f in FACTS)


def facts(prov: Provenance, *, per_job: bool = True) -> dict[str, str]:
    """A provenance's facts as strings (the MLflow tags), unrecorded ones left out;
    per_job=False: only those known before a job runs (no child's facts, no env)."""
    out = {}
    for fact in FACTS:
        if fact.per_job and not per_job:
            continue
        value = fact.get(prov)
        if value not in (None, ""):
            out[fact.name] = str(value)
    if per_job:
        out |= {f"{ENV_PREFIX}{k}": v for k, v in prov.env.items()}
        out |= {
            name: str(v)
            for k, v in prov.versions.items()
            if v and (name := f"{VERSION_PREFIX}{k}") not in _NAMED
        }
    return out


def is_speed(name: str) -> bool:
    if name in _NAMED:
        return any(f.speed for f in FACTS if f.name == name)
    return name.startswith((ENV_PREFIX, VERSION_PREFIX))


@dataclass(frozen=True)
class Difference:
    fact: str
    base: tuple[str, ...]  # the values one side recorded (NOT_RECORDED: none)
    cand: tuple[str, ...]

    @property
    def speed(self) -> bool:
        return is_speed(self.fact)

    def __str__(self) -> str:
        return f"{self.fact}: {' / '.join(self.base)} -> {' / '.join(self.cand)}"


def _values(provs: Iterable[Provenance], per_job: bool) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for prov in provs:
        for name, value in facts(prov, per_job=per_job).items():
            seen.setdefault(name, set()).add(value)
    return seen


def _rank(name: str) -> float:
    """Where a fact comes in a list of differences: FACTS' order, a package's version
    with the others (before the hashes of the whole set), the variables last."""
    order = [f.name for f in FACTS]
    if name in order:
        return order.index(name)
    if name.startswith(VERSION_PREFIX):
        return order.index("version.timm") + 0.5
    return len(order)


def differences(
    base: Iterable[Provenance], cand: Iterable[Provenance], *, per_job: bool = True
) -> list[Difference]:
    """Every fact whose recorded values differ between the two sides, speed facts first."""
    b, c = _values(base, per_job), _values(cand, per_job)
    names = sorted(set(b) | set(c), key=lambda n: (not is_speed(n), _rank(n), n))
    out = []
    for name in names:
        if b.get(name) != c.get(name):
            out.append(
                Difference(
                    name,
                    tuple(sorted(b.get(name) or {NOT_RECORDED})),
                    tuple(sorted(c.get(name) or {NOT_RECORDED})),
                )
            )
    return out


def between_rows(base: Iterable[ResultRow], cand: Iterable[ResultRow]) -> list[Difference]:
    return differences((r.provenance for r in base), (r.provenance for r in cand))


def speed_warning(diffs: list[Difference]) -> str | None:
    """What a gate says when the sides' environments differ in a speed fact."""
    speed = [d.fact for d in diffs if d.speed]
    if not speed:
        return None
    return (
        f"the two sides ran in different environments ({', '.join(speed)}): a slowdown "
        "may come from the environment, not the code"
    )
