"""The environments of a sweep's toolchains, built before its folder and its first job
(runner/toolchain.py builds one; a later sweep reuses it)."""

from __future__ import annotations

from collections.abc import Sequence

from benchflow.core.job import Job
from benchflow.runner.interpreter import ToolchainError
from benchflow.runner.toolchain import build, key_of
from benchflow.sweep import progress


def build_toolchains(jobs: Sequence[Job]) -> None:
    """The environment of each toolchain a running job uses, built where it is not yet.
    ToolchainError where one name stands for two environments (reports go by name)."""
    keys: dict[str, str] = {}  # a toolchain's name -> its environment's key
    toolchains = []  # one of each environment, in the order first needed
    for job in jobs:
        tc = job.config.toolchain
        if job.invalid or job.skip or tc.is_project:
            continue
        key = key_of(tc)
        if keys.setdefault(tc.name, key) != key:
            raise ToolchainError(
                f"toolchain.name={tc.name} names two environments in this sweep (another "
                f"python, build or pins); allowed: a name of its own for each"
            )
        if tc not in toolchains:
            toolchains.append(tc)
    for tc in toolchains:  # each name checked before any is built
        env, took = build(tc, progress.note)
        if tc.python is not None:
            progress.note(f"benchflow: toolchain {tc.name}: {tc.python} (torch {tc.build})")
        elif took:
            progress.note(f"benchflow: toolchain {tc.name} built in {took:.1f} s: {env.folder}")
