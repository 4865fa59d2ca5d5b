"""Interleaved rounds: a sweep whose jobs run in several processes (processes=N, 3 by
default where the repeats are adaptive) runs them as asv runs its rounds. Round r runs
process r of every job that has one, in the sweep's order, so a job's processes lie
across the sweep's whole time, not within a few seconds of each other. This host keeps
one speed for about a minute, then another up to 25% slower: processes run back to back
all see one speed, and their interval says nothing of the other (benchmarks/RESULTS.md).

The sweeper (hydra_plugins/benchflow_sweeper) launches the sweep once a round, each
round's jobs in runs of consecutive numbers (a launcher numbers jobs from the first it
is given). The task (sweep/task.py) of an interleaved job runs its process for the
round and keeps it in the job's folder (processes.json); the round of its last process,
or of one that did not end ok, pools them and records the row. A job's processes are
kept across launches of the sweep: one stopped between rounds (Ctrl-C, a killed
parent) and resumed runs only the processes its jobs lack.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from benchflow.core.files import write_json_atomic
from benchflow.core.job import Job
from benchflow.core.layout import JobDir, SweepDir
from benchflow.core.status import Status
from benchflow.results.child import ChildResult
from benchflow.runner.isolated import Outcome


@dataclass(frozen=True)
class Round:
    index: int  # from 0
    count: int
    # This launch of the sweep: a job recorded in an earlier round of it is done; its
    # processes from an earlier launch are kept, its row from one is not.
    token: str
    # A paired sweep's jobs decided at the last look (sweep/pairs.py): each is recorded
    # from the processes it has, running none this round
    close: frozenset[int] = frozenset()


def interleaved(job: Job) -> bool:
    """Does the job run one process a round (else all in the first round)? A skipped job
    is one too: fail_fast may stop the sweep between its rounds."""
    cfg = job.config
    return cfg.interleave and cfg.process_count > 1 and not job.invalid


def count(jobs: Sequence[Job]) -> int:
    """How many rounds the sweep runs: its interleaved jobs' most processes (1: none)."""
    return max((job.config.process_count for job in jobs if interleaved(job)), default=1)


def duplicates_of(jobs: Sequence[Job]) -> dict[int, int]:
    """The jobs with the fingerprint of an earlier one, each with the number of the first
    (xla=auto,PJRT plans openxla twice): the same job, so the sweep launches it once,
    whatever its outcome, and the first's row is the one row of both."""
    first: dict[str, int] = {}
    out: dict[int, int] = {}
    for job in sorted(jobs, key=lambda j: j.num):
        fp = job.fingerprint
        if fp in first:
            out[job.num] = first[fp]
        else:
            first[fp] = job.num
    return out


def launches(
    jobs: Sequence[Job],
    index: int,
    size: int,
    duplicates: Collection[int] = (),
    swaps: Mapping[int, int] | None = None,
) -> list[tuple[int, list[list[str]]]]:
    """Round `index`'s launches: (the first job's number, the jobs' overrides), each a
    run of consecutive job numbers, at most `size` long, in the order they run. The
    first round launches every job; a later one, the interleaved jobs with a process
    for it. A job in `duplicates` (duplicates_of, or a paired sweep's job closed in an
    earlier round) is not launched. `swaps`: job numbers that trade places this round
    (a paired sweep's A and B, every other round: sweep/pairs.py)."""
    by_num = {job.num: job for job in jobs}
    places = [(swaps or {}).get(num, num) for num in sorted(by_num)]
    out: list[tuple[int, list[list[str]]]] = []
    for job in (by_num[num] for num in places):
        if job.num in duplicates:
            continue
        if index and not (interleaved(job) and job.config.process_count > index):
            continue
        if out and out[-1][0] + len(out[-1][1]) == job.num and len(out[-1][1]) < size:
            out[-1][1].append(list(job.overrides))
        else:
            out.append((job.num, [list(job.overrides)]))
    return out


def new_token() -> str:
    return uuid.uuid4().hex


def begin(
    sweep: SweepDir, index: int, rounds: int, token: str, close: Collection[int] = ()
) -> None:
    """Round `index` of `rounds` is being launched (read by the jobs' tasks); `close`:
    the jobs it records without running a process (Round.close)."""
    data = {"round": index, "rounds": rounds, "token": token, "close": sorted(close)}
    write_json_atomic(sweep.round, data)


def end(sweep: SweepDir) -> None:
    """No round is being launched: a later single launch runs processes back to back."""
    sweep.round.unlink(missing_ok=True)


def current(sweep: SweepDir) -> Round | None:
    try:
        data = json.loads(sweep.round.read_text())
        close = frozenset(int(n) for n in data.get("close", ()))
        return Round(int(data["round"]), int(data["rounds"]), str(data["token"]), close)
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(kw_only=True)
class Ran(Outcome):
    """One process of a job, as the parent saw it: its outcome (the result kept where this
    process ran it, else read from the process's own file once asked for: loaded) and
    what the parent measured around it."""

    gap_s: float  # the parent's work since its previous job's end (results/phases.py)
    cpu_wait_s: float
    started_at: float  # epoch seconds
    cpus: str | None  # the CPU slot, e.g. "0-1"
    cores: int  # how many it holds
    node: str | None = None  # where it ran (core/machine.node_name)

    @classmethod
    def of(cls, outcome: Outcome, **parent: Any) -> Ran:
        return cls(**{f.name: getattr(outcome, f.name) for f in fields(Outcome)}, **parent)

    @classmethod
    def saved(cls, data: dict[str, Any]) -> Ran:
        """As processes.json keeps it (its result is in the process's own file)."""
        return cls(**{**data, "status": Status(data["status"]), "result": None})

    def loaded(self, job_dir: JobDir, n: int) -> Ran:
        """With its result, read from process `n`'s file where an earlier launch of the
        sweep ran it (once)."""
        if self.result is None:
            result_path, _ = job_dir.process_files(n)
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
                self.result = ChildResult.from_dict(json.loads(result_path.read_text()))
        return self


@dataclass
class JobRounds:
    """A job's processes so far: an interleaved job's are kept in its folder's
    processes.json across rounds and launches; another's (token None) only here."""

    job_dir: JobDir
    fingerprint: str
    token: str | None
    ran: dict[int, Ran] = field(default_factory=dict)
    recorded: bool = False  # its row is recorded, in this launch of the sweep

    @classmethod
    def load(cls, job_dir: JobDir, fingerprint: str, token: str) -> JobRounds:
        """The job's processes so far: this launch's, and an earlier launch's that ended
        ok where that launch stopped before recording the job (its row, if recorded
        then, is not this launch's: the job runs again from its first process)."""
        return cls._of(job_dir, _read(job_dir), fingerprint, token)

    @classmethod
    def _of(
        cls, job_dir: JobDir, data: dict[str, Any] | None, fingerprint: str, token: str
    ) -> JobRounds:
        """load, from the folder's processes.json as read (None: none)."""
        fresh = cls(job_dir, fingerprint, token)
        if data is None or data.get("fingerprint") != fingerprint:
            return fresh
        same = data.get("token") == token
        if data.get("recorded") and not same:
            return fresh
        try:
            ran = {int(n): Ran.saved(r) for n, r in data.get("processes", {}).items()}
        except (TypeError, ValueError):
            return fresh
        kept = {n: r for n, r in ran.items() if same or r.status is Status.OK}
        return cls(job_dir, fingerprint, token, kept, bool(data.get("recorded")) and same)

    def save(self) -> None:
        if self.token is None:
            return
        processes = {
            str(n): {f.name: getattr(r, f.name) for f in fields(r) if f.name != "result"}
            for n, r in sorted(self.ran.items())
        }
        write_json_atomic(
            self.job_dir.rounds,
            {
                "fingerprint": self.fingerprint,
                "token": self.token,
                "recorded": self.recorded,
                "processes": processes,
            },
        )

    def add(self, n: int, ran: Ran) -> None:
        self.ran[n] = ran
        self.save()

    def outcomes(self, upto: int) -> list[Outcome]:
        """Processes 0..upto, in order, as far as each ran (a gap ends the list)."""
        out: list[Outcome] = []
        for n in range(upto + 1):
            if n not in self.ran:
                break
            out.append(self.ran[n].loaded(self.job_dir, n))
        return out

    def first_steps(self) -> int | None:
        """The steps per repeat the job's first process ran, calibrated or given (None:
        it did not end ok); a later process runs as many (given ones are given to it too)."""
        first = self.ran.get(0)
        if first is None or first.status is not Status.OK:
            return None
        result = first.loaded(self.job_dir, 0).result
        timing = result.timing if result else None
        return timing.iterations_per_run if timing else None

    @classmethod
    def in_sweep(
        cls, sweep: SweepDir, fingerprints: Collection[str], token: str
    ) -> dict[str, JobRounds]:
        """The processes so far of the sweep's jobs of these fingerprints, by fingerprint,
        from whichever of its folders keeps them."""
        out: dict[str, JobRounds] = {}
        for path in sweep.path.rglob(JobDir(sweep.path).rounds.name):
            job_dir = JobDir(path.parent)
            data = _read(job_dir)  # once: its fingerprint, then its processes
            fingerprint = str(data.get("fingerprint")) if data else ""
            if fingerprint in fingerprints:
                out[fingerprint] = cls._of(job_dir, data, fingerprint, token)
        return out

    def ok_count(self) -> int:
        """How many processes from the first ran and ended ok, with nothing missing."""
        n = 0
        while n in self.ran and self.ran[n].status is Status.OK:
            n += 1
        return n

    def done(self) -> None:
        self.recorded = True
        self.save()


def _read(job_dir: JobDir) -> dict[str, Any] | None:
    """The folder's processes.json (None: none, or not a record)."""
    try:
        data = json.loads(job_dir.rounds.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
