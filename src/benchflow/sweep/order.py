"""The order a sweep runs its jobs in: Hydra's (the product of the command line's
values, in their order), except that the jobs that share a model build
(share_build, sweep/builds.py) run one after another, so that each model is built
once and held while its jobs run, not built again when it comes back.

Each build key's jobs are gathered at the place of its first job, and within a key
those of one zygote (the key's jobs of one toolchain environment share a zygote) in
turn; every other job keeps its place among the rest.
Hydra numbers the jobs in the order they run: a row's ``job.num`` is its place here.
"""

from __future__ import annotations

from collections.abc import Sequence

Build = tuple[str, str]  # a job's build key and the zygote its model's zygote forks from


def run_order(builds: Sequence[Build | None]) -> list[int]:
    """Job indices in run order, from each job's build (None: it builds its own model)."""
    first: dict[object, int] = {}
    for i, build in enumerate(builds):
        if build:
            first.setdefault(build[0], i)
            first.setdefault(build, i)

    def place(i: int) -> tuple[int, int, int]:
        build = builds[i]
        return (first[build[0]], first[build], i) if build else (i, i, i)

    return sorted(range(len(builds)), key=place)
