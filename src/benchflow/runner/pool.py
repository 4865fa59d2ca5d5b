"""The warm processes a process that runs jobs keeps, owned by one object (`POOL`):

- **zygotes** (runner/zygote.py): an interpreter per kind that has imported what its
  jobs need, each job forked from it. Started on first use (and again if it died), on
  the CPU slot of the job that starts it; a kind other than an environment's ``torch``
  one forks from that one where it runs. A sweep starts those its jobs need while it
  sets up (``prestart``), and each job waits for that first (``join_prestart``).
- **model zygotes** (share_build, on by default): a model's own zygote, forked from the
  zygote its jobs need (their kind's, or the union of their kinds': sweep/builds.py),
  that builds the model once (benchflow.harness.prebuilt) and forks the jobs of its
  build key (benchflow.models.sharing), each finishing its own copy. Each is kept once
  built, so that a model whose jobs come again (a sweep's later rounds:
  sweep/rounds.py) is built once per sweep: the sweep closes it after the last job the
  plan says forks from it (``done_with``), and where free memory falls under a quarter
  of the machine's, the least recently used go before another is built.
- **jobs' own interpreters** (share_build): a job's, forked from its model's zygote (or
  its kind's), which compiles the job's step by calling it (harness/prebuilt.warm_here)
  and forks the job's later processes, so that they do not compile it again; kept as
  model zygotes are (by its step key), and closed after the job's last process.
- **builds ahead** (build_ahead): the next model's zygote, started while the jobs
  before it run (``ahead``); it builds beside them, and every one of them stops it over
  its exclusive regions (results/regions.py, harness/hold.py).

A build that fails, outlives the job's timeout_s or leaves a thread running is not
shared: the zygote says why and exits, and the jobs of that build fork from the zygote
it was forked from and build their own, reporting what happens as their own.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import shutil
import threading
from pathlib import Path
from typing import Any

import psutil

from benchflow.core.cpus import ENV_CPUS, cpu_slot
from benchflow.harness.hold import normal_priority, register, release, unregister
from benchflow.runner.zygote import Zygote, ZygoteError, ZygoteUnfit, base_of

log = logging.getLogger(__name__)

MIN_FREE = 0.25  # of the machine's memory: under it, the least recently used builds go


def build_request(key: str, job_file: Path, env: dict[str, str], log: Path) -> dict[str, Any]:
    """The request that makes a model's zygote build the model of `key` from the job file
    `job_file` in `env` and this process's folder, its output to `log`
    (runner/zygote.py's protocol)."""
    return {"key": key, "job": str(job_file), "env": env, "cwd": str(Path.cwd()), "log": str(log)}


class Pool:
    """This process's zygotes, model zygotes and builds ahead (see the module)."""

    def __init__(self) -> None:
        self._zygotes: dict[str, Zygote] = {}  # by name (runner/zygote.named)
        self._lock = threading.Lock()  # the prestart thread starts zygotes too
        self._prestart: list[threading.Thread] = []
        # (kind, build key) -> the zygote that built that model, least recently used first
        self._built: dict[tuple[str, str], Zygote] = {}
        self._not_buildable: set[tuple[str, str]] = set()  # whose zygote could not build
        # build_ahead: (kind, key) -> the zygote building that model, and its log
        self._ahead: dict[tuple[str, str], tuple[Zygote, str]] = {}

    # --- zygotes ---------------------------------------------------------------------

    def zygote(self, name: str = "torch", cores: list[int] | None = None) -> Zygote:
        """The zygote of `name`, started on first use (and again if it died, unless it
        said it will not fork: ZygoteUnfit, its jobs are spawned); `cores`: where its
        start-up may run (the CPU slot of the job that starts it)."""
        with self._lock:
            zygote = self._zygotes.get(name)
            if zygote is not None and zygote.unfit:  # its imports would do it again
                raise ZygoteUnfit(zygote.unfit)
            if zygote is None or not zygote.alive():
                zygote = self._zygotes[name] = self._fresh(name, cores)
                atexit.register(zygote.close)
            return zygote

    def _fresh(self, name: str, cores: list[int] | None) -> Zygote:
        """Forked from the running ``torch`` zygote of the same environment if there is
        one, else started from scratch."""
        base = self._zygotes.get(base_of(name))
        if name != base_of(name) and base is not None and base.alive():
            try:
                return Zygote(name, cores, base=base)
            except (ZygoteError, OSError) as exc:
                log.warning(
                    "could not fork the %s zygote from the %s one (%s)", name, base.name, exc
                )
        return Zygote(name, cores)

    def start(self, kind: str, cores: list[int]) -> float | None:
        """Start the zygote of `kind` on `cores` and wait until it has imported, so the
        job that follows is timed from its fork; returns the import time, or None if the
        zygote could not start (the job is then spawned)."""
        try:
            return self.zygote(kind, cores).wait_ready()
        except (ZygoteError, OSError) as exc:
            log.warning("preforked interpreter unavailable (%s): jobs will be spawned", exc)
            return None

    def prestart(self, kinds: list[str], cpus_per_job: int | None) -> None:
        """Start the zygotes a sweep's jobs will fork from in the background, while the
        parent does its own set-up (MLflow store, parent run); each imports on a CPU
        slot, as a job would. Jobs call `join_prestart` before taking their slot."""

        def start_all() -> None:
            what = f"benchflow: starting the {', '.join(kinds)} zygote(s)"
            with cpu_slot(cpus_per_job, what) as cores:
                # Each environment's torch zygote first: the others fork from it once it
                # has imported torch (zygote.py), then import the rest side by side, each
                # on one of the slot's cores: on a 2-core slot, the longest one's time.
                for kind in sorted(kinds, key=lambda k: k != base_of(k)):
                    with contextlib.suppress(OSError, ZygoteError):  # start() says why
                        self.zygote(kind, cores)
                for kind in kinds:
                    self.start(kind, cores)

        thread = threading.Thread(target=start_all, name="zygote-prestart", daemon=True)
        thread.start()
        self._prestart.append(thread)

    def join_prestart(self) -> None:
        for thread in self._prestart:
            thread.join()

    # --- model zygotes ---------------------------------------------------------------

    def holding(self, kind: str | None, key: str) -> bool:
        """The built model of `key` (from the `kind` zygote) is held for the jobs."""
        return kind is not None and (kind, key) in self._built

    def wanted(self, kind: str, key: str) -> bool:
        """The model of `key` (from the `kind` zygote) is neither built nor being built."""
        return (kind, key) not in self._ahead and (kind, key) not in self._built

    def done_with(self, kind: str, key: str) -> None:
        """No later job forks from the model of `key`: its zygote goes."""
        if (zygote := self._built.pop((kind, key), None)) is not None:
            log.info("no later job forks from the built model (pid %d): it goes", zygote.pid)
            _let_go(zygote)

    def ahead(self, kind: str, build: dict[str, Any]) -> None:
        """Start building the model of `build` now, in its zygote, beside the jobs that
        run before its own (registered as work they hold over their exclusive regions:
        harness/hold.py); `for_build` takes it when its first job comes."""
        key = (kind, build["key"])
        if not self.wanted(*key) or key in self._not_buildable:
            return
        try:
            zygote = self._model_zygote(kind, build | {"beside": True})
            # Registered here, before the next job starts (the build unregisters itself
            # when it is done), so that every job holds it from that job's start.
            register(zygote.pid)
            self._ahead[key] = (zygote, build["log"])
        except (ZygoteError, OSError, psutil.Error) as exc:
            log.warning("could not start building a model ahead of its jobs (%s)", exc)

    def release_ahead(self) -> None:
        """After a job's process: let every build ahead run on unless another job holds
        it (a job that died mid-hold left it stopped)."""
        for zygote, _ in self._ahead.values():
            release(zygote.pid)

    def for_build(
        self, kind: str, build: dict[str, Any], timeout_s: float, base: Zygote | None = None
    ) -> Zygote | None:
        """The zygote that built the model of `build` (its ``key``) from the `kind`
        zygote (or from `base`: a job's own interpreter, forked from its model's zygote,
        harness/prebuilt.warm_here): kept from an earlier job, taken from those built
        ahead, or started now; None where it cannot build it (the job then forks from
        the `kind` zygote and builds its own)."""
        wanted = (kind, build["key"])
        zygote = self._built.pop(wanted, None)
        if zygote is not None and zygote.alive():
            self._built[wanted] = zygote  # the most recently used now
            return zygote
        if zygote is not None:
            _let_go(zygote)
        if wanted in self._not_buildable:
            return None
        self._make_room(keep=base)
        zygote, log_path = self._ahead.pop(wanted, (None, None))
        if zygote is not None:  # its job waits for it now: no longer on idle cores only
            with contextlib.suppress(OSError):
                normal_priority(zygote.pid)
            release(zygote.pid)
        try:
            if zygote is None:
                zygote = self._model_zygote(kind, build, base)
            zygote.wait_ready(timeout_s)
            unregister(zygote.pid)  # (done: it unregistered itself, unless it was quicker)
            if log_path:  # the build's output, in its first job's folder as without ahead
                shutil.copyfile(log_path, build["log"])
        except (ZygoteError, OSError) as exc:
            log.warning("no shared build for this model (%s): its jobs build their own", exc)
            self._not_buildable.add(wanted)
            if zygote is not None:
                _let_go(zygote)
            return None
        what = "step compiled" if build.get("warm") else "model built once"
        log.info("%s for its jobs in %.2f s (pid %d)", what, zygote.build_s, zygote.pid)
        self._built[wanted] = zygote
        return zygote

    def _model_zygote(self, kind: str, build: dict[str, Any], base: Zygote | None = None) -> Zygote:
        cores = [int(c) for c in build["env"].get(ENV_CPUS, "").split(",") if c]
        zygote = Zygote(kind, cores, base=base or self.zygote(kind, cores), build=build)
        atexit.register(_let_go, zygote)
        return zygote

    def _make_room(self, keep: Zygote | None = None) -> None:
        """Before a build: the least recently used models go while memory is short (but
        `keep`, the one the build forks from)."""
        while _short_of_memory() and (
            gone := next((k for k, z in self._built.items() if z is not keep), None)
        ):
            zygote = self._built.pop(gone)
            log.info(
                "memory is short: the least recently used built model (pid %d) goes", zygote.pid
            )
            _let_go(zygote)


def _short_of_memory() -> bool:
    memory = psutil.virtual_memory()
    return memory.available < MIN_FREE * memory.total


def _let_go(zygote: Zygote) -> None:
    release(zygote.pid)  # a job that died holding it left it stopped
    zygote.close()


POOL = Pool()  # this process's
