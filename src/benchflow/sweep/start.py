"""A sweep's front door: every job planned and checked before any starts, then the
sweep's folder, plan.json, the preforked interpreters and the MLflow parent run.

Hydra's sweeper (hydra_plugins/benchflow_sweeper) hands over the command line's grid,
or a plan made elsewhere (`benchflow rerun` plans its jobs from their records), and
launches the jobs of the :class:`~benchflow.core.job.Plan` this returns, in its order.
A refused sweep stops here, before its folder exists.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchflow.config.errors import ConfigError
from benchflow.core.job import Job, Plan
from benchflow.core.layout import SweepDir

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from benchflow.sweep.compose import Composer


class SweepRefused(Exception):
    """Some jobs of the sweep have bad values: nothing may run. One line per job."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


def read_plan(path: str | Path) -> Plan:
    """A plan written by another command (`benchflow rerun`), to run as it stands."""
    return Plan.from_dict(json.loads(Path(path).read_text()))


def grid(
    params: Mapping[str, Any], arguments: Sequence[str], config_loader: Any = None
) -> list[list[str]]:
    """A sweep's jobs, each as its overrides: the sweeper's params (an experiment's
    grid, hydra.sweeper.params), then the command line's, expanded as Hydra's basic
    sweeper does (a key given in both takes the command line's values)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create(config_loader=config_loader)
    parsed = parser.parse_overrides([*(f"{k}={v}" for k, v in params.items()), *arguments])
    return [list(job) for job in BasicSweeper.split_arguments(parsed, None)[0]]


def plan_sweep(
    composer: Composer,
    grid: Sequence[Sequence[str]],
    sweep_args: Sequence[str],
    given: Plan | None = None,
) -> Plan:
    """Every job of the sweep, planned (sweep/plan.py) and numbered in the order it runs.

    `grid` holds each job's overrides, as Hydra expands the command line; `given`, a plan
    made elsewhere, whose jobs run as planned, in their order (its jobs' overrides must
    still make a Hydra job: each is composed once here). Raises SweepRefused naming
    every job with a bad value."""
    from benchflow.sweep.plan import plan_config

    jobs: list[Job] = []
    errors: list[str] = []
    for num, overrides in enumerate(grid):
        try:
            typed = composer.typed(overrides)
            planned = given.job(num) if given else plan_config(typed, num, overrides)
        except ConfigError as exc:
            errors.append(f"job {num} ({' '.join(overrides)}): {exc}")
            continue
        assert planned is not None, f"the given plan has no job {num}"
        jobs.append(planned)
    if errors:
        raise SweepRefused(errors)
    from benchflow.runner.knobs import check_knobs
    from benchflow.sweep.pairs import pairs_of
    from benchflow.sweep.toolchains import build_toolchains

    try:
        pairs_of(jobs)  # pair=AXIS names an axis of two values (a paired sweep)
        build_toolchains(jobs)
        check_knobs(jobs)  # against each job's own torch, once its environment is there
    except ConfigError as exc:  # (a ToolchainError is one)
        raise SweepRefused([str(exc)]) from None
    if given is None:
        jobs = in_run_order(jobs)
    from benchflow.sweep.builds import launches
    from benchflow.sweep.pairs import calibrated_by_a  # the pairs again: in_run_order renumbered

    return Plan.of(jobs, len(grid), sweep_args, calibrated_by_a(jobs, launches(jobs)))


def in_run_order(jobs: Sequence[Job]) -> list[Job]:
    """The jobs in the order they run (sweep/order.py: those that share a model build
    together: sweep/builds.py), each numbered by its place."""
    from benchflow.sweep.builds import shared_builds
    from benchflow.sweep.order import run_order

    shared = shared_builds(jobs)
    builds = [(s.key, s.zygote) if (s := shared.get(job.num)) else None for job in jobs]
    order = run_order(builds)
    if order == sorted(order):
        return list(jobs)
    return [dataclasses.replace(jobs[i], num=num) for num, i in enumerate(order)]


def start_base(master: DictConfig) -> None:
    """Before the sweep is planned, where its jobs run in this process: start the
    ``torch`` zygote every other kind forks from (runner/zygote.py), so that its imports
    overlap the planning, where the command's own config forks jobs (prefork) in the
    project's environment. A refused sweep kills it at exit, before it is used."""
    from omegaconf import OmegaConf

    from benchflow.runner.pool import POOL
    from benchflow.runner.zygote import BASE

    if (
        OmegaConf.select(master, "prefork") is True
        and not OmegaConf.select(master, "toolchain.pins")
        and OmegaConf.select(master, "toolchain.python") is None
    ):
        POOL.prestart([BASE], OmegaConf.select(master, "cpus_per_job"))


def begin(config: DictConfig, plan: Plan, *, prestart: bool) -> None:
    """The sweep may run: its folder and plan.json, the zygotes its jobs fork from
    (`prestart`: when they run in this process, started while the MLflow store and parent
    run are set up, not after), scipy.stats where this process will use it, and the MLflow
    parent run."""
    from benchflow.sweep.callbacks import start_sweep
    from benchflow.sweep.task import ENV_SWEEP_PID

    sweep = SweepDir(Path(config.hydra.sweep.dir))
    sweep.path.mkdir(parents=True, exist_ok=True)
    sweep.write_plan(plan)
    # A launcher's local workers (joblib's) end with this process (task.tie_to_sweep).
    os.environ[ENV_SWEEP_PID] = str(os.getpid())
    kinds: list[str] = []  # the zygotes the jobs fork from, in the order first needed
    cpus_per_job = None
    paired = False  # a paired sweep's B names its A (sweep/pairs.py)
    for job in plan.jobs():
        launch = plan.launch(job.num)  # None: it runs nothing (invalid, skipped)
        paired |= launch is not None and launch.steps_from is not None
        if launch and (kind := launch.forks_from) and kind not in kinds:
            kinds.append(kind)  # (with a shared build: its model's zygote forks from it)
            cpus_per_job = job.config.cpus_per_job
    if kinds and prestart:
        from benchflow.runner.pool import POOL

        POOL.prestart(kinds, cpus_per_job)
    if prestart or paired:
        # This process takes each job's interval from scipy.stats where the jobs run
        # here, and a paired sweep's looks wherever they run: import it now, while the
        # zygotes start, not at the first job's end or the first look, between two
        # processes (the first look's import fell before a B's process every time, the
        # first job's before the next job's last: 0.5 s each; benchmarks/RESULTS.md).
        import scipy.stats  # noqa: F401
    start_sweep(config)
