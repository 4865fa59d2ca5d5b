"""Hydra's task function: one composed config -> one isolated child -> one result row.

Runs in the parent (or a launcher's worker). It validates, spawns the child with
a hard timeout, turns whatever happened into a row, appends the row to the
sweep's ``results.jsonl``, and logs the job's MLflow child run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from benchflow.config.schema import BenchConfig
from benchflow.config.validate import (
    ConfigError,
    InvalidCombination,
    backend_name,
    job_name,
    parse,
    resolve,
)
from benchflow.models.torchbench_index import not_implemented
from benchflow.results.io import current, read_jsonl, record_row, write_json_atomic
from benchflow.results.provenance import fingerprint, provenance
from benchflow.results.row import build_row
from benchflow.runner.cpus import child_env, cpu_slot, span
from benchflow.runner.isolated import Outcome, join_prestart, run_isolated, start_zygote
from benchflow.runner.zygote import kind_for
from benchflow.suite.rules import decide
from benchflow.sweep import progress
from benchflow.sweep.ir import dump_inductor_code, dump_ir
from benchflow.sweep.resume import attempts, current_row, runs_again
from benchflow.tracking.mlflow_runs import (
    PARENT_RUN_FILE,
    Tracker,
    check_reachable,
    flatten,
    safely,
)
from benchflow.tracking.sync import log_job

log = logging.getLogger(__name__)

PLAN_FILE = "plan.json"
RESULTS_FILE = "results.jsonl"


ABORT_FILE = "ABORTED"


def die(exc: ConfigError) -> None:
    """A bad config on a single run: one clear line, non-zero exit, nothing started."""
    print(f"benchflow: error: {exc}", file=sys.stderr)
    raise SystemExit(2)


def _open_tracker(bench: BenchConfig, project_dir: Path) -> Tracker | None:
    if not bench.mlflow.enabled:
        return None
    tracker: Tracker | None = safely("connection", Tracker, bench.mlflow, project_dir)
    return tracker


def run_job(cfg: DictConfig) -> dict[str, Any]:
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    job_dir = Path(hc.runtime.output_dir)
    sweep_dir = Path(hc.sweep.dir) if multirun else job_dir
    project_dir = Path(hc.runtime.cwd)
    num = int(hc.job.num) if multirun else 0
    plan = _read_json(sweep_dir / PLAN_FILE) or {}
    total = int(plan.get("total", 1))

    skip_reason = None
    if multirun and (aborted := _read_text(sweep_dir / ABORT_FILE)):
        skip_reason = f"fail_fast: {aborted}"
    try:
        bench = parse(cfg)
        bench = resolve(bench)
    except InvalidCombination as exc:
        if not multirun:
            die(exc)
        skip_reason = f"invalid combination: {exc}"
        log.warning("job %d skipped: %s", num, exc)
    except ConfigError as exc:
        die(exc)

    name = job_name(bench)  # from the user's choices, before suite rules fill in dtype
    decision = decide(
        bench.suite,
        bench.model.name,
        bench.test.name,
        bench.accelerator.name,
        bench.dtype,
        bench.batch_size,
    )
    bench = dataclasses.replace(bench, dtype=decision.dtype, batch_size=decision.batch_size)
    model_says = None
    if bench.model.source == "torchbench" and bench.suite.torchbench_root:
        model_says = not_implemented(
            Path(bench.suite.torchbench_root),
            bench.model.name,
            bench.accelerator.name,
            bench.test.name,
        )
    if (reason := decision.skip or model_says) and not skip_reason:
        skip_reason = reason
        log.info("job %d skipped: %s", num, reason)

    notes: list[str] = []
    wants_code = bench.ir.inductor_code and not skip_reason
    if wants_code and bench.dynamo.name != "inductor":
        msg = (
            f"ir.inductor_code=true needs dynamo=inductor, but this job runs "
            f"dynamo={bench.dynamo.name}: Inductor generates no code for it"
        )
        if not multirun:
            die(ConfigError(msg))
        notes.append(msg)
        wants_code = False
    wants_ir = bool(bench.ir.formats or bench.ir.xla_dump)
    if wants_ir and bench.xla.name != "PJRT" and not skip_reason:
        msg = (
            f"ir.formats={list(bench.ir.formats)} needs the XLA device, but this job runs "
            f"dynamo={bench.dynamo.name} with xla={bench.xla.name}: it has no XLA IR; "
            "allowed: xla=PJRT or dynamo=openxla (or ir=none)"
        )
        if not multirun:
            die(ConfigError(msg))
        notes.append(msg)
        log.warning("job %d: %s", num, msg)
        wants_ir = False

    if not multirun and (problem := check_reachable(bench.mlflow)):
        die(ConfigError(problem))  # a sweep checks this once, in its callback

    fp = fingerprint(bench)
    history = read_jsonl(sweep_dir / RESULTS_FILE) if multirun else []
    previous = current_row(history, fp)
    if previous is not None and not runs_again(previous["status"], bench.retry):
        # Resume: this job already has a result the retry policy keeps.
        progress.kept(previous, num, total, bench.retry)
        return previous

    job: dict[str, Any] = {"name": name, "num": num, "dir": str(job_dir)}
    job["overrides"] = list(hc.overrides.task)
    job["attempt"] = attempts(history, fp) + 1
    OmegaConf.save(OmegaConf.structured(bench), job_dir / "config.yaml")

    tracker = _open_tracker(bench, project_dir)
    run_id = None
    if tracker:
        parent_id = _read_text(sweep_dir / PARENT_RUN_FILE) if multirun else None
        params = flatten(dataclasses.asdict(bench))
        # The suite's rule lists are hundreds of entries: they live in config.yaml.
        params = {k: v for k, v in params.items() if not k.startswith("suite.rules.")}
        params["backend"] = backend_name(bench)
        run_id = safely("start_run", tracker.start_run, name, parent_id=parent_id, params=params)
        job["mlflow_run_id"] = run_id

    if skip_reason:
        outcome = Outcome("skipped", skip_reason, None, 0.0, None)
    else:
        join_prestart()  # the sweep's zygotes, started while it set up (basic launcher)
        asked = time.perf_counter()
        with cpu_slot(bench.cpus_per_job, f"{name} in {sweep_dir}", progress.note) as cores:
            job["cpus"] = span(cores)
            job["cpu_wait_s"] = time.perf_counter() - asked
            env = child_env(cores, bench.num_threads) | compile_cache_env(bench, job_dir)
            zygote = zygote_kind(bench, env)
            if zygote:
                # Once per process that runs jobs and kind: the imports, on this slot's cores.
                start_zygote(zygote, cores)
            job["started_at"] = time.time()  # with wall_time_s: when the child ran
            outcome = _run_child(bench, name, job_dir, num, total, env, zygote)
            if wants_ir and outcome.status == "ok":
                ir_files, ir_notes = dump_ir(
                    json.loads((job_dir / "job.json").read_text()),
                    job_dir,
                    list(bench.ir.formats),
                    bench.ir.xla_dump,
                    bench.timeout_s,
                    env,
                )
                job["ir_files"] = ir_files
                notes += ir_notes
            if wants_code and outcome.status == "ok":
                code_files, code_notes = dump_inductor_code(
                    json.loads((job_dir / "job.json").read_text()), job_dir, bench.timeout_s, env
                )
                job["ir_files"] = job.get("ir_files", []) + code_files
                notes += code_notes
    job["notes"] = notes
    shutil.rmtree(job_dir / COLD_CACHE, ignore_errors=True)  # megabytes of generated code

    child = outcome.result or {}
    timings = child.get("child_timings", {})
    # In-child model work: building, timing and checking the model (not imports).
    model_work = sum(timings.get(k, 0.0) for k in ("setup_s", "measure_s", "verify_s"))
    job.update(
        wall_time_s=outcome.wall_time_s,
        model_work_s=model_work,
        overhead_s=outcome.wall_time_s - model_work if outcome.result else None,
        returncode=outcome.returncode,
        **{f"child_{k}": v for k, v in timings.items()},
    )
    row = build_row(
        bench,
        status=outcome.status,
        error=outcome.error,
        job=job,
        provenance=provenance(project_dir),
        child=child,
        sources={
            "dtype_source": decision.dtype_source,
            "batch_size_source": decision.batch_size_source,
        },
    )
    write_json_atomic(job_dir / "result.json", row)
    replaced = record_row(sweep_dir / RESULTS_FILE, row)
    if tracker and run_id:
        safely("logging", log_job, tracker, run_id, row, job_dir)
        for old in replaced:
            if old_run := old.get("job", {}).get("mlflow_run_id"):
                safely("supersede", tracker.supersede, old_run, run_id)

    tally = Counter(r["status"] for r in current(read_jsonl(sweep_dir / RESULTS_FILE)))
    progress.report(row, num, total, tally)

    if outcome.status == "interrupted":
        if tracker and multirun and (parent := _read_text(sweep_dir / PARENT_RUN_FILE)):
            safely("end_run", tracker.end_run, parent, "interrupted")
        raise KeyboardInterrupt
    if not multirun and outcome.status not in ("ok", "skipped"):
        raise SystemExit(1)
    if multirun and bench.fail_fast and outcome.status not in ("ok", "skipped"):
        # The launcher goes on calling us; every later job is recorded as skipped,
        # so the sweep still ends with one row per job and its summary.
        (sweep_dir / ABORT_FILE).write_text(f"job {num} ({name}) ended {outcome.status}")
    return row


COLD_CACHE = ".compile_cache"


def zygote_kind(bench: BenchConfig, env: dict[str, str] | None = None) -> str | None:
    """The zygote this job forks from (None: prefork=false, spawn). Without `env`,
    from the config alone, as the sweep does to start zygotes before its jobs."""
    if not bench.prefork:
        return None
    if env is None:
        env = compile_cache_env(bench, Path("."))
    return kind_for(bench.xla.name == "PJRT", env)


def compile_cache_env(bench: BenchConfig, job_dir: Path) -> dict[str, str]:
    """compile_cache=cold: a fresh Inductor cache for this job (and XLA's in-memory one,
    which dies with the child), so compile times never depend on what ran before.
    warm: one cache shared by every job ($BENCHFLOW_CACHE_DIR, default
    ~/.cache/benchflow), Inductor's and XLA's persistent one, as a second run sees."""
    if bench.compile_cache == "cold":
        return {"TORCHINDUCTOR_CACHE_DIR": str(job_dir / COLD_CACHE / "inductor")}
    root = Path(os.environ.get("BENCHFLOW_CACHE_DIR") or Path.home() / ".cache" / "benchflow")
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "XLA_PERSISTENT_CACHE_PATH": str(root / "xla"),
        "XLA_PERSISTENT_CACHE_READ_ONLY": "0",
    }


def _run_child(
    bench: BenchConfig,
    name: str,
    job_dir: Path,
    num: int,
    total: int,
    env: dict[str, str],
    zygote: str | None,
) -> Outcome:
    job_file = job_dir / "job.json"
    write_json_atomic(
        job_file,
        {
            "name": name,
            "config": dataclasses.asdict(bench),
            "result_path": str(job_dir / "child_result.json"),
        },
    )
    with progress.running(bench.progress, num, total, name):
        return run_isolated(job_file, job_dir, bench.timeout_s, env=env, prefork=zygote)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
