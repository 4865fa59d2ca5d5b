"""A job's child processes: one, or with processes=N, N one after another (each from
the zygote, or spawned), sharing the adaptive rule's budget and cap, their samples
pooled (results/pooled.py). A process that does not end ok ends the job there."""

from __future__ import annotations

import dataclasses
import math

from benchflow.core.files import write_json_atomic
from benchflow.core.job import Job, JobSpec
from benchflow.core.layout import JobDir
from benchflow.core.status import Status
from benchflow.runner.isolated import Outcome, run_isolated
from benchflow.sweep import progress


def run_processes(
    job: Job,
    job_dir: JobDir,
    place: tuple[int, int],
    env: dict[str, str],
    prefork: tuple[str | None, str | None],
    cores: int,
) -> Outcome:
    """The job's outcome; `place`: its number and the sweep's total (for the progress
    line); `prefork`: the zygote it forks from and its build key (None: spawned);
    `cores`: how many the job's CPU slot holds."""
    cfg = job.config
    processes = cfg.process_count
    if processes > 1:
        cfg = dataclasses.replace(
            cfg,
            processes=processes,
            timed_budget_s=cfg.timed_budget_s / processes,
            max_repeat=max(1, math.ceil(cfg.max_repeat / processes)),
        )
    zygote, key = prefork
    outcomes: list[Outcome] = []
    with progress.running(cfg.progress, place[0], place[1], job.name):
        for n in range(processes):
            prefix = f"process{n}." if n else ""  # process 2..N: files of its own
            result = job_dir.path / f"{prefix}{job_dir.child_result.name}"
            job_file = job_dir.path / f"{prefix}{job_dir.job_file.name}"
            write_json_atomic(job_file, JobSpec(job.name, cfg, str(result)).to_dict())
            outcomes.append(
                run_isolated(
                    job_file,
                    job_dir.path,
                    cfg.timeout_s,
                    result_path=result,
                    log_prefix=prefix,
                    env=env,
                    prefork=zygote,
                    build_key=key,
                )
            )
            if outcomes[-1].status is not Status.OK:
                break
    return _pooled(outcomes, processes, cores)


def _pooled(outcomes: list[Outcome], processes: int, cores: int) -> Outcome:
    """The processes' outcomes as the job's: the first that did not end ok, else one ok
    outcome with their results pooled, over the wall from the first launch to the last
    exit."""
    first, last = outcomes[0], outcomes[-1]
    if processes == 1:
        return last
    launched, ended = first.launched, last.ended
    wall = ended - launched if launched and ended else sum(o.wall_time_s for o in outcomes)
    if last.status is not Status.OK or any(o.result is None for o in outcomes):
        error = f"process {len(outcomes)} of {processes}: {last.error or last.status.value}"
        return dataclasses.replace(last, error=error, wall_time_s=wall, launched=launched)
    from benchflow.results.pooled import pool

    results = [o.result for o in outcomes if o.result is not None]
    return dataclasses.replace(
        last, wall_time_s=wall, launched=launched, result=pool(results, cores)
    )
