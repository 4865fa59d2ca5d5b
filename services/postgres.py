"""PostgreSQL with an MLflow server on it, as a team runs MLflow: the runs in a database
server, the artifacts uploaded to and downloaded from the MLflow server itself
(`--serve-artifacts`), never read from a path the client shares with it.

    python services/postgres.py up [--port 5433] [--mlflow-port 5001]   (0: a free port)
    python services/postgres.py env      # export MLFLOW_TRACKING_URI=... for a shell
    python services/postgres.py status   # exit status 3 when not running
    python services/postgres.py down     # the data stay, for the next `up`

Everything lives in <$BENCHFLOW_SERVICES_DIR>/postgres: the cluster (data/, owned by the
user PostgreSQL runs as), its unix socket (socket/), the artifacts (artifacts/), the
daemons' logs and PID files, and service.json (the ports last used and the MLflow
role's password). Two state roots can run side by side on different ports (the second
one's first `up --port 0 --mlflow-port 0` on the command line).

Ports: the ones asked for (0: a free one), else those used last. On the command line
the first `up` of a state root takes fixed ports, for `make` and for URIs a user can
write down: 5433, beside a system PostgreSQL's 5432, and 5001, beside the 5000 that
`mlflow ui` and `mlflow server` take by default. From Python (a test's fixture), `up()`
takes free ones instead, and the last ones only where they are still free.

PostgreSQL refuses to run as root: as root, initdb and postgres run as the user
`postgres` ($BENCHFLOW_PG_USER), through setpriv (daemons.as_user), which keeps the
recorded PID the postmaster's own. Every folder above the state root must then be
searchable by that user: pytest's own temporary folders (mode 0700) are not.
"""

from __future__ import annotations

import argparse
import os
import pwd
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root for `services`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services import daemons
from services.daemons import ServiceError

SERVICE = "postgres"
STATE = "service.json"  # its state file, in its folder (daemons.load_state)
DEFAULT_PG_PORT = 5433
DEFAULT_MLFLOW_PORT = 5001
DATABASE = ROLE = "mlflow"
SUPERUSER = "postgres"  # initdb's bootstrap role; it connects by the socket only
PG_OS_USER = os.environ.get("BENCHFLOW_PG_USER", "postgres")
# Generous, as the tests' servers: the MLflow server's imports alone took 5-15 s on
# this 2-core host when busy, and its first start on an empty database runs every
# schema migration too (3 s more here).
MLFLOW_START_TIMEOUT_S = 300.0
PG_START_TIMEOUT_S = 60.0
# pg_hba.conf, in place of initdb's: the socket (in a folder only the database's user
# and root can enter) trusts who reaches it; TCP, from 127.0.0.1 only, wants the
# password. No line for ::1 or any other address: nothing else gets in.
PG_HBA = """\
# Written by services/postgres.py.
local   all   all                  trust
host    all   all   127.0.0.1/32   scram-sha-256
"""


def _folder() -> Path:
    """This service's state folder, under the state root of the moment (a test may point
    daemons.ROOT elsewhere after import)."""
    return daemons.state_dir(SERVICE)


def _pg_bin(tool: str) -> str:
    """A PostgreSQL program: from $BENCHFLOW_PG_BINDIR, else Debian's newest
    /usr/lib/postgresql/<version>/bin (not on PATH there), else PATH."""
    folders = [os.environ["BENCHFLOW_PG_BINDIR"]] if "BENCHFLOW_PG_BINDIR" in os.environ else []
    versions = Path("/usr/lib/postgresql").glob("*/bin")
    folders += [str(p) for p in sorted(versions, key=_version_key, reverse=True)]
    for folder in folders:
        if (Path(folder) / tool).is_file():
            return str(Path(folder) / tool)
    found = shutil.which(tool)
    if found is None:
        raise ServiceError(f"PostgreSQL's {tool} not found (set BENCHFLOW_PG_BINDIR)")
    return found


def _version_key(bin_folder: Path) -> tuple[int, ...]:
    name = bin_folder.parent.name
    return tuple(int(x) for x in name.split(".") if x.isdigit())


def _mlflow_bin() -> str:
    """The `mlflow` of this interpreter's environment (.venv), where psycopg is."""
    here = Path(sys.executable).parent / "mlflow"
    return str(here) if here.is_file() else (shutil.which("mlflow") or "mlflow")


def _db_user() -> str:
    """Who runs PostgreSQL: PG_OS_USER where we are root (it refuses root), else us."""
    return PG_OS_USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name


def _own(path: Path, user: str) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _tail(folder: Path, name: str, chars: int = 3000) -> str:
    try:
        return (folder / f"{name}.log").read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _pick_port(asked: int | None, last: int | None) -> int:
    """`asked` (0: a free one); with nothing asked, the port used last when it is free
    (the URIs a user exported stay right), else a free one."""
    if asked == 0:
        return daemons.free_port()
    if asked is not None:
        return asked
    if last and not daemons.port_open(last):
        return last
    return daemons.free_port()


def _claim(port: int, what: str) -> None:
    """Fail early, with the port's name, where something else listens on it."""
    if daemons.port_open(port):
        raise ServiceError(f"port {port} for {what} is taken: choose another (0: a free one)")


# ---- PostgreSQL ----------------------------------------------------------------------


def _initdb(folder: Path, user: str) -> bool:
    """Create the cluster in <folder>/data unless it exists; True if it was created."""
    data, socket_dir = folder / "data", folder / "socket"
    for sub in (data, socket_dir):
        sub.mkdir(mode=0o700, exist_ok=True)
        _own(sub, user)
    # Ask as that user: a folder above the root it cannot search fails initdb later,
    # with a message that does not name the folder.
    check = subprocess.run(daemons.as_user(user, ["test", "-w", str(data)]), check=False)
    if check.returncode != 0:
        raise ServiceError(
            f"user {user} cannot reach {data}: every folder above it must be searchable "
            f"by {user} (chmod o+x), which a pytest tmp_path (0700) is not"
        )
    if (data / "PG_VERSION").exists():
        return False
    cmd = [_pg_bin("initdb"), "-D", str(data), "-U", SUPERUSER, "-E", "UTF8", "--locale=C"]
    with (folder / "initdb.log").open("ab") as log:
        done = subprocess.run(
            daemons.as_user(user, cmd), stdout=log, stderr=subprocess.STDOUT, check=False
        )
    if done.returncode != 0:
        raise ServiceError(f"initdb failed:\n{_tail(folder, 'initdb')}")
    (data / "pg_hba.conf").write_text(PG_HBA)
    _own(data / "pg_hba.conf", user)
    return True


def _start_postgres(folder: Path, port: int, user: str) -> None:
    """The postmaster, in the foreground of its own session (its PID recorded), on
    127.0.0.1:`port` and a socket in <folder>/socket; returns once it takes queries.
    The addresses are on its command line, not in postgresql.conf: another port next
    time needs no edit."""
    socket_dir = folder / "socket"
    if len(str(socket_dir / f".s.PGSQL.{port}")) > 107:  # sun_path's size, less the NUL
        raise ServiceError(f"socket path too long for a unix socket: {socket_dir}")
    _claim(port, "PostgreSQL")
    cmd = [
        _pg_bin("postgres"),
        "-D",
        str(folder / "data"),
        "-p",
        str(port),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        f"unix_socket_directories={socket_dir}",
        "-c",
        "logging_collector=off",  # its log to stderr: <folder>/postgres.log
    ]
    import psycopg  # the project's dependency; imported where used, not by `down`

    daemons.start("postgres", daemons.as_user(user, cmd), folder)

    def ready() -> bool:
        if daemons.recorded("postgres", folder) is None:
            raise ServiceError(f"postgres exited:\n{_tail(folder, 'postgres')}")
        try:
            _superuser(folder, port).close()
            return True
        except psycopg.OperationalError:  # starting up, or not listening yet
            return False

    daemons.wait_for(ready, PG_START_TIMEOUT_S, "postgres")


def _superuser(folder: Path, port: int) -> Any:
    """A connection as the superuser, by the socket (trusted there, and only there), in
    autocommit mode (CREATE DATABASE runs outside a transaction)."""
    import psycopg

    return psycopg.connect(
        host=str(folder / "socket"),
        port=port,
        user=SUPERUSER,
        dbname="postgres",
        autocommit=True,
        connect_timeout=5,
    )


def _bootstrap(folder: Path, port: int, password: str) -> None:
    """The role MLflow logs in as, with `password`, and its database `mlflow`; both
    created once, the password set again at every start (service.json holds it)."""
    from psycopg import sql

    with _superuser(folder, port) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone()
        # A literal, not a parameter: utility statements take no bound parameters.
        conn.execute(
            sql.SQL("{} ROLE {} LOGIN PASSWORD {}").format(
                sql.SQL("ALTER" if exists else "CREATE"),
                sql.Identifier(ROLE),
                sql.Literal(password),
            )
        )
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(DATABASE), sql.Identifier(ROLE)
                )
            )


def _postgres_uri(state: dict[str, Any], driver: str = "") -> str:
    """libpq's URI (psql, psycopg.connect); with `driver`, SQLAlchemy's for that driver."""
    scheme = f"postgresql+{driver}" if driver else "postgresql"
    return f"{scheme}://{ROLE}:{state['password']}@127.0.0.1:{state['pg_port']}/{DATABASE}"


# ---- MLflow --------------------------------------------------------------------------


def _start_mlflow(folder: Path, port: int, backend_uri: str) -> None:
    """`mlflow server` over the database, serving the artifacts from <folder>/artifacts
    itself; returns once /health answers 200. The store's URI (with the password) goes
    by the environment, which only its owner can read, not on the command line, which
    `ps` shows to everyone. One worker, and no job runner (GenAI scorers, ten more
    processes), as the tests' servers (tests/conftest.py's MlflowServer)."""
    _claim(port, "the MLflow server")
    artifacts = folder / "artifacts"
    artifacts.mkdir(exist_ok=True)
    cmd = [
        _mlflow_bin(),
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--serve-artifacts",
        "--artifacts-destination",
        str(artifacts),
        "--workers",
        "1",
    ]
    env = {"MLFLOW_BACKEND_STORE_URI": backend_uri, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    daemons.start("mlflow", cmd, folder, env=env)

    def healthy() -> bool:
        if daemons.recorded("mlflow", folder) is None:
            raise ServiceError(f"mlflow server exited:\n{_tail(folder, 'mlflow')}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return bool(r.status == 200)

    try:
        daemons.wait_for(healthy, MLFLOW_START_TIMEOUT_S, "mlflow server")
    except ServiceError:
        daemons.stop_session("mlflow", folder)  # a half-started server and its workers
        raise


# ---- The commands --------------------------------------------------------------------


def up(pg_port: int | None = None, mlflow_port: int | None = None) -> dict[str, Any]:
    """Start what is not running (PostgreSQL, then the MLflow server on it) and return
    the URIs: {"tracking_uri", "postgres_uri", "pg_port", "mlflow_port", "folder",
    "started": {what: seconds to ready}}. Idempotent: what runs already is kept, unless
    asked for another port (ServiceError: `down` first)."""
    folder = _folder()
    with daemons.locked(folder):
        return _up(folder, pg_port, mlflow_port)


def _up(folder: Path, pg_port: int | None, mlflow_port: int | None) -> dict[str, Any]:
    state = daemons.load_state(folder, STATE)
    state.setdefault("password", secrets.token_urlsafe(24))
    user = _db_user()
    started: dict[str, float] = {}

    if daemons.recorded("postgres", folder) is not None:
        _same_port(pg_port, state["pg_port"], "PostgreSQL")
    else:
        daemons.stop_session("postgres", folder)  # what a crash left: PID file, orphans
        t0 = time.monotonic()
        created = _initdb(folder, user)
        state["pg_port"] = _pick_port(pg_port, state.get("pg_port"))
        _start_postgres(folder, state["pg_port"], user)
        _bootstrap(folder, state["pg_port"], state["password"])
        started["initdb+postgres" if created else "postgres"] = time.monotonic() - t0
        daemons.save_state(folder, STATE, state)

    if daemons.recorded("mlflow", folder) is not None:
        _same_port(mlflow_port, state["mlflow_port"], "the MLflow server")
    else:
        daemons.stop_session("mlflow", folder)
        state["mlflow_port"] = _pick_port(mlflow_port, state.get("mlflow_port"))
        daemons.save_state(folder, STATE, state)
        t0 = time.monotonic()
        # psycopg (3) named: a plain postgresql:// means psycopg to SQLAlchemy 2.1 (the
        # locked one) but psycopg2, which is not installed, to SQLAlchemy 2.0.
        _start_mlflow(folder, state["mlflow_port"], _postgres_uri(state, "psycopg"))
        started["mlflow"] = time.monotonic() - t0
    return {**_uris(folder, state), "started": started}


def _same_port(asked: int | None, running: int, what: str) -> None:
    if asked not in (None, 0, running):
        raise ServiceError(f"{what} runs on port {running}, not {asked}: `down` first")


def _uris(folder: Path, state: dict[str, Any]) -> dict[str, Any]:
    return {
        "tracking_uri": f"http://127.0.0.1:{state['mlflow_port']}",
        "postgres_uri": _postgres_uri(state),
        "pg_port": state["pg_port"],
        "mlflow_port": state["mlflow_port"],
        "folder": str(folder),
    }


def down() -> None:
    """Stop the MLflow server, then PostgreSQL (its clients gone first), each by its
    recorded PID; the data stay. PostgreSQL gets SIGINT, its fast shutdown: the open
    sessions are ended, not waited for as SIGTERM's smart shutdown would, and it
    checkpoints, so the next start needs no recovery. Also after a crash: a PID file
    whose process is gone is removed, and what is left in its session is stopped (the
    MLflow server's uvicorn, holding the port; PostgreSQL's children leave the
    postmaster's session, but they exit by themselves once it is gone)."""
    folder = _folder()
    with daemons.locked(folder):
        daemons.stop_session("mlflow", folder)
        daemons.stop_session("postgres", folder, signal.SIGINT, timeout_s=60, leader_only=True)


def running() -> bool:
    """Both daemons run (as recorded) and listen on their ports."""
    folder = _folder()
    state = daemons.load_state(folder, STATE)
    return all(
        daemons.recorded(name, folder) is not None and daemons.port_open(state.get(key, 0))
        for name, key in (("postgres", "pg_port"), ("mlflow", "mlflow_port"))
    )


def env_lines() -> list[str]:
    """Shell lines that point a client at the running service."""
    folder = _folder()
    if not running():
        raise ServiceError(f"not running (state in {folder}): `up` first")
    uris = _uris(folder, daemons.load_state(folder, STATE))
    return [
        f"export MLFLOW_TRACKING_URI={shlex.quote(uris['tracking_uri'])}",
        f"export BENCHFLOW_POSTGRES_URI={shlex.quote(uris['postgres_uri'])}",
    ]


def _status_lines() -> list[str]:
    folder = _folder()
    state = daemons.load_state(folder, STATE)
    lines = [f"state: {folder}"]
    for name, key in (("postgres", "pg_port"), ("mlflow", "mlflow_port")):
        proc = daemons.recorded(name, folder)
        port = state.get(key)
        where = f"127.0.0.1:{port}" if port else "no port yet"
        lines.append(f"{name}: " + (f"running, PID {proc.pid}, {where}" if proc else "stopped"))
    return lines


def _or(*ports: int | None) -> int:
    """The first port given: asked for, used last, the default."""
    return next(p for p in ports if p is not None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PostgreSQL with an MLflow server on it.")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="start PostgreSQL and the MLflow server")
    start.add_argument(
        "--port",
        type=int,
        help=f"PostgreSQL's (0: a free one; default: last, or {DEFAULT_PG_PORT})",
    )
    start.add_argument(
        "--mlflow-port", type=int, help=f"0: a free one; default: last, or {DEFAULT_MLFLOW_PORT}"
    )
    commands.add_parser("down", help="stop both (the data stay)")
    commands.add_parser("status", help="what runs; exit status 3 when not both")
    commands.add_parser("env", help="export lines for a shell: eval $(... env)")
    args = parser.parse_args(argv)

    def start_both() -> None:
        last = daemons.load_state(_folder(), STATE)
        info = up(
            _or(args.port, last.get("pg_port"), DEFAULT_PG_PORT),
            _or(args.mlflow_port, last.get("mlflow_port"), DEFAULT_MLFLOW_PORT),
        )
        for what, seconds in info["started"].items():
            print(f"started {what} in {seconds:.1f} s")
        if not info["started"]:
            print("already running")

    return daemons.run_command(
        "postgres.py",
        args.command,
        up=start_both,
        down=down,
        status=_status_lines,
        running=running,
        env=env_lines,
    )


if __name__ == "__main__":
    sys.exit(main())
