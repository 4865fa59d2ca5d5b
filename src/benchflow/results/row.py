"""One job's result row: the experiment runner's schema, plus status and provenance.

{model: {suite_name, model_name, model_source},
 experiment: {accelerator, accelerator_model, xla, dynamo, test, batch_size, dtype, ...},
 repeat, iterations_per_run, warmup, metrics: {...per repeat...}, summary: {...},
 timestamp, verification_code, status, error, job: {...}, provenance: {...}}
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from benchflow.config.schema import BenchConfig
from benchflow.results.provenance import fingerprint

STATUSES = ("ok", "failed", "oom", "crashed", "timeout", "interrupted", "skipped")


def build_row(
    cfg: BenchConfig,
    *,
    status: str,
    error: str | None,
    job: dict[str, Any],
    provenance: dict[str, Any],
    child: dict[str, Any] | None = None,
    sources: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Assemble a row; `child` is the child's result.json when it wrote one."""
    assert status in STATUSES, status
    child = child or {}
    return {
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
            **(sources or {}),
        },
        "repeat": cfg.repeat,
        "iterations_per_run": cfg.iterations_per_run,
        "warmup": cfg.warmup,
        "metrics": child.get("metrics", {}),
        "summary": child.get("summary", {}),
        "timing": child.get("timing", {}),
        "timestamp": time.time(),
        "verification_code": child.get(
            "verification_code",
            "VERIFIER_DIDNT_RUN" if cfg.verify and status != "skipped" else "VERIFIER_SKIPPED",
        ),
        "verification_detail": child.get("verification_detail"),
        "status": status,
        "error": error,
        "job": {**job, "fingerprint": fingerprint(cfg)},
        "provenance": {**provenance, "versions": child.get("versions", {})},
    }


def headline(row: dict[str, Any]) -> float | None:
    """Median per-iteration seconds, the number a sweep is compared on."""
    stats = row.get("summary", {}).get("per_iter_time_s")
    return stats["median"] if stats else None


def flat_metrics(row: dict[str, Any]) -> dict[str, float]:
    """Every numeric result as one flat name -> value map (for MLflow and tables)."""
    out: dict[str, float] = {}
    for name, stats in row.get("summary", {}).items():
        for stat, value in stats.items():
            out[f"{name}.{stat}"] = float(value)
    for name, value in row.get("metrics", {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    for name, value in row.get("job", {}).items():
        if name.endswith("_s") and isinstance(value, (int, float)):
            out[f"job.{name}"] = float(value)
    return out
