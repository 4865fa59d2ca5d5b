"""A real SLURM cluster on this one host, for tests and for trying benchflow's
`hydra/launcher=submitit_slurm` without a cluster: Debian's munged, slurmctld and slurmd,
each started here in the foreground with its PID recorded (daemons.start), and stopped by
that PID in reverse order (daemons.stop_session).

Nothing is written to /etc and nothing is left to systemd: the configuration, munge's
key and socket, slurmctld's saved state, slurmd's spool, the logs and the PID files all
live under `state_dir("slurm")` (/tmp/benchflow-services/slurm by default). Clients find
the cluster through SLURM_CONF (`eval "$(python services/slurm.py env)"`), and SLURM finds
our munged through slurm.conf's `AuthInfo=socket=...`.

    python services/slurm.py up | down | status | env

From Python (a pytest fixture): `up()` returns the environment to use and the node's
partition, name and CPUs; `down()` stops it all; `running()` says whether it runs.

What a test can count on (SLURM 22.05, measured on this setup): a job starts about a
second after sbatch; scancel sends the job's processes SIGCONT and SIGTERM, then SIGKILL
after KillWait (5 s), and the job ends CANCELLED; a time limit is checked only every 30 s,
so a `--time=1` job is killed (SIGCONT, SIGTERM, SIGKILL 5 s later) 60 to 90 s after it
started and ends TIMEOUT; `scontrol show job` answers for 10 min after a job ends
(MinJobAge). There is no accounting (no slurmdbd): sacct fails, and submitit, which polls
it, sees every job's state as UNKNOWN (results still come back through its files).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

if __package__ in (None, ""):  # `python services/slurm.py`: make `services` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.daemons import ServiceError, recorded, start, state_dir, stop_session, wait_for

SERVICE = "slurm"
PARTITION = "debug"
# Started in this order, stopped in the reverse one: slurmctld authenticates through
# munged, and slurmd registers with slurmctld.
DAEMONS = ("munged", "slurmctld", "slurmd")
# Debian's packages, and the programs each must provide (the daemons live in /usr/sbin).
PACKAGES = {
    "munge": ("munged", "munge", "unmunge"),
    "slurmctld": ("slurmctld",),
    "slurmd": ("slurmd", "slurmstepd"),
    "slurm-client": ("sinfo", "squeue", "sbatch", "scancel", "scontrol", "srun"),
}
CTLD_PORT = 6817  # SLURM's defaults: a second SLURM on this host would clash, see _ports_free
SLURMD_PORT = 6818
KILL_WAIT_S = 5  # SIGTERM to SIGKILL, on scancel and on a time limit
UP_TIMEOUT_S = 60.0
SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes, the last one a NUL


def folder() -> Path:
    return state_dir(SERVICE)


def conf_path() -> Path:
    return folder() / "slurm.conf"


def env() -> dict[str, str]:
    """What a client (sbatch, squeue, submitit) needs in its environment."""
    return {"SLURM_CONF": str(conf_path())}


def running() -> bool:
    """All three daemons run, as recorded (a PID reused by another process is not ours)."""
    where = folder()
    return all(recorded(name, where) is not None for name in DAEMONS)


def up() -> dict[str, Any]:
    """Start munged, slurmctld and slurmd (installing Debian's packages if missing), wait
    until the node is idle and a first job has run (a probe job, its ID taken); returns the
    cluster's description (see _info). Already running: the same description. On
    failure, what was started is stopped again and the error carries the daemons' log
    tails."""
    where = folder()
    if running():
        saved = where / "info.json"
        return json.loads(saved.read_text()) if saved.exists() else _info(where)
    if os.geteuid() != 0:
        # SlurmUser=root, and slurmd must be root to start jobs as their users.
        raise ServiceError("the SLURM services run as root: run `up` as root (or with sudo)")
    if any(recorded(name, where) for name in DAEMONS):
        down()  # a half-up cluster (one daemon crashed): start over, cleanly
    ensure_installed()
    _ports_free()
    info = _info(where)
    _write_config(where, info)
    for name in DAEMONS:  # the logs of this start only; the last start's in .log.prev
        with contextlib.suppress(FileNotFoundError):
            (where / f"{name}.log").replace(where / f"{name}.log.prev")
    daemon_env = env()
    try:
        _start_munged(where, daemon_env)
        _start_slurmctld(where, daemon_env)
        _start_slurmd(where, daemon_env, info["node"])
        _probe_job(where)
    except BaseException as exc:  # Ctrl-C too: nothing half-started is left behind
        tails = _log_tails(where)
        down()
        if isinstance(exc, ServiceError):
            raise ServiceError(f"{exc}\n{tails}") from exc
        raise
    (where / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def down() -> None:
    """Cancel the jobs left, then stop slurmd, slurmctld and munged by their recorded
    PIDs. Safe when nothing runs, after a crash (a stale PID file is dropped) and when a
    recorded PID now belongs to another process (that one is left alone)."""
    where = folder()
    if recorded("slurmctld", where) is not None and recorded("munged", where) is not None:
        _cancel_all(where)
    # stop_session, not stop: it polls every 0.1 s and counts a zombie as gone (PID 1
    # here reaps orphans only every second or two: `stop` waited 2 s per daemon), and
    # after a crash it also ends what is left in the daemon's session. slurmctld stops
    # its slurmscriptd itself.
    for name in reversed(DAEMONS):
        stop_session(name, where, timeout_s=15, leader_only=name == "slurmctld")
    # A slurmstepd of a job that was not cancelled (slurmctld had crashed) outlives
    # slurmd: it runs in a session of its own, not as slurmd's child. Its job's
    # processes (its descendants) go with it.
    steps = _leftover_steps(where)
    family = [*steps, *(child for step in steps for child in _descendants(step))]
    for proc in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    with contextlib.suppress(ServiceError):
        wait_for(lambda: not any(map(_running, family)), 5, "leftover job steps killed")
    (where / "info.json").unlink(missing_ok=True)


def _info(where: Path) -> dict[str, Any]:
    return {
        "env": env(),
        "partition": PARTITION,
        "node": _hostname(),
        "cpus": os.cpu_count() or 1,
        # slurmd drains a node that has less memory than slurm.conf says: stay under it.
        "memory_mb": int(psutil.virtual_memory().total / 2**20 * 0.9),
        "state_dir": str(where),
        "kill_wait_s": KILL_WAIT_S,
        "logs": {name: str(where / f"{name}.log") for name in DAEMONS},
    }


def _hostname() -> str:
    """The short host name, as slurmctld and slurmd compare it with slurm.conf."""
    return socket.gethostname().split(".")[0]


# --- installation ---------------------------------------------------------------------


def _which(program: str) -> str | None:
    # Not root, /usr/sbin (the daemons') is often not on PATH.
    return shutil.which(program, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


def _program(program: str) -> str:
    path = _which(program)
    if path is None:
        raise ServiceError(f"{program} not found: is SLURM installed? (`up` installs it)")
    return path


def ensure_installed() -> None:
    """apt-get install the packages whose programs are missing (as root, or with
    passwordless sudo); nothing to do when they are all present."""
    missing = [pkg for pkg, progs in PACKAGES.items() if any(_which(p) is None for p in progs)]
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise ServiceError(f"no apt-get here: install {' '.join(missing)} yourself")
    if os.geteuid() == 0:
        sudo: list[str] = []
    elif subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        sudo = ["sudo", "-n"]
    else:
        raise ServiceError(
            f"not root and no passwordless sudo: run `sudo apt-get install {' '.join(missing)}`"
        )
    log = folder() / "apt-get.log"
    # Where a policy lets the packages' scripts start the system's own munged/slurmd,
    # those stay the system's (on /etc's configuration): ours use other paths.
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    steps = [
        [*sudo, "apt-get", "update", "-q"],
        [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", *install],
    ]
    with log.open("ab") as out:
        for cmd in steps:
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                raise ServiceError(f"{' '.join(cmd)} failed (log: {log}):\n{_tail(log)}")


# --- configuration --------------------------------------------------------------------


def _ports_free() -> None:
    for port in (CTLD_PORT, SLURMD_PORT):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("0.0.0.0", port))
            except OSError as exc:
                raise ServiceError(
                    f"port {port} is taken ({exc}): is another SLURM running on this host?"
                ) from exc


def _munge_socket(where: Path) -> Path:
    # In run/, not munge/: munged wants its socket's folder open to all (clients), and
    # its key's folder closed to all but itself.
    path = where / "run" / "munge.socket"
    if len(str(path)) > SOCKET_PATH_MAX:
        raise ServiceError(f"{path}: too long for a Unix socket; set a shorter state dir")
    return path


def _write_config(where: Path, info: dict[str, Any]) -> None:
    """slurm.conf for one node that is also the controller: consumable CPUs (two 1-CPU
    jobs run side by side), process tracking without cgroups (no systemd delegation
    here), no accounting daemon, and short timers for tests."""
    for sub in ("munge", "state", "spool", "run"):
        (where / sub).mkdir(exist_ok=True)
    # munged insists that nobody but its user reads the key or writes its folder.
    (where / "munge").chmod(0o700)
    key = where / "munge" / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    node, run = info["node"], where / "run"
    lines = {
        "ClusterName": "benchflow",
        # The controller and the node by name (as slurmctld/slurmd check it against
        # this host's name) at 127.0.0.1: the host's own address may not route.
        "SlurmctldHost": f"{node}(127.0.0.1)",
        "SlurmctldPort": CTLD_PORT,
        "SlurmdPort": SLURMD_PORT,
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthInfo": f"socket={_munge_socket(where)}",
        "SlurmUser": "root",
        "SlurmdUser": "root",
        "StateSaveLocation": where / "state",
        "SlurmdSpoolDir": where / "spool",
        # SLURM's own PID files; daemons.start's <name>.pid are the ones `down` trusts.
        "SlurmctldPidFile": run / "slurmctld.pid",
        "SlurmdPidFile": run / "slurmd.pid",
        # No log files: in the foreground (-D) the daemons log to stderr, which is
        # <name>.log (untimed; a LogFile would repeat every line there, timed).
        "SlurmctldDebug": "info",
        "SlurmdDebug": "info",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_CPU",
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/none",
        "JobAcctGatherType": "jobacct_gather/none",
        "AccountingStorageType": "accounting_storage/none",
        "JobCompType": "jobcomp/none",
        "MpiDefault": "none",
        "MailProg": "/bin/true",
        "ReturnToService": 2,  # a node that was down comes back when slurmd registers
        "MinJobAge": 600,  # `scontrol show job` answers for 10 min after a job ends
        "KillWait": KILL_WAIT_S,
        "InactiveLimit": 0,
        "Waittime": 0,
        "SchedulerType": "sched/backfill",
        "SchedulerParameters": "batch_sched_delay=0",
    }
    text = "".join(f"{key}={value}\n" for key, value in lines.items())
    text += (
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={info['cpus']} "
        f"RealMemory={info['memory_mb']} State=UNKNOWN\n"
        f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP\n"
    )
    header = "# Written by services/slurm.py `up`, rewritten at each start.\n"
    conf_path().write_text(header + text)


# --- the daemons ----------------------------------------------------------------------


def _start_munged(where: Path, daemon_env: dict[str, str]) -> None:
    sock = _munge_socket(where)
    cmd = [
        _program("munged"),
        "--foreground",
        f"--socket={sock}",
        f"--key-file={where / 'munge' / 'munge.key'}",
        f"--pid-file={where / 'run' / 'munged.pid'}",
        f"--seed-file={where / 'munge' / 'munged.seed'}",
        # In the foreground it logs to stderr (munged.log) and writes no log file: this
        # only keeps it off /var/log/munge, should it ever.
        f"--log-file={where / 'munge' / 'munged.log'}",
    ]
    start("munged", cmd, where, env=daemon_env)
    wait_for(lambda: _munge_works(sock), 20, "munged")


def _munge_works(sock: Path) -> bool:
    """A credential made and decoded through our socket."""
    cred = _run([_program("munge"), "-n", f"--socket={sock}"])
    if cred.returncode != 0:
        _alive("munged")
        return False
    check = subprocess.run(
        [_program("unmunge"), f"--socket={sock}"],
        input=cred.stdout,
        capture_output=True,
        text=True,
    )
    return check.returncode == 0


def _start_slurmctld(where: Path, daemon_env: dict[str, str]) -> None:
    # -c: a cold start, without the jobs and node states of an earlier run.
    start(
        "slurmctld",
        [_program("slurmctld"), "-D", "-c", "-f", str(conf_path())],
        where,
        env=daemon_env,
    )
    wait_for(lambda: _alive("slurmctld") and _ping(), 30, "slurmctld")


def _ping() -> bool:
    got = _run([_program("scontrol"), "ping"])
    return got.returncode == 0 and "UP" in got.stdout


def _start_slurmd(where: Path, daemon_env: dict[str, str], node: str) -> None:
    cmd = [_program("slurmd"), "-D", "-c", "-N", node, "-f", str(conf_path())]
    start("slurmd", cmd, where, env=daemon_env)
    try:
        wait_for(lambda: _alive("slurmd") and _node_state(node) == "idle", UP_TIMEOUT_S, "slurmd")
    except ServiceError as exc:
        # Why the node is not idle (drained for "Low RealMemory", down, ...), in SLURM's words.
        got = _run([_program("sinfo"), "-h", "-N", "-n", node, "-o", "%T %E"])
        seen = got.stdout.strip() or got.stderr.strip() or "no answer"
        raise ServiceError(f"{exc}: node {node} is not idle ({seen})") from exc


def _probe_job(where: Path) -> None:
    """Run one trivial batch job to its end: an idle node does not yet prove that jobs
    start (munge credentials to slurmd, slurmstepd, process tracking), and the first
    scheduling pass comes a second or two after slurmctld starts, which this waits out
    rather than the caller's first job."""
    cmd = [_program("sbatch"), "--parsable", "--job-name=benchflow-probe", "--output=/dev/null"]
    got = _run([*cmd, f"--chdir={where}", "--wrap=true"])
    if got.returncode != 0:
        raise ServiceError(f"sbatch of a probe job failed: {got.stderr.strip()}")
    job = got.stdout.strip().split(";")[0]

    def state() -> str:
        shown = _run([_program("scontrol"), "show", "job", job]).stdout
        found = shown.split("JobState=", 1)[1].split()[0] if "JobState=" in shown else ""
        if found not in ("", "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "COMPLETED"):
            raise ServiceError(f"probe job {job} ended {found}:\n{shown}")
        return found

    wait_for(lambda: state() == "COMPLETED", UP_TIMEOUT_S, f"probe job {job}")


def _node_state(node: str) -> str:
    got = _run([_program("sinfo"), "-h", "-N", "-n", node, "-o", "%T"])
    return got.stdout.strip() if got.returncode == 0 else ""


def _alive(name: str) -> bool:
    """True while the daemon runs; a ServiceError at once when it died (no point in
    waiting out the timeout)."""
    if recorded(name, folder()) is None:
        raise ServiceError(f"{name} exited")
    return True


def _run(cmd: list[str], timeout_s: float = 15) -> subprocess.CompletedProcess[str]:
    """A client command against this cluster (SLURM_CONF set); one that hangs (a
    daemon that does not answer) counts as failed."""
    try:
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, **env()},
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(cmd, 124, "", f"timed out after {exc.timeout} s")


def _cancel_all(where: Path) -> None:
    """scancel every job and wait (KillWait and a margin) until none runs, so that their
    slurmstepd end with them rather than outlive slurmd."""
    with contextlib.suppress(OSError):
        jobs = _run([_program("squeue"), "-h", "-o", "%A"]).stdout.split()
        if not jobs:
            return
        _run([_program("scancel"), *jobs])
        with contextlib.suppress(ServiceError):
            wait_for(
                lambda: not _run([_program("squeue"), "-h", "-o", "%A"]).stdout.split(),
                KILL_WAIT_S + 15,
                "jobs cancelled",
            )


def _leftover_steps(where: Path) -> list[psutil.Process]:
    """The slurmstepd of this cluster still running: each listens on a Unix socket in
    our SlurmdSpoolDir (<node>_<job>.<step>), which names it more surely than its title
    does (it overwrites its environment for that title)."""
    spool = f"{where / 'spool'}{os.sep}"
    pids = set()
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections("unix"):
            if conn.pid and isinstance(conn.laddr, str) and conn.laddr.startswith(spool):
                pids.add(conn.pid)
    pids -= {os.getpid()}
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            found.append(psutil.Process(pid))
    return found


def _running(proc: psutil.Process) -> bool:
    """Still running: a zombie that PID 1 has not reaped yet is not."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return list(proc.children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _log_tails(where: Path) -> str:
    parts = []
    for name in DAEMONS:
        text = _tail(where / f"{name}.log")
        parts.append(f"--- {where / f'{name}.log'} (last lines)\n{text or '(empty)'}")
    return "\n".join(parts)


# --- the command line -----------------------------------------------------------------


def _status() -> int:
    where = folder()
    for name in DAEMONS:
        proc = recorded(name, where)
        print(f"{name:10s} {'running, PID ' + str(proc.pid) if proc else 'not running'}")
    if not running():
        return 1
    print(_run([_program("sinfo")]).stdout, end="")
    print(_run([_program("squeue")]).stdout, end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "up", "down", "status", "env"])
    args = parser.parse_args(argv)
    try:
        if args.command == "install":  # Debian's packages only (make test needs them)
            ensure_installed()
            print("slurm: slurmctld, slurmd, munge and SLURM's commands are installed")
        elif args.command == "up":
            already = running()
            began = time.monotonic()
            info = up()
            took = time.monotonic() - began
            state = "already running" if already else f"up in {took:.1f} s"
            print(
                f"slurm: {state}: node {info['node']} ({info['cpus']} CPUs, "
                f"{info['memory_mb']} MB), partition {info['partition']}; "
                f"state and logs in {info['state_dir']}"
            )
            script = Path(__file__).resolve()
            print(f'slurm: use it with: eval "$({sys.executable} {script} env)"')
        elif args.command == "down":
            began = time.monotonic()
            down()
            print(f"slurm: down in {time.monotonic() - began:.1f} s")
        elif args.command == "status":
            return _status()
        else:
            for name, value in env().items():
                print(f"export {name}={shlex.quote(value)}")
    except (ServiceError, OSError) as exc:
        print(f"slurm: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
