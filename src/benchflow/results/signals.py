"""What ran, whatever the host's speed (docs/expected.md): the row's `signals`. Dynamo's
graphs, its graph breaks (each with its reason and the user's frame) and its recompiles
(each with the guard that failed), an XLA job's compilations in its timed repeats and
its graph executions per step, Inductor's kernels. The child reads them
(harness/child.py, from backends/probes.py); a change in them is seen in one process,
where a change of time needs many (`benchflow expected`: report/expected.py).
No torch here: the parent, the report and MLflow read these.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from benchflow.core.files import pick

# Over which steps a job's signals were read (`Signals.steps`).
TIMED_STEPS = "the cold call, the warm-up and the timed repeats"
UNTIMED_STEPS = "the first two steps (timing=false)"
OLDER_STEPS = "the cold call and the timed repeats (a row of schema < 7: no reasons)"


@dataclass(frozen=True)
class Break:
    """A place in the user's code where dynamo broke the graph, and why."""

    reason: str  # dynamo's reason: its first line, and its explanation where it gives one
    frame: str  # the user's code where it broke: file:line
    # how many times dynamo broke there: a frame, and each frame that inlines it (a
    # compiled step that calls the module breaks at the module's line too), every trace
    count: int = 1


@dataclass(frozen=True)
class Recompile:
    """A function dynamo compiled again, and the guard of its earlier graph that failed."""

    guard: str  # the guard that failed, as dynamo words it
    frame: str  # the function compiled again: file:line (name)
    count: int = 1


# A count's metadata: the MLflow metric it is logged as (tracking/metrics.py).
def _count(metric: str) -> Any:
    return field(default=None, metadata={"metric": metric})


@dataclass(frozen=True, kw_only=True)
class Signals:
    """The row's `signals`; a count is None where it does not apply (no dynamo: no graphs)."""

    steps: str = TIMED_STEPS  # the steps they were read over
    graphs: int | None = _count("counters.dynamo_graphs")  # graphs dynamo made
    # places in the user's code where dynamo broke the graph (`breaks`: one each)
    graph_breaks: int | None = _count("counters.graph_breaks")
    recompiles: int | None = _count("counters.recompiles")  # a function compiled again
    # XLA compilations in the timed repeats (timing=false: in the second step): a steady
    # step compiles nothing
    xla_repeat_compiles: int | None = _count("counters.xla_repeat_compiles")
    # XLA graph executions per timed step: more than 1, the step ran as several graphs
    xla_executions_per_step: float | None = _count("counters.xla_executions_per_step")
    inductor_kernels: int | None = _count("counters.inductor_kernels")  # kernels generated
    breaks: list[Break] = field(default_factory=list)
    guards: list[Recompile] = field(default_factory=list)  # each recompile's failed guard

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Signals | None:
        if not data:
            return None
        return cls(
            **{
                **pick(cls, data),
                "breaks": [Break(**pick(Break, b)) for b in data.get("breaks") or ()],
                "guards": [Recompile(**pick(Recompile, g)) for g in data.get("guards") or ()],
            }
        )

    def said(self) -> str:
        """Dynamo's counts in words ("graphs 2, graph breaks 0, recompiles 1", as `benchflow
        expected` names them); '' where none applies (no dynamo)."""
        counts = ((words, getattr(self, name)) for name, words in DYNAMO_COUNTS.items())
        return ", ".join(f"{words} {n}" for words, n in counts if n is not None)

    def metrics(self) -> dict[str, float]:
        """The counts that apply, as MLflow metrics."""
        return {
            f.metadata["metric"]: float(value)
            for f in dataclasses.fields(self)
            if "metric" in f.metadata and (value := getattr(self, f.name)) is not None
        }


COUNTS = tuple(f.name for f in dataclasses.fields(Signals) if "metric" in f.metadata)
# dynamo's counts, each in words as an accuracy sweep's lines and the report's tables say
# it (the field's name with spaces, as `benchflow expected` names its columns)
DYNAMO_COUNTS = {"graphs": "graphs", "graph_breaks": "graph breaks", "recompiles": "recompiles"}


def breaks_of(found: Iterable[tuple[str, str]]) -> list[Break]:
    """(reason, frame) of each break dynamo made, as the row keeps them: one per place
    in the user's code, with the reason first given there (an outer frame, which names the
    kind of break; the frame's own may say `generic_jump`), counted, in the order seen."""
    reasons: dict[str, str] = {}
    counted: Counter[str] = Counter()
    for reason, frame in found:
        reasons.setdefault(frame, reason)
        counted[frame] += 1
    return [Break(reasons[frame], frame, n) for frame, n in counted.items()]


def guards_of(found: Iterable[tuple[str, str]]) -> list[Recompile]:
    """(guard, frame) of each recompile, counted as breaks_of counts breaks."""
    counted = Counter(found)
    return [Recompile(guard, frame, n) for (guard, frame), n in counted.items()]


def reason_text(message: str) -> str:
    """A graph break's reason as the row keeps it: dynamo's first line, and its
    `Explanation:` where it gives one (its hints and links left out)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return "(no reason given)"
    explained = (
        x.removeprefix("Explanation:").strip() for x in lines if x.startswith("Explanation:")
    )
    why = next(explained, "")
    return f"{lines[0]}: {why}" if why else lines[0]


# dynamo's recompile reason starts with the id of the cache entry whose guard failed
# ("0/0: tensor 'x' size mismatch ..."): a number of that process, not of the model
_ENTRY_ID = re.compile(r"^\d+/\d+:\s*")


def guard_text(reason: str) -> str:
    """A recompile's failed guard as the row keeps it: its first line, less the entry's id."""
    first = reason.strip().splitlines()[0] if reason.strip() else "(no reason given)"
    return _ENTRY_ID.sub("", first)


def short_frame(frame: str) -> str:
    """file:line as tables and messages show it: the file's folder and name, the line (the
    row keeps the full path)."""
    path, sep, line = frame.rpartition(":")
    if not sep:
        return frame
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) + ":" + line


def from_metrics(metrics: dict[str, Any], iterations_per_run: int) -> Signals | None:
    """An older row's signals (schema < 7), from the counters it kept: the cold call's and
    the timed repeats' (no reasons, no recompiles). None where it kept none."""

    def total(name: str) -> float | None:
        cold, series = metrics.get(f"cold_{name}"), metrics.get(name)
        if cold is None and series is None:
            return None
        values = series if isinstance(series, list) else [series or 0.0]
        return float(cold or 0.0) + sum(float(v) for v in values)

    def repeats(name: str) -> list[float] | None:
        series = metrics.get(name)
        return [float(v) for v in series] if isinstance(series, list) else None

    graphs, breaks = total("dynamo_unique_graphs"), total("dynamo_graph_breaks")
    compiles, executions = repeats("xla_CompileTime_number"), repeats("xla_ExecuteTime_number")
    if graphs is None and compiles is None:
        return None
    steps = len(executions or []) * iterations_per_run
    return Signals(
        steps=OLDER_STEPS,
        graphs=None if graphs is None else int(graphs),
        graph_breaks=None if breaks is None else int(breaks),
        xla_repeat_compiles=None if compiles is None else int(sum(compiles)),
        xla_executions_per_step=sum(executions) / steps if executions and steps else None,
    )
