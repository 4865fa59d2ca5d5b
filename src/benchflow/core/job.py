"""A planned job: its resolved config, the overrides that made it, and its identity.

The sweeper plans every job, and each of its processes as a :class:`Step` forked from a
:class:`Warm` process, into ``plan.json`` (:class:`Plan`); a child reads its
``job.json`` (:class:`JobSpec`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchflow.config.schema import (
    BenchConfig,
    Settings,
    config_from_dict,
    measured,
    measured_flat,
)


def fingerprint(cfg: BenchConfig) -> str:
    """Stable SHA-256 of the measured part of a config (sorted-key JSON). Two jobs with
    the same fingerprint are the same configuration of the same model."""
    blob = json.dumps(measured(cfg), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class Origin:
    """`benchflow rerun`: the recorded row a job runs again (tracking/recorded.py), and
    what its new row is checked against: the digest of its output and its provenance."""

    row_id: str
    fingerprint: str = ""
    mlflow_run_id: str | None = None
    digest: dict[str, Any] | None = None
    provenance: dict[str, Any] = field(default_factory=dict)  # the row's, as recorded


@dataclass(frozen=True)
class Job:
    """One job of a sweep, resolved: what runs, and whether it runs at all."""

    num: int  # Hydra's job number in the sweep
    name: str  # run name: model·backend·test[·dtype], from the user's choices
    overrides: tuple[str, ...]  # the job's command-line overrides
    config: BenchConfig  # resolved: auto choices made, suite rules applied
    backend: str  # the backend's label (benchflow.backends)
    invalid: str | None = None  # why the combination cannot exist (it never runs)
    skip: str | None = None  # why it is not run on purpose (suite skip list, the model)
    notes: tuple[str, ...] = ()  # settings that do not apply to it, said once
    sources: dict[str, str] = field(default_factory=dict)  # dtype_source, batch_size_source
    origin: Origin | None = None  # a rerun's: the row it runs again

    @functools.cached_property  # (a sweep asks it of each row it records: once a job)
    def fingerprint(self) -> str:
        return fingerprint(self.config)

    @property
    def settings(self) -> Settings:
        """The measured settings, flat (the row's `config`, the MLflow params)."""
        return measured_flat(self.config)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["overrides"] = list(self.overrides)
        out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        return cls(
            num=int(data["num"]),
            name=str(data["name"]),
            overrides=tuple(data.get("overrides", ())),
            config=config_from_dict(data["config"]),
            backend=str(data["backend"]),
            invalid=data.get("invalid"),
            skip=data.get("skip"),
            notes=tuple(data.get("notes", ())),
            sources=dict(data.get("sources", {})),
            origin=Origin(**data["origin"]) if data.get("origin") else None,
        )


@dataclass(frozen=True)
class JobSpec:
    """The child's job.json: the job's name, its resolved config, where to answer."""

    name: str
    config: BenchConfig
    result_path: str
    ir: bool = False  # an IR pass: two steps for the dump, nothing timed (sweep/ir.py)
    # which of the job's processes (0: the first, whose row is the job's beyond its samples)
    process: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "config": dataclasses.asdict(self.config),
            "result_path": self.result_path,
        }
        return (
            out
            | ({"mode": "ir"} if self.ir else {})
            | ({"process": self.process} if self.process else {})
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        return cls(
            name=str(data["name"]),
            config=config_from_dict(data["config"]),
            result_path=str(data["result_path"]),
            ir=data.get("mode") == "ir",
            process=int(data.get("process", 0)),
        )


@dataclass(frozen=True)
class Warm:
    """A warm process from which a job's process forks (runner/pool.py): a zygote of
    `zygote` (its kind's modules imported), then one that has built the model of `build`,
    then one that has compiled the step of `step` (models/sharing.py)."""

    zygote: str
    build: str | None = None
    step: str | None = None

    @property
    def stage(self) -> str:
        return "compiled" if self.step else "built" if self.build else "imported"

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Warm | None:
        return cls(data["zygote"], data.get("build"), data.get("step")) if data else None


@dataclass(frozen=True)
class Step:
    """One process of a job, as the plan runs it: in its round, forked from `warm`
    (None: spawned). A paired sweep's B (`steps_from`) runs its A's steps per repeat."""

    job: int  # the job's number
    process: int  # from 0
    round: int
    warm: Warm | None = None
    steps_from: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # `warm` too: a dict, or None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        return cls(
            int(data["job"]),
            int(data["process"]),
            int(data["round"]),
            Warm.from_dict(data.get("warm")),
            data.get("steps_from"),
        )


@dataclass(frozen=True)
class Plan:
    """plan.json: every job of a sweep, planned before any runs, its steps in run order
    (sweep/steps.py), and the command line's overrides (how resume=true finds the
    folder). Read back, a job's config is typed only when asked for (it is slow, and a
    launcher's worker needs its own job only)."""

    entries: tuple[dict[str, Any], ...]  # each a Job.to_dict(), as plan.json holds it
    steps: tuple[Step, ...] = ()
    sweep_args: tuple[str, ...] = ()
    # Jobs typed so far, by number: the planner's own objects, or decoded on first ask.
    _jobs: dict[int, Job] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, jobs: Sequence[Job], steps: Sequence[Step] = (), args: Sequence[str] = ()) -> Plan:
        entries = tuple(job.to_dict() for job in jobs)
        return cls(entries, tuple(steps), tuple(args), {job.num: job for job in jobs})

    @functools.cached_property
    def _by_num(self) -> dict[int, dict[str, Any]]:
        return {int(e["num"]): e for e in self.entries}

    def job(self, num: int) -> Job:
        if num not in self._jobs:
            self._jobs[num] = Job.from_dict(self._by_num[num])
        return self._jobs[num]

    def jobs(self) -> list[Job]:
        """Every job of the plan, by number."""
        return [self.job(num) for num in sorted(self._by_num)]

    @property
    def total(self) -> int:
        return len(self.entries)

    @property
    def baseline(self) -> str | None:
        """The `baseline=` its jobs share (None: none planned, or they differ)."""
        found = {e["config"].get("baseline") for e in self.entries}
        return str(found.pop()) if len(found) == 1 and None not in found else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "sweep_args": list(self.sweep_args),
            "jobs": list(self.entries),
            "steps": [step.to_dict() for step in self.steps],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        jobs = tuple(j for j in data.get("jobs") or [] if isinstance(j, dict) and "config" in j)
        steps = tuple(Step.from_dict(s) for s in data.get("steps") or [])
        return cls(jobs, steps, tuple(map(str, data.get("sweep_args") or [])))
