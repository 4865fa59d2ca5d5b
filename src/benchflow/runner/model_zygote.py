"""share_build (on by default): a model's own zygote, forked from the zygote its jobs
need (their kind's, or the union of their kinds': sweep/builds.py), that builds the
model once (benchflow.harness.prebuilt) and forks the jobs of its build key
(benchflow.models.sharing), each finishing its own copy.

A process that runs jobs keeps one model's zygote at a time (the one before is closed
when a job of another build comes), so it holds one model's memory at a time. A build
that fails, outlives the job's timeout_s or leaves a thread running is not shared: the
zygote says why and exits, and the jobs of that build fork from the zygote it was
forked from and build their own, reporting what happens as their own.
"""

from __future__ import annotations

import atexit
import logging
from typing import Any

from benchflow.core.cpus import ENV_CPUS
from benchflow.runner.zygote import Zygote, ZygoteError, shared

log = logging.getLogger(__name__)

_model: tuple[str, str, Zygote] | None = None  # kind, build key, the zygote of that model
_not_buildable: set[tuple[str, str]] = set()  # (kind, key) whose zygote could not build


def for_build(kind: str, build: dict[str, Any], timeout_s: float) -> Zygote | None:
    """This process's zygote that built the model of `build` (its ``key``) from its
    `kind` zygote, started now if it has none for that key (closing the one before it:
    one model is held at a time); None where it cannot build it (the job then forks from
    the `kind` zygote and builds its own)."""
    global _model
    wanted = (kind, build["key"])
    if _model is not None and (_model[:2] != wanted or not _model[2].alive()):
        _model[2].close()
        _model = None
    if wanted in _not_buildable:
        return None
    if _model is None:
        cores = [int(c) for c in build["env"].get(ENV_CPUS, "").split(",") if c]
        zygote = None
        try:
            zygote = Zygote(kind, cores, base=shared(kind, cores), build=build)
            atexit.register(zygote.close)
            zygote.wait_ready(timeout_s)
        except (ZygoteError, OSError) as exc:
            log.warning("no shared build for this model (%s): its jobs build their own", exc)
            _not_buildable.add(wanted)
            if zygote is not None:
                zygote.close()
            return None
        log.info("model built once for its jobs in %.2f s (pid %d)", zygote.build_s, zygote.pid)
        _model = (kind, wanted[1], zygote)
    return _model[2]
