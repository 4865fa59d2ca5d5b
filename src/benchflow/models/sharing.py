"""What a job's model build depends on: jobs with the same build key get the same
model, weights and inputs, so one build can serve them all (share_build=true).

The build is the seed and the model's construction on the host, before ``place``.
Nothing here imports torch: the sweep orders its jobs by this key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping

from benchflow.config.schema import BenchConfig


def build_device(cfg: BenchConfig) -> str:
    """Where the job itself builds its model: TorchBench's models on the job's CUDA
    device (``Model(device="cuda")``), every other model on the host."""
    return "cuda" if cfg.model.source == "torchbench" and cfg.accelerator.name == "cuda" else "cpu"


def build_key(cfg: BenchConfig) -> str | None:
    """The key of a resolved config's build: everything the build reads (None: it cannot
    be built apart from its job, on the host)."""
    if build_device(cfg) != "cpu":
        return None
    what = {
        "model": dataclasses.asdict(cfg.model),
        "suite": {
            "name": cfg.suite.name,
            "torchbench_root": cfg.suite.torchbench_root,
            "rules": cfg.suite.rules,
        },
        "test": cfg.test.name,
        "batch_size": cfg.batch_size,
        "dtype": cfg.dtype,
        "seed": cfg.seed,
        "matmul_precision": cfg.matmul_precision,
        "host_allocator": cfg.host_allocator,  # set before the build (harness/prebuilt.py)
    }
    return _digest(what)


# What sweep/process.process_config tells each process of a job apart from the others
# (the adaptive rule's share, the first process's steps per repeat): not the step's.
PER_PROCESS = ("processes", "timed_budget_s", "max_repeat", "iterations_per_run")


def step_key(cfg: BenchConfig) -> str:
    """The key of a job's compiled step (harness/prebuilt.warm_here): its resolved config
    but PER_PROCESS; a later process takes a compiled step only where the keys match."""
    what = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in PER_PROCESS}
    return _digest(what)


def reference_key(cfg: BenchConfig) -> str | None:
    """The key of the accuracy check's eager and float64 runs (harness/verify.py): its
    build's, and what else an eager run reads; not the backend under test. Jobs of one
    sweep with the same key take the same references (None: not shared)."""
    build = build_key(cfg)
    if build is None:
        return None
    what = {
        "build": build,
        "accelerator": dataclasses.asdict(cfg.accelerator),
        "toolchain": dataclasses.asdict(cfg.toolchain),
        "env": cfg.env,
        "threads": [cfg.num_threads, cfg.cpus_per_job],
        "slowdown": cfg.slowdown,
    }
    return _digest(what)


def _digest(what: Mapping[str, object]) -> str:
    """A key for `what`: a hash of its JSON, with sorted keys."""
    blob = json.dumps(what, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
