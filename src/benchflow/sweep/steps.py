"""The plan's steps: each job's processes in run order, and the warm process (core/job.Warm)
each forks from, decided once at planning.

A job of several processes runs one a round, so that its processes lie across the sweep's
time (docs/timing.md); jobs that share a build run together. A process forks from the
deepest warm process it can share (docs/isolation.md); none under a Hydra launcher, with
prefork=false, or with `env.` variables: torch reads many at import.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from benchflow import backends
from benchflow.config.schema import settings_of
from benchflow.core.job import Job, Step, Warm
from benchflow.core.layout import JobDir
from benchflow.models import sharing
from benchflow.runner.toolchain import key_of
from benchflow.runner.zygote import named, preloads, split, union
from benchflow.sweep.process import launch_env


def zygote_kind(job: Job) -> str | None:
    """The zygote the job's processes fork from (None: they are spawned)."""
    if not job.config.prefork or settings_of(job.config.env):
        return None
    env = launch_env(job, JobDir(Path(".")))
    kind = backends.get(job.backend).zygote(env, trains=job.config.test.name == "train")
    toolchain = job.config.toolchain
    return kind if toolchain.is_project else named(kind, key_of(toolchain))


def build_key(job: Job) -> str | None:
    """The key of the model build the job may share (None: it builds its own)."""
    cfg = job.config
    if not (cfg.share_build and cfg.prefork) or job.invalid or job.skip:
        return None
    return sharing.build_key(cfg)


def step_key(job: Job) -> str | None:
    """The key of the compiled step the job's later processes fork with (None: each compiles
    its own): in eval only (training changes its model), on the host (no GPU before a fork)."""
    cfg = job.config
    backend = backends.get(job.backend)
    if build_key(job) is None or zygote_kind(job) is None or cfg.process_count < 2:
        return None
    host = not backend.on_xla and cfg.accelerator.name == "cpu"
    if not (host and (backend.compiles or backend.exports)) or cfg.test.name != "eval":
        return None
    return sharing.step_key(cfg)


def shared_builds(jobs: Sequence[Job]) -> dict[int, Warm]:
    """The jobs (by number) whose processes fork from a shared build, and which."""
    by_key: dict[tuple[str, str | None], list[tuple[Job, str]]] = {}
    for job in jobs:
        if (key := build_key(job)) is None or (zygote := zygote_kind(job)) is None:
            continue
        if backends.get(job.backend).on_xla and "torch_xla" not in preloads(split(zygote)[0]):
            continue  # it imports torch_xla itself, after its environment is set
        by_key.setdefault((key, split(zygote)[1]), []).append((job, zygote))
    out: dict[int, Warm] = {}
    for (key, _), members in by_key.items():
        distinct = list({job.fingerprint: job for job, _ in members}.values())
        if len(distinct) >= 2 or _slow_to_build_alone(distinct[0]):
            warm = Warm(union([z for _, z in members]), key)
            out |= {job.num: warm for job, _ in members}
    return out


def _slow_to_build_alone(job: Job) -> bool:
    """A lone job of its build key whose processes would each build a slow (not built-in) model."""
    if job.config.model.source == "builtin" or job.config.process_count < 2:
        return False
    return step_key(job) is None


def in_run_order(jobs: Sequence[Job]) -> list[Job]:
    """The jobs in run order, renumbered: those that share a build at the first's place."""
    shared = shared_builds(jobs)
    first: dict[object, int] = {}
    for i, job in enumerate(jobs):
        if (warm := shared.get(job.num)) is not None:
            first.setdefault(warm.build, i)
            first.setdefault(warm, i)

    def place(i: int) -> tuple[int, int, int]:
        warm = shared.get(jobs[i].num)
        return (first[warm.build], first[warm], i) if warm else (i, i, i)

    order = sorted(range(len(jobs)), key=place)
    return [dataclasses.replace(jobs[i], num=num) for num, i in enumerate(order)]


def interleaved(job: Job) -> bool:
    """Does the job run one process a round (else all in the first round)?"""
    cfg = job.config
    return cfg.interleave and cfg.process_count > 1


def duplicates_of(jobs: Sequence[Job]) -> dict[int, int]:
    """The jobs with an earlier one's fingerprint, each with the first's number: run once."""
    first: dict[str, int] = {}
    out: dict[int, int] = {}
    for job in sorted(jobs, key=lambda j: j.num):
        if job.fingerprint in first:
            out[job.num] = first[job.fingerprint]
        else:
            first[job.fingerprint] = job.num
    return out


def plan_steps(jobs: Sequence[Job], forks: bool, pairs: dict[int, int]) -> list[Step]:
    """Every process of the jobs that run, round by round, with the warm process it forks
    from (`forks`: else none); `pairs`: each paired B and its A, whose steps B runs."""
    running = [j for j in jobs if not (j.invalid or j.skip)]
    twice = duplicates_of(running)
    running = [j for j in running if j.num not in twice]
    shared = shared_builds(running) if forks else {}
    steps: list[Step] = []
    rounds = max((j.config.process_count for j in running if interleaved(j)), default=1)
    for r in range(rounds):
        for job in running:
            count = job.config.process_count
            processes = [r] if interleaved(job) else list(range(count)) if r == 0 else []
            for n in (p for p in processes if p < count):
                steps.append(Step(job.num, n, r, _warm(job, n, shared, forks), pairs.get(job.num)))
    return steps


def _warm(job: Job, n: int, shared: dict[int, Warm], forks: bool) -> Warm | None:
    """What process `n` of the job forks from: a later one, its compiled step if any."""
    zygote = zygote_kind(job) if forks else None
    if zygote is None:
        return None
    base = shared.get(job.num) or Warm(zygote)
    step = step_key(job) if n else None
    return dataclasses.replace(base, step=step) if step else base
