"""Hydra callback: the sweep's MLflow parent run, and the report at the end."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from benchflow.config.schema import DEFAULT_BASELINE, BenchConfig
from benchflow.config.validate import ConfigError, parse
from benchflow.core.layout import SweepDir
from benchflow.results.environment import facts
from benchflow.results.io import current, read_rows
from benchflow.results.provenance import packages, provenance
from benchflow.results.row import ResultRow
from benchflow.tracking.mlflow_runs import (
    BASELINE_TAG,
    KIND_SWEEP,
    KIND_TAG,
    SWEEP_DIR_TAG,
    Tracker,
    check_reachable,
    safely,
)
from benchflow.tracking.sync import close_interrupted, status_tags

if TYPE_CHECKING:
    from benchflow.report.model import Report

log = logging.getLogger(__name__)

PACKAGES = "packages.txt"  # the parent run's artifact: every installed distribution


def _sweep(config: DictConfig) -> SweepDir:
    return SweepDir(Path(config.hydra.sweep.dir))


def _bench(config: DictConfig) -> BenchConfig | None:
    """The sweep's shared config, or None where it is not valid on its own (the sweeper
    reports config errors, with every job's context)."""
    try:
        return parse(config)
    except ConfigError:
        return None


def _tracker(bench: BenchConfig, config: DictConfig) -> Tracker | None:
    """The sweep's MLflow connection (None: MLflow is off, or could not be reached)."""
    if not bench.mlflow.enabled:
        return None
    return safely("connection", Tracker, bench.mlflow, Path(config.hydra.runtime.cwd))


class SweepCallback(Callback):
    """Checks that MLflow can be reached before a run starts; prints and logs a sweep's
    report at its end (the sweeper opens its MLflow parent run: start_sweep)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if (bench := _bench(config)) is None:
            return
        if problem := check_reachable(bench.mlflow):
            print(f"benchflow: error: {problem}; nothing was run.", file=sys.stderr)
            raise SystemExit(2)
        # The parent run is opened by the sweeper (start_sweep), once every job of the
        # grid is known to be valid: a refused sweep leaves nothing behind.

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if OmegaConf.select(config, "hydra.sweeper.single"):
            return  # a single run: its progress line is its answer, it has no parent run
        sweep = _sweep(config)
        rows = current(read_rows(sweep.results))
        baseline = str(OmegaConf.select(config, "baseline", default=DEFAULT_BASELINE))
        made = safely("report", _report, rows, baseline, sweep) if rows else None
        if (bench := _bench(config)) is None:
            return
        if bench.pair and rows:
            print(f"paired sweep: `benchflow report {sweep.path} --pair {bench.pair}` judges it")
        run_id = sweep.parent_run_id()
        if not run_id or (tracker := _tracker(bench, config)) is None:
            return
        # Every job has ended: a job run still RUNNING lost its process (a worker or a
        # node killed; the launcher ran the job again, or it has no row).
        _close_interrupted(tracker, sweep, run_id)
        safely("tags", tracker.set_tags, run_id, status_tags(rows))
        safely("artifacts", tracker.log_files, run_id, [sweep.results])
        if made:
            from benchflow.report.output import log_to_mlflow

            report, files = made
            safely("report logging", log_to_mlflow, report, files, tracker.uri, run_id)
        safely("end_run", tracker.end_run, run_id, "ok")


def _close_interrupted(tracker: Tracker, sweep: SweepDir, run_id: str) -> None:
    closed = safely("interrupted runs", close_interrupted, tracker, sweep, run_id)
    if closed and any(closed.values()):
        log.info(
            "MLflow: job runs left RUNNING by a process that ended first: %d logged from "
            "their rows, %d ended KILLED (their jobs ran again, or have no row)",
            closed["completed"],
            closed["killed"],
        )


def _report(rows: list[ResultRow], baseline: str, sweep: SweepDir) -> tuple[Report, list[Path]]:
    """Print the sweep's report (stdout: the sweep's answer) and write sweep_dir/report/."""
    from benchflow.report import output, terminal
    from benchflow.report.model import build_report
    from benchflow.report.sources import Sweep, meta_of

    report = build_report(rows, baseline)
    title = f"benchflow sweep {sweep.path}"
    terminal.print_terminal(report, title, full=output.full_report(sweep.report))
    meta = meta_of(Sweep(label=str(sweep.path), rows=rows), report.baseline)
    files = output.write(report, sweep.report, title, meta)
    log.info("report written to %s", sweep.report)
    return report, files


def start_sweep(config: DictConfig) -> None:
    """Called by benchflow's sweeper once the whole grid is valid: the sweep folder and
    the MLflow parent run (reopened when the folder is being resumed)."""
    if (bench := _bench(config)) is None:
        return  # every job was checked on its own; the shared config need not be valid
    sweep = _sweep(config)
    sweep.path.mkdir(parents=True, exist_ok=True)
    if (tracker := _tracker(bench, config)) is None:
        return
    earlier = sweep.parent_run_id()
    if earlier and sweep.results.exists():
        # Run again into this folder (a resume): go on in the same parent run.
        run_id = earlier
        if safely("reopen", tracker.reopen, run_id):
            safely("tags", tracker.set_tags, run_id, {"benchflow.resumed": time.ctime()})
            log.info("MLflow parent run %s (resumed) at %s", run_id, tracker.uri)
            _close_interrupted(tracker, sweep, run_id)
            return
    overrides = list(config.hydra.overrides.task)
    experiment = config.hydra.runtime.choices.get("experiment")
    name = f"sweep {sweep.path.parent.name} {sweep.path.name}" + (
        f" ({experiment})" if experiment and experiment != "null" else ""
    )
    # Where the sweep ran, as tags (versions, CPUs, env: the jobs' runs have their own).
    prov = provenance(Path(config.hydra.runtime.cwd))
    run_id = safely(
        "start_run",
        tracker.start_run,
        name,
        params={"sweep.overrides": " ".join(overrides) or "(none)"},
        tags={
            KIND_TAG: KIND_SWEEP,
            SWEEP_DIR_TAG: str(sweep.path.resolve()),
            BASELINE_TAG: bench.baseline,
            "command": prov.command,
            **facts(prov, per_job=False),
        },
    )
    if run_id:
        # The whole installed set, whose hash the rows carry as packages_sha256.
        safely("packages", tracker.log_text, run_id, "\n".join(packages()) + "\n", PACKAGES)
        sweep.parent_run.write_text(run_id)
        sweep.tracking_uri.write_text(tracker.uri)
        log.info("MLflow parent run %s at %s", run_id, tracker.uri)
