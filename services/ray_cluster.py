"""A Ray cluster of two nodes on this one host, for tests and for trying benchflow's
`hydra/launcher=ray` against a cluster it joins rather than one it starts: a head
(`ray start --head`) and a worker node joined to it (`ray start --address`), one CPU
each by default, the worker with a resource of its own (`worker_node`) to tell it apart.

    python services/ray_cluster.py up [--port P] [--cpus N]   (default: a free port)
    python services/ray_cluster.py env      # export RAY_ADDRESS=127.0.0.1:P
    python services/ray_cluster.py status   # exit status 3 when not running
    python services/ray_cluster.py down

From Python (a pytest fixture): `up()` returns the address and the two nodes (their Ray
node ids and resources), `down()` stops both, `running()` says whether both run, and
`kill_worker()` SIGKILLs every process of the worker node at once, as a lost machine
would (a later `up()` starts a new worker node; the dead one stays in `ray.nodes()`).

Processes. Each node is one `ray start --block`, started in its own session with its PID
recorded (daemons.start, `head.pid` / `worker.pid`); it stays in the foreground and owns
the node's processes: the GCS (head only), the raylet, the log monitor, the autoscaler
monitor, the client server and the minimal dashboard (head only); the raylet starts the
dashboard and runtime-env agents and the Python workers. All of them stay in that
session, though the raylet puts each worker in a process group of its own (so killing
the group of `ray start` would miss them). SIGTERM to `ray start --block` is Ray's own
shutdown: it SIGTERMs the node's processes, SIGKILLs what is left, and exits (in about
3 s); the raylet ends its workers. So `down` SIGTERMs each `ray start --block`, waits
for it to exit, and then SIGKILLs whatever of the node is left: the session's processes
and the descendants, as seen before the SIGTERM, of `ray start` and of the raylet (a
job's process in a session of its own is one). Where `ray start` is gone (a crash) or
the GCS is (the head's `ray start` SIGKILLed), the raylet's agents outlive it, orphaned,
and ignore SIGTERM: what is left gets SIGKILL. The raylet's and the GCS's PIDs are
recorded too (`<role>-raylet.pid`, `head-gcs.pid`, in daemons' format), found as
children of our own `ray start` process, not by name across the host. Never `ray stop`:
it finds processes by name and would stop every Ray instance on the host.

Isolation from other Ray instances on the host (the tests' own `ray.init()`s): each node
has its own temp dir (`--temp-dir`: sockets, logs, session files, and Ray's
`ray_current_cluster`, which `ray.init(address="auto")` reads from /tmp/ray, is written
there instead); no fixed port is taken (GCS, client server, dashboard agent: free ones;
the rest 0, Ray's choice). Ray's unix sockets live in the temp dir, and a socket path
holds at most 107 bytes: where <state>/ray is too deep for that (a pytest tmp_path),
the temp dirs are /tmp/bf-ray-<port>/<role>, recorded in ray.json and removed by `down`.

Working folders. A Ray worker runs in its raylet's working folder, which is that of
`ray start`, not the driver's: a job that writes to a relative path (Hydra's
multirun/<date>/<time>, where the launcher passes it on as it is) writes there. Each
node runs in a folder of its own, <state>/ray/<role>-cwd, as on two machines, never in
the folder `up` was called from (a repository's root); nothing removes them. The nodes
inherit `up`'s environment: a job's code must be importable with the PYTHONPATH `up`
had (the tests' models in tests/models only with the repository root on it, as
tests/conftest.py puts it for the tests).

Authentication. Ray 2.60 turns token authentication on for `ray start --head` when
~/.ray/auth_token exists (any `ray.init()` that starts a local instance writes it), but
not for `ray start --address`, nor for a driver given an explicit address: the worker
node and benchflow's launcher could not join. Both nodes run with RAY_AUTH_MODE=disabled,
whatever the home folder holds. The GCS listens on every interface (Ray's choice, not
ours; `--node-ip-address 127.0.0.1` is replaced by the host's address too): a cluster
for a test host, not for a shared network.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

if __package__ in (None, ""):  # run as a script: the repository root for `services`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services import daemons
from services.daemons import ServiceError

SERVICE = "ray"
STATE = "ray.json"  # its state file, in its folder (daemons.load_state)
ROLES = ("head", "worker")  # started in this order, stopped in the reverse one
HOST = "127.0.0.1"
# The object store is in /dev/shm; Ray's default (30% of memory) would want gigabytes.
OBJECT_STORE_BYTES = 100_000_000
UP_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0  # SIGTERM to `ray start --block`, then SIGKILL
SETTLE_S = 2.0  # once `ray start` has exited, for the processes it ended to be gone
SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes, the last one a NUL
# The longest socket path Ray makes below its temp dir: the session's folder (named from
# the head's start time and `ray start`'s PID, up to 7 digits) and the object store's
# socket in it. Ray checks the length only once the node is starting.
SOCKET_SUFFIX = len("/session_2026-01-01_00-00-00_000000_4194304/sockets/plasma_store")
# The environment of both nodes: see the module's docstring for the authentication; no
# drain on SIGTERM (Ray waits up to 30 s for a busy node's tasks, which `down` does not
# want); no usage report.
NODE_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}
# A short-lived driver: connects, waits until the nodes named in argv are alive in the
# GCS's node table, prints them as JSON. A separate process, so that the caller (a test)
# is not itself left connected to the cluster.
PROBE = """
import json, sys, time
import ray
address, timeout_s, wanted = sys.argv[1], float(sys.argv[2]), set(sys.argv[3:])
ray.init(address=address, logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + timeout_s
while True:
    alive = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
    if wanted <= alive.keys() or time.monotonic() > deadline:
        break
    time.sleep(0.3)
print(json.dumps([{"node_id": i, "resources": n["Resources"]} for i, n in alive.items()]))
"""


def _folder() -> Path:
    """This service's state folder, under the state root of the moment (a test may point
    daemons.ROOT elsewhere after import)."""
    return daemons.state_dir(SERVICE)


def _ray_bin() -> str:
    """The `ray` of this interpreter's environment (.venv): the nodes' Python workers run
    the interpreter `ray start` runs under, which must be the one benchflow is in."""
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.is_file() else (shutil.which("ray") or "ray")


def _temp_dirs(folder: Path, port: int) -> dict[str, str]:
    """Each node's Ray temp dir: <folder>/<role> where Ray's socket paths fit in
    sun_path, else /tmp/bf-ray-<port>/<role> (a port is this cluster's alone while it
    runs)."""
    base = folder if len(str(folder / "worker")) + SOCKET_SUFFIX <= SOCKET_PATH_MAX else None
    base = base or Path(f"/tmp/bf-ray-{port}")
    return {role: str(base / role) for role in ROLES}


def _node_cmd(role: str, port: int, temp_dir: str, cpus: int) -> list[str]:
    common = [
        "--block",
        "--node-ip-address",
        HOST,
        "--num-cpus",
        str(cpus),
        "--object-store-memory",
        str(OBJECT_STORE_BYTES),
        "--temp-dir",
        temp_dir,
        # Ray's default, 52365, is one per host: two nodes here (and any other Ray
        # instance on the host) would clash on it.
        "--dashboard-agent-listen-port",
        str(daemons.free_port()),
        "--disable-usage-stats",
    ]
    if role == "head":
        return [
            _ray_bin(),
            "start",
            "--head",
            "--port",
            str(port),
            "--include-dashboard",
            "false",
            "--ray-client-server-port",  # 10001 by default: the same clash
            str(daemons.free_port()),
            *common,
        ]
    return [
        _ray_bin(),
        "start",
        "--address",
        f"{HOST}:{port}",
        "--resources",
        json.dumps({"worker_node": 1}),
        *common,
    ]


# ---- Processes -----------------------------------------------------------------------


def _record(name: str, folder: Path, proc: psutil.Process) -> None:
    """A PID file for a process we did not start ourselves, in daemons.start's format
    (PID and start time), so that daemons.recorded and daemons.stop apply to it."""
    (folder / f"{name}.pid").write_text(f"{proc.pid} {proc.create_time()}\n")


def _record_components(folder: Path, role: str) -> None:
    """Record the raylet's PID (and the GCS's, on the head) once `ray start` has started
    them: its children by executable name, so nothing outside our node is looked at."""
    wanted = {"raylet": "raylet"} | ({"gcs_server": "gcs"} if role == "head" else {})

    def found() -> dict[str, psutil.Process] | None:
        leader = daemons.recorded(role, folder)
        if leader is None:
            raise ServiceError(f"ray start ({role}) exited:\n{_tails(folder, [role])}")
        children = {}
        for child in leader.children():
            with contextlib.suppress(psutil.NoSuchProcess):
                children[child.name()] = child
        got = {short: children[exe] for exe, short in wanted.items() if exe in children}
        return got if len(got) == len(wanted) else None

    got = daemons.wait_for(found, UP_TIMEOUT_S, f"the {role} node's raylet")
    assert isinstance(got, dict)
    for short, proc in got.items():
        _record(f"{role}-{short}", folder, proc)


def _node_id(folder: Path, role: str) -> str:
    """The Ray node id of the node `role`, from its raylet's command line (--node_id):
    that node and no other, where a killed worker node is still listed alive by the GCS
    for a while."""
    raylet = daemons.recorded(f"{role}-raylet", folder)
    if raylet is None:
        raise ServiceError(f"the {role} node's raylet is not running")

    def found() -> str | None:  # (a raylet just started once showed no arguments yet)
        args = [a for a in raylet.cmdline() if a.startswith("--node_id=")]
        return args[0].partition("=")[2] if args else None

    what = f"--node_id on the {role} node's raylet's command line"
    got = daemons.wait_for(found, UP_TIMEOUT_S, what)
    assert isinstance(got, str)
    return got


def _session_id(folder: Path, role: str) -> int | None:
    """The ID of the session `ray start` (role) leads, its recorded PID, also when it is
    gone: the kernel gives no new process a PID that is still a session's ID, so while
    any process of that session runs, the PID is theirs. None where another process
    holds that PID now (its start time differs): nothing of ours is left."""
    path = folder / f"{role}.pid"
    if not path.exists():
        return None
    pid_text, _, created = path.read_text().strip().partition(" ")
    with contextlib.suppress(psutil.NoSuchProcess, ValueError):
        if created and abs(psutil.Process(int(pid_text)).create_time() - float(created)) > 0.01:
            return None
    return int(pid_text) if pid_text.isdigit() else None


def _in_session(sid: int | None) -> list[psutil.Process]:
    """The live processes of the session `sid`."""
    members = []
    for pid in psutil.pids() if sid else []:
        with contextlib.suppress(OSError, psutil.NoSuchProcess):
            if os.getsid(pid) == sid:
                members.append(psutil.Process(pid))
    return [p for p in members if daemons.alive(p)]


def _node_processes(folder: Path, role: str) -> list[psutil.Process]:
    """Every process of the node `role` we can find: `ray start`, its raylet (and GCS),
    their descendants (the raylet's workers, and what a job started in a session of its
    own), and what is left in `ray start`'s session. `ray start` and the raylet first:
    killed first, they start nothing more."""
    found: dict[int, psutil.Process] = {}
    for name in (role, f"{role}-raylet", f"{role}-gcs"):
        proc = daemons.recorded(name, folder)
        if proc is not None:
            found.setdefault(proc.pid, proc)
    for proc in [*found.values(), *_in_session(_session_id(folder, role))]:
        found.setdefault(proc.pid, proc)
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in proc.children(recursive=True):
                found.setdefault(child.pid, child)
    return list(found.values())


def _kill(procs: list[psutil.Process]) -> None:
    """SIGKILL `procs` and wait until they are gone (reaped where they are ours)."""
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    daemons.wait_gone(procs, 10)


def _stop_node(folder: Path, role: str) -> None:
    """SIGTERM `ray start --block`, Ray's own shutdown of the node, and wait until it has
    exited (STOP_TIMEOUT_S at most); then SIGKILL what is left of the node: orphans
    (after a crash of `ray start`, or where the GCS is gone, the raylet's dashboard and
    runtime-env agents outlive it and ignore SIGTERM: daemons.stop_session would wait
    its whole timeout on them), the descendants seen before the SIGTERM (the raylet's
    workers, a job's process in a session of its own), and anything still in the
    session. The PID files go."""
    sid = _session_id(folder, role)
    leader = daemons.recorded(role, folder)
    family = _node_processes(folder, role)
    if leader is not None:
        with contextlib.suppress(psutil.NoSuchProcess):
            leader.send_signal(signal.SIGTERM)
        daemons.wait_gone([leader], STOP_TIMEOUT_S)
        daemons.wait_gone(family, SETTLE_S)  # its processes, ended by it, on their way out
    for _ in range(5):  # one started in between, then the session swept again
        left = {p.pid: p for p in [*family, *_in_session(sid)] if daemons.alive(p)}
        if not left:
            break
        _kill(list(left.values()))
        family = []
    for name in (role, f"{role}-raylet", f"{role}-gcs"):
        (folder / f"{name}.pid").unlink(missing_ok=True)


def _tail(path: Path, lines: int = 15) -> str:
    """The last `lines` lines of a log, less the raylet's periodic state dumps."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join([t for t in text if not t.startswith("[state-dump]")][-lines:])


def _tails(folder: Path, roles: list[str]) -> str:
    """The end of each node's `ray start` output and of its raylet's (and GCS's) log."""
    temp_dirs = daemons.load_state(folder, STATE).get("temp_dirs", {})
    parts = []
    for role in roles:
        logs = Path(temp_dirs.get(role, "/nonexistent")) / "session_latest" / "logs"
        for path in (folder / f"{role}.log", logs / "raylet.out", logs / "gcs_server.out"):
            if text := _tail(path).strip():
                parts.append(f"--- {path}\n{text}")
    return "\n".join(parts) or "(no logs)"


# ---- The cluster ---------------------------------------------------------------------


def _start_node(folder: Path, state: dict[str, Any], role: str) -> None:
    """`ray start --block` for `role`, in a fresh temp dir and in its working folder
    (`env --chdir` execs it: the PID recorded is `ray start`'s). The worker node's once
    the head's GCS takes connections: `ray start --address` waits for the head's raylet
    itself, so the two nodes' starts overlap."""
    temp_dir = Path(state["temp_dirs"][role])
    shutil.rmtree(temp_dir, ignore_errors=True)  # an earlier cluster's sessions
    temp_dir.mkdir(parents=True)
    cwd = folder / f"{role}-cwd"
    cwd.mkdir(exist_ok=True)
    if role == "worker":

        def gcs_up() -> bool:
            if daemons.recorded("head", folder) is None:
                raise ServiceError(f"ray start (head) exited:\n{_tails(folder, ['head'])}")
            return daemons.port_open(state["port"])

        daemons.wait_for(gcs_up, UP_TIMEOUT_S, "the head's GCS")
    cmd = _node_cmd(role, state["port"], str(temp_dir), state["cpus_per_node"])
    daemons.start(role, ["env", f"--chdir={cwd}", *cmd], folder, env=NODE_ENV)


def _probe(folder: Path, address: str, node_ids: dict[str, str], deadline: float) -> list[Any]:
    """The cluster's alive nodes, once the nodes `node_ids` are among them (a driver
    process, PROBE); ServiceError with the logs where a node's `ray start` exits or the
    nodes are not there by `deadline` (time.monotonic)."""
    while True:
        left = max(deadline - time.monotonic(), 1.0)
        probe = subprocess.Popen(
            [sys.executable, "-c", PROBE, address, str(left), *node_ids.values()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **NODE_ENV},
        )
        while probe.poll() is None:
            dead = [r for r in node_ids if daemons.recorded(r, folder) is None]
            if dead or time.monotonic() > deadline + 5:  # the probe's own limit, and a margin
                probe.kill()
                probe.communicate()
                what = f"ray start ({', '.join(dead)}) exited" if dead else "the probe hangs"
                raise ServiceError(f"{what}:\n{_tails(folder, list(ROLES))}")
            time.sleep(0.2)
        out, err = probe.communicate()
        if probe.returncode == 0:
            alive = json.loads(out.decode().strip().splitlines()[-1])
            if set(node_ids.values()) <= {n["node_id"] for n in alive}:
                return list(alive)
        if time.monotonic() > deadline:
            raise ServiceError(
                f"the two nodes not alive within {UP_TIMEOUT_S:.0f} s:\n"
                f"{err.decode()[-1500:]}\n{_tails(folder, list(ROLES))}"
            )
        time.sleep(1)  # the GCS did not take a driver yet: again


def up(port: int | None = None, cpus_per_node: int = 1) -> dict[str, Any]:
    """Start what is not running (the head, then the worker node) and wait until the
    GCS lists both nodes alive; return {"address": "127.0.0.1:P", "port", "nodes":
    [{"node_id", "role", "num_cpus", "resources", "pid"}, ...], "folder", "temp_dirs",
    "started": {role or "both alive": seconds from the call}} ({} where both ran
    already). Idempotent: what runs is kept (a head without its worker node, after
    kill_worker, gets a new one), unless asked for another port or CPU count
    (ServiceError: `down` first). On failure, what this call started is stopped."""
    folder = _folder()
    with daemons.locked(folder):
        return _up(folder, port, cpus_per_node)


def _up(folder: Path, port: int | None, cpus_per_node: int) -> dict[str, Any]:
    state = daemons.load_state(folder, STATE)
    head = daemons.recorded("head", folder)
    if head is not None and "port" not in state:  # ray.json lost: start afresh
        head = None
    if head is not None and port not in (None, 0, state["port"]):
        raise ServiceError(f"the cluster runs on port {state['port']}, not {port}: `down` first")
    if head is not None and cpus_per_node != state["cpus_per_node"]:
        raise ServiceError(
            f"the cluster runs with {state['cpus_per_node']} CPUs a node: `down` first"
        )
    if head is None:  # a fresh cluster: first what a crash left
        _stop_node(folder, "worker")
        _stop_node(folder, "head")
        _remove_temp_dirs(folder, state)
        port = port or daemons.free_port()
        if daemons.port_open(port):
            raise ServiceError(f"port {port} is taken: choose another")
        state = {"port": port, "cpus_per_node": cpus_per_node}
        state["temp_dirs"] = _temp_dirs(folder, port)
        daemons.save_state(folder, STATE, state)

    # Seconds from here until each node started here had its raylet running, and until
    # the GCS listed both nodes alive.
    started: dict[str, float] = {}
    begun: list[str] = []
    t0 = time.monotonic()
    try:
        for role in ROLES:
            if daemons.recorded(role, folder) is None:
                _stop_node(folder, role)  # a killed worker's PID files
                begun.append(role)
                _start_node(folder, state, role)
        for role in begun:
            _record_components(folder, role)
            started[role] = time.monotonic() - t0
        node_ids = {role: _node_id(folder, role) for role in ROLES}
        deadline = max(t0 + UP_TIMEOUT_S, time.monotonic() + 10)
        alive = _probe(folder, _address(state), node_ids, deadline)
    except BaseException:  # KeyboardInterrupt too: nothing half-started stays
        for role in reversed(ROLES if "head" in begun else begun):
            _stop_node(folder, role)
        raise
    if started:
        started["both alive"] = time.monotonic() - t0
    state["node_ids"] = node_ids
    daemons.save_state(folder, STATE, state)
    by_id = {n["node_id"]: n for n in alive}
    nodes = [
        {
            "node_id": node_ids[role],
            "role": role,
            "num_cpus": by_id[node_ids[role]]["resources"].get("CPU", 0),
            "resources": by_id[node_ids[role]]["resources"],
            "pid": _pid(folder, role),
        }
        for role in ROLES
    ]
    return {
        "address": _address(state),
        "port": state["port"],
        "nodes": nodes,
        "folder": str(folder),
        "temp_dirs": state["temp_dirs"],
        "started": started,
    }


def _address(state: dict[str, Any]) -> str:
    return f"{HOST}:{state['port']}"


def _pid(folder: Path, name: str) -> int | None:
    proc = daemons.recorded(name, folder)
    return proc.pid if proc is not None else None


def _remove_temp_dirs(folder: Path, state: dict[str, Any]) -> None:
    """Ray's temp dirs where they are outside the state folder (/tmp/bf-ray-<port>: a
    test's tmp root does not take them along); those inside it keep the last cluster's
    logs until the next `up`."""
    for temp_dir in state.get("temp_dirs", {}).values():
        path = Path(temp_dir)
        if folder not in path.parents:
            shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # /tmp/bf-ray-<port>, once both are gone


def down() -> None:
    """Stop the worker node, then the head, each by its recorded PIDs; nothing of
    either is left running. Also after a crash or kill_worker."""
    folder = _folder()
    with daemons.locked(folder):
        for role in reversed(ROLES):
            _stop_node(folder, role)
        _remove_temp_dirs(folder, daemons.load_state(folder, STATE))


def kill_worker() -> None:
    """SIGKILL every process of the worker node at once (`ray start`, raylet, agents,
    workers), as a lost machine would: nothing of it runs afterwards. Measured here: a
    driver resubmits a task that ran there at once (its connection to the worker
    broke), while the GCS lists the node dead only after its missed health checks,
    about 13 s later. Its PID files stay for `down` or `up`."""
    folder = _folder()
    with daemons.locked(folder):
        if daemons.recorded("worker", folder) is None:
            raise ServiceError("no worker node is running")
        for _ in range(5):  # one the raylet started while we were at it, again
            procs = [p for p in _node_processes(folder, "worker") if daemons.alive(p)]
            if not procs:
                return
            _kill(procs)
        raise ServiceError("the worker node's processes survive SIGKILL")


def running() -> bool:
    """Both nodes' `ray start` run (as recorded) and the GCS takes connections."""
    folder = _folder()
    state = daemons.load_state(folder, STATE)
    return all(daemons.recorded(r, folder) is not None for r in ROLES) and (
        daemons.port_open(state.get("port", 0))
    )


def env_lines() -> list[str]:
    """Shell lines that point a driver (`ray.init()`) at the running cluster."""
    folder = _folder()
    if not running():
        raise ServiceError(f"not running (state in {folder}): `up` first")
    return [f"export RAY_ADDRESS={shlex.quote(_address(daemons.load_state(folder, STATE)))}"]


def _status_lines() -> list[str]:
    folder = _folder()
    state = daemons.load_state(folder, STATE)
    lines = [f"state: {folder}"]
    if "port" in state and daemons.recorded("head", folder) is not None:
        lines.append(f"address: {_address(state)}")
    for role in ROLES:
        proc = daemons.recorded(role, folder)
        if proc is None:
            lines.append(f"{role}: stopped")
            continue
        parts = [f"ray start PID {proc.pid}"]
        parts += [f"{c} PID {p}" for c in ("raylet", "gcs") if (p := _pid(folder, f"{role}-{c}"))]
        node_id = state.get("node_ids", {}).get(role)
        parts += [f"node {node_id}"] if node_id else []
        parts += [f"temp dir {state['temp_dirs'][role]}"]
        lines.append(f"{role}: running, " + ", ".join(parts))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A Ray cluster of two nodes on this host.")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="start the head and the worker node")
    start.add_argument("--port", type=int, help="the GCS's (default: a free one)")
    start.add_argument("--cpus", type=int, default=1, help="CPUs of each node (default 1)")
    commands.add_parser("down", help="stop both nodes")
    commands.add_parser("status", help="what runs; exit status 3 when not both")
    commands.add_parser("env", help="export lines for a shell: eval $(... env)")
    args = parser.parse_args(argv)

    def start_both() -> None:
        info = up(args.port or None, args.cpus)
        for what, seconds in info["started"].items():
            print(f"{what}: {seconds:.1f} s")
        if not info["started"]:
            print("already running")
        for node in info["nodes"]:
            print(f"{node['role']}: node {node['node_id']}, {node['num_cpus']:g} CPU")

    return daemons.run_command(
        "ray_cluster.py",
        args.command,
        up=start_both,
        down=down,
        status=_status_lines,
        running=running,
        env=env_lines,
    )


if __name__ == "__main__":
    sys.exit(main())
