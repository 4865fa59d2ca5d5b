"""A variable of this process's environment set for a block, then as it was."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def variable(name: str, value: str) -> Iterator[None]:
    """`name` set to `value` within the block; after it (an exception too) the value it
    had, or unset where it was unset."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
