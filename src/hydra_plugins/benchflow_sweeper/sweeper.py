"""A BasicSweeper that checks every job with benchflow's rules before any job starts.

Hydra composes each job before launching; this plans every job (benchflow.sweep.plan:
values checked, auto choices resolved, the backend looked up, suite rules applied),
so `repeat=0` stops the sweep before any work, naming the job, the key and the
allowed values. Invalid combinations are not errors in a sweep: those jobs are
recorded as `invalid`. plan.json holds every planned job; each task reads its own
back instead of resolving its config again.

Planning composes each distinct set of group choices once (benchflow.sweep.compose)
and applies each job's value overrides to its typed config. With Hydra's basic
launcher (jobs run in this process) the launcher's config for a job is made the same
way, from the plan's bases, instead of Hydra composing the job again.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from benchflow.core.layout import SweepDir

if TYPE_CHECKING:
    from benchflow.core.job import Job
    from benchflow.sweep.compose import Composer
    from benchflow.sweep.order import Build


class _PlannedConfigs:
    """The basic launcher's config loader: a job of the sweep is made from the plan's
    bases (the Composer), as Hydra would compose it, not composed from scratch
    (~80 ms a job here). Nothing is kept per job, so memory stays flat."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self.composer: Composer | None = None  # the sweep's, once the sweeper has it

    def load_sweep_config(self, master_config: Any, sweep_overrides: list[str]) -> Any:
        if self.composer is not None and master_config is self.composer.master:
            return self.composer.compose(sweep_overrides)
        return self._loader.load_sweep_config(master_config, sweep_overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class BenchflowSweeper(BasicSweeper):
    _checked = False
    _planned: _PlannedConfigs | None = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        if type(self.launcher) is BasicLauncher:  # jobs run here, one after another
            self._planned = _PlannedConfigs(hydra_context.config_loader)
            self.launcher.hydra_context = dataclasses.replace(
                hydra_context, config_loader=self._planned
            )

    def split_arguments(self, overrides: Any, max_batch_size: int | None) -> Any:  # type: ignore[override]
        from benchflow.sweep import rerun

        if rerun.PENDING is None:
            return BasicSweeper.split_arguments(overrides, max_batch_size)
        # `benchflow rerun`: the recorded jobs, each with the overrides that made it.
        jobs = [list(job.overrides) for job in rerun.PENDING]
        size = max_batch_size or len(jobs) or 1
        return [jobs[i : i + size] for i in range(0, len(jobs), size)]

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        # Hydra's own check composes each job of the batch; the plan below composes every
        # job of the sweep once (the same call, the same errors), so it stands for both.
        if self._checked:
            return
        self._checked = True
        from benchflow.config.errors import ConfigError
        from benchflow.core.job import Plan
        from benchflow.sweep import rerun
        from benchflow.sweep.compose import Composer
        from benchflow.sweep.plan import plan_config
        from benchflow.sweep.task import build_key, zygote_kind

        assert self.config is not None and self.hydra_context is not None
        composer = Composer(self.hydra_context.config_loader, self.config)
        if self._planned is not None:
            self._planned.composer = composer
        jobs, errors = [], []
        all_jobs = [job for chunk in (self.overrides or []) for job in chunk]
        for num, overrides in enumerate(all_jobs):
            try:
                typed = composer.typed(overrides)
                # A rerun's job was planned from its record (sweep/rerun.py); typing its
                # overrides above checked that its Hydra job can be made.
                job = rerun.PENDING[num] if rerun.PENDING else plan_config(typed, num, overrides)
            except ConfigError as exc:
                errors.append(f"job {num} ({' '.join(overrides)}): {exc}")
                continue
            jobs.append(job)
        if errors:
            print("benchflow: error: the sweep has bad values; nothing was run.", file=sys.stderr)
            for line in errors:
                print(f"  {line}", file=sys.stderr)
            raise SystemExit(2)
        if not rerun.PENDING:  # (a rerun runs the recorded jobs in their recorded order)
            jobs = self._in_run_order(
                jobs, [(k, zygote_kind(j) or "") if (k := build_key(j)) else None for j in jobs]
            )
        kinds: list[str] = []  # the zygotes the jobs fork from, in the order first needed
        cpus_per_job = None
        for job in jobs:
            runs = not (job.invalid or job.skip)  # others start no child, need no zygote
            if runs and (kind := zygote_kind(job)) and kind not in kinds:
                kinds.append(kind)
                cpus_per_job = job.config.cpus_per_job
        sweep = SweepDir(Path(self.config.hydra.sweep.dir))
        sweep.path.mkdir(parents=True, exist_ok=True)
        # sweep_args: the command line's overrides, so `resume=true` can find this folder.
        sweep_args = [str(a) for a in self.config.hydra.overrides.task]
        sweep.write_plan(Plan.of(jobs, len(all_jobs), sweep_args))
        if kinds and self._planned is not None:
            # Jobs run in this process: their zygotes import torch (and torch_xla)
            # while the MLflow store and parent run are set up, not after.
            from benchflow.runner.isolated import prestart_zygotes

            prestart_zygotes(kinds, cpus_per_job)
        from benchflow.sweep.callbacks import start_sweep

        start_sweep(self.config)  # the MLflow parent run, now that the grid is valid

    def _in_run_order(self, jobs: list[Job], builds: list[Build | None]) -> list[Job]:
        """The jobs in the order they run (benchflow.sweep.order: those sharing a model
        build together), numbered in that order; Hydra's batches are reordered in place
        (the first is the batch being checked, which the launcher runs next)."""
        from benchflow.sweep.order import run_order

        order = run_order(builds)
        batches = self.overrides or []
        if order == sorted(order) or not all(isinstance(b, list) for b in batches):
            return jobs
        moved = [jobs[i] for i in order]
        flat = [list(job.overrides) for job in moved]
        for batch in batches:
            assert isinstance(batch, list)
            batch[:], flat = flat[: len(batch)], flat[len(batch) :]
        return [dataclasses.replace(job, num=num) for num, job in enumerate(moved)]
