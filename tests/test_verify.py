"""verify=true: accuracy checked in the same job as the timing, with the seed's codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tests.conftest import SessionSweep

from benchflow.harness.accuracy import compare, leaves, tolerance


def test_compare_passes_noise_and_fails_a_real_error() -> None:
    torch.manual_seed(0)
    fp64 = [torch.randn(64, 64, dtype=torch.float64)]
    eager = [fp64[0].to(torch.bfloat16)]
    noisy = [(fp64[0] + 1e-3 * torch.randn(64, 64, dtype=torch.float64)).to(torch.bfloat16)]
    ok = compare(noisy, eager, fp64, tol=1e-3, cosine=False)
    assert ok.passed and ok.rmse_vs_fp64 > 0 and ok.eager_rmse_vs_fp64 > 0
    wrong = compare([eager[0] * 1.5], eager, fp64, tol=1e-3, cosine=False)
    assert not wrong.passed and wrong.max_abs_error > 0.1
    assert "leaf 0" in wrong.failures[0]
    assert not compare([eager[0][:1]], eager, fp64, 1e-3, False).passed  # shape mismatch


def test_leaves_and_tolerance_rules() -> None:
    t = torch.ones(2)
    assert len(leaves({"b": (t, [t]), "a": t})) == 3
    rules = {
        "tolerance": {"higher_bf16": ["m"], "even_higher": ["e"], "cosine": ["c"], "higher": ["h"]}
    }
    assert tolerance(rules, "x", "eval", "float32", "cpu") == (1e-4, False)
    assert tolerance(rules, "m", "eval", "bfloat16", "cpu")[0] == 1e-2
    assert tolerance(rules, "e", "eval", "amp", "cpu")[0] == 8e-2
    assert tolerance(rules, "c", "eval", "float32", "cpu")[1] is True
    assert tolerance(rules, "h", "eval", "float32", "cpu")[0] == 1e-3


@pytest.fixture(scope="module")
def verified(cases_sweep: SessionSweep, grid_sweep: SessionSweep) -> dict[str, dict]:
    """verify=true rows: the accuracy fault models (cases of the session sweep), and
    llama on every CPU backend (the session's grid sweep, which runs verify=true)."""
    names = ("acc_wrong_when_compiled", "acc_raises_in_eager", "acc_nondeterministic")
    rows = [cases_sweep.case(n) for n in (*names, "verify_crash")]
    rows += [r for r in grid_sweep.rows() if r["model"]["model_name"] == "llama"]
    return {row["job"]["name"]: row for row in rows if row["status"] != "invalid"}


def test_wrong_backend_result_fails_with_its_errors_as_metrics(verified: dict) -> None:
    row = verified["acc_wrong_when_compiled·aot_eager·eval"]
    assert row["status"] == "ok"  # the timing stands; the verdict is separate
    assert row["verification_code"] == "FAIL"
    m = row["metrics"]
    assert m["accuracy_max_abs_error"] > 0.1
    assert m["accuracy_rmse_vs_fp64"] > 10 * m["accuracy_eager_rmse_vs_fp64"]
    assert "tolerance" in row["verification_detail"]


def test_eager_failure_and_nondeterminism_get_their_codes(verified: dict) -> None:
    assert verified["acc_raises_in_eager·aot_eager·eval"]["verification_code"] == "EAGER_FAILED"
    assert (
        "injected eager failure"
        in verified["acc_raises_in_eager·aot_eager·eval"]["verification_detail"]
    )
    assert (
        verified["acc_nondeterministic·eager·eval"]["verification_code"]
        == "NONDETERMINISTIC_EAGER_RUN"
    )


def test_a_crash_leaves_the_verifier_unrun(verified: dict) -> None:
    row = verified["fault_crash·eager·eval"]
    assert row["status"] == "crashed" and row["verification_code"] == "VERIFIER_DIDNT_RUN"


@pytest.mark.parametrize("backend", ["eager", "lazy_xla", "inductor", "openxla"])
def test_correct_model_passes_on_each_backend(verified: dict, backend: str) -> None:
    row = verified[f"llama·{backend}·eval"]
    assert row["status"] == "ok", row["error"]
    assert row["verification_code"] == "PASS", row["verification_detail"]
    assert row["metrics"]["accuracy_cosine_similarity"] > 0.999
    # timing and verification in one row
    assert row["summary"]["per_iter_time_s"]["median"] > 0


def test_a_sweeps_jobs_of_one_model_share_its_eager_and_float64_runs(
    grid_sweep: SessionSweep,
) -> None:
    """In the grid (verify=true), each model's eager and float64 runs are done by the
    first of its jobs to check it and read by its later ones (two jobs checking at once
    may both run them); the sweep removes them at its end."""
    for model in ("llama", "dlrm"):
        rows = [r for r in grid_sweep.rows() if r["model"]["model_name"] == model]
        rows = [r for r in rows if r["status"] == "ok"]
        logs = [(Path(r["job"]["dir"]) / "stderr.log").read_text() for r in rows]
        read = sum("references from" in log for log in logs)
        assert len(logs) == 4 and 1 <= read <= 3, (model, read)
        assert all(r["verification_code"] == "PASS" for r in rows), model
    (sweep,) = grid_sweep.result.sweep_dirs
    assert (sweep / "plan.json").is_file() and not (sweep / "references").exists()


@pytest.mark.parametrize("test", ["eval", "train"])
def test_the_check_copies_the_jobs_one_build_and_runs_each_copy_from_the_seed(
    test: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A job that checks its accuracy builds its model once: the check's eager run and
    its float64 reference (the last, which takes the kept build itself) start from that
    build, kept before the job's own step ran, so each starts where the job's started;
    a timed job without the check keeps no copy. Real builds of a test model, in this
    process."""
    import dataclasses
    import logging

    from benchflow import backends
    from benchflow.config.schema import BenchConfig, ModelConfig, TestConfig
    from benchflow.harness.child import _start
    from benchflow.harness.verify import outputs

    cfg = BenchConfig(
        model=ModelConfig(name="planted", source="builtin", builtin="tests.models.faults:Planted"),
        test=TestConfig(name=test),
        timing=False,
    )
    job, _ = _start(cfg, backends.get("eager"), None, records=False)
    cpu = torch.device("cpu")
    with caplog.at_level(logging.INFO, logger="benchflow.child"):
        timed = job.build(cpu, None, True, None)
        torch.manual_seed(cfg.seed)
        first = outputs(timed, test, leaves(job.run_step(timed, None)))
        job.run_step(timed, None)  # the job's second step changes its model (train)
        again = job.build(cpu, None, False, None)
        code, metrics, detail = job.verify(first)  # its last build takes the kept one
    assert job.kept is not None and job.kept[1] is None  # (taken by the float64 run)
    built = [r.message for r in caplog.records if r.message.startswith("model planted from")]
    assert len(built) == 1, built
    assert code == "PASS", detail
    assert metrics["accuracy_max_abs_error"] == 0.0  # eager against eager: the same start
    ours, theirs = timed.module.state_dict(), again.module.state_dict()
    assert ours.keys() == theirs.keys()
    changed = [k for k in ours if not torch.equal(ours[k], theirs[k])]
    assert changed == ([] if test == "eval" else [k for k in ours if "body" in k])
    assert all(ours[k].data_ptr() != theirs[k].data_ptr() for k in ours)

    timed_job, _ = _start(dataclasses.replace(cfg, timing=True), backends.get("eager"), None)
    timed_job.build(cpu, None, True, None)
    assert timed_job.kept is None


def test_the_jobs_of_a_sweep_share_the_checks_eager_and_float64_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The check's eager and float64 runs are the model's, not the backend's: the first
    job of a sweep to check a model keeps them in the sweep's folder; a job of another
    backend reads them and builds nothing for them, and still fails a wrong result; a job
    of another seed runs its own. Untimed, a job that reads them keeps no copy of its build
    for the check. Real builds of a test model, in this process."""
    import dataclasses
    import logging

    from benchflow import backends
    from benchflow.config.schema import BenchConfig, DynamoConfig, ModelConfig, TestConfig
    from benchflow.core.layout import SweepDir
    from benchflow.harness.child import _references_file, _start
    from benchflow.harness.verify import outputs

    sweep, cpu = SweepDir(tmp_path), torch.device("cpu")
    sweep.plan.write_text("{}")  # a sweep's folder: its jobs share the references
    shared = sweep.references
    model = ModelConfig(name="planted", source="builtin", builtin="tests.models.faults:Planted")
    cfg = BenchConfig(model=model, test=TestConfig(name="eval"), timing=False)
    copies: list[bool] = []

    def checked(cfg: BenchConfig, label: str, wrong: float = 1.0) -> tuple[Any, list[Any]]:
        job, _ = _start(cfg, backends.get(label), None, records=False)
        job.references = _references_file(cfg, tmp_path / "0")
        timed = job.build(cpu, None, True, None)
        copies.append(job.kept is not None)
        torch.manual_seed(cfg.seed)
        first = outputs(timed, "eval", leaves(job.run_step(timed, None)))
        builds: list[Any] = []
        build = job.build
        job.build = lambda *a, **k: builds.append((*a, k)) or build(*a, **k)  # type: ignore
        return job.verify([t * wrong for t in first]), builds

    with caplog.at_level(logging.INFO, logger="benchflow"):
        (code, metrics, _), builds = checked(cfg, "eager")
        # its first step is the first eager run: eager again, then float64 on the kept build
        assert code == "PASS" and metrics["accuracy_max_abs_error"] == 0.0
        assert len(builds) == 2 and builds[-1][1] is torch.float64
        assert [b[-1] for b in builds] == [{}, {"last": True}]
        (kept,) = shared.iterdir()
        caplog.clear()
        compiled = dataclasses.replace(cfg, dynamo=DynamoConfig(name="aot_eager"))
        (code, metrics, detail), builds = checked(compiled, "aot_eager", wrong=1.5)
    assert builds == [] and f"references from {kept}" in caplog.text
    assert copies == [True, False]  # the first job copied its build; the reader did not
    assert code == "FAIL" and metrics["accuracy_max_abs_error"] > 0, detail
    assert metrics["accuracy_eager_rmse_vs_fp64"] > 0  # the float64 reference was read too
    (code, _, _), builds = checked(dataclasses.replace(cfg, seed=2), "eager")
    assert code == "PASS" and len(builds) == 2 and copies[-1]
    assert len(list(shared.iterdir())) == 2
