"""Counters read as deltas around a timed region: XLA metrics and dynamo state.

A probe snapshots before and after; the difference is what happened inside the
region, whatever ran earlier in the process.
"""

from __future__ import annotations

import re
from typing import Any


class XlaMetricsProbe:
    """torch_xla's CompileTime / ExecuteTime metrics (PJRT names them so)."""

    METRICS = ("CompileTime", "ExecuteTime")

    def snapshot(self) -> dict[str, tuple[int, float]]:
        import torch_xla.debug.metrics as met

        snap = {}
        for name in self.METRICS:
            data = met.metric_data(name)
            # (count, accumulated nanoseconds, samples) or None before the first sample
            count, total_ns = (data[0], data[1]) if data else (0, 0.0)
            snap[name] = (int(count), float(total_ns))
        return snap

    def delta(self, before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for name in self.METRICS:
            out[f"xla_{name}_number"] = after[name][0] - before[name][0]
            out[f"xla_{name}_time_s"] = (after[name][1] - before[name][1]) / 1e9
        return out


class DynamoProbe:
    """Dynamo's frame/graph counters and its compile-time accounting."""

    def snapshot(self) -> dict[str, float]:
        from torch._dynamo.utils import compilation_time_metrics, counters

        return {
            # frames dynamo converted into graphs (a graph break adds one)
            "dynamo_frames_ok": counters["frames"]["ok"],
            "dynamo_unique_graphs": counters["stats"]["unique_graphs"],
            "dynamo_calls_captured": counters["stats"]["calls_captured"],
            "dynamo_graph_breaks": sum(counters["graph_break"].values()),
            "dynamo_compile_time_s": sum(
                compilation_time_metrics.get("_compile.compile_inner", [])
            ),
            # Inductor's FX graph cache: a hit is a compile served from compile_cache
            "inductor_fxgraph_cache_hit": counters["inductor"]["fxgraph_cache_hit"],
            "inductor_fxgraph_cache_miss": counters["inductor"]["fxgraph_cache_miss"],
            # a graph the cache may not hold (freezing's constants, among others)
            "inductor_fxgraph_cache_bypass": counters["inductor"]["fxgraph_cache_bypass"],
            # Inductor's graph rewrites (freezing's weight prepacking, fusions)
            "inductor_pattern_matcher_count": counters["inductor"]["pattern_matcher_count"],
        } | dynamic_graphs()

    def delta(self, before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {k: after[k] - before[k] for k in after}


class DynamoEvents:
    """Dynamo's graph breaks, each with its reason and the user's frame where it broke
    (torch._dynamo.utils.graph_break_reasons, which torch._dynamo.explain reads), and its
    recompiles, each with the guard that failed (the compilation metrics'
    recompile_reason): what happened since a snapshot, as (reason, frame) pairs. Breaks
    of every kind are there, a data-dependent branch too (dynamo's graph_break counter
    leaves that one out)."""

    def snapshot(self) -> tuple[int, frozenset[str]]:
        from torch._dynamo.utils import get_compilation_metrics, graph_break_reasons

        return len(graph_break_reasons), frozenset(_compile_ids(get_compilation_metrics()))

    def since(self, snap: tuple[int, frozenset[str]]) -> dict[str, list[tuple[str, str]]]:
        """{"breaks": [(reason, file:line)], "recompiles": [(guard, file:line (name))]},
        reason and guard as dynamo words them."""
        from torch._dynamo.utils import get_compilation_metrics, graph_break_reasons

        seen, before = snap
        # (torch._dynamo.reset() empties the list: then every break in it is new)
        new = graph_break_reasons[seen:] if len(graph_break_reasons) >= seen else []
        breaks = [(r.reason, _frame(r.user_stack)) for r in new if r.graph_break]
        metrics = get_compilation_metrics()
        recompiles = [
            (str(m.recompile_reason), f"{m.co_filename}:{m.co_firstlineno} ({m.co_name})")
            for m, compile_id in zip(metrics, _compile_ids(metrics), strict=True)
            if compile_id not in before and getattr(m, "recompile_reason", None)
        ]
        return {"breaks": breaks, "recompiles": recompiles}


def _compile_ids(metrics: list[Any]) -> list[str]:
    """Each compilation's id in the process (frame/attempt), or its object's where torch
    gives none."""
    return [str(getattr(m, "compile_id", None) or id(m)) for m in metrics]


def _frame(stack: list[Any]) -> str:
    """file:line of a break's innermost frame: the user's code where dynamo stopped."""
    return f"{stack[-1].filename}:{stack[-1].lineno}" if stack else "(no frame)"


class InductorKernels:
    """Kernels Inductor generated (torch._inductor.metrics.generated_kernel_count): a
    fusion that stops working shows as more."""

    def snapshot(self) -> int:
        from torch._inductor import metrics

        return int(metrics.generated_kernel_count)

    def since(self, snap: int) -> int:
        return max(self.snapshot() - snap, 0)


# A symbolic size as dynamo's compilation metrics write a graph's shapes: 's33' (a size
# of an input), 'u0' (one from data)
_SYMBOL = re.compile(r"'[su]\d+'")


def dynamic_graphs() -> dict[str, float]:
    """`dynamo_dynamic_graphs`: how many of the graphs dynamo compiled (of the last 64 it
    keeps) have an input of symbolic size. Nothing where the job's torch keeps no such
    metrics, decided by their fields so that every snapshot has the same keys."""
    try:
        from torch._dynamo.utils import CompilationMetrics, get_compilation_metrics
    except ImportError:
        return {}
    if "graph_node_shapes" not in getattr(CompilationMetrics, "__dataclass_fields__", {}):
        return {}
    metrics = get_compilation_metrics()
    return {
        "dynamo_dynamic_graphs": sum(
            bool(_SYMBOL.search(m.graph_node_shapes or "")) for m in metrics
        )
    }


# Seconds this process spent exporting models and compiling their exports (the compile
# includes the load), added to by backends/aot_inductor.py; the metric each is read as
EXPORT_SPENT = {"export": 0.0, "compile": 0.0}
EXPORT_METRICS = {"export": "aot_export_time_s", "compile": "aot_compile_time_s"}


class ExportProbe:
    """An exporting backend's export and compile seconds, apart (the cold call holds both)."""

    def snapshot(self) -> dict[str, float]:
        return {EXPORT_METRICS[k]: v for k, v in EXPORT_SPENT.items()}

    def delta(self, before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {k: after[k] - before[k] for k in after}
