"""The job's signals (results/signals.py), read in its child around every step the job
runs before its accuracy check and profile: from before the first call (the compile) to
after the last timed repeat, or, with timing=false, its first two steps."""

from __future__ import annotations

from typing import Any

from benchflow.backends.base import Backend
from benchflow.backends.probes import DynamoEvents, DynamoProbe, InductorKernels
from benchflow.results.signals import (
    TIMED_STEPS,
    UNTIMED_STEPS,
    Signals,
    breaks_of,
    guard_text,
    guards_of,
    reason_text,
)

XLA_COMPILES = "xla_CompileTime_number"  # backends/probes.XlaMetricsProbe's, per region
XLA_EXECUTIONS = "xla_ExecuteTime_number"


class Reader:
    """Snapshots taken where the job starts to step; `read` once it has stepped."""

    def __init__(self, backend: type[Backend]) -> None:
        self.backend = backend
        compiles = backend.compiles
        self._counters = DynamoProbe() if compiles else None
        self._events = DynamoEvents() if compiles else None
        self._kernels = InductorKernels() if backend.generates_code else None
        self._before: dict[str, Any] = {}

    def start(self) -> Reader:
        """What the counters hold now: `read` takes what the step adds to it."""
        if self._counters and self._events:
            self._before["counters"] = self._counters.snapshot()
            self._before["events"] = self._events.snapshot()
        if self._kernels:
            self._before["kernels"] = self._kernels.snapshot()
        return self

    def read(self, m: Any, timed: bool) -> Signals:
        """The signals since `start`; `m`: the job's harness/timing.Measurement, whose
        timed repeats (or, untimed, whose second step) the XLA counts are of."""
        out: dict[str, Any] = {"steps": TIMED_STEPS if timed else UNTIMED_STEPS}
        if self._counters and self._events:
            counted = self._counters.delta(self._before["counters"], self._counters.snapshot())
            events = self._events.since(self._before["events"])
            breaks = breaks_of((reason_text(r), f) for r, f in events["breaks"])
            guards = guards_of((guard_text(g), f) for g, f in events["recompiles"])
            out |= {
                "graphs": int(counted["dynamo_unique_graphs"]),
                "graph_breaks": len(breaks),
                "recompiles": len(events["recompiles"]),
                "breaks": breaks,
                "guards": guards,
            }
        if self.backend.on_xla:
            region = m.per_repeat if timed else {k: [v] for k, v in m.second.items()}
            compiles = region.get(XLA_COMPILES, [])
            executions = region.get(XLA_EXECUTIONS, [])
            steps = len(executions) * (m.iterations_per_run if timed else 1)
            out["xla_repeat_compiles"] = int(sum(compiles))
            out["xla_executions_per_step"] = sum(executions) / steps if steps else None
        if self._kernels:
            out["inductor_kernels"] = self._kernels.since(self._before["kernels"])
        return Signals(**out)
