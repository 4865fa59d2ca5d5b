"""Shared helpers: run the real CLI in a subprocess, inside a scratch directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
TEST_CONF = Path(__file__).resolve().parent / "conf"
# Test-only models (faults, matmul_chain) live in tests/conf/model.
SEARCHPATH = f"hydra.searchpath=[file://{TEST_CONF}]"


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


def run_cli(args: list[str], cwd: Path, timeout: float = 900, **env: str) -> CliResult:
    """`python -m benchflow ARGS` in `cwd` (so multirun/ and mlflow.db land there)."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
    proc = subprocess.run(
        [sys.executable, "-m", "benchflow", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr, cwd)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


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
