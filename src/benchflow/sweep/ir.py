"""IR dumps: short extra passes of a job, one per format, with torch_xla's own dump. torch_xla
reads XLA_SAVE_TENSORS_FMT once per process, so each format gets its own untimed child,
which may fork from the job's imported warm process (it reads the variables at first sync).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from pathlib import Path

from benchflow import backends
from benchflow.backends.base import XLA_PERSISTENT_CACHE
from benchflow.core.job import Job, JobSpec
from benchflow.core.layout import JobDir
from benchflow.core.status import Status
from benchflow.runner.isolated import run_isolated
from benchflow.runner.zygote import Zygote

log = logging.getLogger(__name__)


def ir_passes(
    job: Job, job_dir: JobDir, env: dict[str, str], zygote: Zygote | None = None
) -> tuple[list[str], list[str], float]:
    """The job's IR passes, untimed, after its first process: (files, notes, seconds)."""
    cfg, backend, start = job.config, backends.get(job.backend), time.perf_counter()
    xla_ir = bool(cfg.ir.formats or cfg.ir.xla_dump) and backend.has_xla_ir()
    inductor_code = cfg.ir.inductor_code and backend.generates_code
    if not (xla_ir or inductor_code):
        return [], [], 0.0
    spec = JobSpec(job.name, cfg, str(job_dir.child_result))
    files: list[str] = []
    notes: list[str] = []
    if xla_ir:
        formats = list(cfg.ir.formats)
        ir_files, ir_notes = dump_ir(spec, job_dir.path, formats, cfg.ir.xla_dump, env, zygote)
        files += ir_files
        notes += ir_notes
    if inductor_code:
        code_files, code_notes = dump_inductor_code(spec, job_dir.path, env)
        files += code_files
        notes += code_notes
    return files, notes, time.perf_counter() - start


def dump_ir(
    job: JobSpec,
    job_dir: Path,
    formats: list[str],
    xla_dump: bool,
    base_env: dict[str, str],
    zygote: Zygote | None,
) -> tuple[list[str], list[str]]:
    """Run the XLA IR passes; returns (files written, relative to job_dir; notes)."""
    ir_dir = JobDir(job_dir).ir
    ir_dir.mkdir(exist_ok=True)
    passes: list[tuple[str | None, bool]] = [
        (fmt, xla_dump and i == 0) for i, fmt in enumerate(formats)
    ]
    if xla_dump and not formats:
        passes = [(None, True)]
    files, notes = [], []
    for fmt, with_xla_dump in passes:
        label = fmt or "xla_dump"
        env: dict[str, str] = dict(base_env)
        raw = ir_dir / f".graphs.{label}"
        if fmt:
            env.update(XLA_SAVE_TENSORS_FILE=str(raw), XLA_SAVE_TENSORS_FMT=fmt)
        if with_xla_dump:
            own = env.get("XLA_FLAGS", "")  # the job's xla.flags, which its dump keeps
            env["XLA_FLAGS"] = f"{own} --xla_dump_to={JobDir(job_dir).xla_dump}".strip()
            for name in XLA_PERSISTENT_CACHE:  # XLA dumps what it compiles, not what it reads
                env.pop(name, None)
        outcome = run_isolated(
            _ir_spec(job, ir_dir / f"result_{label}.json"),
            ir_dir / f"job_{label}.json",
            job_dir,
            f"ir_{label}.",
            env,
            zygote,
        )
        if outcome.status is not Status.OK:
            notes.append(f"ir pass {label}: {outcome.status}: {(outcome.error or '')[:300]}")
            continue
        # torch_xla appends the device ordinal to the file name: give it a stable one.
        for part in sorted(ir_dir.glob(f".graphs.{label}*")):
            target = ir_dir / f"graphs.{label}"
            part.replace(target)
            files.append(str(target.relative_to(job_dir)))
        if with_xla_dump and JobDir(job_dir).xla_dump.is_dir():
            files.append(str(JobDir(job_dir).xla_dump.relative_to(job_dir)) + "/")
    log.info("IR files: %s", json.dumps(files))
    return files, notes


def _ir_spec(job: JobSpec, result: Path) -> JobSpec:
    return dataclasses.replace(job, ir=True, result_path=str(result))


def dump_inductor_code(
    job: JobSpec, job_dir: Path, base_env: dict[str, str]
) -> tuple[list[str], list[str]]:
    """A pass with TORCH_COMPILE_DEBUG and a fresh cache (so that code is written, not served)."""
    out = JobDir(job_dir).inductor_code
    out.mkdir(parents=True, exist_ok=True)
    debug_dir = out / ".debug"
    env = {
        **base_env,
        "TORCH_COMPILE_DEBUG": "1",
        "TORCH_COMPILE_DEBUG_DIR": str(debug_dir),
        "TORCHINDUCTOR_CACHE_DIR": str(out / ".cache"),
    }
    spec = _ir_spec(job, out / "result.json")
    outcome = run_isolated(spec, out / "job.json", job_dir, "ir_inductor.", env)
    if outcome.status is not Status.OK:
        return [], [f"inductor code pass: {outcome.status}: {(outcome.error or '')[:300]}"]
    files = []
    written = sorted([*debug_dir.rglob("output_code.py"), *debug_dir.rglob("output_code.cpp")])
    for n, code in enumerate(written):
        target = out / f"output_code_{n}{code.suffix}"
        target.write_text(code.read_text())
        files.append(str(target.relative_to(job_dir)))
    shutil.rmtree(debug_dir, ignore_errors=True)
    shutil.rmtree(out / ".cache", ignore_errors=True)
    return files, [] if files else ["inductor code pass wrote no output_code.py or .cpp"]
