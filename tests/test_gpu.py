"""The `gpu` lane: benchflow on a real CUDA GPU (`make test-gpu`, docs/gpu.md). Every
test here is marked `gpu` and skips, saying why, where torch sees no CUDA GPU; what
of the GPU work runs without one is tests/test_gpus.py's.

One sweep (module-scoped) runs the built-in models forked from the zygotes onto the
GPU; the tests read its rows. MLflow is off: the GPU machine carries no MLflow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import CliResult, run_cli

pytestmark = pytest.mark.gpu

QUICK = ["repeat=3", "mlflow.enabled=false", "accelerator=cuda", "model.size=small"]
# The GPU machine's cores for a job that runs alone (the suite's one core a job is for
# 2-core CI hosts: Inductor's compile on one core took 5 s of a small model's job)
ALONE = "cpus_per_job=8"


@pytest.fixture(scope="module")
def on_gpu(tmp_path_factory: pytest.TempPathFactory) -> CliResult:
    cwd = tmp_path_factory.mktemp("gpu")
    args = ["-m", "model=llama,resnet", "dynamo=none,inductor", "verify=true", ALONE, *QUICK]
    got = run_cli(args, cwd)
    assert got.returncode == 0, got.stderr[-3000:]
    return got


def _rows(result: CliResult) -> dict[str, dict[str, Any]]:
    return {r["job"]["name"]: r for r in result.rows()}


def test_a_zygote_that_touched_cuda_refuses_to_fork() -> None:
    """The zygote's check, for real: asking torch whether CUDA is available opens the
    driver (its device files), initializing CUDA makes a context; each is named."""
    code = (
        "import torch\n"
        "from benchflow.runner.zygote import ZygoteError, pristine\n"
        "threads = pristine(64)['threads']\n"
        "for touch in (torch.cuda.is_available, torch.cuda.init):\n"
        "    touch()\n"
        "    try:\n"
        "        pristine(64)\n"
        "    except ZygoteError as exc:\n"
        "        print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    driver, context = out.stdout.strip().splitlines()
    assert "nvidia_files: ['/dev/nvidia" in driver, out
    assert "cuda_initialized: True" in context, out


def test_forked_jobs_run_on_the_gpu(on_gpu: CliResult) -> None:
    """Each job forked from a zygote that never touched CUDA, ran on its GPU slot, and
    recorded the device allocator's peak, the GPU's clocks, and a passing check
    against eager. Each Inductor job stopped the compile workers its first compile
    started before its timed repeats (8 cores: 8 workers); an eager job had none."""
    rows = _rows(on_gpu)
    assert len(rows) == 4, list(rows)
    for name, row in rows.items():
        assert row["status"] == "ok", (name, row.get("error"))
        assert row["timing"]["launch"] == "fork", name
        assert row["job"]["gpu"] == "0", name  # one GPU: CUDA_VISIBLE_DEVICES=0
        assert min(row["metrics"]["peak_device_memory_bytes"]) > 0, name  # each repeat's
        host = row["timing"]["host"]
        assert host["gpu_sm_clock_mhz"] > 0 and host["gpu_temp_c"] > 0, (name, host)
        assert row["provenance"]["hardware"]["gpu"]["name"], name
        stopped = row["timing"]["compile_workers_stopped_s"]
        assert (stopped is not None) == ("inductor" in name), (name, stopped)
    assert rows["llama·inductor·eval·cuda"]["verification_code"] == "PASS"
    assert rows["resnet·inductor·eval·cuda"]["verification_code"] == "PASS"


def test_two_jobs_never_share_the_gpu(tmp_path: Path) -> None:
    """Two jobs launched side by side (joblib, two CPU slots) on one GPU: the second
    waits for the GPU, so their processes' clocks never overlap."""
    got = run_cli(
        [
            "-m",
            "model=llama",
            "dynamo=none,inductor",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            "cpus_per_job=4",
            *QUICK,
        ],
        tmp_path,
    )
    assert got.returncode == 0, got.stderr[-3000:]
    spans = sorted(
        (r["job"]["started_at"], r["job"]["started_at"] + r["job"]["wall_time_s"])
        for r in got.rows()
    )
    assert len(spans) == 2
    assert spans[0][1] <= spans[1][0], spans


def test_the_profile_lists_cuda_kernels_and_their_gaps(tmp_path: Path) -> None:
    got = run_cli(
        ["-m", "model=llama", "dynamo=inductor", "profile=torch", ALONE, *QUICK], tmp_path
    )
    assert got.returncode == 0, got.stderr[-3000:]
    (row,) = got.rows()
    m = row["metrics"]
    assert m["profile.total_cuda_time_s"] > 0
    assert 0 <= m["profile.device_idle_gap_share"] < 1
    table = (Path(row["job"]["dir"]) / "profile" / "ops_0.txt").read_text()
    assert "Self CUDA" in table
