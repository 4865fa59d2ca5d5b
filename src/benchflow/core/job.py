"""A planned job: its resolved config, the overrides that made it, and its identity.

The sweeper plans every job once (benchflow.sweep.plan) and writes them to
``plan.json`` (:class:`Plan`); the task that runs a job reads its :class:`Job` back
instead of composing and resolving the config again, and tells the child what to run
in ``job.json`` (:class:`JobSpec`).
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
    """`benchflow rerun`: the recorded row a job runs again (sweep/rerun.py), and what
    its new row is checked against: the digest of its output and its provenance."""

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

    @property
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

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "config": dataclasses.asdict(self.config),
            "result_path": self.result_path,
        }
        return out | ({"mode": "ir"} if self.ir else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        return cls(
            name=str(data["name"]),
            config=config_from_dict(data["config"]),
            result_path=str(data["result_path"]),
            ir=data.get("mode") == "ir",
        )


@dataclass(frozen=True)
class Launch:
    """How a job's processes are launched, decided once by the plan (sweep/builds.py)
    and read by the task: nothing after planning works these out again."""

    forks_from: str | None  # the zygote its processes fork from (None: spawned)
    build: str | None = None  # the shared model build they fork from (its key), if any
    ahead: int | None = None  # build_ahead: the job whose build starts before this one's
    last_round: int | None = None  # the round of the last process to fork from `build`
    # The key of the step its later processes fork with, compiled once in an interpreter
    # of the job's own (harness/prebuilt.warm_here); None: each process compiles its own
    step: str | None = None
    # A paired sweep's B: its A, the job the sweep judges it against (sweep/pairs.py),
    # whose first process's steps per repeat its processes run: both time the same loop
    steps_from: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Launch:
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class Plan:
    """plan.json: every job of a sweep, planned before any runs, and the command line's
    overrides (how resume=true finds the folder). A job's config is typed again only
    when asked for (`job`): that takes ~30 ms, and each task needs its own job only;
    where the planner's process runs the jobs, they are its own objects, not typed again."""

    total: int
    sweep_args: tuple[str, ...] = ()
    entries: tuple[dict[str, Any], ...] = ()  # each a Job.to_dict(), as plan.json holds it
    # Jobs typed so far, by number: the planner's own objects, or decoded on first ask.
    _jobs: dict[int, Job] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        jobs: Sequence[Job],
        total: int,
        sweep_args: Sequence[str],
        launches: dict[int, Launch] | None = None,
    ) -> Plan:
        """The plan of `jobs`; `launches`: how each is launched (by job number)."""
        launch = launches or {}
        entries = tuple(
            job.to_dict() | ({"launch": launch[job.num].to_dict()} if job.num in launch else {})
            for job in jobs
        )
        return cls(total, tuple(sweep_args), entries, {job.num: job for job in jobs})

    def launch(self, num: int) -> Launch | None:
        """How job `num` is launched, as planned (None: planned without, a single run)."""
        found = self._by_num.get(num)
        return Launch.from_dict(found["launch"]) if found and "launch" in found else None

    @functools.cached_property
    def _by_num(self) -> dict[int, dict[str, Any]]:
        return {int(e["num"]): e for e in self.entries if "num" in e}

    def job(self, num: int) -> Job | None:
        """Job `num` as planned (None: not in the plan, or planned without a config)."""
        if num not in self._jobs:
            found = self._by_num.get(num)
            if not found or "config" not in found:
                return None
            self._jobs[num] = Job.from_dict(found)
        return self._jobs[num]

    def jobs(self) -> list[Job]:
        """Every job of the plan, by number."""
        found = [self.job(num) for num in range(self.total)]
        assert all(found), "a plan holds every job of its sweep"
        return [job for job in found if job is not None]

    @property
    def baseline(self) -> str | None:
        """The `baseline=` its jobs share (None: none planned, or they differ)."""
        found = {e["config"].get("baseline") for e in self.entries if "config" in e}
        return str(found.pop()) if len(found) == 1 and None not in found else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "sweep_args": list(self.sweep_args),
            "jobs": list(self.entries),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        jobs = tuple(j for j in data.get("jobs") or [] if isinstance(j, dict))
        args = tuple(map(str, data.get("sweep_args") or []))
        return cls(int(data.get("total", 1)), args, jobs)
