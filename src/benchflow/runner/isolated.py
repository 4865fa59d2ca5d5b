"""Spawn (or fork) one job's child, wait for it with a real timeout, and classify the outcome.
The child has a session of its own, so that a timeout or Ctrl-C kills its whole group; every
outcome is an :class:`Outcome`, never an exception: one job cannot take the sweep down.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from benchflow.core.files import pick, write_json_atomic
from benchflow.core.job import JobSpec
from benchflow.core.status import Status
from benchflow.harness.process import ENV_PARENT
from benchflow.results.child import ChildResult
from benchflow.runner.toolchain import launch
from benchflow.runner.zygote import Zygote, ZygoteError, kill_group

log = logging.getLogger(__name__)

STDERR_TAIL_CHARS = 2000


@dataclass
class Outcome:
    """One process of a job: what its child wrote back, how it ended, what the parent saw."""

    status: Status
    error: str | None
    returncode: int | None
    wall_time_s: float
    result: ChildResult | None  # the child's result.json, when it wrote one
    # perf_counter at launch and end (the child's clock too): the row's phases split the wall
    launched: float | None = None
    ended: float | None = None
    gap_s: float = 0.0  # the parent's work since the previous process's end
    cpu_wait_s: float = 0.0  # waiting for its CPU slot
    started_at: float | None = None  # epoch seconds, at its launch
    cpus: str | None = None  # its CPU slot, e.g. "0-1"
    cores: int = 0  # how many the slot holds
    gpu: str | None = None  # its GPU slot
    node: str | None = None  # where it ran (core/machine.node_name)
    # the job's IR passes, after its first process (sweep/ir.py)
    ir_files: list[str] = field(default_factory=list)
    ir_notes: list[str] = field(default_factory=list)
    ir_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """As a job's journal keeps it (sweep/run.py): the result is in its own file."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "result"}
        return out | {"status": self.status.value}

    @classmethod
    def from_dict(cls, data: dict[str, Any], result: ChildResult | None) -> Outcome:
        return cls(**pick(cls, data) | {"status": Status(data["status"]), "result": result})


def _tail(path: Path, chars: int = STDERR_TAIL_CHARS) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - chars))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_isolated(
    spec: JobSpec,
    job_file: Path,
    job_dir: Path,
    log_prefix: str,
    env: dict[str, str],
    zygote: Zygote | None = None,
) -> Outcome:
    """Run `spec`'s job in its toolchain's interpreter or forked from `zygote`, within timeout_s."""
    result_path, timeout_s = Path(spec.result_path), spec.config.timeout_s
    result_path.unlink(missing_ok=True)
    write_json_atomic(job_file, spec.to_dict())
    python, toolchain_env = launch(spec.config.toolchain)
    env = {**env, **toolchain_env}
    stdout_path = job_dir / f"{log_prefix}stdout.log"
    stderr_path = job_dir / f"{log_prefix}stderr.log"
    if zygote is not None:
        paths = (result_path, stdout_path, stderr_path)
        forked = _run_forked(zygote, job_file, timeout_s, paths, env)
        if forked is not None:
            return forked
    cmd = [python, "-m", "benchflow.harness", str(job_file)]
    start = time.perf_counter()
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            # the child dies with this process (harness/process.die_with_parent)
            env={**os.environ, **env, ENV_PARENT: str(os.getpid())},
        )
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return _timed_out(timeout_s, time.perf_counter() - start)
        except KeyboardInterrupt:
            return interrupted(time.perf_counter() - start)
        finally:  # its group, and grandchildren (compile workers) that left it
            kill_group(proc.pid)
            proc.wait()
    return _classify(returncode, start, time.perf_counter(), result_path, stderr_path)


def _timed_out(timeout_s: float, wall: float) -> Outcome:
    return Outcome(Status.TIMEOUT, f"no result after timeout_s={timeout_s:g}", None, wall, None)


def interrupted(wall: float) -> Outcome:
    """Ctrl-C or SIGTERM to the sweep while the job ran."""
    return Outcome(
        Status.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM to the sweep)", None, wall, None
    )


def _run_forked(
    zygote: Zygote,
    job_file: Path,
    timeout_s: float,
    paths: tuple[Path, Path, Path],
    env: dict[str, str],
) -> Outcome | None:
    """The job as a child forked from `zygote`; None if it cannot fork (the caller spawns)."""
    result_path, stdout_path, stderr_path = paths
    try:
        start = time.perf_counter()
        pid = zygote.fork(job_file, Path.cwd(), env, stdout_path, stderr_path)
    except (ZygoteError, OSError) as exc:
        log.warning("preforked interpreter unavailable (%s): spawning a fresh one", exc)
        return None
    try:
        returncode = zygote.wait(timeout_s)
    except ZygoteError as exc:
        # the zygote died under the job: the job goes with it, the next gets a new one
        kill_group(pid)
        wall = time.perf_counter() - start
        error = f"crashed with its preforked interpreter ({exc}); rerun it with retry=failed"
        return Outcome(Status.CRASHED, error, None, wall, None)
    except KeyboardInterrupt:
        _reap(zygote, pid)
        return interrupted(time.perf_counter() - start)
    if returncode is None:
        _reap(zygote, pid)
        return _timed_out(timeout_s, time.perf_counter() - start)
    kill_group(pid)  # grandchildren (compile workers) must not outlive their job
    return _classify(returncode, start, time.perf_counter(), result_path, stderr_path)


def _reap(zygote: Zygote, pid: int) -> None:
    kill_group(pid)
    with contextlib.suppress(ZygoteError):  # it may have died too (SLURM signals them all)
        zygote.wait(None)


def _classify(
    returncode: int | None, launched: float, ended: float, result_path: Path, stderr_path: Path
) -> Outcome:
    wall = ended - launched
    try:
        result = ChildResult.from_dict(json.loads(result_path.read_text()))
    except (OSError, KeyError, TypeError, ValueError, AttributeError):
        result = None  # none, half a file, or no child's: told from the exit, as a crash
    if result is not None:
        return Outcome(result.status, result.error, returncode, wall, result, launched, ended)
    how = f"exit code {returncode} without a result"
    if returncode is not None and returncode < 0:
        how = f"killed by {signal.Signals(-returncode).name}"
    error = f"{how}; stderr tail:\n{_tail(stderr_path)}"
    return Outcome(Status.CRASHED, error, returncode, wall, None, launched, ended)
