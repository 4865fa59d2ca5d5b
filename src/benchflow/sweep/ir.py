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
    xla_ir = bool(cfg.ir.formats or cfg.ir.xla_dump) and backend.on_xla
    inductor_code = cfg.ir.inductor_code and backend.generates_code
    if not (xla_ir or inductor_code):
        return [], [], 0.0
    spec = JobSpec(job.name, cfg, str(job_dir.child_result), ir=True)  # (each pass: its result)
    files, notes = dump_ir(spec, job_dir, env, zygote) if xla_ir else ([], [])
    if inductor_code:
        code_files, code_notes = dump_inductor_code(spec, job_dir, env)
        files, notes = files + code_files, notes + code_notes
    return files, notes, time.perf_counter() - start


def dump_ir(
    job: JobSpec, job_dir: JobDir, base_env: dict[str, str], zygote: Zygote | None
) -> tuple[list[str], list[str]]:
    """Run the XLA IR passes, one per ir.formats, ir.xla_dump's with the first (alone where
    no format is asked); returns (files written, relative to the job's folder; notes)."""
    ir_dir, folder = job_dir.ir, job_dir.path
    ir_dir.mkdir(exist_ok=True)
    formats: list[str | None] = [*job.config.ir.formats] or [None]
    files, notes = [], []
    for i, fmt in enumerate(formats):
        with_xla_dump = job.config.ir.xla_dump and i == 0
        label = fmt or "xla_dump"
        env: dict[str, str] = dict(base_env)
        raw = ir_dir / f".graphs.{label}"
        if fmt:
            env.update(XLA_SAVE_TENSORS_FILE=str(raw), XLA_SAVE_TENSORS_FMT=fmt)
        if with_xla_dump:
            own = env.get("XLA_FLAGS", "")  # the job's xla.flags, which its dump keeps
            env["XLA_FLAGS"] = f"{own} --xla_dump_to={job_dir.xla_dump}".strip()
            for name in XLA_PERSISTENT_CACHE:  # XLA dumps what it compiles, not what it reads
                env.pop(name, None)
        outcome = run_isolated(
            dataclasses.replace(job, result_path=str(ir_dir / f"result_{label}.json")),
            ir_dir / f"job_{label}.json",
            folder,
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
            files.append(str(target.relative_to(folder)))
        if with_xla_dump and job_dir.xla_dump.is_dir():
            files.append(str(job_dir.xla_dump.relative_to(folder)) + "/")
    log.info("IR files: %s", json.dumps(files))
    return files, notes


def dump_inductor_code(
    job: JobSpec, job_dir: JobDir, base_env: dict[str, str]
) -> tuple[list[str], list[str]]:
    """A pass with TORCH_COMPILE_DEBUG and a fresh cache (so that code is written, not served)."""
    out, folder = job_dir.inductor_code, job_dir.path
    out.mkdir(parents=True, exist_ok=True)
    debug_dir = out / ".debug"
    env = {
        **base_env,
        "TORCH_COMPILE_DEBUG": "1",
        "TORCH_COMPILE_DEBUG_DIR": str(debug_dir),
        "TORCHINDUCTOR_CACHE_DIR": str(out / ".cache"),
    }
    spec = dataclasses.replace(job, result_path=str(out / "result.json"))
    outcome = run_isolated(spec, out / "job.json", folder, "ir_inductor.", env)
    if outcome.status is not Status.OK:
        return [], [f"inductor code pass: {outcome.status}: {(outcome.error or '')[:300]}"]
    files = []
    written = sorted([*debug_dir.rglob("output_code.py"), *debug_dir.rglob("output_code.cpp")])
    for n, code in enumerate(written):
        target = out / f"output_code_{n}{code.suffix}"
        target.write_text(code.read_text())
        files.append(str(target.relative_to(folder)))
    shutil.rmtree(debug_dir, ignore_errors=True)
    shutil.rmtree(out / ".cache", ignore_errors=True)
    return files, [] if files else ["inductor code pass wrote no output_code.py or .cpp"]
