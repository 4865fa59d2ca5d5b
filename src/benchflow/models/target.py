"""`model.target=module:function`: finding a user's model factory, without importing torch.

The parent checks that the module can be found; the child imports it. Both look from
the launch folder too, so a file beside the user's command is found however benchflow
runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

FORM = "module:function, e.g. model.target=mymodels:build (mymodels.py in the launch folder)"


def split(target: str) -> tuple[str, str]:
    """'pkg.mod:fn' -> ('pkg.mod', 'fn'); ValueError naming the allowed form."""
    module, sep, function = target.partition(":")
    if not sep or not module or not function.isidentifier():
        raise ValueError(f"model.target={target!r} is not module:function; allowed: {FORM}")
    return module, function


def _launch_folder_on_path() -> None:
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)


def problem(target: str) -> str | None:
    """Why `target` cannot be a factory, checked without importing it; or None."""
    try:
        module, _ = split(target)
    except ValueError as exc:
        return str(exc)
    _launch_folder_on_path()
    top = module.split(".")[0]
    if importlib.util.find_spec(top) is None:
        return (
            f"model.target={target!r}: no module {top!r} on the Python path or in the "
            f"launch folder {os.getcwd()}; allowed: {FORM}"
        )
    return None


def load(target: str) -> Callable[..., Any]:
    """The factory function `target` names (imports its module)."""
    module_name, function = split(target)
    _launch_folder_on_path()
    module = importlib.import_module(module_name)
    fn = getattr(module, function, None)
    if not callable(fn):
        public = sorted(n for n, v in vars(module).items() if callable(v) and n[0] != "_")
        raise ValueError(
            f"model.target={target!r}: {module_name} has no function {function!r}; "
            f"allowed: {', '.join(public) or 'none found'}"
        )
    return fn


def declared_batch_size(builtin: str, test: str) -> int | None:
    """A built-in model's DEFAULT_EVAL_BSIZE or DEFAULT_TRAIN_BSIZE, read from its source
    without importing torch; None where its class body does not state a plain number."""
    import ast

    module, sep, name = builtin.partition(":")
    try:
        spec = importlib.util.find_spec(module) if sep else None
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    wanted = "DEFAULT_TRAIN_BSIZE" if test == "train" else "DEFAULT_EVAL_BSIZE"
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == wanted for t in stmt.targets)
                    and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, int)
                ):
                    return stmt.value.value
    return None
