"""A sweep's one loop: the plan's steps (sweep/steps.py), round by round, run here (forked:
runner/pool.py) or handed to a Hydra launcher in batches. Each process is written to its
job's journal as it ends (what a resumed sweep keeps); each job's row is written once, when
its last process has ended or one did not end ok.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from benchflow.config.schema import MlflowConfig, config_to_yaml
from benchflow.core.files import write_json_atomic
from benchflow.core.interrupts import Stops
from benchflow.core.job import Job, Plan, Step, Warm
from benchflow.core.layout import JobDir, SweepDir
from benchflow.core.status import Status
from benchflow.results.io import current, read_rows, record_row, tally
from benchflow.results.row import JobInfo, ResultRow
from benchflow.runner.isolated import Outcome
from benchflow.runner.pool import Pool, parent
from benchflow.sweep import progress
from benchflow.sweep.pairs import Stopping
from benchflow.sweep.process import journal, run_step, step_overrides, write_journal
from benchflow.sweep.record import Tracking, not_run, pooled_row, report_sweep
from benchflow.sweep.resume import current_row
from benchflow.tracking.mlflow_runs import safely

log = logging.getLogger(__name__)

# A launcher of Hydra's: (the first job's number, each job's overrides) -> their outcomes.
Launch = Callable[[int, list[list[str]]], list[Outcome]]
LOG = "benchflow.log"  # the sweep's log: every line of the machinery (the terminal: warnings)


class Sweep:
    """One sweep's state: plan, folder, warm processes, processes run, rows and clock."""

    def __init__(
        self,
        plan: Plan,
        folder: Path,
        project_dir: Path,
        *,
        single: bool = False,
        verbose: bool = False,
    ) -> None:
        self.plan, self.single, self.verbose = plan, single, verbose
        self.folder = SweepDir(folder.resolve())
        # what the warm processes print goes to the sweep's log, as the machinery's lines do
        self.pool = Pool(None if verbose else self.folder.path / LOG)
        self.tracking = Tracking(self.folder, project_dir)
        self.ran: dict[int, list[Outcome]] = {}  # each job's processes so far, in order
        self.done: set[int] = set()  # jobs recorded (or kept) in this launch of the sweep
        self.rows = read_rows(self.folder.results)  # every attempt, this launch's added
        self.since = _started()  # the clock the next process's gap counts from
        self.aborted: str | None = None  # fail_fast: why no later job runs
        self.stopping = Stopping.of(plan)
        self.last: ResultRow | None = None
        self.stops = Stops()  # Ctrl-C and SIGTERM, held while a row is written

    def run(self, launch: Launch | None = None, batch: int | None = None) -> ResultRow | None:
        """Run the sweep, here or through `launch`; the last row recorded (a single run's)."""
        mlflow = self.plan.job(self.plan.steps[0].job if self.plan.steps else 0).config.mlflow
        with _logged(self.folder.path / LOG, self.verbose), self.stops.installed():
            try:
                if launch is None and (first := self._first_warm()) is not None:
                    self.pool.start(first)
                if not self.single:
                    self.tracking.open_sweep(mlflow, self.plan.sweep_args, self.plan.baseline)
                self._begin()
                rounds = max((s.round for s in self.plan.steps), default=-1) + 1
                for r in range(rounds):
                    if self.aborted:
                        break
                    swaps = self.stopping.swaps(r)
                    steps = [s for s in self.plan.steps if s.round == r and s.job not in self.done]
                    steps.sort(key=lambda s: swaps.get(s.job, s.job))  # (stable: a job's order)
                    if rounds > 1 and steps:
                        progress.note(f"round {r + 1} of {rounds}: each job's process {r + 1}")
                    self._round(steps, launch, batch)
                    for num in sorted(self.stopping.look(r + 1, rounds, self.ran)):
                        self._record(num, closed=True)
                for num in sorted(n for n, ran in self.ran.items() if ran and n not in self.done):
                    self._record(num)  # fail_fast stopped them between their processes
                for job in self.plan.jobs():
                    if job.num not in self.done and self.aborted and not job.invalid:
                        self._record_not_run(dataclasses.replace(job, skip=self.aborted))
            finally:
                self.pool.close_all()
                shutil.rmtree(self.folder.references, ignore_errors=True)  # (the jobs' cache)
            if not self.single:
                self._finish(mlflow)
        return self.last

    def _finish(self, mlflow: MlflowConfig) -> None:
        """The sweep's report, printed and written, and its MLflow parent run closed."""
        rows = current(self.rows)
        made = rows and safely("report", report_sweep, rows, self.plan.baseline, self.folder)
        if (axis := self.plan.job(rows[0].job.num).config.pair if rows else None) is not None:
            print(f"paired sweep: `benchflow report {self.folder.path} --pair {axis}` judges it")
        self.tracking.close_sweep(mlflow, rows, made)

    def _first_warm(self) -> Warm | None:
        """The warm process the first process to run forks from (None: none does)."""
        for step in self.plan.steps:
            if self._kept(self.plan.job(step.job)) is None:
                return step.warm
        return None

    def _kept(self, job: Job) -> ResultRow | None:
        """The job's row from an earlier launch, where it is not run again (resume)."""
        previous = current_row(self.rows, job.fingerprint)
        if previous is not None and not previous.status.runs_again(job.config.retry):
            return previous
        return None

    def _begin(self) -> None:
        """What a resumed sweep keeps, the jobs planned twice, and the rows of those not run."""
        ran = {s.job for s in self.plan.steps}
        for job in self.plan.jobs():
            if (previous := self._kept(job)) is not None:
                progress.kept(previous, job.num, self.plan.total, job.config.retry)
                self.done.add(job.num)
            elif job.num in ran:
                self.ran[job.num] = journal(self._dir(job), job.fingerprint)
        for job in self.plan.jobs():
            if job.num in self.done or job.num in ran:
                continue
            if job.invalid or job.skip:
                self._record_not_run(job)
            else:  # the same job as an earlier one (xla=auto,PJRT): run once, as it
                first = next(j for j in self.plan.jobs() if j.fingerprint == job.fingerprint)
                progress.duplicate(job, first, self.plan.total)
                self.done.add(job.num)

    def _round(self, steps: Sequence[Step], launch: Launch | None, batch: int | None) -> None:
        """Run a round's steps, here or through `launch`, and keep each outcome."""
        todo = [s for s in steps if s.process >= len(self.ran.get(s.job, ()))]  # (resumed)
        if launch is None:
            last = self._last_uses(todo)
            for i, step in enumerate(todo):
                if not (self.aborted or step.job in self.done):
                    self._add(step, self._run_here(step))
                for warm in _chain(step.warm):
                    if last.get(warm) == i:
                        self.pool.close(warm)  # no later process forks from it
            return
        for chunk in _batches(todo, batch):
            if self.aborted:
                return
            for s in chunk:
                self._config(self.plan.job(s.job))
            overrides = [
                [*self.plan.job(s.job).overrides, *step_overrides(s.process, self._steps(s))]
                for s in chunk
            ]
            for step, outcome in zip(chunk, launch(chunk[0].job, overrides), strict=True):
                self._add(step, outcome)

    def _run_here(self, step: Step) -> Outcome:
        job = self.plan.job(step.job)
        self._config(job)
        total = job.config.process_count
        label = job.name if total == 1 else f"{job.name} (process {step.process + 1} of {total})"
        with progress.running(job.config.progress, job.num, self.plan.total, label):
            outcome = run_step(
                job,
                step.process,
                self._dir(job),
                self.since,
                warm=step.warm,
                pool=self.pool,
                steps=self._steps(step),
            )
        self.since = (outcome.ended or time.perf_counter()) + outcome.ir_s  # (after its IR)
        return outcome

    def _config(self, job: Job) -> None:
        """The job's resolved config, as YAML in its folder (once: its first process)."""
        job_dir = self._dir(job)
        if not self.ran.get(job.num):
            job_dir.path.mkdir(parents=True, exist_ok=True)
            config_to_yaml(job.config, job_dir.config)

    def _steps(self, step: Step) -> int | None:
        """Steps per repeat for the process: its job's first's or its A's (None: it calibrates)."""
        first = self.ran.get(step.job if step.process else step.steps_from or -1, [])
        result = first[0].result if first and first[0].status is Status.OK else None
        return result.timing.iterations_per_run if result and result.timing else None

    def _last_uses(self, todo: Sequence[Step]) -> dict[Warm, int]:
        """Each warm process the round uses, with its last use; none that a later round needs."""
        if not todo:
            return {}
        r = todo[0].round
        later = {w for s in self.plan.steps if s.round > r for w in _chain(s.warm)}
        last = {w: i for i, s in enumerate(todo) for w in _chain(s.warm)}
        return {w: i for w, i in last.items() if w not in later}

    def _add(self, step: Step, outcome: Outcome) -> None:
        """Keep the process (in its journal too); record the job where it was its last or did not
        end ok. A stop (Ctrl-C, SIGTERM) waits until then."""
        job = self.plan.job(step.job)
        with self.stops.held():
            ran = self.ran.setdefault(job.num, [])
            ran.append(outcome)
            write_journal(self._dir(job), job.fingerprint, ran, recorded=False)
            if outcome.status is not Status.OK or len(ran) == job.config.process_count:
                self._record(job.num)
        if outcome.status is Status.INTERRUPTED and self.stops.last is not None:
            self.tracking.interrupted(job)  # the sweep's own stop: it ends here
            self.stops.again()

    def _record(self, num: int, closed: bool = False) -> None:
        """Job `num`'s row (`closed`: a paired sweep decided it before its last round)."""
        job, ran = self.plan.job(num), self.ran[num]
        job_dir, total = self._dir(job), job.config.process_count
        notes = []
        if (a := next((s.steps_from for s in self.plan.steps if s.job == num), None)) is not None:
            notes.append(f"pair={job.config.pair}: runs job {a}'s steps per repeat")
        if closed:
            notes.append(
                f"pair={job.config.pair}: stopped after {len(ran)} of its {total} rounds "
                "(docs/reports.md)"
            )
        elif len(ran) < total and ran[-1].status is Status.OK:
            notes.append(
                f"{self.aborted}: the sweep stopped after {len(ran)} of its {total} processes"
            )
        row = pooled_row(job, job_dir, ran, notes, self._info(job))
        self._keep(job, row)
        write_journal(job_dir, job.fingerprint, ran, recorded=True)
        shutil.rmtree(job_dir.compile_cache, ignore_errors=True)  # MBs of generated code

    def _record_not_run(self, job: Job) -> None:
        """An invalid or skipped job, recorded as such."""
        self._config(job)
        kind = "invalid" if job.invalid else "skipped"
        log.info("job %d %s: %s", job.num, kind, job.invalid or job.skip)
        self._keep(job, not_run(job, self._info(job)))

    def _info(self, job: Job) -> JobInfo:
        """The row's `job`: its folder, attempt and MLflow run, opened."""
        info = JobInfo.of(job, str(self._dir(job).path))
        info.attempt = sum(r.job.fingerprint == job.fingerprint for r in self.rows) + 1
        info.mlflow_run_id = self.tracking.start(job)
        return info

    def _keep(self, job: Job, row: ResultRow) -> None:
        """The row in result.json, results.jsonl and MLflow (earlier ones superseded); progress."""
        job_dir = self._dir(job)
        job_dir.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(job_dir.result, row.to_dict())
        if row.signals is not None:  # the reasons, as an artifact of the job's run
            write_json_atomic(job_dir.signals, row.signals.to_dict())
        replaced = record_row(self.folder.results, row)
        self.tracking.log(job, row, job_dir, replaced)
        fingerprint = job.fingerprint
        self.rows = [
            dataclasses.replace(r, superseded_by=row.row_id)
            if r.job.fingerprint == fingerprint and not r.superseded_by
            else r
            for r in self.rows
        ] + [row]
        self.done.add(job.num)
        self.last = row
        progress.report(row, job.num, self.plan.total, tally(current(self.rows)))
        if job.config.fail_fast and row.status.went_wrong and not self.single:
            self.aborted = (
                self.aborted or f"fail_fast: job {job.num} ({job.name}) ended {row.status}"
            )

    def _dir(self, job: Job) -> JobDir:
        return JobDir(self.folder.path if self.single else self.folder.path / str(job.num))


def _chain(warm: Warm | None) -> list[Warm]:
    """`warm` and every warm process it is made from ([]: a spawned process's)."""
    out: list[Warm] = []
    while warm is not None:
        out.append(warm)
        warm = parent(warm)
    return out


def _batches(steps: Sequence[Step], size: int | None = None) -> list[list[Step]]:
    """A round's steps as a launcher of Hydra's takes them: batches of consecutive job
    numbers (it numbers a batch's jobs from its first), one process of a job each (a
    later one's steps per repeat come from the first's), at most `size` long (None: no
    limit; hydra.sweeper.max_batch_size), in the round's order."""
    out: list[list[Step]] = []
    for step in sorted(steps, key=lambda s: s.process):  # (stable: the round's order)
        last = out[-1] if out else None
        if (
            last
            and last[-1].process == step.process
            and last[-1].job + 1 == step.job
            and (size is None or len(last) < size)
        ):
            last.append(step)
        else:
            out.append([step])
    return out


def _started() -> float:
    """When this process started, on perf_counter's clock (the first gap is the start-up)."""
    import psutil

    return time.perf_counter() - (time.time() - psutil.Process().create_time())


@contextlib.contextmanager
def _logged(path: Path, verbose: bool) -> Iterator[None]:
    """All log lines to `path`; on the terminal only warnings (unless `verbose`) and progress."""
    root = logging.getLogger()
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    consoles = [h for h in root.handlers if type(h) is logging.StreamHandler]
    levels = [h.level for h in consoles]
    level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, logging.INFO) if level else logging.INFO)
    for h in consoles:
        h.setLevel(h.level if verbose else max(h.level, logging.WARNING))
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(level)
        for h, was in zip(consoles, levels, strict=True):
            h.setLevel(was)
