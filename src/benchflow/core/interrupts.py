"""Ctrl-C and SIGTERM, held back while a job's row is written.

A sweep stops on Ctrl-C or SIGTERM by raising KeyboardInterrupt in its process: the
running child is killed and its job recorded as `interrupted` (runner/isolated.py). A
signal that comes once the child has ended and before its row is written would lose a
finished job's result: the stop is then held until the row is in results.jsonl, and
raised there. The handlers that raise (cli/sweep.py's, sweep/scheduler.py's, and Ctrl-C's
where the sweep runs in its own process) call `stop`; the signal is process-wide, and so
is this state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_held = 0  # how many `held` sections are open
_pending: list[int] = []  # the signal held back, if any


def stop(signum: int) -> None:
    """A handler's stop: KeyboardInterrupt now, or once the held section ends."""
    if _held:
        if not _pending:
            _pending.append(signum)
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold a stop back until the section ends, then raise it there."""
    global _held
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if not _held and _pending:
            _pending.clear()
            raise KeyboardInterrupt
