"""Hydra's task function: one planned job -> one isolated child -> one result row.

Runs in the parent (or a launcher's worker), as a short sequence of stages:
plan (read back from plan.json; a single run plans here), execute (the isolated
child and the extra passes, on a CPU slot), record (the row, in result.json and
results.jsonl), track (the job's MLflow run).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from benchflow.config.errors import ConfigError
from benchflow.config.schema import config_to_yaml
from benchflow.core import gpus, interrupts
from benchflow.core.cpus import child_env, cpu_slot, span
from benchflow.core.files import write_json_atomic
from benchflow.core.job import Job, JobSpec, Launch, Plan
from benchflow.core.layout import JobDir, SweepDir
from benchflow.core.status import Status
from benchflow.results import phases
from benchflow.results.child import ChildResult
from benchflow.results.io import current, known_rows, record_row, tally
from benchflow.results.provenance import provenance
from benchflow.results.row import JobInfo, Provenance, ResultRow, build_row
from benchflow.runner.isolated import Outcome
from benchflow.runner.pool import POOL, build_request
from benchflow.runner.toolchain import environment, launch
from benchflow.sweep import progress, rounds, scheduler
from benchflow.sweep.builds import launch_env, step_key, zygote_kind
from benchflow.sweep.ir import ir_passes
from benchflow.sweep.plan import plan_job
from benchflow.sweep.processes import pooled, process_config, run_process
from benchflow.sweep.resume import attempts, current_row
from benchflow.tracking.mlflow_runs import Tracker, safely, tracker_for
from benchflow.tracking.sync import job_params, log_job

log = logging.getLogger(__name__)


def die(exc: ConfigError) -> None:
    """A bad config on a single run: one clear line, non-zero exit, nothing started."""
    print(f"benchflow: error: {exc}", file=sys.stderr)
    raise SystemExit(2)


@dataclass
class Where:
    """Where a job runs: Hydra's runtime facts and the sweep's plan, read once."""

    multirun: bool
    sweep: SweepDir
    job_dir: JobDir
    project_dir: Path
    num: int
    overrides: list[str]
    plan: Plan | None  # plan.json (None for a single run)

    @property
    def total(self) -> int:
        return self.plan.total if self.plan else 1

    @classmethod
    def from_hydra(cls) -> Where:
        hc = HydraConfig.get()
        multirun = hc.mode == RunMode.MULTIRUN
        job_dir = Path(hc.runtime.output_dir)
        sweep = SweepDir(Path(hc.sweep.dir) if multirun else job_dir)
        return cls(
            multirun=multirun,
            sweep=sweep,
            job_dir=JobDir(job_dir),
            project_dir=Path(hc.runtime.cwd),
            num=int(hc.job.num) if multirun else 0,
            overrides=list(hc.overrides.task),
            plan=sweep.read_plan() if multirun else None,
        )


@dataclass
class Execution:
    """What the execute stage hands to record: the outcome and what the parent saw."""

    outcome: Outcome
    info: JobInfo  # the row's `job`, as far as the run got
    gap_s: float = 0.0  # the parent's work since its previous job's end (phases.py)
    ir_s: float = 0.0  # the IR passes' children


def run_job(cfg: DictConfig | None, where: Where | None = None) -> ResultRow | None:
    """The task of one job's process: `where` from Hydra's config (None), or given with
    no config by the sweeper for a job's later rounds (its job is in plan.json)."""
    where = where or Where.from_hydra()
    if where.multirun:
        tie_to_sweep()
    job = planned(where, cfg)
    if not where.multirun:  # what resume=true finds a single run's folder by
        where.sweep.write_plan(Plan.of([job], 1, where.overrides))
    history = list(known_rows(where.sweep.results))  # a resumed run's, or a sweep's
    previous = current_row(history, job.fingerprint)
    round_ = rounds.current(where.sweep) if where.multirun else None
    state = None
    if round_ is not None and rounds.interleaved(job):
        state = rounds.JobRounds.load(where.job_dir, job.fingerprint, round_.token)
        if state.recorded:
            return previous  # recorded in an earlier round (a process did not end ok)
    if previous is not None and not previous.status.runs_again(job.config.retry):
        if round_ is None or round_.index == 0:  # said once, in the first round
            progress.kept(previous, where.num, where.total, job.config.retry)
        return previous  # resume: the recorded result stands
    config_to_yaml(job.config, where.job_dir.config)
    tracker = _open_tracker(job, where)
    # From the child's end to the row: a Ctrl-C or SIGTERM waits (core/interrupts.py).
    with contextlib.ExitStack() as hold:
        with scheduler.catch_stop() as stop:  # a SLURM job's stop: its child killed, a row
            index = round_.index if state and round_ else 0
            close = bool(state and round_ and where.num in round_.close)
            done = execute(job, where, hold, state, index, close)
            if done is None:
                return None  # its next process runs in a later round
        if done.outcome.status is Status.INTERRUPTED and (slurm_job := scheduler.slurm_job()):
            done.outcome.status, done.outcome.error = scheduler.cause(slurm_job, stop.signum)
        run_id = _start_run(tracker, job, where)  # its params are logged with its results
        done.info.attempt = attempts(history, job.fingerprint) + 1
        done.info.mlflow_run_id = run_id
        row, replaced = record(job, where, done)
        if tracker and run_id:
            params = job_params(job.settings, job.backend)
            safely("logging", log_job, tracker, run_id, row, where.job_dir.path, params)
            for old in replaced:
                if old_run := old.job.mlflow_run_id:
                    safely("supersede", tracker.supersede, old_run, run_id)
        results = where.sweep.results
        progress.report(row, where.num, where.total, tally(current(known_rows(results))))
        if state is not None:
            state.done()  # later rounds leave it be
    finish(job, where, row.status, tracker)
    return row


ENV_SWEEP_PID = "BENCHFLOW_SWEEP_PID"  # the sweep's own process (start.begin)
_tied = False


def in_sweep_process() -> bool:
    """This is the sweep's own process (start.begin), not a launcher's worker."""
    return os.environ.get(ENV_SWEEP_PID) in (None, str(os.getpid()))


def tie_to_sweep(poll_s: float = 0.5) -> None:
    """In a launcher's worker process that the sweep's process started (joblib's loky
    workers): exit when the sweep's process is gone. Such a worker outlives a SIGKILLed
    sweep by minutes (loky keeps idle workers 300 s), and one in a job would go on to
    record it beside a resumed sweep. Its exit closes its zygotes' pipes, so they end
    their jobs too (runner/zygote.py). A watching thread, not a parent-death signal:
    that fires when the *thread* that started the worker ends, not the process. Once
    per process; nothing where the worker's parent is not the sweep (Ray, SLURM: their
    own daemons end theirs) or in the sweep's own process (the basic launcher)."""
    global _tied
    sweep_pid = os.environ.get(ENV_SWEEP_PID)
    if _tied or not sweep_pid or os.getppid() != int(sweep_pid):
        return
    _tied = True

    def watch() -> None:
        while os.getppid() == int(sweep_pid):
            time.sleep(poll_s)
        log.error("the sweep's process (pid %s) is gone: this worker exits", sweep_pid)
        os._exit(1)

    threading.Thread(target=watch, name="benchflow-tie-to-sweep", daemon=True).start()


def planned(where: Where, cfg: DictConfig | None) -> Job:
    """This job's plan: from plan.json (the sweeper planned every job), else made now
    from its config."""
    found = where.plan.job(where.num) if where.multirun and where.plan else None
    if found and list(found.overrides) == where.overrides:
        return _unless_aborted(found, where)
    assert cfg is not None, "a job not in plan.json needs its config"
    if not where.multirun:
        return plan_single(cfg, where.overrides)  # checked before its folder was made
    try:
        job = plan_job(cfg, where.num, where.overrides)
    except ConfigError as exc:
        die(exc)
        raise  # not reached
    return _unless_aborted(job, where)


def plan_single(cfg: DictConfig, overrides: list[str]) -> Job:
    """A single run's job, its toolchain's environment built; a bad value or combination,
    or an environment that cannot be built, exits (2) with its message."""
    from benchflow.runner.knobs import check_knobs
    from benchflow.sweep.toolchains import build_toolchains

    try:
        job = plan_job(cfg, 0, overrides, single=True)
        build_toolchains([job])  # ToolchainError is a ConfigError
        check_knobs([job])
        return job
    except ConfigError as exc:
        die(exc)
        raise  # not reached


def _unless_aborted(job: Job, where: Where) -> Job:
    if where.multirun and (aborted := where.sweep.abort_reason()) and not job.invalid:
        return dataclasses.replace(job, skip=f"fail_fast: {aborted}")
    return job


def _open_tracker(job: Job, where: Where) -> Tracker | None:
    if not job.config.mlflow.enabled:
        return None
    tracker: Tracker | None = safely(
        "connection", tracker_for, job.config.mlflow, where.project_dir
    )
    return tracker


def _start_run(tracker: Tracker | None, job: Job, where: Where) -> str | None:
    if tracker is None:
        return None
    parent_id = where.sweep.parent_run_id() if where.multirun else None
    run_id: str | None = safely("start_run", tracker.start_run, job.name, parent_id=parent_id)
    return run_id


def execute(
    job: Job,
    where: Where,
    hold: contextlib.ExitStack,
    state: rounds.JobRounds | None = None,
    index: int = 0,
    close: bool = False,
) -> Execution | None:
    """Run the job's processes for this round on a CPU slot: an interleaved job's
    (`state` kept across rounds: sweep/rounds.py) process `index`, unless an earlier
    launch of the sweep ran it ok, or none where a paired sweep closes it (`close`:
    sweep/pairs.py); any other job's all of them, one after another.
    Where the last ran, or one did not end ok: the job's outcome, its processes pooled,
    and its IR passes. None: the job goes on in a later round. Never raises for the
    job's own failures; an invalid or skipped job runs nothing. From the last process's
    end on, a stop waits in `hold` (until the row is written)."""
    cfg, total = job.config, job.config.process_count
    if job.invalid or job.skip:
        return _not_run(job, where, state, hold)
    if state is None:
        state = rounds.JobRounds(where.job_dir, job.fingerprint, token=None)
    close = close and bool(state.ran)
    todo = [] if close else [index] if state.token is not None else list(range(total))
    ran = state.ran.get(index)
    if ran and ran.status is Status.OK and index < total - 1 and not close:
        return None  # an earlier launch of the sweep ran it
    info = JobInfo.of(job, str(where.job_dir.path))
    POOL.join_prestart()  # the sweep's zygotes, started while it set up (basic launcher)
    asked = time.perf_counter()
    owner = f"{job.name} in {where.sweep.path}"
    with (
        cpu_slot(cfg.cpus_per_job, owner, progress.note) as cores,
        gpus.slot_for(cfg.accelerator.name, owner, progress.note) as gpu,
    ):
        info.cpus, info.gpu, wait = span(cores), gpu, time.perf_counter() - asked
        env = (
            child_env(cores, cfg.num_threads) | gpus.child_env(gpu) | launch_env(job, where.job_dir)
        )
        # As the plan says (a single run: its own build, no one to share one with)
        planned = (where.plan.launch(job.num) if where.plan else None) or Launch(
            zygote_kind(job, env), step=step_key(job)
        )
        processes = _Processes(job, where, state, info, hold, env, cores, planned)
        if planned.steps_from is not None:
            info.notes.append(f"pair={cfg.pair}: runs job {planned.steps_from}'s steps per repeat")
        label = job.name if len(todo) == total else f"{job.name} (process {index + 1} of {total})"
        label = f"{job.name} (stopped after {len(state.ran)} processes)" if close else label
        with progress.running(cfg.progress, where.num, where.total, label):
            pending = [n for n in todo if n not in state.ran]
            for n in pending:
                if processes.run(n, wait, last=n == pending[-1]) is not Status.OK:
                    break
                wait = 0.0
        if planned.build and planned.forks_from and planned.last_round == index:
            POOL.done_with(planned.forks_from, planned.build)  # no later job forks from it
        hold.enter_context(interrupts.held())  # (held already where it ran a process)
        last = max(state.ran)
        if close:
            info.notes.append(
                f"pair={cfg.pair}: stopped after {last + 1} of its {total} rounds (docs/reports.md)"
            )
        elif state.ran[last].status is Status.OK and last < total - 1:
            return None  # its next process runs in a later round
        if planned.step and planned.forks_from:  # the job's own interpreter, done with
            POOL.done_with(planned.forks_from, planned.step)
        children_end = _previous_end()  # its last child's (where this call ran one)
        outcome, gap = _pooled(state, last, total, len(cores), info)
        ir_s = 0.0
        if outcome.status == Status.OK:
            info.ir_files, ir_notes, ir_s = ir_passes(job, where.job_dir, env)
            info.notes += ir_notes
        _job_ended(children_end + ir_s)  # the rest of the parent's work: the next gap's
    shutil.rmtree(where.job_dir.compile_cache, ignore_errors=True)  # MBs of generated code
    return Execution(outcome, info, gap_s=gap, ir_s=ir_s)


@dataclass
class _Processes:
    """A job's processes on its CPU slot (`env`, `cores`), launched as the plan says
    (core/job.Launch), each kept in `state` with what the parent measured around it."""

    job: Job
    where: Where
    state: rounds.JobRounds
    info: JobInfo
    hold: contextlib.ExitStack
    env: dict[str, str]
    cores: list[int]
    launch: Launch

    def run(self, n: int, cpu_wait_s: float, last: bool) -> Status:
        """Process `n`, made ready (`_ready`) and run. Where it is the last to run here or
        did not end ok, a stop waits in `hold` from its end on (until the row or the
        process is kept); a stop while a later process of the job runs ends that one
        (`interrupted`)."""
        job, where, planned = self.job, self.where, self.launch
        gap_from = _previous_end()
        self._ready()
        started_at, launching = time.time(), time.perf_counter()
        steps = self.state.first_steps() if n else _steps_of(planned.steps_from, where)
        step = planned.step if n else None  # its first process compiles cold, in itself
        prefork = (planned.forks_from, planned.build, step)
        outcome = run_process(job, where.job_dir, n, self.env, prefork, steps)
        if last or outcome.status is not Status.OK:
            self.hold.enter_context(interrupts.held())
        launched = outcome.launched or launching  # (a timeout's outcome has no clock readings)
        parent = {
            "gap_s": launched - gap_from,
            "cpu_wait_s": cpu_wait_s,
            "started_at": started_at + (launched - launching),
            "cpus": self.info.cpus,
            "cores": len(self.cores),
            "node": self.info.node,
        }
        self.state.add(n, rounds.Ran.of(outcome, **parent))
        _job_ended(outcome.ended)
        count, status = job.config.process_count, outcome.status.value
        log.info("process %d of %d: %s in %.2f s", n + 1, count, status, outcome.wall_time_s)
        return outcome.status

    def _ready(self) -> None:
        """Before a process: the zygote it forks from, started on the slot's cores (once
        per worker and kind); where it waits for no build of its own (its own, or one
        held already), the sweep's next shared build started beside it (build_ahead)."""
        zygote, key = self.launch.forks_from, self.launch.build
        if zygote:
            POOL.start(zygote, self.cores)
        if key is None or POOL.holding(zygote, key):
            _build_ahead(self.launch.ahead, self.where, self.cores)


def _steps_of(num: int | None, where: Where) -> int | None:
    """The steps per repeat job `num`'s first process ran (a paired sweep's A, for its
    B's first process); None where there is none, or it has not run ok (a launcher that
    runs jobs side by side may start B first): the process calibrates its own."""
    first = where.plan.job(num) if num is not None and where.plan else None
    round_ = rounds.current(where.sweep)
    if first is None or round_ is None:
        return None
    found = rounds.JobRounds.in_sweep(where.sweep, {first.fingerprint}, round_.token)
    state = found.get(first.fingerprint)
    return state.first_steps() if state else None


def _build_ahead(num: int | None, where: Where, cores: list[int]) -> None:
    """build_ahead: start the shared build of job `num` before this job's child, where
    the sweep's jobs run one after another in this process (the basic launcher) and
    this job waits for no build of its own; its zygote takes this job's cores, and every
    job stops it over its compile and timed regions (harness/hold.py)."""
    if num is None or where.plan is None or not in_sweep_process():
        return
    first, share = where.plan.job(num), where.plan.launch(num)
    if first is None or share is None or share.forks_from is None or share.build is None:
        return
    if not POOL.wanted(share.forks_from, share.build):
        return
    job_dir = where.sweep.ahead(first.num)
    job_dir.path.mkdir(parents=True, exist_ok=True)
    cfg = process_config(first.config)
    spec = JobSpec(first.name, cfg, str(job_dir.child_result))
    write_json_atomic(job_dir.job_file, spec.to_dict())
    _, toolchain_env = launch(cfg.toolchain)
    env = child_env(cores, cfg.num_threads) | launch_env(first, job_dir) | toolchain_env
    build = build_request(share.build, job_dir.job_file, env, job_dir.path / "build.log")
    POOL.ahead(share.forks_from, build)


def _not_run(
    job: Job, where: Where, state: rounds.JobRounds | None, hold: contextlib.ExitStack
) -> Execution:
    """An invalid or skipped job, recorded as such; an interleaved job that fail_fast
    stopped between its rounds, from the processes it ran (a note says how many)."""
    hold.enter_context(interrupts.held())
    info = JobInfo.of(job, str(where.job_dir.path))
    ran = state.ok_count() if state is not None and not job.invalid else 0
    if not ran:
        status = Status.INVALID if job.invalid else Status.SKIPPED
        log.info("job %d %s: %s", where.num, status, job.invalid or job.skip)
        return Execution(Outcome(status, job.invalid or job.skip, None, 0.0, None), info)
    assert state is not None
    total = job.config.process_count
    info.notes.append(f"{job.skip}: the sweep stopped after {ran} of its {total} processes")
    info.cpus = state.ran[0].cpus
    outcome, gap = _pooled(state, ran - 1, ran, state.ran[0].cores, info)
    shutil.rmtree(where.job_dir.compile_cache, ignore_errors=True)
    return Execution(outcome, info, gap_s=gap)


def _pooled(
    state: rounds.JobRounds, last: int, processes: int, cores: int, info: JobInfo
) -> tuple[Outcome, float]:
    """The job's outcome from its processes 0..last, pooled over their own walls, and
    the parent's gaps before them added up; `info` gets when the first started and how
    long they all waited for CPUs."""
    outcomes = state.outcomes(last)
    ran = [state.ran[n] for n in range(len(outcomes))]
    info.started_at = ran[0].started_at
    info.cpu_wait_s = sum(r.cpu_wait_s for r in ran)
    info.node = ",".join(dict.fromkeys(r.node for r in ran if r.node)) or info.node
    return pooled(outcomes, processes, cores), sum(r.gap_s for r in ran)


# Where this process's last job's accounted time ended (time.perf_counter): its last
# child's end, and its IR passes' time after it. The next job's `gap` phase starts
# there, so the parent's work in between (the row, its pooling) is in that gap.
_last_end: float | None = None


def _job_ended(at: float | None = None) -> None:
    global _last_end
    _last_end = time.perf_counter() if at is None else at


def _previous_end() -> float:
    """The end of this process's previous job, or its own start for its first job (a
    sweep's first job's gap is the command's start-up and planning)."""
    if _last_end is not None:
        return _last_end
    import psutil

    return time.perf_counter() - (time.time() - psutil.Process().create_time())


def record(job: Job, where: Where, done: Execution) -> tuple[ResultRow, list[ResultRow]]:
    """The row, written to the job's result.json and appended to results.jsonl, and the
    earlier rows of the same job it superseded there."""
    outcome, info, child = done.outcome, done.info, done.outcome.result
    timings = child.child_timings if child else None
    ran = not (job.invalid or job.skip)
    info.phases = (
        None
        if not ran
        else phases.breakdown(
            gap=done.gap_s,
            wall=outcome.wall_time_s,
            ir=done.ir_s,
            child=timings.phases() if timings else None,
            entered=timings.entered if timings else None,
            done=timings.done if timings else None,
            launched=outcome.launched,
            ended=outcome.ended,
        )
    )
    # In-child model work: building, moving, compiling, timing and checking the model;
    # the rest of the child's wall (imports, exit) is overhead.
    model_work = phases.model_work(info.phases) if info.phases else 0.0
    info.wall_time_s, info.model_work_s = outcome.wall_time_s, model_work
    info.overhead_s = outcome.wall_time_s - info.model_work_s if child else None
    info.returncode = outcome.returncode
    cfg = job.config
    tb_root = cfg.suite.torchbench_root if cfg.model.source == "torchbench" else None
    prov = provenance(where.project_dir, tb_root)
    if (env := environment(cfg.toolchain)) is not None:  # its own packages, not the project's
        locked = env.lock_sha256()
        prov = dataclasses.replace(prov, lock_sha256=locked, packages_sha256=locked)
    if job.origin:
        _check_rerun(job, info, prov.with_child(child or ChildResult()), child)
    row = build_row(
        job,
        status=outcome.status,
        error=outcome.error,
        info=info,
        provenance=prov,
        child=child,
    )
    write_json_atomic(where.job_dir.result, row.to_dict())
    return row, record_row(where.sweep.results, row)


def _check_rerun(job: Job, info: JobInfo, prov: Provenance, child: ChildResult | None) -> None:
    """A rerun's row says which row it reran, which speed facts of the environment
    differ from that row's, and whether it reproduced that row's output digest."""
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


def finish(job: Job, where: Where, status: Status, tracker: Tracker | None) -> None:
    """What a job's end means for the sweep: Ctrl-C stops it, a single run's failure
    exits non-zero, fail_fast makes every later job skip."""
    if status is Status.INTERRUPTED:
        if where.multirun and scheduler.slurm_job() and not in_sweep_process():
            return  # a SLURM job of the sweep, cancelled: its row says so; the rest go on
        if tracker and where.multirun and (parent := where.sweep.parent_run_id()):
            safely("end_run", tracker.end_run, parent, Status.INTERRUPTED)
        raise KeyboardInterrupt
    if not where.multirun and status.went_wrong:
        raise SystemExit(1)
    if where.multirun and job.config.fail_fast and status.went_wrong:
        # The launcher goes on calling us; every later job is recorded as skipped,
        # so the sweep still ends with one row per job and its summary.
        where.sweep.aborted.write_text(f"job {where.num} ({job.name}) ended {status}")
