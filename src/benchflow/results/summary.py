"""End-of-sweep table: model x backend median per-iteration time and speedup."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchflow.results.row import headline


def backend_label(row: dict[str, Any]) -> str:
    exp = row["experiment"]
    if exp.get("dynamo"):
        return str(exp["dynamo"])
    return "lazy_xla" if exp.get("xla") else "eager"


def _baseline_label(baseline: str) -> str:
    return "eager" if baseline == "none" else baseline


def summary_table(
    rows: Sequence[dict[str, Any]], baseline: str
) -> tuple[list[str], list[list[str]], str]:
    """(header, body, note): one line per model/test, one column per backend.

    A cell is the median per-iteration time and, where the baseline ran ok for
    that model, the speedup over it (baseline time / this time: >1 is faster).
    A job that did not run ok shows its status instead of a time.
    """
    from benchflow.sweep.progress import format_time

    base = _baseline_label(baseline)
    backends: list[str] = []
    cells: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for row in rows:
        label = backend_label(row)
        if label not in backends:
            backends.append(label)
        key = (row["model"]["model_name"], row["experiment"]["test"])
        cells.setdefault(key, {})[label] = row  # a later row (a rerun) wins
    header = ["model", "test", *backends]
    body = []
    for (model, test), by_backend in cells.items():
        base_row = by_backend.get(base)
        base_time = headline(base_row) if base_row and base_row["status"] == "ok" else None
        line = [model, test]
        for label in backends:
            cell = by_backend.get(label)
            if cell is None:
                line.append("")
            elif cell["status"] != "ok" or headline(cell) is None:
                line.append(cell["status"])
            else:
                t = headline(cell)
                assert t is not None
                speed = f" ({base_time / t:.2f}x)" if base_time and label != base else ""
                line.append(format_time(t) + speed)
        body.append(line)
    note = (
        f"median per-iteration time; (Nx) = speedup over baseline={baseline}"
        if base in backends
        else f"baseline={baseline} is not in this sweep: no speedups (set baseline=<backend>)"
    )
    return header, body, note


def to_markdown(header: list[str], body: list[list[str]], note: str) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell or " " for cell in line) + " |" for line in body]
    return "\n".join(lines) + f"\n\n{note}\n"
