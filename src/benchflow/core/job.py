"""A planned job: its resolved config, the overrides that made it, and its identity.

The sweeper plans every job once (benchflow.sweep.plan) and writes them to
``plan.json``; the task that runs a job reads its :class:`Job` back instead of
composing and resolving the config again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from benchflow.config.schema import BenchConfig, config_from_dict, measured, measured_flat


def fingerprint(cfg: BenchConfig) -> str:
    """Stable SHA-256 of the measured part of a config (sorted-key JSON). Two jobs with
    the same fingerprint are the same configuration of the same model."""
    blob = json.dumps(measured(cfg), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


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

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.config)

    @property
    def settings(self) -> dict[str, Any]:
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
        )
