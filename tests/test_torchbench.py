"""TorchBench loading, against tests/fixtures/torchbench: a checkout-shaped package
written for these tests, reproducing each quirk benchflow must survive."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import TORCHBENCH_FIXTURE, SessionSweep

from benchflow.config.errors import ConfigError
from benchflow.config.schema import BenchConfig, ModelConfig, SuiteConfig
from benchflow.models.torchbench_index import (
    TorchBenchNotFound,
    find_root,
    list_models,
    missing_packages,
    not_implemented,
)
from benchflow.sweep.plan import plan_config, resolve

FIXTURE = Path(__file__).parent / "fixtures" / "torchbench"
ROOT_ARG = f"suite.torchbench_root={FIXTURE}"


def test_index_reads_the_checkout_without_importing_it() -> None:
    assert find_root(str(FIXTURE)) == FIXTURE.resolve()
    assert "tb_mlp" in list_models(FIXTURE) and "tb_no_cpu" in list_models(FIXTURE)
    assert not_implemented(FIXTURE, "tb_no_cpu", "cpu", "eval")
    assert not_implemented(FIXTURE, "tb_no_cpu", "cuda", "eval") is None
    assert missing_packages(FIXTURE, "tb_needs_pkg") == ["benchflow_fixture_missing_pkg"]
    assert "torchbenchmark" not in sys.modules


def test_a_root_without_torchbench_is_an_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(TorchBenchNotFound, match=r"suite.torchbench_root=.*allowed"):
        find_root(str(tmp_path))
    cfg = BenchConfig(
        model=ModelConfig(name="llama", builtin="x:Y"),
        suite=SuiteConfig(torchbench_root=str(tmp_path)),
    )
    with pytest.raises(ConfigError, match="torchbenchmark/models"):
        resolve(cfg)


def test_source_auto_prefers_torchbench_only_for_its_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TORCHBENCH_ROOT", raising=False)
    suite = SuiteConfig(torchbench_root=str(FIXTURE))
    tb = resolve(BenchConfig(model=ModelConfig(name="tb_mlp"), suite=suite))
    assert tb.model.source == "torchbench" and tb.suite.torchbench_root == str(FIXTURE.resolve())
    own = resolve(
        BenchConfig(
            model=ModelConfig(name="llama", builtin="benchflow.models.llama:Llama"), suite=suite
        )
    )
    assert own.model.source == "builtin"  # the fixture has no llama
    with pytest.raises(ConfigError, match="no TorchBench was found"):
        resolve(BenchConfig(model=ModelConfig(name="tb_mlp", source="torchbench")))


def test_foreign_utils_module_is_dropped_before_import(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text("OTHER = 1\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import utils; assert utils.OTHER == 1\n"
        "from benchflow.models.torchbench import prepare_import\n"
        "from pathlib import Path; prepare_import(Path(sys.argv[2]))\n"
        "import torchbenchmark, utils; print(utils.MARKER)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), str(FIXTURE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "torchbench-fixture-utils"


TB_CASES = {
    ("tb_mlp", "eval"): "tb_mlp_eval",
    ("tb_mlp", "train"): "tb_mlp_train",
    ("tb_bare", "eval"): "tb_bare_eval",
    ("tb_train_returns_error", "train"): "tb_train_returns_error",
    ("tb_no_cpu", "eval"): "tb_no_cpu",
    ("tb_needs_pkg", "eval"): "tb_needs_pkg",
    ("tb_needs_download", "eval"): "tb_needs_download",
    ("tb_global_state", "eval"): "tb_global_state",
    ("llama", "eval"): "tb_after_global_state",
}


QuirkRows = dict[tuple[str, str], dict]


@pytest.fixture(scope="module")
def quirk_rows(cases_sweep: SessionSweep) -> dict[tuple[str, str], dict]:
    """The fixture's models, run as cases of the session sweep with $TORCHBENCH_ROOT set and
    a `utils.py` in the sweep's working directory; by (model, test)."""
    return {key: cases_sweep.case(name) for key, name in TB_CASES.items()}


def test_models_run_from_torchbench_with_their_own_steps(
    quirk_rows: QuirkRows,
) -> None:
    rows = quirk_rows
    for key in (("tb_mlp", "eval"), ("tb_mlp", "train"), ("tb_bare", "eval")):
        row = rows[key]
        assert row["status"] == "ok", row["error"]
        assert row["model"]["model_source"] == "torchbench"
    assert rows[("tb_mlp", "train")]["experiment"]["batch_size"] == 16  # the model's default
    assert rows[("tb_mlp", "eval")]["experiment"]["batch_size_source"] == "model"
    # The built-in llama still runs as built-in: the fixture has no llama.
    assert rows[("llama", "eval")]["model"]["model_source"] == "builtin"
    # A TorchBench row names the checkout it ran (here the fixture, inside this repository).
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=TORCHBENCH_FIXTURE, capture_output=True, text=True
    ).stdout.strip()
    assert rows[("tb_mlp", "eval")]["provenance"]["torchbench_sha"].split("-")[0] == head
    assert rows[("llama", "eval")]["provenance"]["torchbench_sha"] is None


def test_train_returning_an_error_is_skipped_not_a_fast_success(
    quirk_rows: QuirkRows,
) -> None:
    row = quirk_rows[("tb_train_returns_error", "train")]
    assert row["status"] == "skipped"
    assert "returned NotImplementedError" in row["error"]
    assert row["summary"] == {}


def test_metadata_not_implemented_is_a_note_and_the_model_runs(
    quirk_rows: QuirkRows,
) -> None:
    """TorchBench's own metadata.yaml `not_implemented` is no skip list of the references
    (the experiment runner and PyTorch's dynamo benchmarks do not read it on a CPU, and
    time some such models: phlippe_densenet eval): the job runs, the row says it."""
    row = quirk_rows[("tb_no_cpu", "eval")]
    assert row["status"] == "ok", row["error"]
    said = [n for n in row["job"]["notes"] if "metadata.yaml lists eval on cpu" in n]
    assert len(said) == 1 and "not_implemented; it runs all the same" in said[0]


def test_metadata_not_implemented_is_planned_as_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TORCHBENCH_ROOT", raising=False)
    for skip_lists in (True, False):
        suite = SuiteConfig(torchbench_root=str(FIXTURE), skip_lists=skip_lists)
        job = plan_config(BenchConfig(model=ModelConfig(name="tb_no_cpu"), suite=suite), 0, [])
        assert job.skip is None
        assert any("tb_no_cpu/metadata.yaml lists eval on cpu" in n for n in job.notes)
    suite = SuiteConfig(torchbench_root=str(FIXTURE))
    job = plan_config(BenchConfig(model=ModelConfig(name="tb_mlp"), suite=suite), 0, [])
    assert not any("metadata.yaml" in n for n in job.notes)
    # a single run of it runs too: the note is a fact of the model, not a setting refused
    cfg = BenchConfig(model=ModelConfig(name="tb_no_cpu"), suite=suite)
    single = plan_config(cfg, 0, [], single=True)
    assert single.skip is None and any("not_implemented" in n for n in single.notes)


def test_missing_package_and_download_fail_with_a_clear_message(
    quirk_rows: QuirkRows,
) -> None:
    rows = quirk_rows
    pkg = rows[("tb_needs_pkg", "eval")]
    assert pkg["status"] == "failed"
    assert "needs the package 'benchflow_fixture_missing_pkg'" in pkg["error"]
    dl = rows[("tb_needs_download", "eval")]
    assert dl["status"] == "failed" and "tried to download" in dl["error"]


def test_global_state_from_loading_stays_in_its_job(
    quirk_rows: QuirkRows,
) -> None:
    rows = quirk_rows
    # Its own job survives the default device it set (benchflow resets it) ...
    assert rows[("tb_global_state", "eval")]["status"] == "ok"
    # ... and the next job, which seeds torch, is untouched by its patched manual_seed.
    assert rows[("llama", "eval")]["status"] == "ok"


def test_torchbench_model_runs_on_lazy_xla_and_openxla(cases_sweep: SessionSweep) -> None:
    rows = [cases_sweep.case("tb_lazy_xla_train"), cases_sweep.case("tb_openxla_train")]
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    for r in rows:
        # Every step ran on the device (Adam's step counter adds host syncs, so a
        # step can run several graphs), the same graphs each repeat, none compiled.
        executed = r["metrics"]["xla_ExecuteTime_number"]
        assert executed[0] == executed[1] >= 2
        assert r["metrics"]["xla_CompileTime_number"] == [0.0, 0.0]
        assert r["experiment"]["dtype"] == "float32"  # training on a CPU (suite rule)


def test_models_command_lists_builtin_and_torchbench(workdir: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchflow", "models", ROOT_ARG],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = {
        line.split()[0]: line
        for line in out.stdout.splitlines()
        if line and line[0] != " " and "  " in line
    }
    assert " yes" in lines["llama"] and "builtin" in lines["llama"]
    assert lines["tb_mlp"].split()[2] == "yes"
    assert "tb_needs_pkg" in lines and "benchflow_fixture_missing_pkg" in lines["tb_needs_pkg"]
    assert "metadata.yaml says eval not_implemented (run all the same)" in lines["tb_no_cpu"]
    assert lines["tb_no_cpu"].split()[2] == "yes;"


def test_bare_tensor_eval_is_returned_as_a_tuple() -> None:
    code = (
        "import sys, torch\n"
        "from pathlib import Path\n"
        "from benchflow.models.torchbench import TorchBenchModel\n"
        "cpu = torch.device('cpu')\n"
        "m = TorchBenchModel(Path(sys.argv[1]), 'tb_bare', 'eval', 'cpu', None).place(cpu, None)\n"
        "out = m.eval(); assert isinstance(out, tuple) and len(out) == 1, type(out)\n"
        "assert isinstance(m.tb.eval(), torch.Tensor)  # the model itself returns a bare tensor\n"
        "print('ok', m.batch_size)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(FIXTURE)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["ok", "4"]
