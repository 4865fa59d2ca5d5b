"""A warm process's work for the jobs that fork from it (runner/pool.py): a model built once
(:func:`build_here`) or a job's step compiled once (:func:`warm_here`), taken by each
forked child's first build (:class:`Prebuilt`).

libgomp's pool does not survive a fork once it ran a parallel region on several threads, so
builds run on one thread (which gives a shared build a job's own bits) and a compiled one's
calls run in a thread that ends before any fork (docs/isolation.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchflow.config.schema import BenchConfig
from benchflow.core.environ import variable
from benchflow.models.sharing import build_key, step_key

OPENBLAS_THREADS = "OPENBLAS_NUM_THREADS"  # read as an OpenBLAS library loads
THREADS_GONE_S = 5.0  # how long warm_here waits for the threads its calls started to end


@dataclass
class Prebuilt:
    """What a warm process made: a model as built (before cast and move), or a timed step."""

    key: str  # the build key it was built for
    model: Any
    build_s: float
    # Python's `random` after the build: a fork reseeds it in the child
    python_rng: Any = None
    pid: int = 0  # the process that built it
    # warm_here's: the timed step, placed, prepared and called; its key; the calls' seconds
    step: Any = None
    step_key: str | None = None
    step_s: float | None = None

    def for_(self, cfg: BenchConfig) -> Prebuilt | None:
        """In a job's child: this if made for `cfg` (`random` as the build left it), else None."""
        if self.key != build_key(cfg) or (self.step is not None and self.step_key != step_key(cfg)):
            return None
        import random

        random.setstate(self.python_rng)
        return self


def build_here(cfg: BenchConfig) -> Prebuilt:
    """In a built warm process: the model of `cfg`, built as its job's child would build it."""
    import random

    import torch

    from benchflow.harness.process import seed_everything, set_host_allocator, unsafe_threads
    from benchflow.models.registry import build_model

    key = build_key(cfg)
    assert key is not None, "only a job built on the host shares its build"
    t0 = time.perf_counter()
    before = unsafe_threads()
    set_host_allocator(cfg.host_allocator)  # as the job's child: the model's memory laid out alike
    torch.set_float32_matmul_precision(cfg.matmul_precision)
    seed_everything(cfg.seed)
    # on one thread (see above), as in every job's own build; a BLAS the build loads starts
    # no pool (TorchBench's dlrm imports sklearn, whose scipy has an OpenBLAS of its own)
    with variable(OPENBLAS_THREADS, "1"):
        model = build_model(cfg)
    if started := sorted(name for tid, name in unsafe_threads().items() if tid not in before):
        raise RuntimeError(
            f"building {cfg.model.name} started {len(started)} thread(s) ({', '.join(started)}); "
            "a process forked from here could deadlock"
        )
    return Prebuilt(key, model, time.perf_counter() - t0, random.getstate(), os.getpid())


FirstCall = Callable[[BenchConfig, "Prebuilt | None"], tuple[Any, float]]


def warm_here(cfg: BenchConfig, first_call: FirstCall, built: Prebuilt | None) -> Prebuilt:
    """In a compiled warm process: the job's step, made and called in a thread that then ends."""
    import threading

    from benchflow.backends.inductor import stop_compile_threads
    from benchflow.harness.process import unsafe_threads

    model = built if built is not None and built.key == build_key(cfg) else build_here(cfg)
    made: list[Any] = []

    def call() -> None:
        try:
            made.append(first_call(cfg, model))
        except BaseException as exc:  # raised in the process's own thread below
            made.append(exc)

    before = set(unsafe_threads())
    thread = threading.Thread(target=call, name="benchflow-warm-step")
    thread.start()
    thread.join()
    stop_compile_threads()
    # libgomp's workers of the ended thread exit on their own, soon after it
    deadline = time.monotonic() + THREADS_GONE_S
    while set(unsafe_threads()) - before and time.monotonic() < deadline:
        time.sleep(0.005)
    if isinstance(made[0], BaseException):
        raise made[0]
    step, step_s = made[0]
    return dataclasses.replace(model, model=None, step=step, step_key=step_key(cfg), step_s=step_s)


def build_from_request(
    build: dict[str, Any], inherited: Prebuilt | None, first_call: FirstCall | None = None
) -> Prebuilt:
    """In a warm process: build for the job file ``build["job"]`` in its environment and
    folder, output to ``build["log"]``; the process's own are restored after."""
    from benchflow.core.job import JobSpec

    job = JobSpec.from_dict(json.loads(Path(build["job"]).read_text()))
    key = step_key(job.config) if first_call else build_key(job.config)
    if key != build["key"]:
        raise ValueError(f"job {build['job']} has another key than {build['key']}")
    environ = dict(os.environ)
    out = os.open(build["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved = os.dup(1), os.dup(2)
    handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    level = root.level
    try:
        for fd in (1, 2):
            os.dup2(out, fd)
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        os.environ.update(build["env"])
        os.chdir(build["cwd"])
        if first_call is not None:
            return warm_here(job.config, first_call, inherited)
        return build_here(job.config)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        root.removeHandler(handler)
        root.setLevel(level)
        os.environ.clear()
        os.environ.update(environ)
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(out)


# BENCHFLOW_BUILD_RECORD=FILE: hashes of each job's first build, for tests/test_prefork.py
# (tensors off the CPU by dtype and shape only: a transfer would add to device counters).
ENV_RECORD = "BENCHFLOW_BUILD_RECORD"


def record(model: Any, prebuilt: bool) -> None:
    """With BENCHFLOW_BUILD_RECORD set, a build's record (`prebuilt`: from a warm process)."""
    path = os.environ.get(ENV_RECORD)
    if not path:
        return
    line: dict[str, Any] = {"job": sys.argv[-1], "parent_pid": os.getppid(), "prebuilt": prebuilt}
    try:
        line |= _hashes(model)
    except Exception as exc:  # a record, never the job's failure
        line["error"] = f"{type(exc).__name__}: {exc}"
    with open(path, "a") as f:  # one short line, appended whole
        f.write(json.dumps(line) + "\n")


def _hashes(model: Any) -> dict[str, str | None]:
    import random

    import numpy as np
    import torch

    def tensors(value: Any) -> str:
        h = hashlib.sha256()
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for name, t in items:
            if isinstance(t, torch.Tensor):
                h.update(f"{name}:{t.dtype}:{tuple(t.shape)}:{t.device.type}".encode())
                if t.device.type == "cpu":
                    flat = t.detach().contiguous().reshape(-1)
                    h.update(flat.view(torch.uint8).numpy().tobytes())
        return h.hexdigest()[:16]

    def text(value: Any) -> str:
        return hashlib.sha256(repr(value).encode()).hexdigest()[:16]

    try:
        module, inputs = model.get_module()
    except NotImplementedError:
        module, inputs = None, ()
    if not isinstance(inputs, (dict, list, tuple)):
        inputs = (inputs,)
    return {
        "weights": tensors(module.state_dict()) if isinstance(module, torch.nn.Module) else None,
        "inputs": tensors(inputs),
        "torch_rng": hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()[:16],
        "numpy_rng": text(np.random.get_state()),
        "python_rng": text(random.getstate()),
    }
