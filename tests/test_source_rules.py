"""The rules of docs/architecture.md that a reading of src/ can check: no module state set
through `global`, Hydra through its public API only, and no function longer than a
screen (80 lines)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_FUNCTION_LINES = 80


def _trees() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(SRC)), ast.parse(path.read_text(), str(path)))
        for path in sorted(SRC.rglob("*.py"))
    ]


def test_src_has_no_global_no_hydra_internals_and_no_function_over_a_screen() -> None:
    trees = _trees()
    assert len(trees) > 100  # (the walk found the package)
    globals_, internals, long = [], [], []
    for name, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                globals_.append(f"{name}:{node.lineno}")
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            internals += [f"{name}:{node.lineno} {m}" for m in modules if m.startswith("hydra._")]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    assert globals_ == []
    assert internals == []
    assert long == []
