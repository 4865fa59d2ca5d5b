"""benchflow's sweeper: the grid (or a plan from `benchflow rerun`) planned and checked
before any job starts, then run by benchflow's loop (sweep/run.py): here under Hydra's basic
launcher, else handed to the launcher's workers a round at a time (sweep/process.task).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf, open_dict

# Launchers whose workers run in a working folder of their own (a Ray worker: its node's).
ELSEWHERE = ("hydra_plugins.hydra_ray_launcher",)


class BenchflowSweeper(Sweeper):
    def __init__(
        self,
        max_batch_size: int | None = None,
        params: Any = None,
        plan: str | None = None,
        single: bool = False,
    ) -> None:
        self.max_batch_size = max_batch_size
        self.params = params
        self.plan_file = plan
        self.single = single
        self.config: Any = None
        self.hydra_context: Any = None
        self.launcher: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from benchflow.cli import exit_refused
        from benchflow.config.compose import Composer
        from benchflow.sweep.run import Sweep
        from benchflow.sweep.start import SweepRefused, begin, grid, plan_sweep, read_plan

        config = self.config
        here = str(OmegaConf.select(config, "hydra.launcher._target_")).endswith(".BasicLauncher")
        given = read_plan(self.plan_file) if self.plan_file else None
        if given is not None:
            jobs = [list(job.overrides) for job in given.jobs()]
        else:
            jobs = grid(self.params or {}, arguments, self.hydra_context.config_loader)
        if not jobs:
            empty = next((a for a in arguments if not grid({}, [a])), " ".join(arguments))
            exit_refused(
                f"{empty} gives no value, so the sweep has no job; allowed: at least one "
                "value for every key"
            )
        if self.single and len(jobs) > 1:
            swept = next(a for a in arguments if len(grid({}, [a])) > 1)
            exit_refused(
                f"{swept}: several values make a sweep, but this is a single run; allowed: "
                "-m to sweep them, or one value (a list value: key=[a,b])"
            )
        composer = Composer(self.hydra_context.config_loader, config)
        try:  # the command line's overrides: how resume=true finds this sweep's folder
            args = [str(a) for a in arguments]
            plan = plan_sweep(composer, jobs, args, given, forks=here, single=self.single)
        except SweepRefused as exc:
            if self.single:
                exit_refused(exc.lines[0])
            exit_refused(
                "the sweep has bad values; nothing was run.", *(f"  {x}" for x in exc.lines)
            )
        from benchflow.tracking.mlflow_runs import check_reachable

        if problem := check_reachable(plan.jobs()[0].config.mlflow):
            exit_refused(f"{problem}; nothing was run.")
        folder = Path(config.hydra.sweep.dir)
        begin(plan, folder)
        if not self.single:
            OmegaConf.save(config, folder / "multirun.yaml")  # as Hydra's own sweeper
        self._sweep_dir_for_every_worker(folder)
        project = Path(config.hydra.runtime.cwd)
        verbose = bool(config.hydra.verbose)
        sweep = Sweep(plan, folder, project, single=self.single, verbose=verbose)
        row = sweep.run(None if here else self._launch, self.max_batch_size)
        if self.single and row is not None and row.status.went_wrong:
            raise SystemExit(1)  # a single run's failure: non-zero, as any command's
        return []

    def _launch(self, first: int, overrides: list[list[str]]) -> list[Any]:
        """Jobs `first`, `first + 1`, ... each with its overrides, through the launcher:
        each one's Outcome (raises what a job's task raised, as Hydra's sweeper does)."""
        return [r.return_value for r in self.launcher.launch(overrides, first)]

    def _sweep_dir_for_every_worker(self, sweep_dir: Path) -> None:
        """The sweep's folder, absolute, in the master config's hydra overrides: Hydra composes
        each job's config again, and a relative hydra.sweep.dir would resolve in a Ray worker's."""
        launcher = type(self.launcher).__module__
        if sweep_dir.is_absolute() or not launcher.startswith(ELSEWHERE):
            return
        with open_dict(self.config):
            self.config.hydra.overrides.hydra.append(f"hydra.sweep.dir={sweep_dir.resolve()}")
