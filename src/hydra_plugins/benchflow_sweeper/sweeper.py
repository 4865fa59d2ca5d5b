"""A BasicSweeper that checks every job with benchflow's rules before any job starts.

Hydra composes each job before launching; this plans every job (benchflow.sweep.plan:
values checked, auto choices resolved, the backend looked up, suite rules applied),
so `repeat=0` stops the sweep before any work, naming the job, the key and the
allowed values. Invalid combinations are not errors in a sweep: those jobs are
recorded as `invalid`. plan.json holds every planned job; each task reads its own
back instead of resolving its config again.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from benchflow.core.layout import SweepDir
from benchflow.results.io import write_json_atomic


class BenchflowSweeper(BasicSweeper):
    _checked = False

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        # Hydra's own check composes each job of the batch; the plan below composes every
        # job of the sweep once (the same call, the same errors), so it stands for both.
        if self._checked:
            return
        self._checked = True
        from benchflow.config.errors import ConfigError
        from benchflow.core.job import Plan
        from benchflow.sweep.plan import plan_job
        from benchflow.sweep.task import zygote_kind

        assert self.config is not None and self.hydra_context is not None
        loader = self.hydra_context.config_loader
        jobs, errors = [], []
        kinds: list[str] = []  # the zygotes the jobs fork from, in the order first needed
        cpus_per_job = None
        all_jobs = [job for chunk in (self.overrides or []) for job in chunk]
        for num, overrides in enumerate(all_jobs):
            composed = loader.load_sweep_config(self.config, list(overrides))
            try:
                job = plan_job(composed, num, list(overrides))
            except ConfigError as exc:
                errors.append(f"job {num} ({' '.join(overrides)}): {exc}")
                continue
            runs = not (job.invalid or job.skip)  # others start no child, need no zygote
            if runs and (kind := zygote_kind(job)) and kind not in kinds:
                kinds.append(kind)
                cpus_per_job = job.config.cpus_per_job
            jobs.append(job)
        if errors:
            print("benchflow: error: the sweep has bad values; nothing was run.", file=sys.stderr)
            for line in errors:
                print(f"  {line}", file=sys.stderr)
            raise SystemExit(2)
        sweep = SweepDir(Path(self.config.hydra.sweep.dir))
        sweep.path.mkdir(parents=True, exist_ok=True)
        # sweep_args: the command line's overrides, so `resume=true` can find this folder.
        sweep_args = [str(a) for a in self.config.hydra.overrides.task]
        write_json_atomic(sweep.plan, Plan.of(jobs, len(all_jobs), sweep_args).to_dict())
        if kinds and type(self.launcher).__name__ == "BasicLauncher":
            # Jobs run in this process: their zygotes import torch (and torch_xla)
            # while the MLflow store and parent run are set up, not after.
            from benchflow.runner.isolated import prestart_zygotes

            prestart_zygotes(kinds, cpus_per_job)
        from benchflow.sweep.callbacks import start_sweep

        start_sweep(self.config)  # the MLflow parent run, now that the grid is valid
