"""A warm process (runner/pool.py): an interpreter that has done work a job's processes
share, and forks each of them on request.

A forked child is its own process (own session: a timeout kills its group) running the same
``benchflow.harness.child.main`` a spawned one runs. A zygote has imported torch and its
kind's stack (KINDS) and nothing more: no thread, child, CUDA context or PJRT client
(``pristine``; else its jobs are spawned); a built or compiled one hands what it made to
each child (``Held``). Protocol: one JSON line a message over a Unix socket the parent
listens on. docs/isolation.md says why each rule holds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import logging
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import psutil

from benchflow.backends.inductor import CACHE_KEYS, ISA_CHECK
from benchflow.core.cpus import ENV_CPUS, pin_self
from benchflow.core.environ import variable
from benchflow.core.machine import cuda_present
from benchflow.harness.process import (
    ENV_MACHINE_CHECKS,
    ENV_PARENT,
    TORCH_SCRATCH,
    remove_torch_scratch,
    threads_unsafe_to_fork,
    unsafe_threads,
)

log = logging.getLogger(__name__)

# What each kind preloads: modules, and "module.function()" checks whose answers stay in
# memory. BASE_MODULES' OpenBLAS threads are the only ones a zygote may fork with.
BASE_MODULES = ("torch",)
COMPILE_STACK = (*BASE_MODULES, "torch._dynamo", "torch._inductor.compile_fx")
KINDS = {
    "torch": BASE_MODULES,
    "dynamo": COMPILE_STACK,  # aot_eager, cudagraphs, eager training (its optimizer)
    "inductor": (*COMPILE_STACK, ISA_CHECK, CACHE_KEYS),
    "xla": (*BASE_MODULES, "torch_xla", "torch_xla._dynamo.dynamo_bridge", "torch._dynamo"),
}
BASE = "torch"  # the kind every other kind is forked from
# "inductor+xla": one zygote for a build shared by jobs of several kinds (sweep/steps.py)
KIND_SEP = "+"
TOOLCHAIN_SEP = "@"  # a zygote's name: its kind, then its toolchain environment's key
ENV_PRELOADED = "BENCHFLOW_PRELOADED"  # in a forked child: what was imported before it
INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"  # Inductor's on-disk cache; a job sets its own
CONNECT_TIMEOUT_S = 60.0  # a new zygote connects at once, before it imports


class ZygoteError(RuntimeError):
    pass


def named(kind: str, toolchain_key: str | None = None) -> str:
    """The zygote of `kind` in `toolchain_key`'s environment (None: this interpreter's)."""
    return kind if toolchain_key is None else f"{kind}{TOOLCHAIN_SEP}{toolchain_key}"


def split(name: str) -> tuple[str, str | None]:
    """A zygote's name as (its kind, its toolchain environment's key or None)."""
    kind, _, key = name.partition(TOOLCHAIN_SEP)
    return kind, key or None


def preloads(kind: str) -> tuple[str, ...]:
    """What a zygote of `kind` preloads, in order (each of its KIND_SEP kinds', once)."""
    return tuple(dict.fromkeys(p for k in kind.split(KIND_SEP) for p in KINDS[k]))


def union(names: list[str]) -> str:
    """The zygote preloading what all `names` preload (torch, inductor, xla: inductor+xla)."""
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
    """To a zygote: fork a zygote of kind `zygote` (with `build`: a built or compiled one)."""

    zygote: str
    socket: str
    cpus: list[int]
    build: dict[str, Any] | None = None


@dataclass(frozen=True)
class Ready:
    """From a zygote: its imports (and its build) are done."""

    ready: float  # seconds they took
    state: dict[str, Any]  # what runs in it (pristine)
    build_s: float | None = None


@dataclass(frozen=True)
class NotReady:
    """From a zygote: it will not fork (`pristine`'s answer, or its build's error)."""

    not_ready: str


@dataclass(frozen=True)
class Exited:
    """From a zygote: its child `pid` ended (negative: killed by that signal, as Popen)."""

    returncode: int
    pid: int


@dataclass(frozen=True)
class Forked:
    """From a zygote: it forked the child or the zygote asked for (0: that fork failed)."""

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


class Lines:
    """Lines read from a descriptor into our own buffer: a buffered reader may hold a second
    line (an exit code behind its pid) where select() cannot see it."""

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


# --- the parent's side -----------------------------------------------------------------


class Zygote:
    """The parent's handle on one zygote process."""

    def __init__(
        self,
        name: str = "torch",
        cores: list[int] | None = None,
        base: Zygote | None = None,
        build: dict[str, Any] | None = None,
        output: Path | None = None,
    ) -> None:
        """A zygote of `name`, from `base` or afresh, importing on `cores` (not a timed slot);
        what it prints appended to `output` (None: this process's stderr; one forked from
        `base` prints where its base does)."""
        self.name, self.kind, self.output = name, split(name)[0], output
        self.proc: subprocess.Popen[bytes] | None = None
        self.build_s: float | None = None
        self.import_s = 0.0
        self._ready = self._closed = False
        ours = tempfile.TemporaryDirectory(prefix="benchflow-zygote-", ignore_cleanup_errors=True)
        with ours as folder, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            path = os.path.join(folder, "s")  # (0700: ours alone)
            listener.bind(path)
            listener.listen(1)
            listener.settimeout(CONNECT_TIMEOUT_S)
            self.pid = self._start(path, cores, base, build)
            try:
                self._sock, _ = listener.accept()
            except TimeoutError as exc:
                raise ZygoteError(f"the {self.name} zygote never connected") from exc
        self._sock.settimeout(None)
        self._lines = Lines(self._sock.fileno())

    def _start(self, path: str, cores: list[int] | None, base: Zygote | None, build: Any) -> int:
        if base is not None:
            base.wait_ready()
            base._say(ForkZygote(self.kind, path, cores or [], build))
            msg = base._read(CONNECT_TIMEOUT_S)
            if not isinstance(msg, Forked) or not msg.pid:
                raise ZygoteError(f"the {base.name} zygote did not fork a zygote: {msg}")
            return msg.pid
        python, env = sys.executable, dict(os.environ)
        if (toolchain_key := split(self.name)[1]) is not None:
            from benchflow.runner.toolchain import interpreter

            python, extra = interpreter(toolchain_key)
            env.update(extra)
        if cores:
            env[ENV_CPUS] = ",".join(map(str, cores))
        with open(self.output, "ab") if self.output else contextlib.nullcontext() as err:
            self.proc = subprocess.Popen(
                [python, "-m", "benchflow.runner.zygote", self.kind, path],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,  # a Ctrl-C at the terminal reaches the parent only
            )
        return self.proc.pid

    def _say(self, msg: Message) -> None:
        self._sock.sendall(encode(msg))

    def _read(self, timeout: float | None) -> Message | None:
        """The zygote's next message, or None after `timeout` without one."""
        try:
            line = self._lines.next(timeout)
        except EOFError:
            code = f"code {self.proc.poll()}" if self.proc else f"pid {self.pid}"
            raise ZygoteError(f"the zygote exited ({code})") from None
        return None if line is None else decode(line)

    def wait_ready(self, timeout: float = 300.0) -> float:
        """Block until the zygote has done its imports (and build); how long they took."""
        if not self._ready:
            msg = self._read(timeout)
            if isinstance(msg, NotReady):
                raise ZygoteError(msg.not_ready)
            if not isinstance(msg, Ready):
                raise ZygoteError(f"the zygote did not start: {msg}")
            self._ready, self.import_s, self.build_s = True, msg.ready, msg.build_s
            state = json.dumps(msg.state)
            log.info(
                "the %s zygote (pid %d) preloaded in %.1f s: %s",
                self.name,
                self.pid,
                msg.ready,
                state,
            )
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
        try:  # forked from its base: not our child, so asked of the kernel
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def close(self) -> None:
        """The end of its socket closed: its loop ends, it exits (killed after 10 s)."""
        if self._closed:  # (its pid may be another process's by now)
            return
        self._closed = True
        if not self._ready and self.proc is not None:  # still importing: nothing to finish
            with contextlib.suppress(OSError):
                self.proc.kill()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        deadline = time.monotonic() + 10
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.alive():
            with contextlib.suppress(OSError):
                os.kill(self.pid, 9)
        if self.proc is not None:
            self.proc.wait()


# --- the zygote's side -------------------------------------------------------------------


@dataclass
class Held:
    """What a zygote's process holds for the processes it forks, handed to each."""

    environ: dict[str, str]  # before its imports (a zygote forked from another: that one's)
    # the machine checks it ran: from the cache or not, how long (timing.machine_checks)
    checks: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    prebuilt: Any = None  # a built or compiled warm process's (harness/prebuilt.Prebuilt)


def serve(kind: str, conn: socket.socket, build: Any = None, held: Held | None = None) -> None:
    """Be a zygote of `kind` over `conn`: preload, build, say Ready, fork until the parent goes."""
    t0 = time.perf_counter()
    held = dataclasses.replace(held) if held else Held(dict(os.environ))
    allowed = os.sched_getaffinity(0)
    pin_self()  # import on the cores of the process that asked for it only
    preload = preloads(kind)

    def say(msg: Message) -> None:
        conn.sendall(encode(msg))

    watch = Threads()
    with cuda_answered_without_the_driver():
        threads = _preload_all(preload, watch, held.checks)
        try:
            if build is not None:  # the build on the asking process's cores
                with watch.watched("the build"):
                    held.prebuilt = _build(build, held.prebuilt)
        except Exception as exc:  # its processes build their own and report it as theirs
            say(NotReady(f"the model was not built: {type(exc).__name__}: {exc}"[:2000]))
            return
    os.sched_setaffinity(0, allowed)  # forked children pin themselves to their own cores
    os.environ.pop(ENV_CPUS, None)
    try:
        state = pristine(threads, watch)  # if the preloads (or the build) started anything: no
    except ZygoteError as exc:  # the parent's warning says why its processes are spawned
        say(NotReady(str(exc)))
        return
    build_s = (held.prebuilt.step_s or held.prebuilt.build_s) if build is not None else None
    say(Ready(time.perf_counter() - t0, state, build_s))
    requests = Lines(conn.fileno())
    while True:
        try:
            line = requests.next()  # no timeout: a whole line, or the end
        except EOFError:  # the parent closed its end
            return
        assert line is not None
        request = decode(line)
        if isinstance(request, ForkZygote):
            say(Forked(_fork_zygote(request, held, conn)))
            continue
        if not isinstance(request, ForkJob):
            raise ZygoteError(f"not a request: {request}")
        pid = os.fork()
        if pid == 0:
            _exit_after(_run_child, request, preload, os.getppid(), held)
        say(Forked(pid))
        returncode = _wait_child(pid, requests)
        if returncode is None:  # the parent is gone (SIGKILLed mid-sweep): so is its job
            kill_group(pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            return
        say(Exited(returncode, pid))


def _connected(path: str) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    return conn


def _preload_all(
    preload: tuple[str, ...], watch: Threads, checks: dict[str, dict[str, Any]]
) -> int:
    """Import the kind's modules; how many threads (the base's BLAS ones) may be left running."""
    with contextlib.ExitStack() as for_the_imports:  # variables unset after them
        # torch_xla must not pick one PJRT device for every child at import
        if "torch_xla" in preload and "PJRT_SELECT_DEFAULT_DEVICE" not in os.environ:
            for_the_imports.enter_context(variable("PJRT_SELECT_DEFAULT_DEVICE", "0"))
        # torch <= 2.8 starts Inductor's compile-worker pool at import without it
        if "TORCH_WARM_POOL" not in os.environ:
            for_the_imports.enter_context(variable("TORCH_WARM_POOL", "0"))
        threads = watch.allow_running()  # a zygote forked from the base: 1 (fork keeps one)
        for name in preload:
            with watch.watched(name):
                _preload(name, checks)
            if name in BASE_MODULES:  # numpy's OpenBLAS threads (torch imports it); none after may
                threads = watch.allow_running()
    with watch.watched("benchflow.harness.child.preload()"):  # what every job imports next
        import benchflow.harness.child

        benchflow.harness.child.preload()
    return threads


def _preload(name: str, checks: dict[str, dict[str, Any]]) -> None:
    """Import a module, or call a check ("module.function()", KINDS) kept in `checks`."""
    if not name.endswith("()"):
        importlib.import_module(name)
        return
    module, _, function = name[:-2].rpartition(".")
    start = time.perf_counter()
    # Inductor's cache in a folder of this zygote's own, removed after
    scratch = tempfile.TemporaryDirectory(
        prefix="benchflow-zygote-inductor-", ignore_cleanup_errors=True
    )
    with scratch as folder, variable(INDUCTOR_CACHE, folder):
        cached = getattr(importlib.import_module(module), function)()
    if cached is not None and name not in checks:  # a machine check, its first time
        checks[name] = {"from_cache": cached, "s": round(time.perf_counter() - start, 3)}


def _build(build: dict[str, Any], inherited: Any) -> Any:
    """A built zygote's model or a compiled one's step (harness/prebuilt.py)."""
    from benchflow.harness.child import first_call_step
    from benchflow.harness.prebuilt import build_from_request

    first_call = first_call_step if build["stage"] == "compiled" else None
    return build_from_request(build, inherited, first_call)


def _fork_zygote(request: ForkZygote, held: Held, conn: socket.socket) -> int:
    """Double-fork a zygote of another kind, which closes its copy of `conn`; its pid."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            grandchild = os.fork()
            if grandchild == 0:
                os.close(w)
                conn.close()
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
    if request.cpus:
        os.environ[ENV_CPUS] = ",".join(map(str, request.cpus))
    inherited = TORCH_SCRATCH in sys.modules  # its folder then is the zygote's it forked from
    serve(request.zygote, _connected(request.socket), request.build, held)
    if not inherited:
        remove_torch_scratch()
    return 0


def _run_child(request: ForkJob, preloaded: tuple[str, ...], zygote_pid: int, held: Held) -> int:
    """In the forked child: become the job's process, as a spawned child would be."""
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request.stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(request.stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.closerange(3, 1 << 16)  # the zygote's socket and anything else it held
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

    # the environment as a spawned job starts with (torch_xla's import adds to XLA_FLAGS)
    return main([request.job], held.prebuilt, {**held.environ, **request.env})


def _exit_after(run: Callable[..., int], *args: Any) -> NoReturn:
    """In a forked process: `run(*args)`, then exit: never back into the code that forked it."""
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


def _wait_child(pid: int, requests: Lines) -> int | None:
    """The job's exit code (as Popen's), or None if the parent went away first."""
    pidfd = os.pidfd_open(pid)
    try:
        while pidfd not in select.select([pidfd, requests.fd], [], [])[0]:
            if not requests.fill():
                return None
    finally:
        os.close(pidfd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def kill_group(pid: int) -> None:
    """SIGKILL a job's group and every descendant that left it (compile workers, which must
    not outlive their job), and wait for those (5 s at most)."""
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, 9)
    for proc in descendants:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(descendants, timeout=5)


# --- what a zygote must be to fork ----------------------------------------------------------


@contextlib.contextmanager
def cuda_answered_without_the_driver() -> Iterator[None]:
    """While a zygote preloads and builds: torch.cuda.is_available(), which Inductor's import
    asks, answered by the driver's files (core/machine.cuda_present), not by the driver or
    NVML: on an H200 either left a thread of the driver's running (NVML's stayed after its
    shutdown), and a process with one cannot fork a working job."""
    import torch

    asked = torch.cuda.is_available
    torch.cuda.is_available = cuda_present
    try:
        yield
    finally:
        torch.cuda.is_available = asked


def nvidia_files(fd_dir: str = "/proc/self/fd") -> list[str]:
    """The NVIDIA device files this process has open."""
    found = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                target = os.readlink(os.path.join(fd_dir, fd))
                if target.startswith("/dev/nvidia"):
                    found.add(target)
    return sorted(found)


def pristine(threads: int, watch: Threads | None = None) -> dict[str, Any]:
    """This process's state, as a zygote must fork it (no thread beyond `threads`, no child, CUDA
    context, NVIDIA device file or PJRT client); ZygoteError naming what is not so."""
    torch, torch_xla = sys.modules.get("torch"), sys.modules.get("torch_xla")
    now = threads_unsafe_to_fork()
    state: dict[str, Any] = {
        "threads": now,
        "children": [" ".join(p.cmdline()) for p in psutil.Process().children()],
        "cuda_initialized": bool(torch and torch.cuda.is_initialized()),
        "nvidia_files": nvidia_files(),
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
    """The threads a zygote may fork with, and which step started each other one."""

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
        """' (name from step, ...)' for each thread beyond the allowed ones; '' if none."""
        names = [
            f"{name!r} from {self.started_in.get(tid, 'later')}"
            for tid, name in unsafe_threads().items()
            if tid in self.started_in or (self.allowed and tid not in self.allowed)
        ]
        return f" ({', '.join(names)})" if names else ""


def _main() -> int:
    serve(sys.argv[1], _connected(sys.argv[2]))
    remove_torch_scratch()
    return 0


if __name__ == "__main__":  # no interpreter teardown after (torch's took about 1 s)
    _exit_after(_main)
