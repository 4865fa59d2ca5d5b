"""The CLI's edges: bad input exits non-zero before any work; --help stays light."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import (
    REPO,
    SEARCHPATH,
    SessionSweep,
    benchflow_args,
    interruptible,
    run_cli,
)

HEAVY = ("torch", "torch_xla", "mlflow")


def _imported_top_level(args: list[str], cwd: Path) -> set[str]:
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
    return mods


def test_help_and_cfg_job_do_not_import_heavy_modules(workdir: Path) -> None:
    for args in (["--help"], ["--cfg", "job"], ["model=dlrm", "dynamo=openxla", "--cfg", "job"]):
        mods = _imported_top_level(args, workdir)
        assert "hydra" in mods  # the measurement works
        assert not (set(HEAVY) & mods), f"{args} imported {set(HEAVY) & mods}"


def test_help_explains(workdir: Path) -> None:
    # Fast because light: the test above checks that --help imports no heavy module (a
    # wall-clock bound would measure the other tests' load, not the CLI).
    res = run_cli(["--help"], workdir)
    assert res.returncode == 0
    for text in (
        "dynamo: ",
        "openxla",
        "model: bert, dlrm, llama, resnet",
        "timeout_s",
        "Examples",
    ):
        assert text in res.stdout


def test_unknown_model_lists_choices_and_runs_nothing(workdir: Path) -> None:
    res = run_cli(["-m", "model=llama,nope"], workdir)
    assert res.returncode != 0
    err = res.stderr
    assert "nope" in err and "llama" in err and "dlrm" in err
    assert not list(workdir.glob("multirun/*/*/0/result.json")), "a job ran before the error"


def test_single_run_invalid_combination_exits_2_naming_both_keys(workdir: Path) -> None:
    res = run_cli(["dynamo=inductor", "xla=PJRT"], workdir)
    assert res.returncode == 2
    assert "dynamo=inductor" in res.stderr and "xla=PJRT" in res.stderr
    assert not (workdir / "mlflow.db").exists()


def test_bad_value_anywhere_in_a_sweep_stops_it_before_any_job(workdir: Path) -> None:
    res = run_cli(["-m", "model=llama,dlrm", "repeat=3,0"], workdir)
    assert res.returncode == 2
    assert "repeat=0" in res.stderr and ">= 1" in res.stderr
    assert "nothing was run" in res.stderr
    assert not list(workdir.glob("multirun/*/*/*/result.json"))


def test_wrong_type_names_key_and_value(workdir: Path) -> None:
    res = run_cli(["repeat=abc"], workdir)
    assert res.returncode != 0
    assert "repeat" in res.stderr and "abc" in res.stderr


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


def test_ctrl_c_marks_the_running_job_interrupted_and_keeps_earlier_rows(workdir: Path) -> None:
    import json
    import os
    import signal

    import psutil

    args = ["-m", SEARCHPATH, "model=fault_raise,fault_hang,matmul_chain"]
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "benchflow"),
            *benchflow_args([*args, "mlflow.enabled=false", "timeout_s=300"]),
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    # Wait until the hang job's child is running (its job.json exists), then interrupt.
    deadline = time.monotonic() + 120
    while not list(workdir.glob("multirun/*/*/1/job.json")):
        assert time.monotonic() < deadline and proc.poll() is None, "the sweep did not reach job 1"
        time.sleep(0.2)
    time.sleep(3)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    (results,) = workdir.glob("multirun/*/*/results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["failed", "interrupted"]  # job 2 never started
    time.sleep(0.5)
    leftovers = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if "benchflow.harness" in " ".join(p.info["cmdline"] or [])
        and str(workdir) in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []
