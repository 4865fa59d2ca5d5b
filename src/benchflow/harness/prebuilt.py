"""share_build: the model built once, in a preforked interpreter of its own, for every
job with the same build (benchflow.models.sharing.build_key).

That interpreter (runner/zygote.py) runs :func:`build_here` as the job's child would
run its build: the allocator's settings, the matmul precision, the seed, then the
model's construction; its jobs are forked from it after, each with its own copy
(copy-on-write), and the first build of each job (:func:`take`) finishes that copy
(``place``: the dtype cast and device move) instead of building again. Verify, the
compile profile and IR passes build their own models, as without sharing.

The build runs on one thread (models/registry.build_model), here as in a job that
builds its own: GNU OpenMP (libgomp, torch's CPU thread pool) cannot fork once it has
run a parallel region on more than one thread (a child's next parallel region waits
for pool threads that were not forked: it hangs), so the process that forks jobs must
never have used more than one; and since every build runs on one, an op of the build
whose result depends on the thread count (a large reduction, a matmul) gives the same
bits in a shared build and in a job's own, whatever the job's thread count.

A job's later processes (processes=N, its second on) fork from an interpreter of the
job's own, forked from its model's zygote (or its kind's), which builds the job's timed
step from that model and calls it (:func:`warm_here`): the compiled step is then every
later process's, which does not trace and compile it again (0.35-2.3 s a process here,
Inductor's graph caches hit). Its first process compiles cold in itself, and is the
row's compile time. The calls run in a thread of their own, which ends before the
interpreter forks: libgomp's pool belongs to the thread that started it and goes with
that thread, so the forking thread has never run a parallel region and a child's first
region starts a pool of its own. What else the calls leave running (a compile-worker
pool, any thread) and the interpreter does not fork (`pristine`): the job's processes
then compile as before (docs/isolation.md, "One compile per job").
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
from benchflow.models.sharing import build_key, step_key


@dataclass
class Prebuilt:
    key: str  # the build key it was built for
    model: Any  # as built: benchflow.models.registry.Built
    build_s: float
    # Python's `random` after the build: a fork reseeds it in the child (os.register_at_fork
    # in the random module), so a job forked from here would not find it as built
    python_rng: Any = None
    pid: int = 0  # the interpreter that built it
    # warm_here: the job's timed step (models/step.TimedStep), placed, prepared and called
    # (compiled); the step key it was made for; the seconds those calls took
    step: Any = None
    step_key: str | None = None
    step_s: float | None = None


_prebuilt: Prebuilt | None = None


def build_here(cfg: BenchConfig) -> float:
    """In a model's zygote: build the model of `cfg` as its job's child would, before the
    dtype cast and device move; returns how long it took. Raises what the build raises,
    and RuntimeError if the build left a thread running (forking would then be unsafe)."""
    global _prebuilt
    import torch

    from benchflow.harness.process import (
        seed_everything,
        steady_host_allocator,
        threads_unsafe_to_fork,
    )
    from benchflow.models.registry import build_model

    key = build_key(cfg)
    assert key is not None, "only a job built on the host shares its build"
    t0 = time.perf_counter()
    before = threads_unsafe_to_fork()
    steady_host_allocator()  # as the job's child, so the model's memory is laid out alike
    torch.set_float32_matmul_precision(cfg.matmul_precision)
    seed_everything(cfg.seed)
    model = build_model(cfg)  # on one thread (see above), as in every job's own build
    if (after := threads_unsafe_to_fork()) > before:
        raise RuntimeError(
            f"building {cfg.model.name} started {after - before} thread(s); a process "
            "forked from here could deadlock"
        )
    import random

    t1 = time.perf_counter()
    _prebuilt = Prebuilt(key, model, t1 - t0, random.getstate(), os.getpid())
    return _prebuilt.build_s


def take(cfg: BenchConfig) -> Prebuilt | None:
    """In a job's child: the model built before the fork (with its step, where it was
    made for this very config), if it was built for this config; once (every later
    build of the job builds anew)."""
    global _prebuilt, _taken
    found, _prebuilt = _prebuilt, None
    if found is None or found.key != build_key(cfg):
        return None
    if found.step is not None and found.step_key != step_key(cfg):
        return None  # a step made for another config: the job builds its own
    import random

    random.setstate(found.python_rng)  # as the build left it, before the fork reseeded it
    _taken = dataclasses.replace(found, model=None)  # what the row says of it, not the model
    return found


_taken: Prebuilt | None = None


def taken() -> Prebuilt | None:
    """The shared build this job's model came from, as the row tells it (None: the job
    built its own): its seconds, the pid of the interpreter that made it, and the
    seconds of the calls that compiled its step (None: the job compiled its own)."""
    return _taken


# How long warm_here waits for the threads its calls started to end (pristine refuses a
# process with one left: its jobs then compile their own step).
THREADS_GONE_S = 5.0


def warm_here(cfg: BenchConfig, first_call: Callable[[BenchConfig], tuple[Any, float]]) -> float:
    """In a job's own interpreter, once its model is built (inherited from the model's
    zygote, or built here): the job's timed step made and called (`first_call`:
    harness/child.first_call_step: twice), in a thread that ends before this returns
    (see the module), kept for the job's later processes; returns the seconds of those
    calls. Raises what the step raises."""
    global _prebuilt, _taken, _recorded
    import threading

    from benchflow.backends.inductor import stop_compile_threads
    from benchflow.harness.process import unsafe_threads

    if _prebuilt is None or _prebuilt.key != build_key(cfg):
        build_here(cfg)
    model, recorded = _prebuilt, _recorded
    assert model is not None
    _recorded = True  # the build record is each child's, of what it took (record)
    made: list[Any] = []

    def call() -> None:
        try:
            made.append(first_call(cfg))
        except BaseException as exc:  # raised in the interpreter's own thread below
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
    _taken, _recorded = None, recorded  # the step's build took the model: a child's own take
    if isinstance(made[0], BaseException):
        raise made[0]
    step, step_s = made[0]
    _prebuilt = dataclasses.replace(
        model, model=None, step=step, step_key=step_key(cfg), step_s=step_s
    )
    return step_s


# BENCHFLOW_BUILD_RECORD=FILE: each job's child appends to FILE what its first build made
# (hashes of the weights, the inputs and the RNG state after it, as placed on the job's
# device; tensors off the CPU by dtype and shape only: a transfer would add to the
# device's counters): how tests/test_prefork.py checks that a shared build and a job's
# own agree.
ENV_RECORD = "BENCHFLOW_BUILD_RECORD"
_recorded = False


def record(model: Any) -> None:
    """With BENCHFLOW_BUILD_RECORD set, the first build's record (once per process)."""
    global _recorded
    path = os.environ.get(ENV_RECORD)
    if not path or _recorded:
        return
    _recorded = True
    line: dict[str, Any] = {"job": sys.argv[-1], "parent_pid": os.getppid()}
    line["prebuilt"] = _taken is not None
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


def build_from_request(
    build: dict[str, Any], first_call: Callable[[BenchConfig], tuple[Any, float]] | None = None
) -> float:
    """In the model's zygote: build the model of the job file ``build["job"]``
    (build_here; with `first_call`, in a job's own interpreter: warm_here) in that
    job's environment and folder, its output (prints, log lines) to ``build["log"]``;
    the zygote's environment, output and logging are as they were after."""
    from benchflow.core.job import JobSpec

    job = JobSpec.from_dict(json.loads(Path(build["job"]).read_text()))
    warm = first_call is not None
    if (step_key(job.config) if warm else build_key(job.config)) != build["key"]:
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
        return warm_here(job.config, first_call) if first_call else build_here(job.config)
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
