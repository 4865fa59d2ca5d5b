"""A job's row from its processes' Outcomes and its MLflow run, as sweep/run.py records
them; the sweep's MLflow parent run, and its report at its end."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchflow.config.schema import DEFAULT_BASELINE, MlflowConfig
from benchflow.core.job import Job
from benchflow.core.layout import JobDir, SweepDir
from benchflow.core.status import Status
from benchflow.results import phases
from benchflow.results.child import ChildResult
from benchflow.results.environment import facts
from benchflow.results.provenance import packages, provenance
from benchflow.results.row import JobInfo, Provenance, ResultRow, build_row
from benchflow.runner.isolated import Outcome
from benchflow.runner.toolchain import environment
from benchflow.tracking.mlflow_runs import (
    BASELINE_TAG,
    KIND_SWEEP,
    KIND_TAG,
    SWEEP_DIR_TAG,
    Tracker,
    safely,
)
from benchflow.tracking.sync import close_interrupted, job_params, log_job, status_tags

log = logging.getLogger(__name__)

PACKAGES = "packages.txt"  # the parent run's artifact: every installed distribution


def pooled(outcomes: Sequence[Outcome], processes: int) -> Outcome:
    """The job's outcome: its first not ok, else its results pooled, its wall their sum."""
    first, last = outcomes[0], outcomes[-1]
    if processes == 1:
        return last
    launched, wall = first.launched, sum(o.wall_time_s for o in outcomes)
    if last.status is not Status.OK or any(o.result is None for o in outcomes):
        error = f"process {len(outcomes)} of {processes}: {last.error or last.status.value}"
        return dataclasses.replace(last, error=error, wall_time_s=wall, launched=launched)
    from benchflow.results.pooled import pool

    results = [o.result for o in outcomes if o.result is not None]
    return dataclasses.replace(
        last, wall_time_s=wall, launched=launched, result=pool(results, first.cores)
    )


def pooled_row(
    job: Job, job_dir: JobDir, ran: Sequence[Outcome], notes: list[str], info: JobInfo
) -> ResultRow:
    """The job's row from its processes `ran`, with `notes`; `info`: the row's `job`."""
    outcome = pooled(ran, job.config.process_count)
    first = ran[0]
    info.notes += [*first.ir_notes, *notes]
    info.started_at, info.cpus, info.gpu = first.started_at, first.cpus, first.gpu
    info.cpu_wait_s = sum(o.cpu_wait_s for o in ran)
    info.node = ",".join(dict.fromkeys(o.node for o in ran if o.node)) or info.node
    if outcome.status is Status.OK:
        info.ir_files = first.ir_files
    child = outcome.result
    timings = child.child_timings if child else None
    info.phases = phases.breakdown(
        gap=sum(o.gap_s for o in ran),
        wall=outcome.wall_time_s,
        ir=first.ir_s,
        child=timings.phases() if timings else None,
        entered=timings.entered if timings else None,
        done=timings.done if timings else None,
        launched=outcome.launched,
        ended=outcome.ended,
    )
    info.wall_time_s = outcome.wall_time_s
    info.model_work_s = phases.model_work(info.phases)
    info.overhead_s = outcome.wall_time_s - info.model_work_s if child else None
    info.returncode = outcome.returncode
    cfg = job.config
    tb_root = cfg.suite.torchbench_root if cfg.model.source == "torchbench" else None
    prov = provenance(Path.cwd(), tb_root)
    if (env := environment(cfg.toolchain)) is not None:  # its own packages, not the project's
        locked = env.lock_sha256()
        prov = dataclasses.replace(prov, lock_sha256=locked, packages_sha256=locked)
    if job.origin:
        _check_rerun(job, info, prov.with_child(child or ChildResult()), child)
    status, error = outcome.status, outcome.error
    return build_row(job, status=status, error=error, info=info, provenance=prov, child=child)


def not_run(job: Job, info: JobInfo) -> ResultRow:
    """The row of a job that runs nothing: an invalid combination, or skipped."""
    status = Status.INVALID if job.invalid else Status.SKIPPED
    info.wall_time_s = info.model_work_s = 0.0
    prov = provenance(Path.cwd())
    return build_row(job, status=status, error=job.invalid or job.skip, info=info, provenance=prov)


def _check_rerun(job: Job, info: JobInfo, prov: Provenance, child: ChildResult | None) -> None:
    """A rerun's row: the row it reran, the speed facts that differ, the digest's check."""
    from benchflow.results.digest import OTHER_CONFIG, check
    from benchflow.results.environment import differences
    from benchflow.suite.tolerance import tolerance

    assert job.origin is not None
    cfg = job.config
    info.rerun_of = job.origin.row_id
    before = Provenance.from_dict(job.origin.provenance)
    info.rerun_env = [str(d) for d in differences([before], [prov]) if d.speed]
    dtype = (child.dtype if child else None) or cfg.dtype or "float32"
    tol, _ = tolerance(
        cfg.suite.rules, cfg.model.name, cfg.test.name, dtype, cfg.accelerator.name, cfg.suite.name
    )
    same = job.fingerprint == job.origin.fingerprint
    info.rerun_digest = (
        check(job.origin.digest, child.digest if child else None, tol) if same else OTHER_CONFIG
    )


class Tracking:
    """A sweep's MLflow runs, one per job. A failed call warns: `benchflow sync` logs it later."""

    def __init__(self, folder: SweepDir, project_dir: Path) -> None:
        self.folder, self.project_dir = folder, project_dir
        self._trackers: dict[tuple[str | None, str], Tracker | None] = {}

    def _tracker(self, cfg: MlflowConfig) -> Tracker | None:
        if not cfg.enabled:
            return None
        key = (cfg.tracking_uri, cfg.experiment)
        if key not in self._trackers:
            self._trackers[key] = safely("connection", Tracker, cfg, self.project_dir)
        return self._trackers[key]

    def start(self, job: Job) -> str | None:
        """The job's run, opened (its id; None: MLflow is off, or failed)."""
        if (tracker := self._tracker(job.config.mlflow)) is None:
            return None
        parent = self.folder.parent_run_id()
        return safely("start_run", tracker.start_run, job.name, parent_id=parent)

    def log(self, job: Job, row: ResultRow, job_dir: JobDir, replaced: Sequence[ResultRow]) -> None:
        """The job's row, files and params in its run; those of the rows it replaced, superseded."""
        tracker, run_id = self._tracker(job.config.mlflow), row.job.mlflow_run_id
        if tracker is None or not run_id:
            return
        params = job_params(job.settings, job.backend)
        safely("logging", log_job, tracker, run_id, row, job_dir.path, params)
        for old in replaced:
            if old_run := old.job.mlflow_run_id:
                safely("supersede", tracker.supersede, old_run, run_id)

    def interrupted(self, job: Job) -> None:
        """The sweep was stopped: its parent run ends as such."""
        tracker = self._tracker(job.config.mlflow)
        if tracker is not None and (parent := self.folder.parent_run_id()):
            safely("end_run", tracker.end_run, parent, Status.INTERRUPTED)

    def open_sweep(self, cfg: MlflowConfig, args: Sequence[str], baseline: str | None) -> None:
        """The sweep's parent run, before its first job's (reopened where resumed)."""
        folder = self.folder
        if (tracker := self._tracker(cfg)) is None:
            return
        earlier = folder.parent_run_id()
        if earlier and folder.results.exists() and safely("reopen", tracker.reopen, earlier):
            safely("tags", tracker.set_tags, earlier, {"benchflow.resumed": time.ctime()})
            log.info("MLflow parent run %s (resumed) at %s", earlier, tracker.uri)
            self._close_interrupted(tracker, earlier)
            return
        experiment = next((a.split("=", 1)[1] for a in args if _key(a) == "experiment"), None)
        name = f"sweep {folder.path.parent.name} {folder.path.name}"
        name += f" ({experiment})" if experiment else ""
        prov = provenance(self.project_dir)
        tags = {KIND_TAG: KIND_SWEEP, SWEEP_DIR_TAG: str(folder.path), BASELINE_TAG: baseline}
        tags |= {"command": prov.command, **facts(prov, per_job=False)}
        params = {"sweep.overrides": " ".join(args) or "(none)"}
        run_id = safely("start_run", tracker.start_run, name, params=params, tags=tags)
        if run_id:
            listed = "\n".join(packages()) + "\n"
            safely("packages", tracker.client.log_text, run_id, listed, PACKAGES)
            folder.parent_run.write_text(run_id)
            folder.tracking_uri.write_text(tracker.uri)
            log.info("MLflow parent run %s at %s", run_id, tracker.uri)

    def close_sweep(self, cfg: MlflowConfig, rows: list[ResultRow], made: Any) -> None:
        """The parent run's tags, files and report, its end, and job runs still RUNNING closed."""
        run_id = self.folder.parent_run_id()
        if not run_id or (tracker := self._tracker(cfg)) is None:
            return
        self._close_interrupted(tracker, run_id)
        safely("tags", tracker.set_tags, run_id, status_tags(rows))
        safely("artifacts", tracker.log_files, run_id, [self.folder.results])
        if made:
            from benchflow.report.output import log_to_mlflow

            report, files = made
            safely("report logging", log_to_mlflow, report, files, tracker.uri, run_id)
        safely("end_run", tracker.end_run, run_id, "ok")

    def _close_interrupted(self, tracker: Tracker, run_id: str) -> None:
        closed = safely("interrupted runs", close_interrupted, tracker, self.folder, run_id)
        if closed and any(closed.values()):
            log.info(
                "MLflow: job runs left RUNNING by a process that ended first: %d logged from "
                "their rows, %d ended KILLED (their jobs ran again, or have no row)",
                closed["completed"],
                closed["killed"],
            )


def report_sweep(rows: list[ResultRow], baseline: str | None, folder: SweepDir) -> Any:
    """Print the sweep's report and write its report/ folder; the report and its files."""
    from benchflow.report import output, terminal
    from benchflow.report.model import build_report
    from benchflow.report.sources import Sweep, meta_of

    report = build_report(rows, baseline or DEFAULT_BASELINE)
    title = f"benchflow sweep {folder.path}"
    terminal.print_terminal(report, title, full=output.full_report(folder.report))
    meta = meta_of(Sweep(label=str(folder.path), rows=rows), report.baseline)
    files = output.write(report, folder.report, title, meta)
    log.info("report written to %s", folder.report)
    return report, files


def _key(arg: str) -> str:
    return arg.lstrip("+~").split("=", 1)[0]
