"""The environments of a sweep's toolchains, built before its folder and its first job
(runner/toolchain.py builds one; a later sweep reuses it)."""

from __future__ import annotations

from collections.abc import Sequence

from benchflow.core.job import Job
from benchflow.runner.toolchain import build
from benchflow.sweep import progress


def build_toolchains(jobs: Sequence[Job]) -> None:
    """The environment of each toolchain that a job that runs uses, built where it is
    not yet, with a line for each build. Raises ToolchainError (runner/toolchain.py)
    naming the toolchain and what uv could not install."""
    seen: set[str] = set()
    for job in jobs:
        tc = job.config.toolchain
        if job.invalid or job.skip or tc.is_project or tc.name in seen:
            continue
        seen.add(tc.name)
        env, took = build(tc, progress.note)
        if took:
            progress.note(f"benchflow: toolchain {tc.name} built in {took:.1f} s: {env.folder}")
