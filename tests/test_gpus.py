"""What of the GPU work runs without a GPU (docs/gpu.md): GPU slots over a list of
devices, the rule that reads a throttled GPU as a busy host, the probe's clean skip
where there is no NVML, and the zygote's check against an initialized CUDA driver.
The runs on a real GPU are tests/test_gpu.py's (the `gpu` lane)."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import REPO, EarlySweeps, early, python_c
from tests.test_launchers import another_sweep_holds

from benchflow.core import cpus, gpus
from benchflow.harness.gpu_load import Reading, gpu_probe, throttle_names, window
from benchflow.results.load import host_load
from benchflow.runner.zygote import nvidia_files


def test_the_gpus_a_job_may_get_are_those_cuda_visible_devices_names() -> None:
    """As CUDA reads the variable: its entries up to the first invalid one (an index
    or a UUID kept as written); unset, the driver's GPUs by index; none counted, one
    slot of them all, which leaves the variable alone."""
    assert gpus.visible({"CUDA_VISIBLE_DEVICES": "2, 3"}, 8) == ["2", "3"]
    assert gpus.visible({"CUDA_VISIBLE_DEVICES": "GPU-4a7f,1,-1,5"}, None) == ["GPU-4a7f", "1"]
    assert gpus.visible({"CUDA_VISIBLE_DEVICES": ""}, 2) == []
    assert gpus.visible({}, 3) == ["0", "1", "2"]
    assert gpus.visible({}, None) == [gpus.ALL]
    assert gpus.child_env("1") == {"CUDA_VISIBLE_DEVICES": "1"}
    assert gpus.child_env(gpus.ALL) == {} and gpus.child_env(None) == {}
    # here: no NVIDIA driver, so no GPU counted and no slot taken for a CPU job
    assert gpus.driver_count() is None
    with gpus.slot_for("cpu", "a cpu job") as gpu:
        assert gpu is None
    with gpus.gpu_slot("x", names=[]) as gpu:  # none visible: the child will say so
        assert gpu == gpus.ALL


def test_jobs_get_a_gpu_each_and_wait_for_a_free_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two GPUs: two holders get one each, a third waits (saying who holds them) and
    goes on when one is given back, to the GPU given back."""
    monkeypatch.setenv(cpus.ENV_LOCK_DIR, str(tmp_path))
    devices = ["0", "1"]
    got: dict[int, str] = {}
    release = [threading.Event(), threading.Event()]
    both_in = threading.Barrier(3)

    def job(n: int) -> None:
        with gpus.gpu_slot(f"job {n}", names=devices) as gpu:
            got[n] = gpu
            both_in.wait()
            release[n].wait()

    threads = [threading.Thread(target=job, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    both_in.wait(timeout=30)
    assert sorted(got.values()) == devices
    said: list[str] = []
    late: list[str] = []

    def late_job() -> None:
        with gpus.gpu_slot("job 2", said.append, names=devices) as gpu:
            late.append(gpu)

    waiting = threading.Thread(target=late_job)
    waiting.start()
    time.sleep(1.0)
    assert late == []
    assert said and "waiting for a free GPU (of 0, 1)" in said[0], said
    assert ": job 0" in said[0] and ": job 1" in said[0], said
    release[1].set()
    waiting.join(timeout=30)
    assert late == [got[1]]  # job 1's, given back
    release[0].set()
    for t in threads:
        t.join(timeout=30)


def test_on_one_gpu_a_second_sweep_waits_for_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One GPU, held by another process (another sweep on this host): a job waits until
    that process gives it back, never beside it."""
    monkeypatch.setenv(cpus.ENV_LOCK_DIR, str(tmp_path))
    holder = another_sweep_holds("gpus", "gpu_slot('the other sweep', names=['0'])", 2)
    said: list[str] = []
    start = time.monotonic()
    with gpus.gpu_slot("this sweep", said.append, names=["0"]) as gpu:
        waited = time.monotonic() - start  # the holder keeps the GPU for 2 s
    holder.wait(timeout=30)
    assert gpu == "0" and 1.0 < waited < 30, waited
    assert said == [f"waiting for a free GPU (of 0): pid {holder.pid}: the other sweep"]


def test_a_throttled_gpu_makes_a_job_timed_on_a_busy_host() -> None:
    """The probe's window from two NVML readings, and the rule over the repeats: a
    thermal slowdown at either end (or thermal violation time within) marks the
    repeat throttled; more than a tenth throttled and the job is not quiet, as with
    a busy host. The power cap is recorded, not judged."""
    calm = Reading(1980.0, 50.0, 0x0, thermal_ns=10, power_ns=0)
    capped = Reading(1755.0, 60.0, 0x4, thermal_ns=10, power_ns=5_000_000)
    hot = Reading(1410.0, 88.0, 0x20 | 0x4, thermal_ns=10, power_ns=5_000_000)
    assert window(calm, calm) == {
        "gpu_sm_clock_mhz": 1980.0,
        "gpu_temp_c": 50.0,
        "gpu_thermal_violation_s": 0.0,
        "gpu_power_violation_s": 0.0,
        "gpu_throttled": 0.0,
        "gpu_power_capped": 0.0,
    }
    assert window(calm, capped)["gpu_throttled"] == 0.0
    assert window(calm, capped)["gpu_power_capped"] == 1.0
    w = window(capped, hot)
    assert (w["gpu_throttled"], w["gpu_sm_clock_mhz"], w["gpu_temp_c"]) == (1.0, 1410.0, 88.0)
    counted = Reading(1980.0, 50.0, 0x0, thermal_ns=2_000_000, power_ns=0)
    assert window(calm, counted)["gpu_throttled"] == 1.0  # throttled between the readings
    assert throttle_names(0x8 | 0x40 | 0x80 | 0x1) == ["hw_slowdown", "hw_thermal", "power_brake"]

    def series(throttled: int, n: int = 20) -> dict[str, list[float]]:
        windows = [window(calm, hot if i < throttled else calm) for i in range(n)]
        return {
            "total_time_s": [0.1] * n,
            "host_other_cpu_own_s": [0.0] * n,
            **{k: [w[k] for w in windows] for k in windows[0]},
        }

    quiet = host_load(series(2), cores=2)
    assert quiet is not None and quiet.quiet and quiet.throttled == [0, 1]
    busy = host_load(series(3), cores=2)
    assert busy is not None and not busy.quiet and busy.contended == []
    assert busy.gpu_temp_c == 88.0 and busy.gpu_sm_clock_mhz == 1980.0
    assert "3 with the GPU throttled (SM clock 1980 MHz, up to 88 C)" in busy.described
    both = series(2)  # two throttled repeats and one other contended: three of twenty
    both["host_other_cpu_own_s"][5] = 0.1
    mixed = host_load(both, cores=2)
    assert mixed is not None and mixed.contended == [5] and mixed.throttled == [0, 1]
    assert not mixed.quiet
    cpu_only = host_load({"total_time_s": [0.1], "host_other_cpu_own_s": [0.0]}, cores=2)
    assert cpu_only is not None and cpu_only.gpu_sm_clock_mhz is None
    assert "GPU" not in cpu_only.described


def test_without_nvml_a_gpu_job_records_no_gpu_readings(caplog: pytest.LogCaptureFixture) -> None:
    """Here (no NVIDIA driver library) the probe is left out and the log says why; a
    job not on the GPU never asks."""
    assert gpu_probe("cpu") == []
    assert gpu_probe("cuda") == []
    assert "the GPU's clocks and throttling are not recorded: NVML is unavailable" in caplog.text


def test_the_zygote_names_nvidia_device_files_it_has_open(tmp_path: Path) -> None:
    """The CUDA driver's first call opens /dev/nvidia*: the zygote's check lists them
    from its open files (here a folder laid out as /proc/self/fd is, since this host
    has no such device), and on this process finds none."""
    fds = tmp_path / "fd"
    fds.mkdir()
    for fd, target in {"3": "/dev/nvidiactl", "4": "/dev/nvidia0", "5": "/dev/null"}.items():
        (fds / fd).symlink_to(target)
    assert nvidia_files(str(fds)) == ["/dev/nvidia0", "/dev/nvidiactl"]
    assert nvidia_files() == []


_CUDA_INITIALIZED = """
import torch
from benchflow.runner.zygote import ZygoteError, pristine
threads = pristine(64)['threads']
torch.cuda.is_initialized = lambda: True
try:
    pristine(64)
except ZygoteError as exc:
    print(exc)
"""


def test_a_zygote_with_cuda_initialized_refuses_to_fork(early_sweeps: EarlySweeps) -> None:
    """The zygote's CUDA check fires. A mock: with no GPU here CUDA cannot be
    initialized, so torch.cuda.is_initialized is made to say it was; the gpu lane
    initializes it for real (tests/test_gpu.py)."""
    out = early_sweeps.result("gpus")["cuda_initialized"]
    assert out.stdout.strip() == "not forking from this zygote (cuda_initialized: True)", out


# Planted in a zygote (sitecustomize): torch.cuda.is_available records what answers it at
# each call; importing the job's modules starts a thread.
_PLANTED = """
import importlib.abc, os, sys, threading, time

class Planted(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch._inductor.runtime.benchmarking":  # torch.cuda is imported by then
            cuda, ask = sys.modules["torch.cuda"], sys.modules["torch.cuda"].is_available
            def is_available():
                with open(os.environ["ASKED"], "a") as f:
                    f.write(f"{ask.__module__}.{ask.__name__}\\n")
                return ask()
            cuda.is_available = is_available
        if name == "benchflow.harness.child":
            threading.Thread(target=time.sleep, args=(300,), daemon=True).start()
        return None

sys.meta_path.insert(0, Planted())
"""


_POOL_TWICE = """
import logging, time
from benchflow.core.job import Warm
from benchflow.runner.pool import Pool
logging.basicConfig(level=logging.WARNING)
pool = Pool()
print("started:", pool.get(Warm("inductor"), {"env": {}}, 300))  # None: spawned
t = time.monotonic()
again = pool.get(Warm("inductor"), {"env": {}}, 300)
print(f"again: {again} in {time.monotonic() - t:.2f} s: {pool._failed[Warm('inductor')]}")
"""


def test_a_zygote_answers_cuda_without_the_driver_and_says_once_why_it_will_not_fork(
    early_sweeps: EarlySweeps,
) -> None:
    """A real Inductor zygote. Importing Inductor asks torch.cuda.is_available(), whose
    default answer initializes the driver on a GPU host, and whose NVML answer leaves a
    thread of the driver's (every job was spawned on the H200): each call the preload
    makes is answered by the driver's files (core/machine.cuda_present). A zygote that will not fork
    (a thread planted after torch's import) says why, so the warning names it and the
    preload that started it (on the H200 it read "the zygote exited", then "threads:
    2"), and its pool does not start it again (three
    tries a job there, 6 s each). In a process of its own: what it plants must not reach
    the suite's other sweeps."""
    out, asked = early_sweeps.result("gpus")["nvml"]
    assert "started: None" in out.stdout, (out.stdout, out.stderr[-2000:])
    # the thread by its name, and the preload step that started it
    planted = r"'Thread-\d+ \(sleep\)' from benchflow\.harness\.child\.preload\(\)"
    refusal = rf"not forking from this zygote \(threads: \d+ \({planted}\)\)"
    assert re.search(rf"no imported warm process inductor \({refusal}\)", out.stderr), out.stderr
    (again,) = re.findall(rf"again: None in ([\d.]+) s: {refusal}", out.stdout)
    assert float(again) < 0.5  # no second zygote started
    calls = asked.read_text().split()
    # and no second one imported Inductor
    assert calls and set(calls) == {"benchflow.core.machine.cuda_present"}, calls


_POOL_STOPPED = """
import time, psutil
from torch._inductor.async_compile import AsyncCompile
from benchflow.backends.inductor import stop_compile_workers
print("none yet:", stop_compile_workers())
AsyncCompile.process_pool()  # as Triton's first compile on CUDA starts it
AsyncCompile.wakeup()  # and its workers
deadline = time.monotonic() + 60
while len(psutil.Process().children(recursive=True)) < 3 and time.monotonic() < deadline:
    time.sleep(0.05)
print("running:", len(psutil.Process().children(recursive=True)))
print("stopped in:", stop_compile_workers())
print("left:", len(psutil.Process().children(recursive=True)))
print("again:", stop_compile_workers())
"""


@early("gpus")
def _zygote_checks(root: Path) -> dict[str, Any]:
    """The three checks below, each in a process of its own, from the first test on."""
    (root / "sitecustomize.py").write_text(_PLANTED)
    asked = root / "asked"
    nvml = {"PYTHONPATH": f"{root}:{REPO / 'src'}", "ASKED": str(asked)}
    return {
        "cuda_initialized": python_c(_CUDA_INITIALIZED, timeout=120),
        "nvml": (python_c(_POOL_TWICE, env=nvml, timeout=180), asked),
        "pool_stopped": python_c(
            _POOL_STOPPED, env={"TORCHINDUCTOR_COMPILE_THREADS": "2"}, timeout=120
        ),
    }


def test_inductor_s_compile_workers_are_stopped_before_the_timed_repeats(
    early_sweeps: EarlySweeps,
) -> None:
    """On CUDA Inductor compiles Triton kernels in a pool of processes, started at a
    job's first compile; on the H200 every Inductor job's timed repeats had about a
    core of other CPU on its cores beside it, and none without the pool. The job's
    child stops it after the warm-up (measure's before_timed, tested in
    test_steady_state): here a real pool (a sidecar and 2 workers, as on 2 cores), which
    a CPU compile does not start, is started as Triton's first compile does, and
    stopped with every process of it; with none running there is nothing to stop."""
    out = early_sweeps.result("gpus")["pool_stopped"]
    said = dict(line.split(": ", 1) for line in out.stdout.splitlines() if ": " in line)
    assert said.get("none yet") == "None" and said.get("again") == "None", out
    assert int(said["running"]) >= 3, out  # the sidecar and its 2 workers
    assert float(said["stopped in"]) > 0 and said["left"] == "0", out


def test_the_gpu_wheels_are_the_lock_s_versions() -> None:
    """`make gpu-wheels` (docs/gpu.md) fetches each of GPU_PACKAGES, and hydra's parser
    runtime, at the version the lock pins: each is pinned there (a package renamed or
    dropped from benchflow's dependencies breaks this), and the target is wired to
    download them for the GPU machine's Python without syncing .venv; `make test-gpu`
    finds benchflow from any folder."""
    make = (REPO / "Makefile").read_text()
    (line,) = [x for x in make.splitlines() if x.startswith("GPU_PACKAGES :=")]
    wanted = [*line.split(":=")[1].split(), "antlr4-python3-runtime"]
    export = [str(REPO / ".uv" / "bin" / "uv"), "export", "--no-hashes", "--format"]
    pins = subprocess.run(
        [*export, "requirements-txt", "--all-extras", "--no-emit-project"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    for name in wanted:
        assert f"\n{name}==" in pins, name
    dry = subprocess.run(
        ["make", "-n", "gpu-wheels"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert dry.returncode == 0, dry.stderr
    assert "download -q --no-deps --only-binary=:all: --python-version 3.12" in dry.stdout
    assert "-r .whl/requirements.txt" in dry.stdout and "wheel -q --no-deps -w .whl" in dry.stdout
    assert " sync " not in dry.stdout, dry.stdout  # .venv left as it is, its extras too
    # The lane's sweeps run in folders of their own: a relative `src` on PYTHONPATH
    # found no benchflow there (the first call on the H200 stopped so)
    lane = subprocess.run(
        ["make", "-n", "test-gpu"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    (run,) = [x for x in lane.stdout.splitlines() if "pytest" in x]
    assert f"PYTHONPATH={REPO / 'src'}:" in run, run
