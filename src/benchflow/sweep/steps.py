"""The plan's steps: each job's processes in the order they run, and the warm process
(core/job.Warm) each forks from. Decided here, once; nothing after planning works
them out again.

**Rounds.** A job of several processes (processes=N, 3 by default where the repeats
adapt) runs one process a round, as asv runs its rounds: round r runs process r of
every such job, in the sweep's order, so that a job's processes lie across the sweep's
whole time, not within a few seconds of each other (this host keeps one speed for
about a minute, then another up to 25% slower: benchmarks/RESULTS.md). A job with
`interleave=false` runs all its processes in the first round, one after another.

**Order.** Hydra's (the product of the command line's values), except that the jobs
that share a model build run one after another, gathered at the place of the first.

**Warm processes.** A process forks from the deepest warm process it can share:
*imported* (its backend's zygote: runner/zygote.py), *built* (the model, built once for
the jobs of one build key that run in more than one process) or *compiled* (a job's
later processes fork from an interpreter of the job's own that compiled its step,
where the job compiles on the host in eval). Nothing is forked where the processes
run under a launcher of Hydra's (they are spawned there), with prefork=false, or
where the job sets `env.` variables (torch and its libraries read many at import,
which a forked process did before its variables were set).

A build is shared where at least two of the sweep's processes would build models of
the same build key (models/sharing.py) in one toolchain environment: two jobs, or one
job of several processes whose model takes a while to build (a suite's or the user's;
a built-in one builds in a tenth of a second here, less than a forked process then
spends copying its pages). Its warm process preloads what each of those jobs' own
zygote would (``zygote.union``: a model's eager, Inductor and XLA jobs fork from one
``inductor+xla`` build). An XLA job whose environment sets a variable torch_xla reads
at import (its kind leaves torch_xla out, so that it imports it itself) builds its own.
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
    """The name of the zygote the job's processes fork from (its kind, in its
    toolchain's environment; None: prefork=false, or `env.` variables: spawned)."""
    if not job.config.prefork or settings_of(job.config.env):
        return None
    env = launch_env(job, JobDir(Path(".")))
    kind = backends.get(job.backend).zygote(env, trains=job.config.test.name == "train")
    toolchain = job.config.toolchain
    return kind if toolchain.is_project else named(kind, key_of(toolchain))


def build_key(job: Job) -> str | None:
    """share_build=true: the key of the job's model build, which it may share with the
    sweep's other jobs of that key (None: it builds its own)."""
    cfg = job.config
    if not (cfg.share_build and cfg.prefork) or job.invalid or job.skip:
        return None
    return sharing.build_key(cfg)


def step_key(job: Job) -> str | None:
    """The key of the compiled step the job's later processes fork with (None: each
    compiles its own): a job of several processes that builds apart (build_key) and
    compiles on the host (dynamo, or AOTInductor's export), in eval (a training step
    changes the model it runs on, and a GPU is never used before a fork)."""
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
        key = build_key(job)
        zygote = zygote_kind(job) if key else None
        if key is None or zygote is None:
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
    """A job alone with its build key whose processes would each build a model that
    takes a while to build: several processes, no interpreter of its own that builds it
    once for them (step_key), and a model from a suite or the user's own code."""
    if job.config.model.source == "builtin" or job.config.process_count < 2:
        return False
    return step_key(job) is None


def in_run_order(jobs: Sequence[Job]) -> list[Job]:
    """The jobs in the order they run, each numbered by its place: those that share a
    build gathered at the place of the first, those of one zygote within it together."""
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
    """The jobs with the fingerprint of an earlier one, each with the number of the first
    (xla=auto,PJRT plans openxla twice): the same job, run once, whose row is both's."""
    first: dict[str, int] = {}
    out: dict[int, int] = {}
    for job in sorted(jobs, key=lambda j: j.num):
        if job.fingerprint in first:
            out[job.num] = first[job.fingerprint]
        else:
            first[job.fingerprint] = job.num
    return out


def plan_steps(jobs: Sequence[Job], forks: bool, pairs: dict[int, int]) -> list[Step]:
    """Every process of the jobs that run, in run order (round by round), each with the
    warm process it forks from (`forks`: the sweep runs its processes itself; else
    none); `pairs`: each paired sweep's B and its A, whose steps per repeat B runs."""
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
    """What process `n` of the job forks from: its first process from the job's shared
    build or its zygote; a later one from the job's compiled step where it has one."""
    zygote = zygote_kind(job) if forks else None
    if zygote is None:
        return None
    base = shared.get(job.num) or Warm(zygote)
    step = step_key(job) if n else None
    return dataclasses.replace(base, step=step) if step else base
