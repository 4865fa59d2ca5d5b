"""Start a daemon in its own session with its PID recorded; stop it by that PID."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(os.environ.get("BENCHFLOW_SERVICES_DIR", "/tmp/benchflow-services"))


class ServiceError(RuntimeError):
    pass


def state_dir(service: str) -> Path:
    """The folder of one service's state, logs and PID files."""
    folder = ROOT / service
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One `up`, `down` (or other change) at a time in a service's state folder: test
    workers and Make targets may share one."""
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def load_state(folder: Path, name: str) -> dict[str, Any]:
    """A service's recorded state (`name` in its folder); {} before its first `up`."""
    path = folder / name
    return json.loads(path.read_text()) if path.exists() else {}


def save_state(folder: Path, name: str, state: dict[str, Any]) -> None:
    """Readable by its owner only: a service's state may hold a password."""
    path = folder / name
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(json.dumps(state, indent=2) + "\n")


def run_command(
    prog: str,
    command: str,
    *,
    up: Callable[[], None],
    down: Callable[[], None],
    status: Callable[[], list[str]],
    running: Callable[[], bool],
    env: Callable[[], list[str]],
) -> int:
    """A service script's command (up, down, status, env) with its output and exit
    status: 1 and the reason for a ServiceError, 3 from `status` when not all runs."""
    try:
        if command == "up":
            up()  # prints what it started
            print("\n".join(env()))
        elif command == "down":
            down()
            print("stopped")
        elif command == "status":
            print("\n".join(status()))
            return 0 if running() else 3
        else:
            print("\n".join(env()))
    except ServiceError as e:
        print(f"{prog} {command}: {e}", file=sys.stderr)
        return 1
    return 0


def start(
    name: str,
    cmd: Sequence[str],
    folder: Path,
    env: dict[str, str] | None = None,
    pid_of: Callable[[], int | None] | None = None,
) -> int:
    """Run `cmd` in the foreground of its own session, its output in `<folder>/<name>.log`,
    and record its PID in `<folder>/<name>.pid`. `pid_of`: where the command forks a
    daemon and exits, how to find the daemon's PID (its own PID file)."""
    log = (folder / f"{name}.log").open("ab")
    proc = subprocess.Popen(
        list(cmd),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    pid = proc.pid
    if pid_of is not None:
        proc.wait(timeout=60)
        found = wait_for(pid_of, 30, f"{name}'s PID file")
        pid = int(str(found))  # wait_for returns an object: pid_of's int
    (folder / f"{name}.pid").write_text(f"{pid} {_started(pid)}\n")
    return pid


def _started(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return 0.0


def recorded(name: str, folder: Path) -> psutil.Process | None:
    """The daemon `name` as recorded, if that process still runs (the same PID and start
    time: a PID the kernel gave to another process since is not ours)."""
    path = folder / f"{name}.pid"
    if not path.exists():
        return None
    pid_text, _, created = path.read_text().strip().partition(" ")
    try:
        proc = psutil.Process(int(pid_text))
        if created and abs(proc.create_time() - float(created)) > 0.01:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except (psutil.NoSuchProcess, ValueError):
        return None


def stop(name: str, folder: Path, timeout_s: float = 20.0) -> bool:
    """SIGTERM the recorded daemon (and its process group where it leads one), SIGKILL
    what is left after `timeout_s`; True if it was running."""
    proc = recorded(name, folder)
    (folder / f"{name}.pid").unlink(missing_ok=True)
    if proc is None:
        return False
    family = [proc, *_children(proc)]
    for p in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGTERM)
    _, left = psutil.wait_procs(family, timeout=timeout_s)
    for p in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(left, timeout=5)
    return True


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return list(proc.children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def wait_for(probe: Callable[[], object], timeout_s: float, what: str) -> object:
    """Poll `probe` until it returns something truthy; ServiceError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(OSError, ValueError):
            if got := probe():
                return got
        if time.monotonic() > deadline:
            raise ServiceError(f"{what}: not ready after {timeout_s:.0f} s")
        time.sleep(0.2)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def as_user(user: str, cmd: Sequence[str]) -> list[str]:
    """`cmd` as `user` would run it, with that user's groups, where we are root (a
    daemon that refuses to run as root: PostgreSQL); as it is otherwise. setpriv changes
    identity and then execs the command in the same process, so the PID `start`
    records is the daemon's own (runuser and su fork it and stay its parent)."""
    if os.geteuid() != 0 or user == pwd.getpwuid(os.geteuid()).pw_name:
        return list(cmd)
    gid = pwd.getpwnam(user).pw_gid
    return ["setpriv", f"--reuid={user}", f"--regid={gid}", "--init-groups", "--", *cmd]


def stop_session(
    name: str,
    folder: Path,
    sig: int = signal.SIGTERM,
    timeout_s: float = 20.0,
    leader_only: bool = False,
) -> bool:
    """Stop the daemon `name` that `start` recorded and every process of the session it
    leads: `sig` to each (to the daemon alone with `leader_only`: one that stops its own
    children, as PostgreSQL's postmaster does on SIGINT, and whose children read signals
    of their own differently), SIGKILL to what is left after `timeout_s`; True if
    anything was running. Unlike `stop`, it also cleans up after a crash: when the
    recorded process is gone, what is still in its session (its orphans, which a server
    whose parent process died leaves holding its port) gets SIGTERM. That is safe from
    PID reuse: the kernel gives no new process a PID that is still a session's ID, so a
    recorded PID that another process holds now means nothing of ours is left."""
    path = folder / f"{name}.pid"
    if not path.exists():
        return False
    pid_text, _, created = path.read_text().strip().partition(" ")
    path.unlink(missing_ok=True)
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    try:
        proc = psutil.Process(pid)
        if created and abs(proc.create_time() - float(created)) > 0.01:
            return False  # another process's PID now: ours and its session are gone
        leader = proc if proc.status() != psutil.STATUS_ZOMBIE else None
    except (psutil.NoSuchProcess, ValueError):
        leader = None
    members = [p for p in _session(pid) if p.pid != pid]
    if leader is None:
        family, targets, sig = members, members, signal.SIGTERM
    else:  # with any child that left the session
        family = [leader, *members, *(c for c in _children(leader) if c not in members)]
        targets = [leader] if leader_only else family
    for p in targets:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(sig)
    left = wait_gone(family, timeout_s)
    for p in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    wait_gone(left, 5)
    return bool(family)


def wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Those of `procs` still alive after `timeout_s`, polled every 0.1 s (psutil's
    wait_procs backs off to 2 s between polls: seconds more on every stop). Our own
    children that exited are reaped; others' zombies count as gone."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [p for p in procs if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def alive(proc: psutil.Process) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)  # reaps it if it is our exited child
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _session(sid: int) -> list[psutil.Process]:
    """The processes whose session ID is `sid`."""
    found = []
    for pid in psutil.pids():
        with contextlib.suppress(OSError, psutil.NoSuchProcess):
            if os.getsid(pid) == sid:
                found.append(psutil.Process(pid))
    return found
