"""One job's result row: the experiment runner's schema, plus status and provenance.

{schema_version, row_id, model: {suite_name, model_name, model_source},
 experiment: {accelerator, accelerator_model, xla, dynamo, test, batch_size, dtype, ...},
 backend, config: {measured settings, flat}, repeat, iterations_per_run, warmup,
 metrics: {...per repeat...}, summary: {...}, timing: {...}, timestamp,
 verification_code, status, error, job: {...}, provenance: {...}}

schema_version 2 added `backend`, `config` and the `invalid` status; rows without a
version are 1, and readers take them as they are (see benchflow.core.status.status_of).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from benchflow.core.job import Job
from benchflow.core.status import Status

SCHEMA_VERSION = 2


def build_row(
    job: Job,
    *,
    status: Status,
    error: str | None,
    info: dict[str, Any],
    provenance: dict[str, Any],
    child: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a row; `child` is the child's result.json when it wrote one, `info`
    what the parent knows of the run (times, CPUs, files)."""
    cfg = job.config
    child = child or {}
    return {
        "schema_version": SCHEMA_VERSION,
        "row_id": uuid.uuid4().hex,
        "model": {
            "suite_name": cfg.suite.name,
            "model_name": cfg.model.name,
            "model_source": child.get("model_source"),
        },
        "experiment": {
            "accelerator": cfg.accelerator.name,
            "accelerator_model": child.get("accelerator_model"),
            "xla": None if cfg.xla.name in ("none", "auto") else cfg.xla.name,
            "dynamo": None if cfg.dynamo.name == "none" else cfg.dynamo.name,
            "test": cfg.test.name,
            "batch_size": child.get("batch_size", cfg.batch_size),
            "dtype": child.get("dtype", cfg.dtype),
            "model_size": cfg.model.size,
            "matmul_precision": cfg.matmul_precision,
            "num_threads": child.get("num_threads", cfg.num_threads),
            **job.sources,
        },
        "backend": job.backend,
        "config": job.settings,
        "repeat": cfg.repeat,
        "iterations_per_run": cfg.iterations_per_run,
        "warmup": cfg.warmup,
        "metrics": child.get("metrics", {}),
        "summary": child.get("summary", {}),
        "timing": child.get("timing", {}),
        "timestamp": time.time(),
        "verification_code": child.get(
            "verification_code",
            "VERIFIER_DIDNT_RUN"
            if cfg.verify and status.counts_in_passrate
            else "VERIFIER_SKIPPED",
        ),
        "verification_detail": child.get("verification_detail"),
        "status": status.value,
        "error": error,
        "job": {
            "name": job.name,
            "num": job.num,
            "overrides": list(job.overrides),
            **info,
            "notes": [*job.notes, *info.get("notes", [])],
            "fingerprint": job.fingerprint,
        },
        "provenance": {**provenance, "versions": child.get("versions", {})},
    }
