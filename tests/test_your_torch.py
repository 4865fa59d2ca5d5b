"""benchflow on the user's own torch (docs/your-torch.md), the real thing (-m full: torch
2.11.0 from the registry, about 3 GB once in uv's cache): benchflow's wheel installed
into an environment that holds torch 2.11.0 and no torch_xla keeps that torch and runs
there, XLA backends being invalid pairs that name torch_xla; and that environment's
interpreter as a toolchain beside benchflow's own, in one sweep and one report. The
default suite's checks of the same paths use an interpreter of the test's own making
(tests/test_toolchains.py) and the installed wheel (tests/test_your_code.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import REPO, read_rows, run_cli
from tests.early import environ

TORCH = "2.11.0"
UV = str(REPO / ".uv" / "bin" / "uv")


def _torch_of(python: Path) -> str:
    ask = "import torch; print(torch.__version__)"
    done = subprocess.run([str(python), "-c", ask], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.full
def test_benchflow_installs_beside_torch_2_11_and_runs_it(tmp_path: Path) -> None:
    venv, dist = tmp_path / "venv", tmp_path / "dist"
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    subprocess.run([UV, "venv", "--quiet", "--python", str(base), str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([UV, "pip", "install", "--python", str(python), f"torch=={TORCH}"], check=True)
    before = _torch_of(python)
    assert before.startswith(TORCH), before
    built = subprocess.run([UV, "build", "--wheel", "--out-dir", str(dist), str(REPO)], check=True)
    assert built.returncode == 0
    assert [p.name for p in dist.glob("*.whl")] == ["benchflow-0.1.0-py3-none-any.whl"]
    wheel = f"{dist}/benchflow-0.1.0-py3-none-any.whl"  # as docs/your-torch.md names it
    subprocess.run([UV, "pip", "install", "--python", f"{venv}/bin/python", wheel], check=True)
    assert _torch_of(python) == before  # the user's torch, kept

    # from an empty folder, the environment's own benchflow
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in environ().items() if k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    sweep = ["benchflow", "-m", "model=llama,dlrm", "dynamo=none,inductor,openxla"]
    small = ["model.size=tiny", "repeat=3"]
    done = subprocess.run([*sweep, *small], cwd=empty, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = (empty / "multirun").glob("*/*")
    rows = read_rows(folder)
    ok = [r for r in rows if r["status"] == "ok"]
    invalid = [r for r in rows if r["status"] == "invalid"]
    assert len(ok) == 4 and len(invalid) == 2, [(r["job"]["name"], r["error"]) for r in rows]
    assert {r["provenance"]["versions"]["torch"] for r in ok} == {TORCH}
    assert all(r["provenance"]["versions"]["torch_git"] for r in ok)
    assert all(r["backend"] == "openxla" for r in invalid)
    assert all("needs torch_xla" in r["error"] and f"torch: {TORCH}" in r["error"] for r in invalid)

    # that interpreter as a toolchain beside benchflow's own, from the checkout
    both = [
        "-m",
        f"toolchain.python=null,{venv}/bin/python",
        "model=llama,dlrm",
        "dynamo=none,inductor",
    ]
    got = run_cli([*both, *small], tmp_path)
    assert got.returncode == 0, got.stderr[-3000:]
    (folder,) = (tmp_path / "multirun").glob("*/*")
    rows = read_rows(folder)
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    names = {r["config"].get("toolchain.name", "project") for r in rows}
    (mine,) = names - {"project"}
    assert mine.startswith(f"torch-{TORCH}")
    day, clock = folder.parent.name, folder.name
    got = run_cli(
        ["report", f"multirun/{day}/{clock}", "--baseline-toolchain", "project"], tmp_path
    )
    assert got.returncode == 0, got.stderr[-3000:]
    assert f"toolchain={mine}" in got.stdout
