"""Hydra's basic sweeper, handing the sweep to benchflow (benchflow.sweep.start): every
job is planned and checked before any starts, and a refused sweep leaves no folder.

`plan` (hydra.sweeper.plan=PATH) runs a plan made elsewhere (`benchflow rerun`) instead
of the command line's grid. With Hydra's basic launcher (jobs run in this process) the
launcher's config for a job is made from the plan's composed bases, not composed again,
and a job's later rounds run with the configs its first round was given (_Again).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, configure_log, env_override
from hydra.experimental.callback import Callback
from omegaconf import OmegaConf, open_dict

# Launchers (their modules) whose workers run in a working folder of their own: a Ray
# worker in its node's.
ELSEWHERE = ("hydra_plugins.hydra_ray_launcher",)


class _PlannedConfigs:
    """The basic launcher's config loader: a job of the sweep is made from the plan's
    bases (benchflow.sweep.compose), as Hydra would compose it (~80 ms a job here)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self.composer: Any = None  # the sweep's Composer, once planned

    def load_sweep_config(self, master_config: Any, sweep_overrides: list[str]) -> Any:
        if self.composer is not None and master_config is self.composer.master:
            return self.composer.compose(sweep_overrides)
        return self._loader.load_sweep_config(master_config, sweep_overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _Job(NamedTuple):  # (not a dataclass: Hydra's plugin scan runs this module unnamed)
    """What a job's later rounds take from its first: where it runs (sweep.task.Where)
    and the part of Hydra's config that run_job applies around the task, small and
    detached from the config (a job's full configs are about 300 KB)."""

    where: Any  # benchflow.sweep.task.Where
    logging: dict[str, Any]  # hydra.job_logging, resolved
    verbose: Any
    env_set: dict[str, str]
    chdir: bool


class _Again:
    """A job's later rounds with Hydra's basic launcher: the task runs again where its
    first round ran, with the log file and environment Hydra gave it then, without
    Hydra's run_job. That copied the whole config four times and wrote its three
    .hydra/*.yaml files again for every process of every round (88 ms a process on this
    VM: benchmarks/RESULTS.md); the job's config and its folder's files are the same in
    every round, and the task takes its job from plan.json. Not where a callback
    watches each job (on_job_start, on_job_end): those launches go through Hydra."""

    def __init__(self, launcher: BasicLauncher, callbacks: Sequence[Any]) -> None:
        self.launcher = launcher
        self.first: dict[int, _Job] = {}  # by job number
        self.watched = any(
            getattr(type(c), hook) is not getattr(Callback, hook)
            for c in callbacks
            for hook in ("on_job_start", "on_job_end")
        )
        task = launcher.task_function
        assert task is not None

        def remember(cfg: Any) -> Any:
            from benchflow.sweep.task import Where  # (here: a refused sweep never needs it)

            where = Where.from_hydra()
            job = where.plan.job(where.num) if where.plan else None
            if job is not None and list(job.overrides) == where.overrides:
                hc = HydraConfig.get()
                verbose = hc.verbose
                self.first[where.num] = _Job(
                    where,
                    OmegaConf.to_container(hc.job_logging, resolve=True),  # type: ignore[arg-type]
                    OmegaConf.to_container(verbose) if OmegaConf.is_list(verbose) else verbose,
                    {str(k): str(v) for k, v in hc.job.env_set.items()},
                    bool(hc.job.chdir),
                )
            return task(cfg)

        launcher.task_function = remember

    def launch(self, batch: list[list[str]], first: int) -> Sequence[JobReturn]:
        nums = range(first, first + len(batch))
        if self.watched or not all(n in self.first for n in nums):
            return self.launcher.launch(batch, initial_job_idx=first)
        return [
            self._run(self.first[n], overrides) for n, overrides in zip(nums, batch, strict=True)
        ]

    def _run(self, job: _Job, overrides: list[str]) -> JobReturn:
        """As Hydra's run_job, from the job's first round."""
        cwd = os.getcwd()
        ret = JobReturn(overrides=overrides)
        try:
            if job.chdir:
                os.chdir(job.where.job_dir.path)
            ret.working_dir = os.getcwd()
            verbose = job.verbose
            configure_log(
                OmegaConf.create(job.logging),
                OmegaConf.create(verbose) if isinstance(verbose, list) else verbose,
            )
            with env_override(job.env_set):
                from benchflow.sweep.task import run_job

                try:
                    ret.return_value = run_job(None, job.where)
                    ret.status = JobStatus.COMPLETED
                except Exception as exc:  # raised by the sweeper, as Hydra's
                    ret.return_value, ret.status = exc, JobStatus.FAILED
            return ret
        finally:
            os.chdir(cwd)
            main = self.launcher.config
            assert main is not None
            configure_log(main.hydra.hydra_logging, main.hydra.verbose)


class BenchflowSweeper(BasicSweeper):
    def __init__(self, max_batch_size: int | None, params: Any = None, plan: str | None = None):
        super().__init__(max_batch_size=max_batch_size, params=params)
        self.plan_file = plan
        self._planned: _PlannedConfigs | None = None
        self._again: _Again | None = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        if type(self.launcher) is BasicLauncher:  # jobs run here, one after another
            self._planned = _PlannedConfigs(hydra_context.config_loader)
            self.launcher.hydra_context = dataclasses.replace(
                hydra_context, config_loader=self._planned
            )
            self._again = _Again(self.launcher, hydra_context.callbacks.callbacks)

    def _sweep_dir_for_every_worker(self, sweep_dir: Path) -> None:
        """The sweep's folder as an absolute path in every job's config. Hydra composes
        each job's config again (load_sweep_config), so a relative hydra.sweep.dir
        (multirun/<date>/<time>) is resolved in the job's own working folder; a Ray
        worker runs in its node's (`ray start`'s), not this one, and would write its
        rows there. The master config's hydra overrides are the base of every job's
        composition: the absolute folder is added there, not to the jobs' own
        overrides (which name each job, and find a sweep to resume). Only for the
        launchers whose workers work elsewhere (SLURM's start in the submitting folder)."""
        launcher = type(self.launcher).__module__
        if sweep_dir.is_absolute() or not launcher.startswith(ELSEWHERE):
            return
        absolute = f"hydra.sweep.dir={sweep_dir.resolve()}"
        assert self.config is not None
        with open_dict(self.config):
            self.config.hydra.overrides.hydra.append(absolute)

    def sweep(self, arguments: list[str]) -> Any:
        from benchflow.core.layout import SweepDir
        from benchflow.sweep import pairs, progress, rounds
        from benchflow.sweep.compose import Composer
        from benchflow.sweep.start import SweepRefused, begin, plan_sweep, read_plan, start_base
        from benchflow.sweep.start import grid as expand

        assert self.config is not None and self.hydra_context is not None
        assert self.launcher is not None
        given = read_plan(self.plan_file) if self.plan_file else None
        if given is not None:
            grid = [list(job.overrides) for job in given.jobs()]
        else:
            grid = expand(self.params or {}, arguments, self.hydra_context.config_loader)
        composer = Composer(self.hydra_context.config_loader, self.config)
        if self._planned is not None:  # its jobs run in this process: import meanwhile
            start_base(self.config)
        try:  # the command line's overrides: how resume=true finds this sweep's folder
            plan = plan_sweep(composer, grid, [str(a) for a in arguments], given)
        except SweepRefused as exc:
            print("benchflow: error: the sweep has bad values; nothing was run.", file=sys.stderr)
            for line in exc.lines:
                print(f"  {line}", file=sys.stderr)
            raise SystemExit(2) from None
        if self._planned is not None:
            self._planned.composer = composer
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        self._sweep_dir_for_every_worker(sweep_dir)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")  # as Hydra's own sweeper
        begin(self.config, plan, prestart=self._planned is not None)
        jobs = plan.jobs()
        size = self.max_batch_size or len(jobs) or 1
        sweep = SweepDir(sweep_dir)
        count, token = rounds.count(jobs), rounds.new_token()
        duplicates = rounds.duplicates_of(jobs)
        by_num = {job.num: job for job in jobs}
        for num, first in duplicates.items():
            progress.duplicate(by_num[num], by_num[first], len(jobs))
        rounds.end(sweep)  # a killed launch's round, if it left one
        stopping = pairs.Stopping.of(sweep, plan, token)  # a paired sweep's (pair=AXIS)
        returns = []
        try:
            for index in range(count):  # interleaved rounds (benchflow.sweep.rounds)
                skip = {*duplicates, *stopping.closed}
                launches = rounds.launches(jobs, index, size, skip, stopping.swaps(index))
                if not launches:
                    break  # a paired sweep whose pairs are all decided
                if count > 1:
                    rounds.begin(sweep, index, count, token, stopping.closing)
                    progress.note(f"round {index + 1} of {count}: each job's process {index + 1}")
                for first, batch in launches:
                    if index and self._again is not None:
                        results = self._again.launch(batch, first)
                    else:
                        results = self.launcher.launch(batch, initial_job_idx=first)
                    for result in results:
                        _ = result.return_value  # raises what a job raised, as Hydra's
                    returns.append(results)
                stopping.look(index + 1, count)
        finally:
            rounds.end(sweep)
        return returns
