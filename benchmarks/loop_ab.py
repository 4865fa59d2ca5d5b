"""The timed step, A/B: benchflow's loop against the experiment runner's, in one process, on
the same built and compiled step of a job that ran.

Given job files (`job.json` in a sweep's job folders, e.g. those `make coverage` left),
each job's model is built, cast, moved and compiled as its child built it
(harness/child.py), warmed up, and then timed three ways, interleaved over --rounds
rounds so that the host's drift falls on each alike, --iterations steps a repeat:
- `benchflow`: benchflow's loop: Python's garbage collector off over the repeat, each
  step's output dropped once the step is cut;
- `gc`: the same with the garbage collector on (the runner leaves it on);
- `runner`: the runner's loop: the collector on, each step's output held while the next
  step runs, and each step fed its own deep copy of the inputs, made before the repeat
  (its `_prepare_inputs`).
All three under benchflow's host allocator setting (the runner's process has glibc's
default: `make coverage`'s own A/B measures that). A cell of the coverage table whose
ratio the runner's loop explains has `runner / benchflow` here near the cell's
runner / benchflow ratio. Only `model.step=module` eval and train jobs (the module on
its inputs), on the host.

    python benchmarks/loop_ab.py coverage/dcgan/eval/benchflow/native/*/job.json
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

WARMUP = 3
VARIANTS = ("benchflow", "gc", "runner")


def time_job(path: Path, rounds: int, iterations: int) -> dict[str, Any]:
    """One job's medians per step (s), each variant; its model, backend and test."""
    from benchflow import backends
    from benchflow.backends.inductor import stop_compile_workers
    from benchflow.core.job import JobSpec
    from benchflow.harness.child import _start, compiler_settings
    from benchflow.harness.process import set_host_allocator

    cfg = JobSpec.from_dict(json.loads(path.read_text())).config
    set_host_allocator(cfg.host_allocator)  # as the job's child
    backend = backends.of_row(cfg.dynamo.name, cfg.xla.name)
    if cfg.model.step != "module":
        raise SystemExit(f"{path}: model.step={cfg.model.step}; this A/B needs model.step=module")
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with compiler_settings(cfg):
        job, _ = _start(cfg, backend, None, records=False)
        device = job.device
        step = job.compiled_step()
        own = step.args

        def repeat(variant: str) -> float:
            copies = [copy.deepcopy(own) for _ in range(iterations)]
            out = None
            if variant == "benchflow":
                gc.disable()
            start = time.perf_counter()
            for i in range(iterations):
                if variant == "runner":
                    step.args = copies[i]
                else:
                    out = None
                out = job.run_step(step, device.autocast_type)
                device.mark_step()
            device.synchronize()
            end = time.perf_counter()
            gc.enable()
            del out
            step.args = own
            return (end - start) / iterations

        for _ in range(WARMUP):
            repeat("benchflow")
        stop_compile_workers()
        for _ in range(rounds):
            for variant in VARIANTS:
                times[variant].append(repeat(variant))
    return {
        "model": cfg.model.name,
        "backend": backend.label,
        "test": cfg.test.name,
        **{v: statistics.median(t) for v, t in times.items()},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("jobs", nargs="+", type=Path, help="job.json files")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--iterations", type=int, default=10, help="steps a repeat")
    args = p.parse_args(argv)
    head = ("model", "backend", "test", *VARIANTS, "gc / benchflow", "runner / benchflow")
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    import torch._dynamo

    for path in args.jobs:
        torch._dynamo.reset()
        r = time_job(path, args.rounds, args.iterations)
        ms = {v: r[v] * 1e3 for v in VARIANTS}
        print(
            f"| {r['model']} | {r['backend']} | {r['test']} | {ms['benchflow']:.2f} ms "
            f"| {ms['gc']:.2f} ms | {ms['runner']:.2f} ms "
            f"| {ms['gc'] / ms['benchflow']:.3f} | {ms['runner'] / ms['benchflow']:.3f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
