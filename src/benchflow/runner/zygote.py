"""A preforked interpreter: torch imported once, a fresh forked child per job.

Importing torch costs seconds per job (more on a busy host); a job's own work can
take less. The zygote is a process that imports torch, then forks one child per
job on request. Each child is still its own process (its own session, so the
parent's timeout kills its whole group), starts from the zygote's pristine state
(nothing was seeded, compiled, or placed on a device there), and runs the same
``benchflow.harness.child.main`` a spawned child runs.

Four kinds (KINDS), each started on first use: ``torch`` (torch imported), ``dynamo``
(and the compile stack: dynamo and Inductor, 10 s here), ``inductor`` (the same, then
Inductor's C++ toolchain check: which compiler, which vector ISAs build and load,
17-35 s here in every Inductor job's first call otherwise) and ``xla`` (torch_xla, its
dynamo bridge and dynamo: importing torch_xla costs 6-9 s here, more than most jobs);
the backend says which (``Backend.zygote``). Training jobs of eager backends fork from
``dynamo`` too: building a torch.optim optimizer imports torch._dynamo (5 s here, in
every such job otherwise).

Nothing is compiled, cached or started in a zygote of a kind (a job's own interpreter,
harness/prebuilt.warm_here, compiles that job's step by calling it, for its later
processes, in a thread that has ended before it forks). The compile stack is imported,
never used; the toolchain check's answer is the machine's and stays in memory (as do
the hashes of torch's and Triton's installs that Inductor keys its caches by), and
the test library it builds goes to a scratch Inductor cache, removed after (no job's
cache, nor the one the zygote inherited, sees it); its compiler and loader processes
have exited before the zygote is ready. Inductor's compile workers start at a job's
first compile, in the job. Before its first fork a zygote checks this (``pristine``:
no child process, no thread beyond torch's import's, no CUDA context, no PJRT client)
and exits otherwise: its jobs are then spawned.
torch_xla's import sets up no device: PJRT's client is created at a child's first
device use, so children forked after the import get their own client. The import
does read some settings, so the zygote imports it with ``PJRT_SELECT_DEFAULT_DEVICE=0``
(each child picks its own ``PJRT_DEVICE``), and a job whose environment sets any
``XLA_*`` or ``PJRT_*`` variable that torch_xla reads at import (an XLA persistent
cache) is forked from a zygote without torch_xla and imports it itself, after its
environment is set; the IR dump's variables are read later, so IR passes fork from
it. CUDA is never initialized in a zygote (forking after CUDA init is unsafe); a
child initializes it after the fork.

torch is imported once per process that runs jobs, not once per kind: when its
``torch`` zygote is running, the ``dynamo`` and ``xla`` zygotes are forked from it (it
forks, the child forks the new zygote and exits, so the new one belongs to no job and
no zygote) and import only what they add. A sweep of eager, compiled and XLA jobs so
imports torch once instead of three times (5-6 CPU-s each here). Such a zygote talks
to the parent over a Unix socket the parent listens on (a pipe cannot be handed to a
process that is already running); ``ps`` shows it with its base's command line.
Without a ``torch`` zygote (no eager job), each kind starts from a fresh interpreter.

Protocol (one job at a time; the task process that owns the zygote runs jobs one
after another), each message a typed record sent as one JSON line (``encode``,
``decode``): the parent sends ``ForkJob``; the zygote forks, answers ``Forked``, waits
for the child, then answers ``Exited`` (negative: killed by that signal, as Popen). To
a ``torch`` zygote the parent may instead send ``ForkZygote`` (a kind, a socket's
path, its cores); it answers ``Forked`` once the new zygote is forked, which
then connects to the path and says ``Ready`` there after its imports.

A toolchain other than the project's (runner/toolchain.py) has zygotes of its own,
started from its environment's interpreter: a zygote's *name* is its kind, or its kind
and the environment's key (``inductor@<key>``, ``named``). They import that
environment's torch, and fork only from that environment's ``torch`` zygote.

A zygote forked with a ``build`` in its request (runner/pool.py: the job file of the
process that first needs it, its environment, folder and log, and the stage) is a
deeper warm process: *built* (it builds that job's model) or *compiled* (it builds the
job's step and calls it); it says ``Ready`` with the seconds that took (``build_s``),
or ``NotReady`` (why, ``build_failed``) and exits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import logging
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

import psutil

from benchflow.backends.inductor import CACHE_KEYS, ISA_CHECK
from benchflow.core.cpus import ENV_CPUS, pin_self
from benchflow.core.environ import variable
from benchflow.harness.process import (
    ENV_MACHINE_CHECKS,
    ENV_PARENT,
    threads_unsafe_to_fork,
    unsafe_threads,
)

log = logging.getLogger(__name__)

# What each kind of zygote preloads before it forks: modules it imports and, written
# as calls ("module.function()"), pure checks whose answers stay in memory (a machine
# check returns whether it answered from the machine's cache; a call that returns None
# is no check: the keys Inductor's caches hash the installs into, backends/inductor.py).
# The compile stack (dynamo 5-6 s, Inductor's compile_fx 4-5 s on 2 cores) is imported,
# never used: no graph is compiled, no cache written, no compile-worker pool started
# (Inductor starts its pool at its first compile, in the child). Inductor's C++
# toolchain check (which compiler, which vector ISAs build and load: 7-35 s here, in
# every Inductor job's first call otherwise) is answered from the machine's cache, or
# run and kept there (backends/inductor.py), with Inductor's cache in a scratch folder,
# removed after it (_scratch_inductor_cache): the test library it builds is read by no
# job. torch_xla's import brings its dynamo bridge (openxla); no PJRT client.
# Every kind imports these first (scipy.stats: the timing loop's median interval, 1-2 s;
# like numpy's, its OpenBLAS starts an idle thread pool at import, before the check).
BASE_MODULES = ("torch", "scipy.stats")
COMPILE_STACK = (*BASE_MODULES, "torch._dynamo", "torch._inductor.compile_fx")
KINDS = {
    "torch": BASE_MODULES,
    "dynamo": COMPILE_STACK,  # aot_eager, cudagraphs, eager training (its optimizer)
    "inductor": (*COMPILE_STACK, ISA_CHECK, CACHE_KEYS),
    "xla": (*BASE_MODULES, "torch_xla", "torch_xla._dynamo.dynamo_bridge", "torch._dynamo"),
}
BASE = "torch"  # the kind the other kinds fork from, once a zygote of it runs
# A zygote may preload several kinds' modules ("inductor+xla"): the one a model's shared
# build forks from when the model's jobs fork from different kinds (sweep/steps.py).
KIND_SEP = "+"
TOOLCHAIN_SEP = "@"  # a zygote's name: its kind, then its toolchain environment's key
ENV_PRELOADED = "BENCHFLOW_PRELOADED"  # in a forked child: what was imported before it
INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"  # Inductor's on-disk cache; a job sets its own
CONNECT_TIMEOUT_S = 60.0  # a zygote forked from the base connects at once, before importing


class ZygoteError(RuntimeError):
    pass


class ZygoteUnfit(ZygoteError):
    """A zygote said it will not fork (NotReady: what `pristine` found). What its
    preloads did, they do again: its pool does not start it again (runner/pool.py)."""


def named(kind: str, toolchain_key: str | None = None) -> str:
    """The name of the zygote of `kind` in the environment of `toolchain_key`
    (runner/toolchain.key_of; None: this interpreter's)."""
    return kind if toolchain_key is None else f"{kind}{TOOLCHAIN_SEP}{toolchain_key}"


def split(name: str) -> tuple[str, str | None]:
    """A zygote's name as (its kind, its toolchain environment's key or None)."""
    kind, _, key = name.partition(TOOLCHAIN_SEP)
    return kind, key or None


def preloads(kind: str) -> tuple[str, ...]:
    """What a zygote of `kind` preloads, in order: KINDS' entry, or for kinds joined by
    KIND_SEP each one's in turn, once."""
    return tuple(dict.fromkeys(p for k in kind.split(KIND_SEP) for p in KINDS[k]))


def union(names: list[str]) -> str:
    """The name of the zygote that preloads what every zygote of `names` preloads (all of
    one toolchain environment), with no kind whose preloads another one's hold:
    ``torch``, ``inductor`` and ``xla`` give ``inductor+xla``."""
    keys = {split(n)[1] for n in names}
    assert len(keys) == 1, f"zygotes of several environments: {names}"
    kinds = {k for n in names for k in split(n)[0].split(KIND_SEP)}
    kept = [
        k
        for k in KINDS
        if k in kinds and not any(o != k and set(KINDS[k]) < set(KINDS[o]) for o in kinds)
    ]
    return named(KIND_SEP.join(kept), keys.pop())


# --- the protocol: each message one JSON line, told apart by its first field --------


@dataclass(frozen=True)
class ForkJob:
    """To a zygote: fork a child that runs the job file `job` in `cwd` with `env`."""

    job: str
    cwd: str
    env: dict[str, str]
    stdout: str
    stderr: str


@dataclass(frozen=True)
class ForkZygote:
    """To a zygote: fork a zygote of kind `zygote` that connects to `socket` and imports
    on `cpus`; with `build` (runner/pool.build_request), a model's zygote."""

    zygote: str
    socket: str
    cpus: list[int]
    build: dict[str, Any] | None = None


@dataclass(frozen=True)
class Ready:
    """From a zygote: its imports (and its model's build) are done."""

    ready: float  # seconds they took
    state: dict[str, Any]  # what runs in it (pristine)
    build_s: float | None = None


@dataclass(frozen=True)
class NotReady:
    """From a zygote: it will not fork (`pristine`'s answer, or with `build_failed` its
    model's build's error: why); it exits."""

    not_ready: str
    build_failed: bool = False


@dataclass(frozen=True)
class Exited:
    """From a zygote: its child `pid` ended (negative: killed by that signal, as Popen)."""

    returncode: int
    pid: int


@dataclass(frozen=True)
class Forked:
    """From a zygote: it forked the job's child, or the zygote asked for (0: that fork
    failed)."""

    pid: int


Message = ForkJob | ForkZygote | Ready | NotReady | Exited | Forked
_MESSAGES: tuple[type[Message], ...] = (ForkZygote, ForkJob, Ready, NotReady, Exited, Forked)


def encode(msg: Message) -> bytes:
    return (json.dumps(dataclasses.asdict(msg)) + "\n").encode()


def decode(line: bytes) -> Message:
    data = json.loads(line)
    for cls in _MESSAGES:
        names = [f.name for f in dataclasses.fields(cls)]
        if names[0] in data:
            return cls(**{n: data[n] for n in names if n in data})
    raise ZygoteError(f"not a message of the zygote's protocol: {line[:200]!r}")


def base_of(name: str) -> str:
    """The name of the zygote a zygote of `name` forks from: the same environment's."""
    return named(BASE, split(name)[1])


class Zygote:
    """The parent's handle on one zygote process."""

    def __init__(
        self,
        name: str = "torch",
        cores: list[int] | None = None,
        base: Zygote | None = None,
        build: dict[str, Any] | None = None,
    ) -> None:
        """A fresh interpreter of the zygote `name` (its kind, in its toolchain's
        environment: ``named``), or (`base`: a running zygote of that environment) one
        forked from it; `build` (with `base` of the same name): the zygote of that model.
        `cores`: where its imports (and build) run."""
        self.name = name
        self.kind, toolchain_key = split(name)
        self._ready = False
        self._ready_lock = threading.Lock()  # a pre-start thread and a job may both wait
        self.proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self.build_s: float | None = None
        self._closed = False
        self.unfit: str | None = None  # why it said it will not fork (NotReady)
        if base is not None:
            self._fork_from(base, cores, build)
            return
        # The import runs on the cores of the job that asked for the zygote (its CPU
        # slot), so it never competes with a job timing on other cores.
        python, env = sys.executable, dict(os.environ)
        if toolchain_key is not None:
            from benchflow.runner.toolchain import interpreter

            python, extra = interpreter(toolchain_key)
            env.update(extra)
        if cores:
            env[ENV_CPUS] = ",".join(map(str, cores))
        self.proc = subprocess.Popen(
            [python, "-m", "benchflow.runner.zygote", self.kind],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the zygote's own errors go to the sweep's stderr
            start_new_session=True,  # a Ctrl-C at the terminal reaches the parent only
        )
        self.pid = self.proc.pid
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._out: IO[bytes] = self.proc.stdout
        self._in: IO[bytes] = self.proc.stdin
        self._lines = Lines(self._out.fileno())

    def _fork_from(
        self, base: Zygote, cores: list[int] | None, build: dict[str, Any] | None
    ) -> None:
        folder = tempfile.mkdtemp(prefix="benchflow-zygote-")  # 0700: ours alone
        path = os.path.join(folder, "s")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
                listener.bind(path)
                listener.listen(1)
                listener.settimeout(CONNECT_TIMEOUT_S)
                base.wait_ready()
                base._say(ForkZygote(self.kind, path, cores or [], build))
                msg = base._read(CONNECT_TIMEOUT_S)
                if not isinstance(msg, Forked) or not msg.pid:
                    raise ZygoteError(f"the {base.name} zygote did not fork a zygote: {msg}")
                self.pid = msg.pid
                try:
                    self._sock, _ = listener.accept()
                except TimeoutError as exc:
                    raise ZygoteError(f"the forked {self.name} zygote never connected") from exc
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self._sock.settimeout(None)
        self._out = self._sock.makefile("rb")
        self._in = self._sock.makefile("wb")
        self._lines = Lines(self._out.fileno())

    def _say(self, msg: Message) -> None:
        self._in.write(encode(msg))
        self._in.flush()

    def _read(self, timeout: float | None) -> Message | None:
        """The zygote's next message, or None after `timeout` without one."""
        try:
            line = self._lines.next(timeout)
        except EOFError:
            code = f"code {self.proc.poll()}" if self.proc else f"pid {self.pid}"
            raise ZygoteError(f"the zygote exited ({code})") from None
        return None if line is None else decode(line)

    def wait_ready(self, timeout: float = 300.0) -> float:
        """Block until the zygote has done its imports; returns how long they took."""
        with self._ready_lock:
            if not self._ready:
                msg = self._read(timeout)
                if isinstance(msg, NotReady) and msg.build_failed:
                    raise ZygoteError(f"the model was not built: {msg.not_ready}")
                if isinstance(msg, NotReady):
                    self.unfit = msg.not_ready
                    raise ZygoteUnfit(msg.not_ready)
                if not isinstance(msg, Ready):
                    raise ZygoteError(f"the zygote did not start: {msg}")
                self._ready = True
                self.import_s = msg.ready
                log.info(
                    "the %s zygote (pid %d) preloaded in %.1f s: %s",
                    self.name,
                    self.pid,
                    self.import_s,
                    json.dumps(msg.state),
                )
                self.build_s = msg.build_s
        return self.import_s

    def fork(
        self, job_file: Path, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path
    ) -> int:
        self.wait_ready()
        self._say(ForkJob(str(job_file), str(cwd), env, str(stdout), str(stderr)))
        msg = self._read(60.0)
        if not isinstance(msg, Forked):
            raise ZygoteError(f"the zygote did not fork: {msg}")
        return msg.pid

    def wait(self, timeout: float | None) -> int | None:
        """The child's return code, or None if it is still running after `timeout`."""
        msg = self._read(timeout)
        if msg is not None and not isinstance(msg, Exited):
            raise ZygoteError(f"the zygote said {msg} where its child's end was due")
        return None if msg is None else msg.returncode

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        try:  # forked from the base: not our child, so asked of the kernel
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def close(self) -> None:
        if self._closed:  # (its pid may be another process's by now)
            return
        self._closed = True
        if not self._ready and self.proc is not None:  # still importing: nothing to finish
            with contextlib.suppress(OSError):
                self.proc.kill()
        with contextlib.suppress(Exception):
            self._in.close()  # end of its input: its loop ends, it exits
            if self._sock is not None:  # (a socket ends only when every reader is closed)
                self._sock.shutdown(socket.SHUT_WR)
            if self.proc is not None:
                self.proc.wait(timeout=10)
            else:  # not our child: exited once a zombie, whenever init reaps it
                deadline = time.monotonic() + 10
                while self.alive() and time.monotonic() < deadline:
                    time.sleep(0.01)
        if self._sock is not None:
            self._sock.close()
        if self.alive():
            with contextlib.suppress(OSError):
                os.kill(self.pid, 9)


@dataclass
class Held:
    """What a zygote's process holds for the processes it forks, handed to each."""

    environ: dict[str, str]  # before its imports (a zygote forked from another: that one's)
    # The machine checks it ran (KINDS' "module.function()" entries): whether the answer
    # came from the machine's cache, and how long the check took (the row's
    # timing.machine_checks)
    checks: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    prebuilt: Any = None  # a built or compiled warm process's (harness/prebuilt.Prebuilt)


def _preload(name: str, checks: dict[str, dict[str, Any]]) -> None:
    """Import a module, or call a check ("module.function()", see KINDS: it returns True
    when it answered from the machine's cache), kept in `checks`."""
    if not name.endswith("()"):
        importlib.import_module(name)
        return
    module, _, function = name[:-2].rpartition(".")
    start = time.perf_counter()
    with _scratch_inductor_cache():
        cached = getattr(importlib.import_module(module), function)()
    if cached is not None and name not in checks:  # a machine check, its first time
        checks[name] = {"from_cache": cached, "s": round(time.perf_counter() - start, 3)}


@contextlib.contextmanager
def _scratch_inductor_cache() -> Iterator[None]:
    """Inductor's cache (TORCHINDUCTOR_CACHE_DIR: the source and library a check builds,
    their locks) in a folder of this zygote's own, removed after; the variable as it
    was (Inductor sets it when it is unset)."""
    folder = tempfile.mkdtemp(prefix="benchflow-zygote-inductor-")
    try:
        with variable(INDUCTOR_CACHE, folder):
            yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"  # torch's own fork-safe availability check


@contextlib.contextmanager
def cuda_asked_through_nvml() -> Iterator[None]:
    """While a zygote preloads and builds: torch.cuda.is_available() answered through
    NVML (NVML_CHECK=1), then NVML released, the variable as it was.

    Importing Inductor asks it (torch 2.9-2.11: the benchmarker's choice, kept in a
    module of Inductor's runtime; torch.utils.cpp_extension, for CUDA_HOME), and its
    default answer initializes the driver (cuInit) where there is a GPU, which leaves
    the zygote unfit to fork: every job was spawned on an H200. NVML gives the same
    answer without the driver; where it cannot, torch asks the driver as before and
    `pristine` refuses. torch caches no device count before CUDA is initialized, so a
    forked job counts the GPUs its slot gives it."""
    try:
        with variable(NVML_CHECK, "1"):
            yield
    finally:
        release_nvml()


def release_nvml() -> int:
    """Undo every NVML initialization in this process (torch's NVML device count
    initializes it and leaves it so, the NVIDIA device files open, which no job must
    inherit); how many. Nothing where NVML's library was never loaded."""
    import ctypes

    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return 0
    released = 0
    while released < 1000 and lib.nvmlShutdown() == 0:  # 0: NVML_SUCCESS, one init undone
        released += 1
    return released


def nvidia_files(fd_dir: str = "/proc/self/fd") -> list[str]:
    """The NVIDIA device files this process has open (/dev/nvidiactl, /dev/nvidia0,
    /dev/nvidia-uvm: the CUDA driver opens them at its first call)."""
    found = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                target = os.readlink(os.path.join(fd_dir, fd))
                if target.startswith("/dev/nvidia"):
                    found.add(target)
    return sorted(found)


def pristine(threads: int, watch: Threads | None = None) -> dict[str, Any]:
    """This process's state, as a zygote must fork it: no thread besides the `threads`
    it had once torch was imported, no child process (the checks' compilers and
    loaders have exited; no compile-worker pool), no CUDA context and no NVIDIA device
    file open (the driver not initialized), no PJRT client.
    Raises ZygoteError naming what is not so (each thread beyond, where `watch` says)."""
    torch, torch_xla = sys.modules.get("torch"), sys.modules.get("torch_xla")
    now = threads_unsafe_to_fork()
    state: dict[str, Any] = {
        "threads": now,
        "children": [" ".join(p.cmdline()) for p in psutil.Process().children()],
        "cuda_initialized": bool(torch and torch.cuda.is_initialized()),
        # the driver opened (cuInit: torch.cuda.is_available() or device_count() does it,
        # with no context), which a forked child cannot use, and whose device count
        # torch keeps: a child given one GPU by its slot would still count them all
        "nvidia_files": nvidia_files(),
        # torch_xla's own test, which creates nothing (torch_xla.runtime asks it so)
        "xla_runtime_initialized": bool(
            torch_xla and torch_xla._XLAC._xla_runtime_is_initialized()
        ),
    }
    wrong = [f"threads: {now}{watch.beyond() if watch else ''}"] if now > threads else []
    wrong += [f"{k}: {v}" for k, v in state.items() if k != "threads" and v]
    if wrong:
        raise ZygoteError(f"not forking from this zygote ({'; '.join(wrong)})")
    return state


class Threads:
    """The threads a zygote may fork with (their ids: those running once its base
    modules were imported), and which preload (or the build) started each of the
    others: a zygote that will not fork names them (on the H200 the warning said only
    "threads: 2")."""

    def __init__(self) -> None:
        self.allowed: set[int] = set()
        self.started_in: dict[int, str] = {}

    def allow_running(self) -> int:
        """The threads running now are the zygote's own; how many."""
        self.allowed = set(unsafe_threads())
        self.started_in.clear()
        return len(self.allowed)

    @contextlib.contextmanager
    def watched(self, step: str) -> Iterator[None]:
        """Note the threads `step` started (and left running)."""
        before = set(unsafe_threads())
        try:
            yield
        finally:
            for tid in set(unsafe_threads()) - before:
                self.started_in.setdefault(tid, step)

    def beyond(self) -> str:
        """' (name from step, ...)': each thread beyond the allowed ones, by its name and
        the step that started it ('later': none of them); '' where none is known."""
        named = [
            f"{name!r} from {self.started_in.get(tid, 'later')}"
            for tid, name in unsafe_threads().items()
            if tid in self.started_in or (self.allowed and tid not in self.allowed)
        ]
        return f" ({', '.join(named)})" if named else ""


def _run_child(request: ForkJob, preloaded: tuple[str, ...], zygote_pid: int, held: Held) -> int:
    """In the forked child: become the job's process, as a spawned child would be."""
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request.stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(request.stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.closerange(3, 1 << 16)  # the zygote's pipes and anything else it held
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    env = dict(request.env)
    if "XLA_FLAGS" in env and os.environ.get("XLA_FLAGS"):  # torch_xla's import set some
        env["XLA_FLAGS"] = f"{os.environ['XLA_FLAGS']} {env['XLA_FLAGS']}".strip()
    os.environ.update(env)
    os.environ["BENCHFLOW_LAUNCH"] = "fork"  # the row says how the child started
    os.environ[ENV_PARENT] = str(zygote_pid)  # it dies with the zygote (die_with_parent)
    os.environ[ENV_PRELOADED] = ",".join(preloaded)
    if held.checks:
        os.environ[ENV_MACHINE_CHECKS] = json.dumps(held.checks)
    os.chdir(request.cwd)
    sys.argv = [sys.executable, "-m", "benchflow.harness", request.job]
    from benchflow.harness.child import main

    # its environment as its job started it: torch_xla's import adds to XLA_FLAGS, which
    # a spawned job would not have had when it started
    return main([request.job], held.prebuilt, {**held.environ, **request.env})


def _fork_zygote(request: ForkZygote, held: Held) -> int:
    """In a zygote: fork a zygote of another kind that belongs to neither this zygote
    nor a job (a double fork); returns its pid."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            grandchild = os.fork()
            if grandchild == 0:
                os.close(w)
                _exit_after(_become_zygote, request, held)
            os.write(w, str(grandchild).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return int(text or b"0")


def _become_zygote(request: ForkZygote, held: Held) -> int:
    """In the forked zygote: serve its parent over the request's socket."""
    os.setsid()  # as a spawned zygote: a Ctrl-C at the terminal reaches the parent only
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # the base's pipes to the parent are not this zygote's
    os.dup2(devnull, 1)
    os.close(devnull)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(request.socket)
    if request.cpus:
        os.environ[ENV_CPUS] = ",".join(map(str, request.cpus))
    serve(request.zygote, sock.makefile("rb"), sock.makefile("wb"), request.build, held)
    return 0


def serve(
    kind: str,
    stdin: IO[bytes],
    stdout: IO[bytes],
    build: dict[str, Any] | None = None,
    held: Held | None = None,
) -> None:
    """Be a zygote of `kind` (with `build`, a built or compiled warm process): preload,
    build, say Ready, then fork what the parent asks for until it closes its end.
    `held`: what the zygote this one was forked from holds (None: started afresh)."""
    t0 = time.perf_counter()
    held = dataclasses.replace(held) if held else Held(dict(os.environ))
    allowed = os.sched_getaffinity(0)
    pin_self()  # import on the starting job's cores only
    preload = preloads(kind)

    def say(msg: Message) -> None:
        stdout.write(encode(msg))
        stdout.flush()

    watch = Threads()
    with cuda_asked_through_nvml():
        threads = _preload_all(preload, watch, held.checks)
        build_s = None
        if build is not None:  # a model's zygote: the build on the first job's cores
            try:
                with watch.watched("the model's build"):
                    held.prebuilt = _build(build, held.prebuilt)
                build_s = held.prebuilt.step_s or held.prebuilt.build_s
            except Exception as exc:  # the jobs build their own and report it as theirs
                say(NotReady(f"{type(exc).__name__}: {exc}"[:2000], build_failed=True))
                return
    # Forked children pin themselves to their own job's cores.
    os.sched_setaffinity(0, allowed)
    os.environ.pop(ENV_CPUS, None)
    try:
        state = pristine(threads, watch)  # if the preloads (or the build) started anything: no
    except ZygoteError as exc:  # the parent's warning says why its jobs are spawned
        say(NotReady(str(exc)))
        return

    say(Ready(time.perf_counter() - t0, state, build_s))
    requests = Lines(stdin.fileno())
    zygote_pid = os.getpid()
    while True:
        try:
            line = requests.next()  # no timeout: a whole line, or the end
        except EOFError:  # the parent closed its end
            return
        assert line is not None
        request = decode(line)
        if isinstance(request, ForkZygote):
            say(Forked(_fork_zygote(request, held)))
            continue
        if not isinstance(request, ForkJob):
            raise ZygoteError(f"not a request: {request}")
        pid = os.fork()
        if pid == 0:
            _exit_after(_run_child, request, preload, zygote_pid, held)
        say(Forked(pid))
        returncode = _wait_child(pid, requests)
        if returncode is None:  # the parent is gone (SIGKILLed mid-sweep): so is its job
            _kill_job(pid)
            return
        say(Exited(returncode, pid))


def _preload_all(
    preload: tuple[str, ...], watch: Threads, checks: dict[str, dict[str, Any]]
) -> int:
    """Import the kind's modules, and what every job imports next; returns how many
    threads may be running that fork leaves behind (the base's BLAS threads)."""
    with contextlib.ExitStack() as for_the_imports:  # variables unset after them
        # torch_xla must not pick a PJRT device for every child at import (a user's
        # own PJRT_SELECT_DEFAULT_DEVICE is kept).
        if "torch_xla" in preload and "PJRT_SELECT_DEFAULT_DEVICE" not in os.environ:
            for_the_imports.enter_context(variable("PJRT_SELECT_DEFAULT_DEVICE", "0"))
        # torch 2.8 and older start Inductor's compile-worker pool (Triton's, where triton
        # is installed) when Inductor's async_compile is imported; torch's own switch
        # (TORCH_WARM_POOL=0) leaves it to the job's first compile, as torch 2.9 does.
        if "TORCH_WARM_POOL" not in os.environ:
            for_the_imports.enter_context(variable("TORCH_WARM_POOL", "0"))
        threads = watch.allow_running()  # a zygote forked from the base: 1 (fork keeps one)
        for name in preload:
            with watch.watched(name):
                _preload(name, checks)
            if name in BASE_MODULES:  # numpy's and scipy's OpenBLAS threads; none after may
                threads = watch.allow_running()
    # Modules every job imports next; cheap, but not free.
    with watch.watched("benchflow.harness.child.preload()"):
        import benchflow.harness.child

        benchflow.harness.child.preload()
    return threads


def _build(build: dict[str, Any], inherited: Any) -> Any:
    """A built warm process's model, or a compiled one's step (harness/prebuilt.py), made
    from `inherited`: what the warm process above it made."""
    from benchflow.harness.child import first_call_step
    from benchflow.harness.prebuilt import build_from_request

    first_call = first_call_step if build["stage"] == "compiled" else None
    return build_from_request(build, inherited, first_call)


def _exit_after(run: Callable[..., int], *args: Any) -> NoReturn:
    """In a forked process (a job, or a zygote): `run(*args)`, then exit with its code (1 where
    it raised, its traceback on stderr), whatever happens: never back into the code
    that forked it."""
    code = 1
    try:
        code = run(*args)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class Lines:
    """Lines read from a file descriptor into a buffer of our own, so that select() can
    watch the descriptor: a buffered reader may hold a second line (a job's exit code
    right behind its pid) where select() cannot see it. The zygote watches the parent's
    requests so while a job runs: the parent says nothing then, so they turn readable
    only when the parent is gone (end of file: its end of the pipe or socket closed)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = b""

    def fill(self) -> bool:
        """Read what has come (blocking until something has); False at end of file."""
        chunk = os.read(self.fd, 65536)
        self.pending += chunk
        return bool(chunk)

    def next(self, timeout: float | None = None) -> bytes | None:
        """The next line, or None after `timeout` without one; EOFError at end of file."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], left)[0]:
                return None
            if not self.fill():
                raise EOFError
        line, _, self.pending = self.pending.partition(b"\n")
        return line


def _wait_child(pid: int, requests: Lines) -> int | None:
    """The job's exit code (negative: the signal that killed it, as Popen), or None if
    the parent went away first."""
    pidfd = os.pidfd_open(pid)
    try:
        while pidfd not in select.select([pidfd, requests.fd], [], [])[0]:
            if not requests.fill():
                return None
    finally:
        os.close(pidfd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def kill_group(pid: int) -> list[psutil.Process]:
    """SIGKILL a job's process group and every descendant that left it; returns the
    descendants, for the caller to wait on once the job's own process is reaped."""
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, 9)
    for proc in descendants:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    return descendants


def _kill_job(pid: int) -> None:
    """In the zygote: kill a job (kill_group) and reap it."""
    kill_group(pid)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


if __name__ == "__main__":
    serve(sys.argv[1] if len(sys.argv) > 1 else "torch", sys.stdin.buffer, sys.stdout.buffer)
