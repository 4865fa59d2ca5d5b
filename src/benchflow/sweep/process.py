"""One process of a job, run on its CPU slot: forked from its warm process (runner/pool.py)
or spawned, within its timeout; the job's IR passes after its first. Here or in a launcher's
worker (`task`), what comes back is one :class:`~benchflow.runner.isolated.Outcome`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import threading
import time
from pathlib import Path

from benchflow import backends
from benchflow.backends.base import XLA_PERSISTENT_CACHE
from benchflow.config.schema import BenchConfig, settings_of
from benchflow.core import gpus
from benchflow.core.cpus import ENV_CPUS, child_env, cpu_slot, span
from benchflow.core.files import write_json_atomic
from benchflow.core.job import Job, JobSpec, Warm
from benchflow.core.layout import JobDir, SweepDir, cache_root
from benchflow.core.machine import node_name
from benchflow.core.status import Status
from benchflow.results.child import ChildResult
from benchflow.runner.isolated import Outcome, interrupted, run_isolated
from benchflow.runner.pool import Pool, build_request
from benchflow.sweep import progress, scheduler
from benchflow.sweep.ir import ir_passes

log = logging.getLogger(__name__)

# The rows' start times on one clock: the wall clock read once, then perf_counter's steps.
# (A step of the wall clock mid-sweep, as a VM's clock sync makes, would otherwise put a
# job's start out of line with its gap and wall: 58 ms once, on CI.)
WALL_AT_ZERO = time.time() - time.perf_counter()
# The output of a built or compiled warm process, in the folder of the job that made it.
LOGS = {"imported": "zygote.log", "built": "build.log", "compiled": "step.log"}


def process_config(cfg: BenchConfig, steps: int | None = None) -> BenchConfig:
    """What each of the job's processes is told: the adaptive budget and cap shared among them,
    and `steps`, the first's calibrated count, so that every repeat is as long (PER_PROCESS)."""
    processes = cfg.process_count
    if processes == 1:
        return cfg
    return dataclasses.replace(
        cfg,
        processes=processes,
        timed_budget_s=cfg.timed_budget_s / processes,
        max_repeat=max(1, math.ceil(cfg.max_repeat / processes)),
        iterations_per_run=cfg.iterations_per_run or steps,
    )


def run_step(
    job: Job,
    n: int,
    job_dir: JobDir,
    since: float,
    *,
    warm: Warm | None = None,
    pool: Pool | None = None,
    steps: int | None = None,
) -> Outcome:
    """Process `n` of the job, forked from `warm` or spawned; `since`: when its gap starts
    (perf_counter); `steps`: its steps per repeat. Never raises for the job's own failures."""
    cfg = job.config
    try:
        asked = time.perf_counter()
        owner = f"{job.name} in {job_dir.path.parent}"
        with (
            cpu_slot(cfg.cpus_per_job, owner, progress.note) as cores,
            gpus.slot_for(cfg.accelerator.name, owner, progress.note) as gpu,
        ):
            waited = time.perf_counter() - asked
            env = child_env(cores, cfg.num_threads) | gpus.child_env(gpu) | launch_env(job, job_dir)
            spec_cfg = process_config(cfg, steps)
            result, job_file = job_dir.process_files(n)
            spec = JobSpec(job.name, spec_cfg, str(result), process=n)
            zygote = request = None
            if warm is not None and pool is not None:
                write_json_atomic(job_file, spec.to_dict())  # what a new warm process builds
                request = build_request(job_file, env, job_dir.path / LOGS[warm.stage])
                zygote = pool.get(warm, request, cfg.timeout_s)
            launching = time.perf_counter()
            outcome = run_isolated(
                spec, job_file, job_dir.path, job_dir.process_prefix(n), env, zygote
            )
            if outcome.launched is None:  # a timeout: the parent's clocks around it
                ended = time.perf_counter()
                outcome = dataclasses.replace(
                    outcome, launched=launching, ended=ended, wall_time_s=ended - launching
                )
            launched = outcome.launched or launching
            outcome = dataclasses.replace(
                outcome,
                gap_s=launched - since,
                cpu_wait_s=waited,
                started_at=WALL_AT_ZERO + launched,
                cpus=span(cores),
                cores=len(cores),
                gpu=gpu,
                node=node_name(),
            )
            if n == 0 and outcome.status is Status.OK:
                ir_zygote = None
                if warm is not None and pool is not None and request is not None:
                    ir_zygote = pool.get(Warm(warm.zygote), request, cfg.timeout_s)
                outcome.ir_files, outcome.ir_notes, outcome.ir_s = ir_passes(
                    job, job_dir, env, ir_zygote
                )
    except KeyboardInterrupt:
        # a stop before its child started: its progress line is out, so it gets its row
        return interrupted(0.0)
    count = cfg.process_count
    log.info(
        "job %d (%s): process %d of %d: %s in %.2f s",
        job.num,
        job.name,
        n + 1,
        count,
        outcome.status.value,
        outcome.wall_time_s,
    )
    return outcome


def launch_env(job: Job, job_dir: JobDir) -> dict[str, str]:
    """The variables the job's settings give its child: compile caches (compile_cache=cold: a
    fresh one for this job; warm: one shared, as a second run sees), XLA_FLAGS, `env.`."""
    cfg, backend = job.config, backends.get(job.backend)
    if cfg.compile_cache == "cold":
        env = backend.cache_env(str(job_dir.compile_cache), persistent=False)
    else:
        env = backend.cache_env(str(cache_root()), persistent=True)
    if cfg.xla.flags:
        env["XLA_FLAGS"] = cfg.xla.flags
    return env | {k: str(v) for k, v in settings_of(cfg.env).items()}


# Variables benchflow sets for every job, and the setting that gives each its value.
SET_BY = {
    "OMP_NUM_THREADS": "num_threads=N",
    "MKL_NUM_THREADS": "num_threads=N",
    ENV_CPUS: "cpus_per_job=N",
    "TORCHINDUCTOR_CACHE_DIR": "compile_cache=cold|warm",
    **dict.fromkeys(XLA_PERSISTENT_CACHE, "compile_cache=cold|warm"),
    "XLA_FLAGS": "xla.flags=...",
}


def why_not_env(name: str) -> str | None:
    """Why `env.<name>=` cannot be set (None: it can)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return f"env.{name}: not an environment variable's name; allowed: letters, digits, _"
    if name in SET_BY:
        return f"env.{name}: benchflow sets {name} for every job; allowed: {SET_BY[name]}"
    if name.startswith("BENCHFLOW_"):
        return f"env.{name}: BENCHFLOW_* variables are benchflow's own; allowed: another name"
    return None


# --- under a launcher of Hydra's: the task of each launched process ---------------------

ENV_STEP = "BENCHFLOW_STEP"  # the launched process: "n" or "n,steps" (hydra.job.env_set)
ENV_SWEEP_PID = "BENCHFLOW_SWEEP_PID"  # the sweep's own process
_TIE = "benchflow-tie-to-sweep"


def step_overrides(n: int, steps: int | None) -> list[str]:
    """The Hydra overrides that tell a launched job which of its processes it runs."""
    value = f"{n},{steps}" if steps else str(n)
    return [f"+hydra.job.env_set.{ENV_STEP}={value}"]


def task(plan_dir: Path, num: int, job_dir: Path) -> Outcome:
    """A launcher's worker: the process of job `num` that ENV_STEP names, spawned."""
    tie_to_sweep()
    plan = SweepDir(plan_dir).read_plan()
    assert plan is not None, f"no plan.json in {plan_dir}"
    process, _, steps = os.environ[ENV_STEP].partition(",")
    n, folder, since = int(process), JobDir(job_dir), time.perf_counter()
    job = plan.job(num)
    with scheduler.catch_stop() as stop:  # a SLURM job's stop: its child killed, an outcome
        outcome = run_step(job, n, folder, since, steps=int(steps) if steps else None)
    if outcome.status is Status.INTERRUPTED and (slurm_job := scheduler.slurm_job()):
        outcome.status, outcome.error = scheduler.cause(slurm_job, stop.signum)
    # In the job's journal now (the sweep writes it again once the launcher's batch is
    # back): a sweep killed meanwhile keeps it, and its progress, said here.
    if len(ran := journal(folder, job.fingerprint)) == n:
        write_journal(folder, job.fingerprint, [*ran, outcome], recorded=False)
    said = f"[{num + 1}/{plan.total}] {job.name} (process {n + 1} of {job.config.process_count})"
    progress.note(f"{said}: {outcome.status.value} in {outcome.wall_time_s:.1f} s")
    return outcome


def journal(job_dir: JobDir, fingerprint: str) -> list[Outcome]:
    """A job's journal (processes.json): the processes a launch of the sweep ran of a job
    it has not recorded yet, from the first, as far as each ended ok. A resumed sweep
    keeps them, and runs only the rest."""
    try:
        data = json.loads(job_dir.rounds.read_text())
        if data.get("fingerprint") != fingerprint or data.get("recorded"):
            return []
        saved = [data["processes"][str(n)] for n in range(len(data["processes"]))]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    kept: list[Outcome] = []
    for n, entry in enumerate(saved):
        result_path, _ = job_dir.process_files(n)
        try:
            result = ChildResult.from_dict(json.loads(result_path.read_text()))
            outcome = Outcome.from_dict(entry, result)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            break
        if outcome.status is not Status.OK:
            break
        kept.append(outcome)
    return kept


def write_journal(job_dir: JobDir, fingerprint: str, ran: list[Outcome], recorded: bool) -> None:
    """The job's processes so far into its journal (`recorded`: its row is written)."""
    job_dir.path.mkdir(parents=True, exist_ok=True)
    processes = {str(n): outcome.to_dict() for n, outcome in enumerate(ran)}
    data = {"fingerprint": fingerprint, "recorded": recorded, "processes": processes}
    write_json_atomic(job_dir.rounds, data)


def tie_to_sweep(poll_s: float = 0.5) -> None:
    """In a loky worker the sweep started: exit when the sweep is gone, or it would run its job
    beside a resumed sweep. A thread: a parent-death signal fires when a *thread* ends."""
    sweep_pid = os.environ.get(ENV_SWEEP_PID)
    if not sweep_pid or os.getppid() != int(sweep_pid):
        return
    if any(t.name == _TIE for t in threading.enumerate()):
        return

    def watch() -> None:
        while os.getppid() == int(sweep_pid):
            time.sleep(poll_s)
        log.error("the sweep's process (pid %s) is gone: this worker exits", sweep_pid)
        os._exit(1)

    threading.Thread(target=watch, name=_TIE, daemon=True).start()
