"""Ctrl-C and SIGTERM, held back while a job's row is written.

A sweep stops by raising KeyboardInterrupt (Terminated for a SIGTERM): the running
child is killed and recorded as `interrupted`. A stop between a child's end and its
row would lose a finished result, so :class:`Stops` holds it until the row is written.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler, `kill`): a stop, as Ctrl-C's, that the command tells apart."""


def raise_stop(signum: int, frame: Any = None) -> NoReturn:
    """A handler's stop: KeyboardInterrupt, or Terminated for a SIGTERM."""
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


@dataclass
class Stops:
    """A sweep's stops: raised at once, or inside `held` sections once the outermost ends."""

    depth: int = 0  # how many `held` sections are open
    pending: int | None = None  # the signal held back, if any
    last: int | None = None  # the signal that stopped the sweep (None: none has)

    def stop(self, signum: int, frame: Any = None) -> None:
        self.last = signum
        if not self.depth:
            raise_stop(signum)
        self.pending = self.pending or signum

    def again(self) -> NoReturn:
        """The stop that ended a process (its child killed, its row written), raised for
        the sweep as it came (a SIGTERM: Terminated)."""
        raise_stop(self.last or signal.SIGINT)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold a stop back until the section ends, then raise it there."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.pending:
                signum, self.pending = self.pending, None
                raise_stop(signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Ctrl-C and SIGTERM go through `stop` over the block (the main thread's)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        signals = (signal.SIGINT, signal.SIGTERM)
        before = {sig: signal.signal(sig, self.stop) for sig in signals}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)
