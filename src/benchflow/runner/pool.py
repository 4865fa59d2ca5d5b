"""The warm processes of a sweep's own process (core/job.Warm), owned by one object: each
forked from the one above it (imported, built, compiled: runner/zygote.py, harness/prebuilt.py)
when the first process that needs it comes, on that process's slot (the first process's
imported one is started as the sweep begins: its imports overlap the opening of the sweep's
MLflow run). One that cannot be made is not tried again: its processes do its work themselves.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

import psutil

from benchflow.core.cpus import ENV_CPUS
from benchflow.core.job import Warm
from benchflow.runner.zygote import BASE, Zygote, ZygoteError, named, split

log = logging.getLogger(__name__)

MIN_FREE = 0.25  # of the machine's memory: under it, the least recently used builds go


def build_request(job_file: Path, env: dict[str, str], log_file: Path) -> dict[str, Any]:
    """A built or compiled warm process's request: the first asking process's job, env and log."""
    return {"job": str(job_file), "env": env, "cwd": str(Path.cwd()), "log": str(log_file)}


def parent(warm: Warm) -> Warm | None:
    """The warm process `warm` is forked from (None: it is started from scratch)."""
    if warm.step:
        return Warm(warm.zygote, warm.build)
    if warm.build:
        return Warm(warm.zygote)
    base = named(BASE, split(warm.zygote)[1])  # its environment's torch zygote
    return Warm(base) if base != warm.zygote else None


class Pool:
    """A sweep's warm processes (see the module); what they print themselves appended to
    `output` (the sweep's log; None: this process's stderr)."""

    def __init__(self, output: Path | None = None) -> None:
        self.output = output
        self._live: dict[Warm, Zygote] = {}  # least recently used first
        self._failed: dict[Warm, str] = {}  # could not be made, and why

    def get(self, warm: Warm, request: dict[str, Any], timeout_s: float) -> Zygote | None:
        """`warm`, or the deepest ancestor that can be made (None: the process is spawned)."""
        found: Warm | None = warm
        while found is not None:
            if (zygote := self._made(found, request, timeout_s)) is not None:
                return zygote
            found = parent(found)
        return None

    def _made(self, warm: Warm, request: dict[str, Any], timeout_s: float) -> Zygote | None:
        if warm in self._failed:
            return None
        zygote = self._live.pop(warm, None)
        if zygote is not None and zygote.alive():
            return self._ready(warm, zygote, timeout_s)  # (the most recently used now)
        if zygote is not None:  # it died (killed, the OOM killer): made again
            zygote.close()
        above = parent(warm)  # (a kind's zygote without its base: started from scratch)
        base = self._made(above, request, timeout_s) if above is not None else None
        build = None
        if warm.stage != "imported":  # a built or compiled one: forked from its base only
            if base is None:
                return None
            self._make_room(keep=base)
            build = request | {"stage": warm.stage, "key": warm.step or warm.build}
        cores = [int(c) for c in request["env"].get(ENV_CPUS, "").split(",") if c]
        try:
            zygote = Zygote(warm.zygote, cores, base=base, build=build, output=self.output)
        except (ZygoteError, OSError) as exc:
            self._fail(warm, None, exc)
            return None
        if (zygote := self._ready(warm, zygote, timeout_s)) is None:
            return None
        if build is not None:
            log.info(
                "%s warm process (pid %d) ready in %.2f s",
                warm.stage,
                zygote.pid,
                zygote.build_s or 0.0,
            )
        return zygote

    def _ready(self, warm: Warm, zygote: Zygote, timeout_s: float) -> Zygote | None:
        """`zygote` once it has done its imports (and build), kept as `warm`'s."""
        try:
            zygote.wait_ready(timeout_s)
        except (ZygoteError, OSError) as exc:
            self._fail(warm, zygote, exc)
            return None
        self._live[warm] = zygote
        return zygote

    def _fail(self, warm: Warm, zygote: Zygote | None, exc: Exception) -> None:
        log.warning(
            "no %s warm process %s (%s): its processes do without", warm.stage, warm.zygote, exc
        )
        self._failed[warm] = str(exc)
        if zygote is not None:
            zygote.close()

    def start(self, warm: Warm) -> None:
        """Start the imported process at the root of `warm`'s chain, without waiting for
        its imports: the sweep's first process's, while the sweep opens its MLflow run."""
        while (above := parent(warm)) is not None:
            warm = above
        if warm not in self._live and warm not in self._failed:
            with contextlib.suppress(ZygoteError, OSError):  # (tried again, and said why,
                self._live[warm] = Zygote(warm.zygote, output=self.output)  # when it comes)

    def close(self, warm: Warm) -> None:
        """No later process forks from `warm`: it goes."""
        if (zygote := self._live.pop(warm, None)) is not None:
            zygote.close()

    def close_all(self) -> None:
        for warm in list(self._live):
            self.close(warm)

    def _make_room(self, keep: Zygote | None) -> None:
        """Before a build: the least recently used builds go while memory is short."""
        while (memory := psutil.virtual_memory()).available < MIN_FREE * memory.total:
            gone = next(
                (w for w, z in self._live.items() if w.stage != "imported" and z is not keep), None
            )
            if gone is None:
                return
            log.info("memory is short: the least recently used %s warm process goes", gone.stage)
            self.close(gone)
