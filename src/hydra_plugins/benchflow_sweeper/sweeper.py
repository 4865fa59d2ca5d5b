"""A BasicSweeper that checks every job with benchflow's rules before any job starts.

Hydra composes each job before launching; this adds benchflow's own value and
combination checks over the whole grid, so `repeat=0` or an unknown backend
stops the sweep before any work, naming the job, the key and the allowed values.
Invalid combinations are not errors in a sweep: those jobs are recorded as
skipped. The plan (job count and names) feeds the progress display.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


class BenchflowSweeper(BasicSweeper):
    _checked = False

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        super().validate_batch_is_legal(batch)  # Hydra's own composition check
        if self._checked:
            return
        self._checked = True
        from benchflow.config.validate import (
            ConfigError,
            InvalidCombination,
            job_name,
            parse,
            resolve,
        )
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
                cfg = parse(composed)
            except ConfigError as exc:
                errors.append(f"job {num} ({' '.join(overrides)}): {exc}")
                continue
            entry = {"num": num, "name": job_name(cfg), "overrides": list(overrides)}
            try:
                resolved = resolve(cfg)
                entry["name"] = job_name(resolved)
                if (kind := zygote_kind(resolved)) and kind not in kinds:
                    kinds.append(kind)
                    cpus_per_job = resolved.cpus_per_job
            except InvalidCombination as exc:
                entry["skipped"] = str(exc)
            except ConfigError as exc:
                errors.append(f"job {num} ({' '.join(overrides)}): {exc}")
                continue
            jobs.append(entry)
        if errors:
            print("benchflow: error: the sweep has bad values; nothing was run.", file=sys.stderr)
            for line in errors:
                print(f"  {line}", file=sys.stderr)
            raise SystemExit(2)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        # sweep_args: the command line's overrides, so `resume=true` can find this folder.
        sweep_args = [str(a) for a in self.config.hydra.overrides.task]
        plan = {"total": len(all_jobs), "sweep_args": sweep_args, "jobs": jobs}
        (sweep_dir / "plan.json").write_text(json.dumps(plan, indent=2))
        if kinds and type(self.launcher).__name__ == "BasicLauncher":
            # Jobs run in this process: their zygotes import torch (and torch_xla)
            # while the MLflow store and parent run are set up, not after.
            from benchflow.runner.isolated import prestart_zygotes

            prestart_zygotes(kinds, cpus_per_job)
        from benchflow.sweep.callbacks import start_sweep

        start_sweep(self.config)  # the MLflow parent run, now that the grid is valid
