"""`make coverage` (benchmarks/torchbench_coverage.py): its table from compare_xr's
per-model results, each cell's note, and the packages a model lacks (the real runs need
both checkouts: docs/experiment-runner.md)."""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import torchbench_coverage as coverage  # noqa: E402  (benchmarks/torchbench_coverage.py)

FIELDS = [
    "model",
    "backend",
    "batch_size",
    "runner_status",
    "benchflow_status",
    "runner_median_ms",
    "benchflow_median_ms",
    "ratio",
    "flag",
    "runner_first_ms",
    "benchflow_cold_ms",
    "runner_note",
    "benchflow_note",
]


def _checkout(root: Path) -> Path:
    models = root / "torchbenchmark" / "models"
    for name, requirements in (("fine", "numpy\n"), ("needy", "# a comment\nnumpy\nnopkg>=1.0\n")):
        (models / name).mkdir(parents=True)
        (models / name / "__init__.py").write_text("")
        (models / name / "requirements.txt").write_text(requirements)
    (models / "ADDING_MODELS.md").write_text("not a model\n")
    return root


def _results(out: Path, model: str, rows: list[dict[str, str]]) -> None:
    (out / model / "eval").mkdir(parents=True)
    with (out / model / "eval" / "compare_xr.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows([{k: r.get(k, "") for k in FIELDS} for r in rows])


def test_the_table_says_why_each_cell_did_not_run_or_differs(tmp_path: Path) -> None:
    tb = _checkout(tmp_path / "benchmark")
    assert coverage.models_of(tb) == ["fine", "needy"]
    assert coverage.missing_packages(tb, "fine") == []
    assert coverage.missing_packages(tb, "needy") == ["nopkg"]
    out = tmp_path / "out"
    ok = {"runner_status": "ok", "benchflow_status": "ok", "batch_size": "8"}
    _results(
        out,
        "fine",
        [
            {**ok, "backend": "eager", "runner_median_ms": "10", "benchflow_median_ms": "10.5"},
            {
                **ok,
                "backend": "inductor",
                "runner_median_ms": "10",
                "benchflow_median_ms": "13",
                "ratio": "1.300",
                "flag": "outside +-10%",
            },
            {
                "backend": "openxla",
                "runner_status": "ok",
                "benchflow_status": "failed",
                "runner_median_ms": "30",
                "benchflow_note": "RuntimeError: boom",
            },
        ],
    )
    _results(
        out,
        "needy",
        [
            {
                "backend": "eager",
                "runner_status": "failed",
                "benchflow_status": "failed",
                "runner_note": "ModuleNotFoundError: No module named 'nopkg'",
                "benchflow_note": "ModuleNotFoundError: No module named 'nopkg'",
            }
        ],
    )
    notes = tmp_path / "notes.csv"
    notes.write_text("model,test,backend,note\nfine,eval,inductor,A/B: the allocator\n")
    args = [f"--xla={tmp_path}", f"--torchbench={tb}", f"--out={out}", "--tests=eval"]
    assert coverage.main([*args, "--report-only", f"--explained={notes}"]) == 0
    with (out / "coverage.csv").open() as f:
        table = {(r["model"], r["backend"]): r for r in csv.DictReader(f)}
    assert table["fine", "eager"]["note"] == ""
    assert table["fine", "eager"]["runner"] == "10 ms"
    assert table["fine", "inductor"]["note"] == "A/B: the allocator"  # the measured reason
    assert table["fine", "openxla"]["note"] == "fails in benchflow only: RuntimeError: boom"
    assert table["needy", "eager"]["note"] == "needs the package nopkg"
    md = (out / "coverage.md").read_text()
    assert "cells the runner times and benchflow does not: 1" in md
    assert "- fine eval openxla: fails in benchflow only" in md
    # without the notes file, a ratio outside 10% says it is not explained
    assert coverage.main([*args, "--report-only"]) == 0
    assert (
        "fine | eval | inductor | 8 | 10 ms | 13 ms | 1.300 | outside ±10%: not explained yet"
        in (out / "coverage.md").read_text()
    )
    # --skip-missing: a model torchbench.yaml's lists skip on a CPU is not run either
    assert "listed in `skip.all`" in (coverage.listed_skip("hf_Bert", "eval") or "")
    assert "listed in `skip.device.cpu`" in (coverage.listed_skip("nanogpt", "train") or "")
    assert coverage.listed_skip("dlrm", "eval") is None
    # --skip-missing lists the model that lacks a package as not run, with the package,
    # unless it ran all the same (dlrm runs without its requirements.txt's packages)
    assert coverage.main([*args, "--report-only", "--skip-missing"]) == 0
    md = (out / "coverage.md").read_text()
    assert "- needy: needs the package(s) nopkg" not in md and "| needy | eval |" in md
    shutil.rmtree(out / "needy")
    assert coverage.main([*args, "--report-only", "--skip-missing"]) == 0
    md = (out / "coverage.md").read_text()
    assert "- needy: needs the package(s) nopkg" in md and "| needy | eval |" not in md
    assert "- fine train: not run yet: make coverage runs it" not in md  # --tests=eval

    # --ab: the runner measured again given benchflow's host settings (compare_xr
    # --as-benchflow, under <model>/<test>/ab); within 10% of benchflow, that explains it
    ab = out / "fine" / "eval" / "ab"
    ab.mkdir()
    abrow = {"model": "fine", "backend": "inductor", "runner_status": "ok"}
    for again, verdict, explained in (
        ("12.5", "benchflow / it: 1.040): the difference is those settings", 1),
        ("10.2", "benchflow / it: 1.275): not only those settings", 0),
    ):
        with (ab / "compare_xr.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerow({k: {**abrow, "runner_median_ms": again}.get(k, "") for k in FIELDS})
        assert coverage.main([*args, "--report-only"]) == 0
        with (out / "coverage.csv").open() as f:
            note = {(r["model"], r["backend"]): r["note"] for r in csv.DictReader(f)}
        assert note["fine", "inductor"].startswith("A/B: the runner given benchflow's malloc")
        assert note["fine", "inductor"].endswith(verdict)
        assert (
            f"outside it and explained (an A/B, benchmarks/coverage_notes.csv): {explained}"
            in (out / "coverage.md").read_text()
        )


def test_passes_pool_each_side_by_its_median(tmp_path: Path) -> None:
    tb = _checkout(tmp_path / "benchmark")
    out = tmp_path / "out"
    ok = {"runner_status": "ok", "benchflow_status": "ok", "batch_size": "8"}
    # three passes of one cell: a single pass would say 1.300, 0.900 or 1.050
    for folder, runner, ours in (
        ("", "10", "13"),
        ("pass2", "12", "10.8"),
        ("pass3", "11", "11.55"),
    ):
        where = out / "fine" / "eval" / folder
        where.mkdir(parents=True, exist_ok=True)
        with (where / "compare_xr.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            ratio = f"{float(ours) / float(runner):.3f}"
            row = {
                **ok,
                "backend": "eager",
                "runner_median_ms": runner,
                "benchflow_median_ms": ours,
            }
            row["ratio"] = ratio
            writer.writerow({k: row.get(k, "") for k in FIELDS})
    args = [f"--xla={tmp_path}", f"--torchbench={tb}", f"--out={out}", "--tests=eval"]
    assert coverage.main([*args, "--models=fine", "--report-only", "--passes=3"]) == 0
    with (out / "coverage.csv").open() as f:
        (cell,) = list(csv.DictReader(f))
    assert (cell["runner"], cell["benchflow"], cell["ratio"]) == ("11 ms", "11.55 ms", "1.050")
    assert cell["note"] == (
        "3 passes (runner / benchflow): 10 / 13 ms, 12 / 10.8 ms, 11 / 11.55 ms; "
        "the ratio of the medians"
    )
    assert "3 passes, each side's median over them" in (out / "coverage.md").read_text()
    # one pass read: the first pass's figures alone, outside ±10%
    assert coverage.main([*args, "--models=fine", "--report-only"]) == 0
    with (out / "coverage.csv").open() as f:
        (cell,) = list(csv.DictReader(f))
    assert (cell["ratio"], cell["note"]) == ("1.300", "outside ±10%: not explained yet")
