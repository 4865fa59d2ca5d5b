"""What a job's model build depends on: jobs with the same build key get the same
model, weights and inputs, so one build can serve them all (share_build=true).

The build runs the seed and the model's own construction, on the host (TorchBench
on CUDA builds on the GPU: not shared), before the job's dtype cast and device move
(``place``). Nothing here imports torch: the sweep orders its jobs by this key.
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
    """The key of a resolved config's build (None: it cannot be built apart from its job,
    on the host). What the build reads: the model's settings, its suite (TorchBench's
    checkout, the rules a suite's loss reads), the test, the batch size, the seed and
    the float32 matmul precision; the dtype too, as the suite resolved it."""
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
    }
    return _digest(what)


# What sweep/process.process_config tells each process of a job apart from the others
# (the adaptive rule's share, the first process's steps per repeat): not the step's.
PER_PROCESS = ("processes", "timed_budget_s", "max_repeat", "iterations_per_run")


def step_key(cfg: BenchConfig) -> str:
    """The key of a job's timed step as compiled (harness/prebuilt.warm_here): its whole
    resolved config but what each process is told apart (PER_PROCESS). A job's later
    processes take the step its own interpreter compiled only where their keys match."""
    what = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in PER_PROCESS}
    return _digest(what)


def _digest(what: Mapping[str, object]) -> str:
    """A key for `what`: a hash of its JSON, with sorted keys."""
    blob = json.dumps(what, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
