"""Shared helpers: run the real CLI in a subprocess, inside a scratch directory."""

from __future__ import annotations

import gc
import getpass
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from tests.early import (
    BACKGROUND_NICE,
    CPU_LOG,
    SESSION_RUNS,
    EarlySweeps,
    early,
    environ,
    in_background,
    log_cpu,
    nice_prefix,
    python_c,
)

__all__ = ["SESSION_RUNS", "EarlySweeps", "early", "python_c"]  # for the modules with early runs

REPO = Path(__file__).resolve().parents[1]
TEST_CONF = Path(__file__).resolve().parent / "conf"
# Test-only models (faults, matmul_chain) are configured in tests/conf/model and built
# from tests/models/faults.py, which the sweeps' child processes import: the repository
# root goes on every subprocess's PYTHONPATH (it is not shipped in the package).
SEARCHPATH = f"hydra.searchpath=[file://{TEST_CONF}]"
# Inductor's default cache folder on this host (torch's default_cache_dir: its precompiled
# headers are kept there whatever a job's TORCHINDUCTOR_CACHE_DIR)
HOST_INDUCTOR_CACHE = Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"
TORCHBENCH_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "torchbench"
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
)
# The real services tests start (services/: PostgreSQL with an MLflow server, SLURM, a
# Ray cluster) keep their state and PID files here, apart from any a user runs with
# `make` under /tmp/benchflow-services; in a folder the `postgres` user can enter
# (pytest's own are 0700). Each test stops what it started, by PID.
# (Once per session: pytest imports this file both as `conftest` and `tests.conftest`.)
if "BENCHFLOW_TEST_SERVICES_DIR" not in os.environ:
    _root = Path(tempfile.mkdtemp(prefix="bf-services-", dir="/tmp"))
    _root.chmod(0o755)
    os.environ["BENCHFLOW_TEST_SERVICES_DIR"] = os.environ["BENCHFLOW_SERVICES_DIR"] = str(_root)
SERVICES_ROOT = Path(os.environ["BENCHFLOW_TEST_SERVICES_DIR"])


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    cwd: Path

    @property
    def sweep_dirs(self) -> list[Path]:
        return sorted(p for p in (self.cwd / "multirun").glob("*/*") if p.is_dir())

    def rows(self) -> list[dict[str, Any]]:
        (sweep,) = self.sweep_dirs
        return read_rows(sweep)


def read_rows(sweep_dir: Path) -> list[dict[str, Any]]:
    lines = (sweep_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# Test runs and sweeps take one core per job (cpus_per_job=1): the session sweeps run in
# the background while the other tests run, and two one-core jobs can then run at once
# on a 2-core host (a job wanting every core would wait for both to be free at once).
# A test that sets cpus_per_job itself keeps its own value.


from benchflow.cli import COMMANDS  # noqa: E402 (after the comment it belongs to)


def benchflow_args(args: list[str]) -> list[str]:
    """The command line a test's `python -m benchflow ARGS` runs (see above)."""
    runs_jobs = bool(args) and args[0] not in COMMANDS and not args[0].startswith("--")
    if runs_jobs and not any(a.startswith("cpus_per_job=") for a in args):
        return [*args, "cpus_per_job=1"]
    return args


def pytest_runtest_logstart(nodeid: str) -> None:
    own = resource.getrusage(resource.RUSAGE_SELF)  # pytest's own CPU so far: each test's
    log_cpu({"test": nodeid, "at": time.time(), "cpu_s": round(own.ru_utime + own.ru_stime, 2)})


# The host's speed at the session's start and end: benchflow's reference step (a job's
# own measure of it, harness/load.py) on one thread. The suite's wall follows it: on
# 2026-12-02 a VM whose step took 0.74-0.84 ms ran the suite 1.6x as long as the VMs of
# 0.41-0.57 ms had (docs/tests.md).
HOST_STEP_MS: list[float] = []


def host_step_ms() -> float:
    import torch

    from benchflow.harness.load import reference_step_s

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return round(reference_step_s() * 1e3, 3)
    finally:
        torch.set_num_threads(threads)


def pytest_sessionstart() -> None:
    HOST_STEP_MS.append(host_step_ms())


def pytest_collection_finish() -> None:
    """The modules the tests imported, out of pytest's later collections: its tests
    allocate as they compose, plan and simulate, and each full collection scanned every
    imported object (about a tenth of the CPU of the in-process tests, docs/tests.md)."""
    gc.collect()
    gc.freeze()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    HOST_STEP_MS.append(host_step_ms())
    start, end = HOST_STEP_MS[0], HOST_STEP_MS[-1]
    terminalreporter.write_line(
        f"host reference step: {start:.2f} ms at the start, {end:.2f} ms at the end "
        "(one thread; docs/tests.md has the suite's wall on hosts of each speed)"
    )
    log_cpu({"host_step_ms": HOST_STEP_MS})


def pytest_sessionfinish() -> None:
    """The test process's own CPU, and all it reaped (with BENCHFLOW_TEST_CPU_LOG); the
    services' state folder removed (their daemons were stopped by their tests)."""
    import shutil

    shutil.rmtree(SERVICES_ROOT, ignore_errors=True)
    own, reaped = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    log_cpu(
        {
            "session_end": time.time(),
            "pytest_cpu_s": round(own.ru_utime + own.ru_stime, 1),
            "reaped_cpu_s": round(reaped.ru_utime + reaped.ru_stime, 1),
        }
    )


def wait_counted(proc: subprocess.Popen[Any], args: list[str], timeout: float) -> int:
    """proc's exit code, once it ends (killed past `timeout`), its CPU logged if asked."""
    started = time.monotonic()
    if not CPU_LOG:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    while True:  # os.wait4 reports the CPU of the process and of all it reaped
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > timeout:
            proc.kill()
            proc.wait()
            raise subprocess.TimeoutExpired(proc.args, timeout)
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    log_run(args, started, usage.ru_utime + usage.ru_stime)
    return proc.returncode


def log_run(args: list[str], started: float, cpu_s: float) -> None:
    """A CLI run's line of the CPU log: its arguments, wall and CPU seconds (with all it
    reaped)."""
    wall = time.monotonic() - started
    log_cpu({"args": args, "wall_s": round(wall, 1), "cpu_s": round(cpu_s, 1), "end": time.time()})


def _capture() -> IO[str]:
    return tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")


def cli_command(args: list[str], background: bool = False) -> list[str]:
    """The command of `python -m benchflow ARGS`; a background one niced (tests/early.py)."""
    return [*nice_prefix(background), sys.executable, "-m", "benchflow", *benchflow_args(args)]


def run_cli(args: list[str], cwd: Path, timeout: float = 900, **env: str) -> CliResult:
    """`python -m benchflow ARGS` in `cwd` (so multirun/ and mlflow.db land there): forked
    from the suite's warm interpreter (_served), else an interpreter of its own."""
    full_env = {**environ(), "PYTHONUNBUFFERED": "1", **env}
    with _capture() as out, _capture() as err:
        code = _served(args, cwd, full_env, timeout, out, err)
        if code is None:
            proc = subprocess.Popen(
                cli_command(args, in_background()),
                cwd=cwd,
                stdout=out,
                stderr=err,
                env=full_env,
            )
            code = wait_counted(proc, args, timeout)
        out.seek(0)
        err.seek(0)
        return CliResult(code, out.read(), err.read(), cwd)


# One interpreter for the session that imported what a sweep's command imports, from which
# each run_cli forks (tests/forked_cli.py: serve): the same entry, each run in a process
# of its own, without the interpreter's start and the imports (about 3 CPU-seconds a run
# with MLflow, 1 without). Runs a test starts and signals (start_cli), the session sweeps
# and a run with other start variables (forked_cli.START_VARIABLES) start their own.
_SERVER: dict[str, Any] = {}
_SERVER_LOCK = threading.Lock()


def _server(env: dict[str, str]) -> Path | None:
    """The socket of the suite's warm interpreter, started at the first call; None where
    `env` needs an interpreter of its own, or where the warm one could not start."""
    from tests.forked_cli import start_variables

    with _SERVER_LOCK:
        if not _SERVER:
            folder = Path(tempfile.mkdtemp(prefix="bf-cli-"))
            path = folder / "cli.sock"
            proc = subprocess.Popen(
                [sys.executable, "-u", str(Path(__file__).with_name("forked_cli.py")), "serve",
                 str(path)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(folder / "serve.log").open("w"),
            )  # fmt: skip
            deadline = time.monotonic() + 120
            while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            _SERVER.update(path=path if path.exists() else None, proc=proc)
            _SERVER["variables"] = start_variables(env)
    if _SERVER["path"] is None or start_variables(env) != _SERVER["variables"]:
        return None
    path: Path = _SERVER["path"]
    return path


class _Lines:
    """The JSON lines a socket answers, one at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.data = sock, b""

    def next(self) -> Any:
        while b"\n" not in self.data:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the warm interpreter closed the run's socket")
            self.data += chunk
        line, self.data = self.data.split(b"\n", 1)
        return json.loads(line)


def _served(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float, out: IO[str], err: IO[str]
) -> int | None:
    """run_cli's run forked from the warm interpreter: its exit code (killed past
    `timeout`), its CPU logged as wait_counted logs it; None where it cannot be served."""
    path = _server(env)
    if path is None:
        return None
    request = {"args": benchflow_args(args), "cwd": str(cwd), "env": env}
    request["nice"] = BACKGROUND_NICE if in_background() else 0
    started = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        data = json.dumps(request).encode() + b"\n"
        socket.send_fds(sock, [data], [out.fileno(), err.fileno()])
        answers = _Lines(sock)
        pid = answers.next()["pid"]
        sock.settimeout(timeout)
        try:
            done = answers.next()
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            sock.settimeout(60)
            answers.next()
            raise subprocess.TimeoutExpired(["benchflow", *args], timeout) from None
    log_run(args, started, done["cpu_s"])
    code: int = done["code"]
    return code


def run_cli_forked(runs: list[tuple[list[str], Path]], scratch: Path) -> list[CliResult]:
    """`python -m benchflow ARGS` in `cwd` for each (ARGS, cwd), as run_cli does, but each
    forked from one interpreter that imported benchflow's command line once
    (tests/forked_cli.py): for many short runs that must stop before any work."""
    spec = scratch / "forked.json"
    logs = [(scratch / f"forked{n}.out", scratch / f"forked{n}.err") for n in range(len(runs))]
    spec.write_text(
        json.dumps(
            [
                {"args": benchflow_args(args), "cwd": str(cwd), "out": str(out), "err": str(err)}
                for (args, cwd), (out, err) in zip(runs, logs, strict=True)
            ]
        )
    )
    script = str(Path(__file__).with_name("forked_cli.py"))
    proc = subprocess.Popen(
        [*nice_prefix(), sys.executable, script, str(spec)],
        env={**environ(), "PYTHONUNBUFFERED": "1"},
    )
    assert wait_counted(proc, ["forked", str(len(runs))], 900) == 0
    codes = json.loads(Path(f"{spec}.codes").read_text())
    return [
        CliResult(code, out.read_text(), err.read_text(), cwd)
        for code, (_, cwd), (out, err) in zip(codes, runs, logs, strict=True)
    ]


def interruptible() -> None:
    """preexec_fn for a sweep a test will interrupt: SIGINT back to its default. A shell
    starts background jobs (`make test &`) with SIGINT ignored, children inherit that,
    and Python then installs no KeyboardInterrupt handler: Ctrl-C would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_cli(args: list[str], cwd: Path, stderr_log: Path, **env: str) -> subprocess.Popen[bytes]:
    """`python -m benchflow ARGS` in the background, stderr to a file to watch."""
    return subprocess.Popen(
        cli_command(args, in_background()),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=stderr_log.open("w"),
        env={**environ(), "PYTHONUNBUFFERED": "1", **env},
        preexec_fn=interruptible,
    )


def left_behind(folder: Path) -> list[int]:
    """Processes still running whose command line names `folder` (a test's own)."""
    import psutil

    time.sleep(0.5)
    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if str(folder) in " ".join(p.info["cmdline"] or [])
    ]


def wait_for_text(
    log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 300
) -> None:
    """Until `text` appears in `log`; fails if the process ends or time runs out first."""
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)


def sigterm_once_started(
    proc: subprocess.Popen[bytes], root: Path, child_log: str, err: Path
) -> int:
    """SIGTERM `proc` as soon as a job's child has started (the first line of a log under
    `root` matching the glob `child_log`), and its exit code. A fixed wait from the
    sweep's progress line landed after the child's end when the test was slow to wake
    under the suite's load; the child's own log says it runs."""

    def text(path: Path) -> str:
        try:
            return path.read_text()
        except OSError:
            return ""

    deadline = time.monotonic() + 300
    while not any("pid " in text(p) for p in root.glob(child_log)):
        assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=600)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


# --- session sweeps: one real sweep feeds the many tests that only read its results ---

# Heterogeneous jobs in one Hydra multirun: each `+case=NAME` is tests/conf/case/NAME.yaml,
# a config that chooses its own model, backend and settings. Order matters: the faults
# come before a good job, which must come out intact.
CASES = [
    *("fault_crash", "fault_segfault", "fault_raise", "fault_raise_on_load", "fault_oom"),
    "fault_raise",  # planned twice: the same job, run once though it failed (DUPLICATE)
    *("fault_hang", "good"),
    *("leaky_control", "leaky_1", "leaky_2", "spawned"),
    *("xla_lazy_cold", "xla_openxla_cold", "xla_openxla_warm"),
    *("acc_wrong_when_compiled", "acc_raises_in_eager", "acc_nondeterministic", "verify_crash"),
    "xla_timing",
    *("recompiles_fixed", "recompiles_adaptive", "recompiles_lazy_xla", "zygote_probe"),
    *("zygote_probe_inductor", "zygote_probe_xla"),
    *("profile_graph_breaks", "profile_lazy_dlrm", "profile_off", "profile_on"),
    *("graph_breaks_openxla", "graph_breaks_lazy"),
    *("ir_openxla", "ir_eager"),
    *("knob_freezing", "knob_freezing_off"),  # an inductor.* setting, on and off
    *("knob_dynamic", "knob_dynamic_batch", "aot_inductor"),  # dynamic shapes, AOTInductor
    *("env_probe", "xla_flags", "xla_flags_unknown"),  # env.NAME=, xla.flags=
    # TorchBench quirks (tests/fixtures/torchbench, through $TORCHBENCH_ROOT)
    *("tb_mlp_eval", "tb_mlp_train", "tb_bare_eval", "tb_train_returns_error", "tb_no_cpu"),
    *("tb_needs_pkg", "tb_needs_download", "tb_global_state", "tb_after_global_state"),
    *("tb_lazy_xla_train", "tb_openxla_train"),
    *("tb_step_module", "tb_step_torchbench", "tb_dict_train", "tb_holder_lazy_xla"),
    # share_build=true and false, built-in and TorchBench, eval and train; a second job
    # of each training build, listed apart: the sweep runs it right after the first
    *("share_llama_eval_on", "share_llama_eval_off", "share_llama_train_on"),
    *("share_llama_train_off", "share_tb_eval_on", "share_tb_eval_off", "share_tb_train_on"),
    *("share_tb_train_off", "share_llama_train_again", "share_tb_train_again"),
    # across backends (two zygote kinds): one build, and each one's own
    *("share_llama_eval_on_openxla", "share_llama_eval_off_openxla", "share_tb_eval_again"),
    *("ff_raise", "ff_after"),  # last: fail_fast=true skips every job after it
]


DUPLICATE = (2, 5)  # the numbers of CASES' two fault_raise jobs
ZYGOTES_INDUCTOR_CACHE = "zygotes-inductor-cache"  # the cases sweep's, under its folder


@dataclass
class SessionSweep:
    """A sweep run once per test session; tests read its rows and its MLflow store."""

    result: CliResult

    @property
    def cwd(self) -> Path:
        return self.result.cwd

    @property
    def tracking_uri(self) -> str:
        return f"sqlite:///{self.cwd / 'mlflow.db'}"

    def rows(self) -> list[dict[str, Any]]:
        return self.result.rows()

    def log(self) -> str:
        """The sweep's log (its folder's benchflow.log): the machinery's lines."""
        (sweep,) = self.result.sweep_dirs
        return (sweep / "benchflow.log").read_text()

    def builds(self) -> dict[str, dict[str, Any]]:
        """What each job's first build made (BENCHFLOW_BUILD_RECORD), by job folder."""
        lines = (self.cwd / "builds.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        return {str(Path(r["job"]).parent): r for r in records}

    def case(self, name: str) -> dict[str, Any]:
        """The row of `+case=NAME`."""
        (row,) = [r for r in self.rows() if f"+case={name}" in r["job"]["overrides"]]
        return row


# The issue-12 grid, which is also the README's headline sweep widened to every CPU
# backend: eager, lazy XLA, Inductor and openxla on llama and dlrm, with the two invalid
# pairs (dynamo=inductor xla=PJRT) and one duplicate (openxla with xla=auto and PJRT).
GRID = [
    "-m",
    "model=llama,dlrm",
    "dynamo=none,inductor,openxla",
    "xla=auto,PJRT",
    "model.size=tiny",
    "repeat=3",
    "iterations_per_run=3",
    "verify=true",
]


class _Background:
    """A CLI run started now and collected later."""

    def __init__(self, args: list[str], cwd: Path, **env: str) -> None:
        self.cwd, self.args = cwd, args
        self.code: int | None = None
        self.out, self.err = cwd / "cli.stdout", cwd / "cli.stderr"
        self.proc = subprocess.Popen(
            cli_command(args),
            cwd=cwd,
            stdout=self.out.open("w"),
            stderr=self.err.open("w"),
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )

    def result(self, timeout: float = 1200) -> CliResult:
        if self.code is None:
            self.code = wait_counted(self.proc, self.args, timeout)
        code = self.code
        return CliResult(code, self.out.read_text(), self.err.read_text(), self.cwd)


def no_gpu_here() -> str | None:
    """Why the `gpu` lane (tests/test_gpu.py, docs/gpu.md) cannot run here; None: it can."""
    from benchflow.core.machine import cuda_present

    if not cuda_present():
        return (
            "no NVIDIA GPU here: the gpu lane runs on a GPU machine (`make test-gpu`, docs/gpu.md)"
        )
    code = "import torch; print(torch.cuda.is_available())"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if found.stdout.strip() != "True":
        return f"an NVIDIA driver, but torch sees no CUDA GPU: {found.stderr.strip()[-300:]}"
    return None


SESSION_FIXTURES = ("cases_sweep", "grid_sweep")
_WANTED = pytest.StashKey[bool]()  # a selected test reads a session sweep
_EARLY_MODULES = pytest.StashKey[set[str]]()  # selected modules that read their early sweeps


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: only what will run counts
def pytest_collection_modifyitems(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Tests that read the session sweeps or a module's early sweeps run last: those
    sweeps start with the first test and run in the background while the others run.
    Tests marked `gpu` skip, saying why, where no CUDA GPU is."""
    gpu_tests = [i for i in items if i.get_closest_marker("gpu")]
    why = no_gpu_here() if gpu_tests else None
    for item in gpu_tests if why else []:
        item.add_marker(pytest.mark.skip(reason=why))

    uses = {i: set(getattr(i, "fixturenames", ())) for i in items}
    late = [i for i in items if uses[i] & {*SESSION_FIXTURES, "early_sweeps"}]
    items[:] = [i for i in items if i not in late] + late
    session.config.stash[_WANTED] = any(uses[i] & set(SESSION_FIXTURES) for i in late)
    session.config.stash[_EARLY_MODULES] = {
        i.module.__name__
        for i in late
        if isinstance(i, pytest.Function) and "early_sweeps" in uses[i]
    }


@pytest.fixture(scope="session")
def early_sweeps(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> EarlySweeps:
    """The selected modules' early sweeps (tests/early.py), started once per session."""
    return EarlySweeps(request.config.stash.get(_EARLY_MODULES, set()), tmp_path_factory.mktemp)


@pytest.fixture(scope="session", autouse=True)
def _start_session_sweeps(request: pytest.FixtureRequest) -> None:
    """Start the session sweeps and the early sweeps with the first test, if a selected
    test reads them."""
    if request.config.stash.get(_WANTED, False):
        request.getfixturevalue("_session_sweeps")
    if request.config.stash.get(_EARLY_MODULES, set()):
        request.getfixturevalue("early_sweeps")


@pytest.fixture(scope="session")
def _session_sweeps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, _Background]]:
    """Both session sweeps, started together with the first test: each job takes one core
    (cpus_per_job=1), so their jobs, and the other tests' jobs, run two at a time."""
    from benchflow.core.cpus import ENV_LOCK_DIR, lock_dir

    cases = tmp_path_factory.mktemp("cases")
    # A `utils` module in the working directory must not shadow TorchBench's own.
    (cases / "utils.py").write_text("OTHER = 1  # shadows the checkout's utils from the cwd\n")
    grid = tmp_path_factory.mktemp("grid")
    (grid / "tmp").mkdir()
    # Inductor's precompiled headers are the host's, as every other sweep finds them (in a
    # TMPDIR of its own the grid built them again: 6.8 CPU-seconds a session)
    HOST_INDUCTOR_CACHE.mkdir(parents=True, exist_ok=True)
    (grid / "tmp" / HOST_INDUCTOR_CACHE.name).symlink_to(HOST_INDUCTOR_CACHE)
    started = {
        "cases": _Background(
            ["-m", SEARCHPATH, "experiment=cases", "+case=" + ",".join(CASES)],
            cases,
            BENCHFLOW_CACHE_DIR=str(cases / "cache"),  # the warm-cache cases' shared cache
            # what the zygotes inherit; each job sets its own: nothing may be written here
            TORCHINDUCTOR_CACHE_DIR=str(cases / ZYGOTES_INDUCTOR_CACHE),
            # Inductor's compile workers as on 2 cores (a one-core job's Inductor has none)
            TORCHINDUCTOR_COMPILE_THREADS="2",
            TORCHBENCH_ROOT=str(TORCHBENCH_FIXTURE),  # its models become `model` options
            BENCHFLOW_BUILD_RECORD=str(cases / "builds.jsonl"),  # what each job built
        ),
        # a TMPDIR of its own, left as it was (test_headline.py); the cores' locks the host's
        "grid": _Background(
            GRID, grid, TMPDIR=str(grid / "tmp"), **{ENV_LOCK_DIR: str(lock_dir())}
        ),
    }
    SESSION_RUNS.update(started)
    yield started
    for run in started.values():  # a session that needed only one of them: stop the other
        if run.proc.poll() is None:
            run.proc.terminate()
            run.proc.wait(timeout=60)


@pytest.fixture(scope="session")
def cases_sweep(_session_sweeps: dict[str, _Background]) -> SessionSweep:
    """Every case in CASES, in one real sweep with MLflow on: faults, prefork
    isolation, XLA zygotes, accuracy faults, lazy XLA timing, steady state, profiling,
    IR, TorchBench quirks, fail_fast."""
    res = _session_sweeps["cases"].result()
    assert res.returncode == 0, res.stderr[-4000:]
    return SessionSweep(res)


@pytest.fixture(scope="session")
def grid_sweep(_session_sweeps: dict[str, _Background]) -> SessionSweep:
    res = _session_sweeps["grid"].result()
    assert res.returncode == 0, res.stderr[-4000:]
    return SessionSweep(res)


def sweep_runs(tracking_uri: str, experiment: str = "benchflow") -> tuple[list[Any], list[Any]]:
    """(parent runs, child runs) of an MLflow experiment, read through a real client."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no MLflow experiment {experiment!r} at {tracking_uri}"
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return parents, children


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A real server process started in its own session, ready once `<url>/health`
    answers 200; stop() signals its whole process group."""

    START_TIMEOUT_S = 480

    def __init__(self, cmd: list[str], port: int, log: Path, cwd: Path | None = None) -> None:
        self.cmd, self.port, self.log, self.cwd = cmd, port, log, cwd
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=self.cwd,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # MLflow's job runner (GenAI scorers: ten more processes) serves no test here.
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        )
        # Generous: at the suite's start it shares 2 cores with every early sweep, and
        # once took over 120 s to answer. How fast it starts is no test's subject.
        started = time.monotonic()
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return self.url
            except OSError:
                pass
            code = self.proc.poll()
            waited = time.monotonic() - started
            if code is not None or waited > self.START_TIMEOUT_S:
                self.stop(signal.SIGKILL)
                why = f"exited with {code}" if code is not None else f"no answer in {waited:.0f} s"
                pytest.fail(
                    f"{self.cmd[:3]} did not start ({why}):\n" + self.log.read_text()[-3000:]
                )
            time.sleep(0.5)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)


class MlflowServer(ServerProcess):
    """`mlflow server` on 127.0.0.1 over a SQLite store and proxied artifacts in `root`;
    it can be stopped and started again on the same port and store."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        port = port or free_port()
        self.root = root
        mlflow_bin = Path(sys.executable).parent / "mlflow"
        cmd = [
            str(mlflow_bin),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{root / 'server.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--workers",
            "1",
        ]
        super().__init__(cmd, port, root / "server.log")
