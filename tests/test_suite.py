"""The torchbench.yaml mirror and its rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.conftest import REPO

from benchflow.config.schema import SuiteConfig
from benchflow.suite.mirror import load_upstream, unknown_paths
from benchflow.suite.rules import decide, skip_reason
from benchflow.suite.suites import SUITES

REFERENCE = REPO.parent / "shared" / "reference" / "torchbench.yaml"
MIRROR = SUITES["torchbench"].mirror


def mirror_rules() -> dict:
    return yaml.safe_load(MIRROR.read_text())["rules"]


def tb() -> SuiteConfig:
    return SuiteConfig(name="torchbench", rules=mirror_rules())


@pytest.mark.skipif(not REFERENCE.exists(), reason=f"no reference file at {REFERENCE}")
def test_committed_mirror_holds_exactly_the_reference_data() -> None:
    assert mirror_rules() == load_upstream(REFERENCE)
    assert unknown_paths(mirror_rules()) == []


def test_mirror_is_flat_plain_lists() -> None:
    rules = mirror_rules()
    # Upstream nests `- *DETECTRON2_MODELS` inside lists and leaves very_slow empty.
    assert "detectron2_maskrcnn_r_50_fpn" in rules["only_training"]
    assert all(isinstance(x, str) for x in rules["only_training"])
    assert rules["very_slow"] == []
    assert "detectron2_fasterrcnn_r_50_c4" in rules["skip"]["device"]["xpu"]
    for key in (
        "all",
        "device",
        "test",
        "multiprocess",
        "control_flow",
        "export_not_supported",
        "freezing",
    ):
        assert key in rules["skip"]
    assert rules["accuracy"]["max_batch_size"] == {"pytorch_unet": 2}


def test_sync_keeps_and_reports_an_unknown_upstream_key(tmp_path: Path) -> None:
    upstream = tmp_path / "torchbench.yaml"
    text = MIRROR.read_text()
    data = yaml.safe_load(text)["rules"]
    data["brand_new_list"] = ["some_model"]
    data["skip"]["brand_new_skip"] = ["other"]
    upstream.write_text(yaml.safe_dump(data))
    out = tmp_path / "mirror.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "benchflow.suite", "sync", str(upstream), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "kept, not applied by benchflow: brand_new_list" in proc.stderr
    assert "kept, not applied by benchflow: skip.brand_new_skip" in proc.stderr
    kept = yaml.safe_load(out.read_text())["rules"]
    assert kept["brand_new_list"] == ["some_model"] and kept["skip"]["brand_new_skip"] == ["other"]


def test_sync_rejects_a_missing_file(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchflow.suite", "sync", str(tmp_path / "nope.yaml")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "nope.yaml" in proc.stderr


@pytest.mark.parametrize(
    ("model", "test", "dtype", "source"),
    [
        ("llama", "eval", "bfloat16", "suite"),
        ("tts_angular", "eval", "bfloat16", "suite"),  # force_amp_…: no AMP on a CPU
        ("vision_maskrcnn", "eval", "float16", "suite"),  # force_fp16_for_bf16_models
        ("dlrm", "train", "float32", "suite"),  # training on a CPU: float32, as XR
        ("modded_nanogpt", "train", "float32", "suite"),
    ],
)
def test_dtype_rules(model: str, test: str, dtype: str, source: str) -> None:
    d = decide(tb(), model, test, "cpu", None, None)
    assert (d.dtype, d.dtype_source) == (dtype, source)


@pytest.mark.parametrize(
    ("model", "dtype"),
    [("dlrm", "amp"), ("modded_nanogpt", "amp_bf16"), ("llama", "amp")],  # amp_dtype_bfloat16
)
def test_training_on_cuda_is_amp_and_a_given_dtype_wins_on_a_cpu(model: str, dtype: str) -> None:
    """Training runs in AMP on CUDA (the suite's rule); on a CPU `dtype=amp` is asked."""
    assert decide(tb(), model, "train", "cuda", None, None).dtype == dtype
    assert decide(tb(), "tts_angular", "eval", "cuda", None, None).dtype == "amp"
    given = decide(tb(), model, "train", "cpu", "amp", None)
    assert (given.dtype, given.dtype_source) == ("amp", "user")


def test_user_dtype_always_wins_and_builtin_suite_is_float32() -> None:
    assert decide(tb(), "vision_maskrcnn", "eval", "cpu", "float32", None).dtype_source == "user"
    d = decide(SuiteConfig(), "llama", "eval", "cpu", None, None)
    assert (d.dtype, d.dtype_source) == ("float32", "model")


def test_batch_size_sources() -> None:
    assert decide(tb(), "dlrm", "train", "cpu", None, None).batch_size == 1024
    assert decide(tb(), "dlrm", "train", "cpu", None, None).batch_size_source == "suite"
    d = decide(tb(), "dlrm", "train", "cpu", None, 8)
    assert (d.batch_size, d.batch_size_source) == (8, "user")
    d = decide(tb(), "dlrm", "eval", "cpu", None, None)
    assert (d.batch_size, d.batch_size_source) == (None, "model")
    d = decide(tb(), "demucs", "train", "cpu", None, 8)  # dont_change_batch_size
    assert (d.batch_size, d.batch_size_source) == (None, "model")


@pytest.mark.parametrize(
    ("model", "test", "device", "listed"),
    [
        ("hf_Bert", "eval", "cpu", "skip.all"),
        ("llama", "train", "cpu", "skip.test.training"),
        ("nanogpt", "eval", "cpu", "skip.device.cpu"),
        ("simple_gpt", "eval", "cuda", "skip.multiprocess"),
    ],
)
def test_skip_lists_name_the_list(model: str, test: str, device: str, listed: str) -> None:
    reason = skip_reason(tb(), model, test, device)
    assert reason is not None and f"`{listed}`" in reason
    no_skip = SuiteConfig(name="torchbench", rules=mirror_rules(), skip_lists=False)
    assert skip_reason(no_skip, model, test, device) is None


def test_skip_lists_leave_other_jobs_alone() -> None:
    assert skip_reason(tb(), "llama", "eval", "cpu") is None
    assert skip_reason(tb(), "nanogpt", "eval", "cuda") is None  # cpu-only skip


def test_fast_mode_leaves_out_slow_models() -> None:
    fast = SuiteConfig(name="torchbench", rules=mirror_rules(), fast=True)
    assert "`slow`" in (skip_reason(fast, "BERT_pytorch", "eval", "cpu") or "")
    assert skip_reason(tb(), "BERT_pytorch", "eval", "cpu") is None


def test_rules_for_a_model_keep_only_what_names_it() -> None:
    from benchflow.suite.rules import rules_for

    rules = {
        "skip": {"all": ["a", "b"], "device": {"cpu": ["c"]}, "test": {"training": ["a"]}},
        "batch_size": {"training": {"a": 4, "c": 8}, "inference": {"c": 2}},
        "slow": [],
    }
    assert rules_for(rules, "a") == {
        "skip": {"all": ["a"], "test": {"training": ["a"]}},
        "batch_size": {"training": {"a": 4}},
    }
    assert rules_for(rules, "nobody") == {}
    real = mirror_rules()
    assert rules_for(real, "dlrm")["batch_size"] == {"training": {"dlrm": 1024}}


def test_hydra_composes_a_suites_name_and_the_plan_gives_each_job_its_rules() -> None:
    """The rules are no part of Hydra's composition (a third of its time for TorchBench's):
    each planned job has the mirror's, with any the command line gives merged over them
    as Hydra merges an override into a mapping."""
    from tests.test_core import composed

    from benchflow.sweep.plan import plan_job

    assert composed("model=llama").suite.rules == {}
    job = plan_job(composed("model=llama"), 0, [])
    assert job.config.suite.rules == mirror_rules() and job.config.dtype == "bfloat16"
    given = ["model=llama", "++suite.rules.skip.all=[llama]", "+suite.rules.extra=1"]
    merged = plan_job(composed(*given), 0, given).config.suite.rules
    assert merged["skip"]["all"] == ["llama"] and merged["extra"] == 1
    assert merged["skip"]["device"] == mirror_rules()["skip"]["device"]  # the rest kept
    assert merged["batch_size"] == mirror_rules()["batch_size"]
    builtin = plan_job(composed("model=llama", "suite=builtin"), 0, [])
    assert builtin.config.suite.rules == {} and builtin.config.dtype == "float32"
