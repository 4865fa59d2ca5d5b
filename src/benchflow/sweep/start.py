"""A sweep's front door: every job planned and checked before any starts, then the sweep's
folder and plan.json. Hydra's sweeper hands over the grid (or a plan made elsewhere) and
runs the Plan this returns (sweep/run.py); a refused sweep stops before its folder exists.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchflow.config.errors import ConfigError
from benchflow.core.job import Job, Plan
from benchflow.core.layout import SweepDir

if TYPE_CHECKING:
    from benchflow.config.compose import Composer


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
    """A sweep's jobs' overrides: params, then the command line, expanded as Hydra's sweeper."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create(config_loader=config_loader)
    parsed = parser.parse_overrides([*(f"{k}={v}" for k, v in params.items()), *arguments])
    values: dict[str, list[str]] = {}
    for override in parsed:
        key = override.get_key_element()
        if not override.is_sweep_override():
            values[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            values[key] = [f"{key}={v}" for v in override.sweep_string_iterator()]
        else:
            raise HydraException(f"{override.input_line}: a sweep of this kind is not a grid")
    return [list(job) for job in itertools.product(*values.values())]


def plan_sweep(
    composer: Composer,
    grid: Sequence[Sequence[str]],
    sweep_args: Sequence[str],
    given: Plan | None = None,
    forks: bool = True,
    single: bool = False,
) -> Plan:
    """Every job of the sweep, planned and in run order, and its steps (`forks`: forked here);
    `given`: a plan made elsewhere, run as planned. SweepRefused names every bad job."""
    from benchflow.sweep.plan import plan_config

    jobs: list[Job] = []
    errors: list[str] = []
    for num, overrides in enumerate(grid):
        try:
            typed = composer.typed(overrides)
            planned = given.job(num) if given else plan_config(typed, num, overrides, single=single)
            jobs.append(planned)
        except ConfigError as exc:
            errors.append(str(exc) if single else f"job {num} ({' '.join(overrides)}): {exc}")
    if errors:
        raise SweepRefused(errors)
    from benchflow.runner.knobs import check_knobs
    from benchflow.sweep.pairs import pairs_of, steps_from
    from benchflow.sweep.steps import in_run_order, plan_steps
    from benchflow.sweep.toolchains import build_toolchains

    try:
        pairs_of(jobs)  # pair=AXIS names an axis of two values (a paired sweep)
        build_toolchains(jobs)
        check_knobs(jobs)  # against each job's own torch, once its environment is there
    except ConfigError as exc:  # (a ToolchainError is one)
        raise SweepRefused([str(exc)]) from None
    if given is None:
        jobs = in_run_order(jobs)
    return Plan.of(jobs, plan_steps(jobs, forks, steps_from(jobs)), sweep_args)


def begin(plan: Plan, folder: Path) -> None:
    """The sweep may run: its folder and plan.json."""
    from benchflow.sweep.process import ENV_SWEEP_PID

    sweep = SweepDir(folder)
    sweep.path.mkdir(parents=True, exist_ok=True)
    sweep.write_plan(plan)
    # a launcher's local workers end with this process (process.tie_to_sweep)
    os.environ[ENV_SWEEP_PID] = str(os.getpid())
