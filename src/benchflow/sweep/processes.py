"""A job's child processes: one, or with processes=N, N of them (each from the zygote,
or spawned), sharing the adaptive rule's budget and cap, their samples pooled
(results/pooled.py). In a sweep they run in interleaved rounds (sweep/rounds.py), one
process of each job a round; elsewhere (a single run, interleave=false) one after
another (sweep/task.execute runs both). A process that does not end ok ends the job
there."""

from __future__ import annotations

import dataclasses
import math

from benchflow.config.schema import BenchConfig
from benchflow.core.job import Job, JobSpec
from benchflow.core.layout import JobDir
from benchflow.core.status import Status
from benchflow.runner.isolated import Outcome, interrupted, run_isolated
from benchflow.runner.pool import POOL


def process_config(cfg: BenchConfig, steps: int | None = None) -> BenchConfig:
    """What each of the job's processes is told: the adaptive rule's budget and cap
    shared among them; `steps`, where the first process calibrated its steps per repeat,
    that count, which a later process takes as given (as pyperf's worker processes run
    the loops its first one calibrated): every repeat of the job is as long. (The
    fields set here are models/sharing.PER_PROCESS: a compiled step is shared across them.)"""
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


def run_process(
    job: Job,
    job_dir: JobDir,
    n: int,
    env: dict[str, str],
    prefork: tuple[str | None, str | None, str | None],
    steps: int | None = None,
) -> Outcome:
    """Process `n` (from 0) of the job; `prefork`: the zygote it forks from, its build
    key and its step key (None: spawned; runner/isolated.run_isolated); `steps`: the
    first process's calibrated steps per repeat."""
    try:
        cfg = process_config(job.config, steps)
        result, job_file = job_dir.process_files(n)
        zygote, key, step_key = prefork
        try:
            return run_isolated(
                JobSpec(job.name, cfg, str(result)),
                job_file,
                job_dir.path,
                job_dir.process_prefix(n),
                env,
                prefork=zygote,
                build_key=key,
                step_key=step_key,
            )
        finally:
            POOL.release_ahead()  # a child that died over a hold left the builds ahead stopped
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM before its child started (its files written, its zygote made
        # ready, its model built: seconds on a busy host). Its progress line is out, so
        # it is under way for the user: it gets its `interrupted` row, as in its child.
        return interrupted(0.0)


def pooled(outcomes: list[Outcome], processes: int, cores: int) -> Outcome:
    """The processes' outcomes as the job's: the first that did not end ok, else one ok
    outcome with their results pooled. Its wall: the processes' own walls added up (a
    job's processes lie across the sweep's rounds)."""
    first, last = outcomes[0], outcomes[-1]
    if processes == 1:
        return last
    launched, wall = first.launched, sum(o.wall_time_s for o in outcomes)
    if last.status is not Status.OK or any(o.result is None for o in outcomes):
        error = f"process {len(outcomes)} of {processes}: {last.error or last.status.value}"
        return dataclasses.replace(last, error=error, wall_time_s=wall, launched=launched)
    from benchflow.results.pooled import pool

    results = [o.result for o in outcomes if o.result is not None]
    return dataclasses.replace(
        last, wall_time_s=wall, launched=launched, result=pool(results, cores)
    )
