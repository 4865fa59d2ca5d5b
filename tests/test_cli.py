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

import pytest
from tests.conftest import (
    REPO,
    SEARCHPATH,
    CliResult,
    EarlySweeps,
    SessionSweep,
    early,
    left_behind,
    run_cli,
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
            for text in ("dynamo: ", "openxla", models, "timeout_s", "docs/usage.md"):
                assert text in out, text
            assert "Examples" in out
            _one_screen(out)
        else:
            _the_job_as_planned(out, args)


@early("cfg_job")
def _cfg_jobs(root: Path) -> tuple[CliResult, CliResult]:
    """`--cfg job` of a sweep and of an experiment's grid."""
    sweep = ["--cfg", "job", "-m", "model=llama,dlrm", "dynamo=inductor,openxla", "xla=PJRT"]
    grid = ["--cfg", "job", "-m", "experiment=hud", "model=llama"]
    return run_cli(sweep, root), run_cli(grid, root)


def test_cfg_job_of_a_sweep_shows_each_job_as_planned(early_sweeps: EarlySweeps) -> None:
    """-m with --cfg job: each job of the sweep as it would run (Hydra's own --cfg job
    refuses a sweep's values and says to add --multirun), an invalid pair as such."""
    import yaml

    res, grid = early_sweeps.result("cfg_job")
    assert res.returncode == 0, res.stderr[-2000:]
    docs = res.stdout.split("\n---\n")
    assert len(docs) == 4
    invalid = [d for d in docs if "invalid combination" in d]
    assert [d.split(" ", 2)[1] for d in invalid] == ["llama·inductor·eval", "dlrm·inductor·eval"]
    shown = [yaml.safe_load(d) for d in docs if d not in invalid]
    assert [(j["model"]["name"], j["dynamo"]["name"]) for j in shown] == [
        ("llama", "openxla"),
        ("dlrm", "openxla"),
    ]
    assert all(j["dtype"] == "bfloat16" and j["xla"]["name"] == "PJRT" for j in shown)
    # an experiment's grid too, the command line's values in place of its own
    assert grid.returncode == 0, grid.stderr[-2000:]
    names = [d.split(",", 1)[0] for d in grid.stdout.split("\n---\n")]
    configurations = ("", "[freezing]", "[cpp_wrapper]", "[dynamic_batch]")
    aot, eager = "# llama·aot_inductor·eval", "# llama·eager·eval"
    inductor = [f"# llama·inductor{s}·eval" for s in configurations]
    assert names == [
        *[eager] * 4,
        aot,
        eager,
        *inductor,
        aot,
        "# llama·inductor[max_autotune]·eval",
    ]
    assert not list(res.cwd.glob("multirun/*/*"))  # nothing ran


def _one_screen(out: str) -> None:
    """--help fits a screen: every group and its options, every command, one line per
    key; the suites' rule lists are `benchflow models`', not here."""
    from benchflow.cli import COMMANDS
    from benchflow.config.store import groups, options

    lines = out.splitlines()
    assert len(lines) <= 80, len(lines)
    for group in groups():
        (line,) = [ln for ln in lines if ln.startswith(f"{group}: ")]
        assert all(name in line for name in options(group)), line
    for command in COMMANDS:
        assert any(ln.split()[:1] == [command] for ln in lines), command
    assert "repeat=null" in out and "dont_change_batch_size" not in out and "skip:" not in out


def _the_job_as_planned(out: str, args: list[str]) -> None:
    """--cfg job shows the job resolved as it would run (dtype, batch size, the auto
    choices) and of the suite's rules only those naming its model."""
    import yaml

    from benchflow.suite.rules import listed

    assert len(out.splitlines()) <= 120, len(out.splitlines())
    shown = yaml.safe_load(out)
    model = shown["model"]["name"]
    assert model == ("dlrm" if "model=dlrm" in args else "llama")
    assert shown["dtype"] == "bfloat16"  # the suite's inference dtype (was null)
    # the model's own default batch size, read from its class without importing torch
    from benchflow.models.dlrm import Dlrm
    from benchflow.models.llama import Llama

    assert shown["batch_size"] == (Dlrm if model == "dlrm" else Llama).DEFAULT_EVAL_BSIZE
    assert shown["accelerator"]["name"] in ("cpu", "cuda")  # auto resolved
    assert shown["xla"]["name"] == ("PJRT" if "dynamo=openxla" in args else "none")
    rules = shown["suite"]["rules"]
    assert listed(rules, "skip.test.training", "llama") == (model == "llama")

    def names(node: object) -> set[str]:
        if isinstance(node, list):
            return set(node)
        if isinstance(node, dict):
            tables = {k for k, v in node.items() if not isinstance(v, (dict, list))}
            return tables.union(*(names(v) for v in node.values()))
        return set()

    assert names(rules) <= {model}, names(rules)


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
    # Its own CPU locks: what it checks does not depend on cores, and the session's
    # sweeps may hold both slots for minutes (it once waited past its deadline).
    locks = str(root / "cpu-locks")
    proc = start_cli(
        [*args, "mlflow.enabled=false", "timeout_s=300"], root, log, BENCHFLOW_CPU_LOCK_DIR=locks
    )
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


def test_a_launcher_of_benchflows_own_passes_the_config_file_check(tmp_path: Path) -> None:
    """benchflow's hydra/launcher options (ray_local, ray_cluster) set keys of Hydra's
    launcher schema, not benchflow's: the check of a chosen file's keys leaves them be
    (it once refused every one of them), and still refuses a file of benchflow's groups
    that sets a key the schema does not have."""
    from benchflow.cli.sweep import _check_yaml

    for launcher in ("ray_local", "ray_cluster"):
        _check_yaml([f"hydra/launcher={launcher}", "model=llama"])  # no SystemExit
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "odd.yaml").write_text("name: odd\nno_such_key: 1\n")
    with pytest.raises(SystemExit):
        _check_yaml(["--config-dir", str(tmp_path), "model=odd"])
