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
