"""The CLI's edges: --help stays light, fail_fast, and Ctrl-C (bad input exits non-zero
before any work: test_bad_input.py, one case per kind)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import (
    REPO,
    SEARCHPATH,
    EarlySweeps,
    SessionSweep,
    early,
    left_behind,
    start_cli,
)

HEAVY = ("torch", "torch_xla", "mlflow")


def _imported_top_level(args: list[str], cwd: Path) -> tuple[set[str], str]:
    """The top-level modules `python -m benchflow ARGS` imported, and what it printed."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "benchflow", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    mods = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            mods.add(name.split(".")[0])
    return mods, proc.stdout


def test_help_and_cfg_job_do_not_import_heavy_modules(workdir: Path) -> None:
    """--help explains, and is fast because light: it imports no heavy module (a
    wall-clock bound would measure the other tests' load, not the CLI)."""
    for args in (["--help"], ["--cfg", "job"], ["model=dlrm", "dynamo=openxla", "--cfg", "job"]):
        mods, out = _imported_top_level(args, workdir)
        assert "hydra" in mods  # the measurement works
        assert not (set(HEAVY) & mods), f"{args} imported {set(HEAVY) & mods}"
        if args == ["--help"]:
            models = "model: bert, custom, dlrm, llama, resnet"
            for text in ("dynamo: ", "openxla", models, "timeout_s"):
                assert text in out, text
            assert "Examples" in out


def test_fail_fast_records_the_rest_as_skipped(cases_sweep: SessionSweep) -> None:
    """The session sweep's last cases: a failure with fail_fast=true, then a good job."""
    assert cases_sweep.case("ff_raise")["status"] == "failed"
    after = cases_sweep.case("ff_after")
    assert after["status"] == "skipped" and after["metrics"] == {}
    assert "fail_fast" in after["error"] and "fault_raise" in after["error"]
    # earlier failures (without fail_fast) did not stop it
    assert cases_sweep.case("good")["status"] == "ok"


def test_readme_documents_the_two_commands() -> None:
    readme = (REPO / "README.md").read_text()
    assert "make run" in readme and "make test" in readme


@early("ctrl_c")
def _interrupted_by_ctrl_c(root: Path) -> dict[str, Any]:
    """A sweep SIGINTed (Ctrl-C) while its second job (a hang) runs: what it left."""
    log = root / "stderr.log"
    args = ["-m", SEARCHPATH, "model=fault_raise,fault_hang,matmul_chain"]
    proc = start_cli([*args, "mlflow.enabled=false", "timeout_s=300"], root, log)
    # Wait until the hang job's child is running (its job.json exists), then interrupt.
    deadline = time.monotonic() + 300
    while not list(root.glob("multirun/*/*/1/job.json")):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            return {"code": None, "err": "the sweep did not reach job 1: " + log.read_text()}
        time.sleep(0.2)
    time.sleep(3)
    os.kill(proc.pid, signal.SIGINT)
    code = proc.wait(timeout=600)  # niced beside the sweeps
    results = list(root.glob("multirun/*/*/results.jsonl"))
    rows = [json.loads(line) for r in results for line in r.read_text().splitlines()]
    return {"code": code, "err": log.read_text(), "rows": rows, "leftovers": left_behind(root)}


def test_ctrl_c_marks_the_running_job_interrupted_and_keeps_earlier_rows(
    early_sweeps: EarlySweeps,
) -> None:
    got = early_sweeps.result("ctrl_c")
    assert got["code"] == 130, got["err"][-2000:]
    assert [r["status"] for r in got["rows"]] == ["failed", "interrupted"]  # job 2 never started
    assert got["leftovers"] == []
