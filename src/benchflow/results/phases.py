"""Where a job's seconds went: the one definition of the phases every row accounts for.

A row's ``job.phases`` splits every second from the end of the previous job's child to
the end of this job's into the phases below, each measured where it happens, so that a
sweep's wall is the sum of its rows' phases plus the parent's work after its last job;
``other`` is the rest of the child's wall, so nothing goes unaccounted (docs/results.md).
"""

from __future__ import annotations

PHASES: dict[str, str] = {
    "gap": "the parent's work before the child: the previous job's row and MLflow run, "
    "Hydra's job set-up, waiting for a CPU slot, starting a zygote (a process's first "
    "job: the command's start-up and planning)",
    "start": "harness start: fork or spawn, and the child's imports",
    "build": "building the model and its inputs on the host (and the backend's wrapper)",
    "move": "moving the model and inputs to the device, and casting them to the dtype",
    "compile": "the cold first call: tracing and compiling (each process's, with several)",
    "warmup": "the warm-up steps",
    "timed": "the timed repeats",
    "profile": "the profiler's passes",
    "verify": "the accuracy check",
    "flops": "a step's FLOPs counted on the eager module, and the device's matmul peak "
    "read from benchflow's cache (measured there once per machine, dtype and threads)",
    "ir": "the IR dump passes (children of their own)",
    "teardown": "the child's exit, and its compile workers killed",
    "other": "the rest of the child's time: logging set-up, versions, counter dumps, "
    "the output digest; for a job in several processes, the later ones' start and exit "
    "(with interleave=false, the parent's time between them too)",
}
# The model's own work; every other phase of the child is overhead (imports are).
MODEL_WORK = ("build", "move", "compile", "warmup", "timed", "profile", "verify", "flops")
# The child's wall as the parent saw it: start to teardown.
IN_CHILD = ("start", *MODEL_WORK, "teardown", "other")


def breakdown(
    *,
    gap: float,
    wall: float,
    ir: float = 0.0,
    child: dict[str, float] | None = None,
    entered: float | None = None,
    done: float | None = None,
    launched: float | None = None,
    ended: float | None = None,
) -> dict[str, float]:
    """The phases of one job. `child`: the child's own phases (None: its whole wall is
    `other`); `entered`/`done`: the child's clock at its start and its result;
    `launched`/`ended`: the parent's, around the child."""
    out = dict.fromkeys(PHASES, 0.0)
    out["gap"], out["ir"] = max(gap, 0.0), ir
    if child is None or None in (entered, done, launched, ended):
        out["other"] = wall
        return out
    assert entered is not None and done is not None and launched is not None
    assert ended is not None
    out["start"] = max(entered - launched, 0.0) + child.get("import", 0.0)
    for name in MODEL_WORK:
        out[name] = child.get(name, 0.0)
    out["teardown"] = max(ended - done, 0.0)
    out["other"] = max(wall - sum(out[k] for k in IN_CHILD if k != "other"), 0.0)
    return out


def model_work(phases: dict[str, float]) -> float:
    return sum(phases.get(k, 0.0) for k in MODEL_WORK)


def overhead(phases: dict[str, float]) -> float:
    """The child's time that is not the model's own work: start, teardown, other."""
    return sum(phases.get(k, 0.0) for k in IN_CHILD if k not in MODEL_WORK)
