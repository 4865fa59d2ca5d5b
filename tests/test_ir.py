"""ir=...: XLA IR of every compiled graph, from torch_xla's own dump, checked by content."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import SessionSweep, run_cli

COMMON = [
    "model=llama",
    "model.size=tiny",
    "dtype=float32",
    "repeat=2",
    "iterations_per_run=2",
    "warmup=1",
]


def _graphs(text: str) -> int:
    # torch_xla starts every saved graph with a bracketed header line
    return sum(1 for line in text.splitlines() if line.startswith("[") and line.endswith("]"))


def test_each_format_holds_real_ir_for_every_step(cases_sweep: SessionSweep) -> None:
    row = cases_sweep.case("ir_openxla")
    ir = Path(row["job"]["dir"]) / "ir"
    expected = {"text": "IR {", "hlo": "HloModule", "stablehlo": "stablehlo."}
    for fmt, marker in expected.items():
        text = (ir / f"graphs.{fmt}").read_text()
        assert text.count(marker) >= 2, f"{fmt}: fewer than one graph per compiled step"
        assert _graphs(text) >= 2
    assert any((ir / "xla_dump").iterdir()), "XLA's own dump is empty"
    assert {"ir/graphs.text", "ir/graphs.hlo", "ir/graphs.stablehlo"} <= set(row["job"]["ir_files"])


def test_a_backend_without_xla_ir_gets_a_note_and_no_files(cases_sweep: SessionSweep) -> None:
    row = cases_sweep.case("ir_eager")
    assert row["status"] == "ok"
    assert any("has no XLA IR" in n for n in row["job"]["notes"])
    assert not list((Path(row["job"]["dir"]) / "ir").glob("graphs.*"))


@pytest.mark.full  # a second, cold Inductor compile of llama: ~45 s on 2 CPUs
def test_inductor_generated_code_is_kept(tmp_path: Path) -> None:
    res = run_cli(
        ["-m", *COMMON, "dynamo=inductor,openxla", "ir.inductor_code=true", "mlflow.enabled=false"],
        tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    xla = next(r for r in res.rows() if r["experiment"]["dynamo"] == "openxla")
    said = ("ir.inductor_code=true needs dynamo=aot_inductor|inductor", "runs dynamo=openxla")
    assert any(all(s in n for s in said) for n in xla["job"]["notes"]), xla["job"]["notes"]
    assert not (Path(xla["job"]["dir"]) / "ir" / "inductor").exists()
    row = next(r for r in res.rows() if r["experiment"]["dynamo"] == "inductor")
    files = [f for f in row["job"]["ir_files"] if f.startswith("ir/inductor/output_code_")]
    assert files
    code = (Path(row["job"]["dir"]) / files[0]).read_text()
    assert "def call(" in code and "cpp_fused" in code  # Inductor's wrapper and C++ kernels


def test_ir_reaches_mlflow(cases_sweep: SessionSweep) -> None:
    from mlflow.tracking import MlflowClient

    run_id = cases_sweep.case("ir_openxla")["job"]["mlflow_run_id"]
    files = {a.path for a in MlflowClient(cases_sweep.tracking_uri).list_artifacts(run_id, "ir")}
    assert {"ir/graphs.text", "ir/graphs.hlo", "ir/graphs.stablehlo", "ir/xla_dump"} <= files


def test_single_run_asking_ir_of_inductor_is_an_error(workdir: Path) -> None:
    res = run_cli([*COMMON, "dynamo=inductor", "ir=hlo", "mlflow.enabled=false"], workdir)
    assert res.returncode == 2
    assert "ir.formats=['hlo']" in res.stderr and "dynamo=inductor" in res.stderr
    assert not list(workdir.glob("runs/*/*/ir"))
    assert not list(workdir.glob("runs/*/*/result.json")), "work started before the error"


def test_bad_ir_format_names_the_allowed_ones(workdir: Path) -> None:
    res = run_cli([*COMMON, "dynamo=openxla", "ir.formats=[mlir]"], workdir)
    assert res.returncode == 2
    assert "ir.formats='mlir'" in res.stderr and "stablehlo" in res.stderr
