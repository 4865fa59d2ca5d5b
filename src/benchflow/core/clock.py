"""Seconds a process spent in named parts of its work (a job's child: the device
move inside a model's build), read back for the row's phases (results/phases.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

_spent: dict[str, float] = {}


@contextmanager
def spent(name: str) -> Iterator[None]:
    """Add the time the block takes to `name`'s total."""
    start = time.perf_counter()
    try:
        yield
    finally:
        _spent[name] = _spent.get(name, 0.0) + time.perf_counter() - start


def take(name: str) -> float:
    """`name`'s total so far, and start it again from zero."""
    return _spent.pop(name, 0.0)
