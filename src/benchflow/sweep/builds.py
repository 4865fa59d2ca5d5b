"""What a job forks from: its zygote (runner/zygote.py), and the model build it shares
with the sweep's other jobs (share_build, on by default).

A build is shared where at least two of a sweep's jobs that run have the same build
key (models/sharing.py: the model, its suite, test, batch size, dtype, seed and matmul
precision) in the same toolchain environment. The model is then built once, in a
zygote of its own (runner/model_zygote.py) forked from a zygote that preloads what each
of those jobs' own zygote would (``zygote.union``: a model's eager, Inductor and XLA
jobs fork from one ``inductor+xla`` build), and every one of them forks from it. A
build key with one job builds in its job, as with share_build=false: sharing it would
only add a process.

An XLA job whose environment sets a variable torch_xla reads at import (its kind leaves
torch_xla out, so that it imports it itself once its environment is set) joins no
shared build: it builds its own. No sweep setting gives a job such a variable today.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchflow import backends
from benchflow.core.job import Job, Plan
from benchflow.core.layout import JobDir, cache_root
from benchflow.models import sharing
from benchflow.runner.toolchain import key_of
from benchflow.runner.zygote import named, preloads, split, union
from benchflow.sweep import rounds


@dataclass(frozen=True)
class Shared:
    """A job's share of a build: its key and the zygote its model's zygote forks from."""

    key: str
    zygote: str


def zygote_kind(job: Job, env: dict[str, str] | None = None) -> str | None:
    """The name of the zygote this job forks from (runner/zygote.named: its kind, in its
    toolchain's environment; None: prefork=false, spawn). Without `env`, from the plan
    alone, as the sweep does to start zygotes before its jobs."""
    if not job.config.prefork:
        return None
    if env is None:
        env = compile_cache_env(job, JobDir(Path(".")))
    kind = backends.get(job.backend).zygote(env, trains=job.config.test.name == "train")
    toolchain = job.config.toolchain
    if kind is None or toolchain.is_project:
        return kind
    return named(kind, key_of(toolchain))


def build_key(job: Job) -> str | None:
    """share_build=true: the key of the job's model build, which it may share with the
    sweep's other jobs of that key (None: it builds its own)."""
    cfg = job.config
    if not (cfg.share_build and cfg.prefork) or job.invalid or job.skip:
        return None
    return sharing.build_key(cfg)


def compile_cache_env(job: Job, job_dir: JobDir) -> dict[str, str]:
    """compile_cache=cold: a fresh Inductor cache for this job (and XLA's in-memory one,
    which dies with the child), so compile times never depend on what ran before.
    warm: one cache shared by every job ($BENCHFLOW_CACHE_DIR, default
    ~/.cache/benchflow), Inductor's and XLA's persistent one, as a second run sees."""
    backend = backends.get(job.backend)
    if job.config.compile_cache == "cold":
        return backend.cache_env(str(job_dir.compile_cache), persistent=False)
    return backend.cache_env(str(cache_root()), persistent=True)


def _imports_xla_itself(job: Job, zygote: str) -> bool:
    return backends.get(job.backend).on_xla and "torch_xla" not in preloads(split(zygote)[0])


def shared_builds(jobs: Sequence[Job]) -> dict[int, Shared]:
    """The jobs (by number) that fork from a shared build, and which."""
    by_key: dict[tuple[str, str | None], list[tuple[Job, str]]] = {}
    for job in jobs:
        key = build_key(job)
        zygote = zygote_kind(job) if key else None
        if key is not None and zygote is not None and not _imports_xla_itself(job, zygote):
            by_key.setdefault((key, split(zygote)[1]), []).append((job, zygote))
    shared: dict[int, Shared] = {}
    for (key, _), members in by_key.items():
        # two distinct jobs (a grid point planned twice runs once: sweep/rounds.py)
        if len({job.fingerprint for job, _ in members}) >= 2:
            zygote = union([z for _, z in members])
            shared |= {job.num: Shared(key, zygote) for job, _ in members}
    return shared


_plan_memo: tuple[Plan, dict[int, Shared], dict[Shared, tuple[int, int]]] | None = None


def _of_plan(plan: Plan) -> dict[int, Shared]:
    """shared_builds of the plan's jobs, computed once per plan (SweepDir.read_plan keeps
    one object while plan.json stays the same)."""
    return _memo(plan)[1]


def _memo(plan: Plan) -> tuple[Plan, dict[int, Shared], dict[Shared, tuple[int, int]]]:
    """The plan's shared builds, and each one's last use: the round and job number of
    the last process that forks from it (a duplicate job never runs: sweep/rounds.py)."""
    global _plan_memo
    if _plan_memo is None or _plan_memo[0] is not plan:
        jobs = plan.jobs()
        shared = shared_builds(jobs)
        skipped = rounds.duplicates_of(jobs)
        last: dict[Shared, tuple[int, int]] = {}
        for job in jobs:
            if (share := shared.get(job.num)) is not None and job.num not in skipped:
                use = (job.config.process_count - 1 if rounds.interleaved(job) else 0, job.num)
                last[share] = max(last.get(share, use), use)
        _plan_memo = (plan, shared, last)
    return _plan_memo


def shared_of(job: Job, plan: Plan | None) -> Shared | None:
    """The build `job` shares in its sweep's plan (None: it builds its own; a single run
    has no one to share with)."""
    if plan is None or build_key(job) is None:
        return None
    return _of_plan(plan).get(job.num)


def next_build(job: Job, plan: Plan) -> tuple[Job, Shared] | None:
    """build_ahead: the next shared build after `job`'s in run order (its first job, and
    the build), which its process may make while `job` and the rest before it run; None
    if `job` turns off build_ahead or no other shared build follows."""
    if not (job.config.build_ahead and job.config.share_build):
        return None
    shared = _of_plan(plan)
    mine = shared.get(job.num)
    for later in sorted(n for n in shared if n > job.num):
        if shared[later] != mine:
            first = plan.job(later)
            return (first, shared[later]) if first is not None else None
    return None


def last_of_build(job: Job, plan: Plan, round_index: int) -> Shared | None:
    """The build `job` shares, where this round's process of `job` is the last of the
    sweep to fork from it (its zygote may go after it); None otherwise."""
    _, shared, last = _memo(plan)
    mine = shared.get(job.num)
    return mine if mine is not None and last.get(mine) == (round_index, job.num) else None
