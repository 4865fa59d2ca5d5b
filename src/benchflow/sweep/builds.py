"""What a job forks from: its zygote (runner/zygote.py), and the model build it shares
with the sweep's other jobs (share_build, on by default).

A build is shared where at least two of a sweep's processes that run would build
models of the same build key (models/sharing.py: the model, its suite, test, batch
size, dtype, seed and matmul precision) in the same toolchain environment: two jobs,
or one job of several processes whose model takes a while to build (a suite's or the
user's; a lone Inductor job's own interpreter builds its model once already:
step_key). The model is then built once, in a zygote of its own (runner/pool.py)
forked from a zygote that preloads what each of those jobs' own zygote would
(``zygote.union``: a model's eager, Inductor and XLA jobs fork from one
``inductor+xla`` build), and every one of them forks from it. A build key of one
process builds in its job, as with share_build=false: sharing it would only add a
process.

An XLA job whose environment sets a variable torch_xla reads at import (its kind leaves
torch_xla out, so that it imports it itself once its environment is set) joins no
shared build: it builds its own. A job with `env.NAME=` variables forks from no zygote:
it is spawned, since torch and the libraries it loads read many variables at import
(OMP_*, TORCH_*, TORCHINDUCTOR_*), which a forked job's interpreter did before its
variables were set. `xla.flags=` (XLA_FLAGS) is read at the first compile: its jobs
fork as any other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchflow import backends
from benchflow.backends.base import XLA_PERSISTENT_CACHE
from benchflow.config.schema import settings_of
from benchflow.core.cpus import ENV_CPUS
from benchflow.core.job import Job, Launch
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
    toolchain's environment; None: prefork=false, or `env.` variables: spawn). Without
    `env`, from the plan alone, as the sweep does to start zygotes before its jobs."""
    if not job.config.prefork or settings_of(job.config.env):
        return None
    if env is None:
        env = launch_env(job, JobDir(Path(".")))
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


def step_key(job: Job) -> str | None:
    """The key of the compiled step a job's later processes fork with, made once in an
    interpreter of the job's own (harness/prebuilt.warm_here); None: each process
    compiles its own. With share_build, for a job of several processes that builds its
    model apart (build_key) and compiles it on the host (dynamo, or AOTInductor's
    export), in eval (a training step changes the model it runs on, and a GPU is never
    used before a fork)."""
    cfg = job.config
    backend = backends.get(job.backend)
    if build_key(job) is None or zygote_kind(job) is None or cfg.process_count < 2:
        return None
    host = not backend.on_xla and cfg.accelerator.name == "cpu"
    if not (host and (backend.compiles or backend.exports)):
        return None
    return sharing.step_key(cfg) if cfg.test.name == "eval" else None


def compile_cache_env(job: Job, job_dir: JobDir) -> dict[str, str]:
    """compile_cache=cold: a fresh Inductor cache for this job (and XLA's in-memory one,
    which dies with the child), so compile times never depend on what ran before.
    warm: one cache shared by every job ($BENCHFLOW_CACHE_DIR, default
    ~/.cache/benchflow), Inductor's and XLA's persistent one, as a second run sees."""
    backend = backends.get(job.backend)
    if job.config.compile_cache == "cold":
        return backend.cache_env(str(job_dir.compile_cache), persistent=False)
    return backend.cache_env(str(cache_root()), persistent=True)


def launch_env(job: Job, job_dir: JobDir) -> dict[str, str]:
    """The variables the job's settings give its child: its compile caches
    (compile_cache_env), XLA_FLAGS (`xla.flags`) and its `env.` variables."""
    cfg = job.config
    env = compile_cache_env(job, job_dir)
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
    """Why `env.<name>=` cannot be set (None: it can): not a variable's name, or one
    benchflow sets itself."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return f"env.{name}: not an environment variable's name; allowed: letters, digits, _"
    if name in SET_BY:
        return f"env.{name}: benchflow sets {name} for every job; allowed: {SET_BY[name]}"
    if name.startswith("BENCHFLOW_"):
        return f"env.{name}: BENCHFLOW_* variables are benchflow's own; allowed: another name"
    return None


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
        # (a grid point planned twice runs once: sweep/rounds.py)
        distinct = list({job.fingerprint: job for job, _ in members}.values())
        if len(distinct) >= 2 or _builds_in_each_process(distinct[0]):
            zygote = union([z for _, z in members])
            shared |= {job.num: Shared(key, zygote) for job, _ in members}
    return shared


def _builds_in_each_process(job: Job) -> bool:
    """A job alone with its build key whose processes would each build a model that
    takes a while to build: several processes, no interpreter of its own that builds it
    once for them (step_key), and a model from a suite or the user's own code, not a
    built-in one (which builds in a tenth of a second here, less than a process forked
    from a build spends more, copying the model's pages as it touches them)."""
    if job.config.model.source == "builtin" or job.config.process_count < 2:
        return False
    return step_key(job) is None


def launches(jobs: Sequence[Job]) -> dict[int, Launch]:
    """How each of a sweep's jobs that runs is launched (by number; the plan writes it
    in plan.json): the zygote it forks from, the build it shares, the next build it
    starts ahead (build_ahead), the round of the last process that forks from its
    build (after which the build's zygote goes), and the step its later processes fork
    with (step_key); a job planned twice runs once
    (sweep/rounds.duplicates_of), so its second planning is no build's last use."""
    shared = shared_builds(jobs)
    skipped = rounds.duplicates_of(jobs)
    last: dict[Shared, tuple[int, int]] = {}  # each build's last use: (round, job number)
    for job in jobs:
        if (share := shared.get(job.num)) is not None and job.num not in skipped:
            use = (job.config.process_count - 1 if rounds.interleaved(job) else 0, job.num)
            last[share] = max(last.get(share, use), use)
    out: dict[int, Launch] = {}
    in_order = sorted(shared)
    for job in jobs:
        if job.invalid or job.skip:
            continue  # it runs nothing
        ahead = _next_build(job, shared, in_order)
        step = step_key(job)
        if (share := shared.get(job.num)) is None:
            out[job.num] = Launch(zygote_kind(job), ahead=ahead, step=step)
            continue
        final = last.get(share)
        last_round = final[0] if final and final[1] == job.num else None
        out[job.num] = Launch(share.zygote, share.key, ahead, last_round, step=step)
    return out


def _next_build(job: Job, shared: dict[int, Shared], in_order: list[int]) -> int | None:
    """build_ahead: the first job of the next shared build after `job`'s in run order
    (`in_order`: the numbers of the jobs that share one, sorted), which its process may
    build while `job` and the rest before it run; None if `job` turns off build_ahead
    or no other shared build follows."""
    if not (job.config.build_ahead and job.config.share_build):
        return None
    mine = shared.get(job.num)
    return next((n for n in in_order if n > job.num and shared[n] != mine), None)
