"""benchflow on other people's code (docs/your-code.md): the wheel installed and run from an
empty folder, a user's config folder with their own model (a factory in their own file)
and experiment, and the factory's contract. Every run here starts outside the checkout."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import REPO, CliResult, EarlySweeps, early, read_rows, run_cli
from tests.early import environ, nice_prefix

# A user's repository: a model file beside their command, and a folder of their config.
MODELS_PY = '''
import torch
from torch import nn

LOSS_CALLS = []


def build(batch_size: int = 6, size: str = "small"):
    """A small MLP; `size` is benchflow's model.size."""
    width = {"tiny": 32, "small": 64}[size]
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 4))
    return module, (torch.randn(batch_size, 16),)


def build_with_loss(batch_size: int = 4, test: str = "eval"):
    module = nn.Linear(8, 3)
    inputs = {"input": torch.randn(batch_size, 8)}

    def loss(outputs):
        LOSS_CALLS.append(test)
        return outputs.pow(2).mean()

    return module, inputs, loss


def no_batch():
    return nn.Linear(8, 2), torch.randn(5, 8)


def wrong():
    return "not a module"
'''
MODEL_YAML = """\
# A small MLP from this repository's mymodels.py.
name: mlp
target: mymodels:build
"""
EXPERIMENT_YAML = """\
# @package _global_
# Our nightly check: the MLP on three backends, verified.
#   benchflow --config-dir bench -m model=mlp experiment=nightly
hydra:
  sweeper:
    params:
      dynamo: none,inductor,openxla
model:
  size: tiny
repeat: 2
iterations_per_run: 3
warmup: 1
verify: true
"""


def user_repo(root: Path) -> Path:
    """A user's repository: mymodels.py and bench/{model,experiment}/."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "mymodels.py").write_text(MODELS_PY)
    (root / "bench" / "model").mkdir(parents=True)
    (root / "bench" / "experiment").mkdir()
    (root / "bench" / "model" / "mlp.yaml").write_text(MODEL_YAML)
    (root / "bench" / "experiment" / "nightly.yaml").write_text(EXPERIMENT_YAML)
    return root


# The README's one-command example: the same file, no config folder.
ONE_FILE = """\
import torch
from torch import nn


def build(batch_size: int = 6):
    module = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    return module, (torch.randn(batch_size, 16),)
"""
ONE_COMMAND = ["model=custom", "model.target=mlp:build", "model.name=mlp", "verify=true"]
USER_SWEEP = ["--config-dir", "bench", "-m", "model=mlp", "experiment=nightly", "cpus_per_job=1"]


def readme_command() -> str:
    """The README's own-model command, as the page shows it (tests/test_docs.py reads it)."""
    from tests.test_docs import commands

    text = (REPO / "README.md").read_text()
    (cmd,) = [c for c in commands(text, "README.md") if "model=custom" in c.line]
    return cmd.line


def run_readme_command(folder: Path) -> CliResult:
    """The README's command exactly as written, in a fresh shell (no venv activated, no
    .venv/bin on PATH) from a folder laid out as the checkout: its .venv (a link to the
    checkout's) and mlp.py, so that its runs/ and mlflow.db land in the test's folder.
    Its CPU slots are its own (a lock folder of its own): it must not wait for the
    session's one-core jobs to leave both cores free; its times are not read."""
    from tests.test_docs import fresh_env

    line = readme_command()
    assert line.split()[1:] == ONE_COMMAND, line  # the arguments test_docs.py finds here
    folder.mkdir()
    (folder / ".venv").symlink_to(REPO / ".venv")
    (folder / "mlp.py").write_text(ONE_FILE)
    env = fresh_env(BENCHFLOW_CPU_LOCK_DIR=str(folder / "cpu-locks"), PYTHONUNBUFFERED="1")
    shell = [*nice_prefix(), "bash", "--noprofile", "--norc", "-c", line]
    proc = subprocess.run(shell, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
    return CliResult(proc.returncode, proc.stdout, proc.stderr, folder)


@early("user_config")
def _user_config(root: Path) -> dict[str, Any]:
    repo = user_repo(root / "their_repo")
    sweep = run_cli(USER_SWEEP, repo)
    one = run_readme_command(root / "one_file")
    listing = run_cli(["models", "--config-dir", "bench"], repo)
    helped = run_cli(["--config-dir", "bench", "--help"], repo)
    return {"sweep": sweep, "models": listing, "help": helped, "one": one}


def test_a_users_model_and_experiment_run_on_three_backends_verified(
    early_sweeps: EarlySweeps,
) -> None:
    res = early_sweeps.result("user_config")["sweep"]
    assert res.returncode == 0, res.stderr[-3000:]
    assert REPO not in res.cwd.parents  # a folder of the user's, not the checkout
    rows = {r["backend"]: r for r in res.rows()}
    assert sorted(rows) == ["eager", "inductor", "openxla"], sorted(rows)
    for backend, row in rows.items():
        assert row["status"] == "ok", (backend, row["error"])
        assert row["verification_code"] == "PASS", (backend, row["verification_detail"])
        assert row["model"]["model_name"] == "mlp" and row["model"]["model_source"] == "factory"
        assert row["config"]["model.target"] == "mymodels:build"
        # the experiment file's settings, and the factory's own default batch size
        assert row["repeat"] == 2 and row["iterations_per_run"] == 3
        assert row["config"]["model.size"] == "tiny"
        assert row["experiment"]["batch_size"] == 6
        assert row["experiment"]["batch_size_source"] == "model"
        assert len(row["metrics"]["per_iter_time_s"]) == 2
    # results and the tracking store land in the user's folder
    assert (res.cwd / "mlflow.db").is_file()


def test_the_one_file_example_runs(early_sweeps: EarlySweeps) -> None:
    """The README's command, as written, from a fresh shell: one job, verified."""
    assert readme_command() == " ".join([".venv/bin/benchflow", *ONE_COMMAND])
    one = early_sweeps.result("user_config")["one"]
    assert one.returncode == 0, one.stderr[-3000:]
    (result,) = (one.cwd / "runs").glob("*/*/result.json")
    row = json.loads(result.read_text())
    assert row["status"] == "ok" and row["verification_code"] == "PASS", row["error"]
    assert row["model"]["model_name"] == "mlp" and row["experiment"]["batch_size"] == 6


def test_models_and_help_list_what_the_user_added(early_sweeps: EarlySweeps) -> None:
    found = early_sweeps.result("user_config")
    listing, helped = found["models"], found["help"]
    assert listing.returncode == 0, listing.stderr
    (line,) = [ln for ln in listing.stdout.splitlines() if ln.startswith("mlp ")]
    assert "factory" in line and "bench/model/mlp.yaml" in line and "A small MLP" in line
    assert helped.returncode == 0, helped.stderr
    assert "model: bert, custom, dlrm, llama, mlp, resnet" in helped.stdout
    assert "experiment: backends_smoke, headline, hud, nightly" in helped.stdout


# --- the wheel, installed into a fresh environment, run from an empty folder ----------


def _installed_env(root: Path) -> Path:
    """A venv with the built wheel installed without dependencies; the project's own
    installed packages (torch, torch_xla, hydra, mlflow...) reached through a .pth line.
    The line adds their folder only, so the checkout's editable benchflow (a .pth there)
    is not seen: `benchflow` is the wheel's."""
    uv = REPO / ".uv" / "bin" / "uv"
    wheels = root / "dist"
    build = subprocess.run(
        [str(uv), "build", "--wheel", "--out-dir", str(wheels), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("benchflow-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(uv), "pip", "install", "--no-deps", "--python", str(python), str(wheel)],
        capture_output=True,
        check=True,
        timeout=120,
    )
    return venv


# docs/your-code.md's command (eager: the package, not a backend, is what the wheel changes;
# Inductor's jobs run in every other sweep); cpus_per_job=1 lets it run beside the others.
WHEEL_SWEEP = ["-m", "model=llama", "model.size=tiny", "cpus_per_job=1"]


@early("wheel")
def _wheel(root: Path) -> dict[str, Any]:
    venv = _installed_env(root)
    empty = root / "elsewhere"
    empty.mkdir()
    env = {k: v for k, v in environ().items() if k != "PYTHONPATH"}  # nothing of the checkout
    script = str(venv / "bin" / "benchflow")

    def run(*args: str, cwd: Path = empty) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
        )

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import benchflow; print(benchflow.__file__)"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
    ).stdout.strip()
    helped = run(*["--help"])
    started = time.monotonic()
    sweep = run(*WHEEL_SWEEP)
    sweep_s = time.monotonic() - started
    # An existing interpreter as a toolchain, from the installed wheel: its jobs reach
    # benchflow's harness through a folder of their own (site-packages holds the rest).
    env["BENCHFLOW_CACHE_DIR"] = str(root / "cache")
    (root / "own").mkdir()
    own = [f"toolchain.python={venv / 'bin' / 'python'}", "model=llama", "dynamo=none"]
    toolchain = run("-m", *own, "model.size=tiny", "repeat=3", "cpus_per_job=1", cwd=root / "own")
    return {
        "where": where,
        "venv": venv,
        "cwd": empty,
        "help": helped,
        "sweep": sweep,
        "toolchain": toolchain,
        "own": root / "own",
        "cache": root / "cache",
        "wheel": next((root / "dist").glob("*.whl")),
        "sweep_s": sweep_s,
    }


def test_the_installed_wheel_runs_a_sweep_from_an_empty_folder(early_sweeps: EarlySweeps) -> None:
    got = early_sweeps.result("wheel")
    assert got["where"].startswith(str(got["venv"])), got["where"]  # the wheel's benchflow
    helped = got["help"]
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert "model: bert, custom, dlrm, llama, resnet" in helped.stdout
    sweep = got["sweep"]
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    (folder,) = (got["cwd"] / "multirun").glob("*/*")
    rows = {r["backend"]: r for r in read_rows(folder)}
    assert sorted(rows) == ["eager"]
    assert all(r["status"] == "ok" for r in rows.values()), [r["error"] for r in rows.values()]
    assert (got["cwd"] / "mlflow.db").is_file()
    print(f"wheel {got['wheel'].stat().st_size} bytes; first sweep {got['sweep_s']:.1f} s")


def test_the_installed_wheel_runs_jobs_in_an_existing_interpreter(
    early_sweeps: EarlySweeps,
) -> None:
    """toolchain.python from an installed benchflow (a toolchain job was refused there:
    "benchflow must run from a checkout"): the job ran in that interpreter, with the
    harness from a folder that holds only the wheel's benchflow package."""
    got = early_sweeps.result("wheel")
    done = got["toolchain"]
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = (got["own"] / "multirun").glob("*/*")
    (row,) = read_rows(folder)
    assert row["status"] == "ok", row["error"]
    assert row["config"]["toolchain.python"] == str(got["venv"] / "bin" / "python")
    assert row["config"]["toolchain.name"].startswith("torch-2.9.0")
    (harness,) = (got["cache"] / "harness").iterdir()
    assert [p.name for p in harness.iterdir()] == ["benchflow"]
    assert (harness / "benchflow").resolve() == Path(got["where"]).parent.resolve()


def test_the_wheel_carries_its_license_type_hints_and_one_version(
    early_sweeps: EarlySweeps,
) -> None:
    """The wheel's version is __version__ (its one source), and it ships LICENSE and
    py.typed (PEP 561); its metadata names the license and the project's links."""
    import email.parser
    import zipfile

    import benchflow

    wheel = early_sweeps.result("wheel")["wheel"]
    assert wheel.name.startswith(f"benchflow-{benchflow.__version__}-")
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        info = f"benchflow-{benchflow.__version__}.dist-info"
        meta = email.parser.Parser().parsestr(whl.read(f"{info}/METADATA").decode())
        licensed = whl.read(f"{info}/licenses/LICENSE").decode()
    assert "benchflow/py.typed" in names
    assert licensed == (REPO / "LICENSE").read_text()
    assert meta["Version"] == benchflow.__version__
    assert meta["License-Expression"] == "BSD-3-Clause"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert sorted(urls) == ["Changelog", "Homepage", "Issues", "Repository"]


# --- the factory's contract, in process ----------------------------------------------


@pytest.fixture
def their_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    user_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    sys.modules.pop("mymodels", None)
    return importlib.import_module("mymodels")


def _factory(target: str, test: str = "eval", batch_size: int | None = None) -> Any:
    import torch

    from benchflow.models.factory import build

    return build(target, "mine", test, batch_size, "small").place(
        torch.device("cpu"), torch.float32
    )


def test_a_factory_gets_the_batch_size_and_its_loss_trains_the_module_step(
    their_models: Any,
) -> None:
    import torch

    from benchflow.models.step import TimedStep

    model = _factory("mymodels:build_with_loss", test="train", batch_size=3)
    assert model.batch_size == 3 and model.example_inputs["input"].shape == (3, 8)
    before = model.module.weight.detach().clone()
    step = TimedStep(model, name="mine", kind="module", test="train", prepare=None)
    step()
    assert their_models.LOSS_CALLS == ["train"]  # its own loss, not the default reduction
    assert not torch.equal(before, model.module.weight.detach())  # the optimizer stepped
    own = TimedStep(model, name="mine", kind="torchbench", test="train", prepare=None)
    own()
    assert their_models.LOSS_CALLS == ["train", "train"]


def test_a_factory_without_a_batch_size_parameter(their_models: Any) -> None:
    model = _factory("mymodels:no_batch")
    assert model.batch_size == 5  # its input's leading dimension
    with pytest.raises(ValueError, match=r"batch_size=7 was asked for.*no batch_size parameter"):
        _factory("mymodels:no_batch", batch_size=7)


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("mymodels:wrong", r"returned str; allowed: \(nn.Module, example_inputs\)"),
        ("mymodels:nothere", r"has no function 'nothere'; allowed: .*build, build_with_loss"),
    ],
)
def test_a_factory_that_breaks_its_contract_says_what_is_allowed(
    their_models: Any, target: str, says: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=says):
        _factory(target)


def test_the_docs_example_is_the_tested_one() -> None:
    """docs/your-code.md and the README show this file's user repository, not a copy
    that could drift."""
    page = (REPO / "docs" / "your-code.md").read_text()
    for text in (MODEL_YAML, EXPERIMENT_YAML, ONE_FILE):
        assert text in page, text
    assert ONE_FILE in (REPO / "README.md").read_text()
