"""suite=huggingface and suite=timm: the mirrors regenerate from PyTorch's files, the
rules come out at plan time, `benchflow models` lists the suites, and one real job
per suite builds its model offline and times it through the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from tests.conftest import CliResult, EarlySweeps, early, read_rows, run_cli

from benchflow.cli import models as models_cli
from benchflow.config.errors import ConfigError, InvalidCombination
from benchflow.config.store import CONF_DIR, register
from benchflow.suite import __main__ as suite_cli
from benchflow.suite.mirror import load_models_list
from benchflow.suite.suites import SUITES, by_upstream, model_names, register_suite_models
from benchflow.suite.tolerance import huggingface as hf_tolerance
from benchflow.suite.tolerance import timm as timm_tolerance
from benchflow.sweep.plan import plan_job

DATA = Path(__file__).parent / "data" / "suites"
# Small jobs: a real model each, at batch size 2, one timed step, then verified.
QUICK = ["batch_size=2", "repeat=1", "iterations_per_run=1", "warmup=0", "verify=true"]
SWEEPS = {
    # (its rows are read from the folder: MLflow's 2.7 CPU-s in the sweep are not needed)
    "timm": ["-m", "suite=timm", "model=mobilenetv2_100", *QUICK, "mlflow.enabled=false"],
}
# ElectraForCausalLM's default config is BERT-small sized (its training step verified
# in float64: 35 CPU-seconds, so in `make test-full`); GPTJForCausalLM is in skip.all
# and must never start.
HUGGINGFACE = [
    "-m",
    "suite=huggingface",
    "model=ElectraForCausalLM,GPTJForCausalLM",
    "test=train",
    *QUICK,
]

register()
register_suite_models(["suite=huggingface,timm"])


def composed(*overrides: str) -> Any:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


# --- the mirrors -------------------------------------------------------------------


@pytest.mark.parametrize("suite", ["huggingface", "timm"])
def test_mirror_regenerates_from_the_upstream_files(
    suite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / f"{suite}.yaml"
    upstream = DATA / SUITES[suite].upstream
    assert suite_cli.main(["sync", str(upstream), "--out", str(out)]) == 0
    assert out.read_text() == SUITES[suite].mirror.read_text()
    kept = capsys.readouterr().err
    # timm_models.yaml has a list benchflow does not apply: kept and reported.
    assert ("kept, not applied by benchflow: emulate_precision_casts" in kept) == (suite == "timm")


def test_the_models_list_goes_into_the_mirror_with_upstream_divisors_beside_it() -> None:
    rules = SUITES["huggingface"].mirror.read_text()
    assert "divisors:" in rules
    names = model_names(SUITES["huggingface"])
    assert names[:2] == ["AlbertForMaskedLM", "AlbertForQuestionAnswering"]
    assert len(names) == 55 and len(model_names(SUITES["timm"])) == 18
    listed = load_models_list(DATA / "timm_models_list.txt", " ")
    assert listed["ghostnet_100"] == 512 and listed["vit_base_patch16_siglip_256"] == 128


def test_sync_tells_the_suite_by_name_or_by_flag(tmp_path: Path) -> None:
    assert by_upstream(Path("x/timm_models.yaml")) is SUITES["timm"]
    assert by_upstream(Path("x/models.yaml")) is None
    renamed = tmp_path / "hf.yaml"
    renamed.write_text((DATA / "huggingface.yaml").read_text())
    with pytest.raises(SystemExit) as exc:  # no suite's file name, no --suite
        suite_cli.main(["sync", str(renamed), "--out", str(tmp_path / "o.yaml")])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):  # --suite, but no models list beside it
        suite_cli.main(["sync", str(renamed), "--suite", "huggingface"])
    out = tmp_path / "o.yaml"
    args = ["--suite", "huggingface", "--models-list", str(DATA / "huggingface_models_list.txt")]
    assert suite_cli.main(["sync", str(renamed), *args, "--out", str(out)]) == 0
    assert out.read_text() == SUITES["huggingface"].mirror.read_text()


def test_a_bad_models_list_line_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "list.txt"
    bad.write_text("BertForMaskedLM,32\nGPT2ForSequenceClassification 8\n")
    with pytest.raises(ValueError, match=r"list.txt:2: .*not `name,batch size`"):
        load_models_list(bad, ",")


# --- the rules, at plan time -------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "batch", "batch_source", "dtype", "dtype_source"),
    [
        # the list's 32, halved by batch_size.divisors; inference in bfloat16
        (["suite=huggingface", "model=BertForMaskedLM"], 16, "suite", "bfloat16", "suite"),
        (["suite=huggingface", "model=BertForMaskedLM", "test=train"], 16, "suite", "float32",
         "suite"),
        # only_fp32
        (["suite=huggingface", "model=GoogleFnet"], 16, "suite", "float32", "suite"),
        (["suite=timm", "model=mobilevit_s"], 64, "suite", "bfloat16", "suite"),  # 128 / 2
        (["suite=timm", "model=ghostnet_100", "test=train"], 512, "suite", "float32", "suite"),
        (["suite=timm", "model=ghostnet_100", "batch_size=4", "dtype=float32"], 4, "user",
         "float32", "user"),
    ],
)  # fmt: skip
def test_suite_rules_give_batch_size_and_dtype_with_their_source(
    overrides: list[str], batch: int, batch_source: str, dtype: str, dtype_source: str
) -> None:
    job = plan_job(composed(*overrides), 0, overrides)
    assert job.skip is None and job.invalid is None
    assert (job.config.batch_size, job.sources["batch_size_source"]) == (batch, batch_source)
    assert (job.config.dtype, job.sources["dtype_source"]) == (dtype, dtype_source)
    assert job.config.model.source == job.config.suite.name


def test_a_skip_listed_model_is_skipped_naming_the_list() -> None:
    job = plan_job(composed("suite=huggingface", "model=GPTJForCausalLM"), 0, [])
    assert job.skip is not None and "`skip.all` of suite huggingface" in job.skip
    job = plan_job(
        composed("suite=huggingface", "model=GPTJForCausalLM", "suite.skip_lists=false"), 0, []
    )
    assert job.skip is None


def test_a_suite_model_runs_under_its_own_suite_only() -> None:
    overrides = ["suite=torchbench", "model=BertForMaskedLM"]
    job = plan_job(composed(*overrides), 0, overrides)
    assert job.invalid is not None and "allowed: suite=huggingface" in job.invalid
    with pytest.raises(InvalidCombination, match="suite=torchbench"):
        plan_job(composed(*overrides), 0, overrides, single=True)


def test_a_suite_model_needs_its_library_in_the_toolchain() -> None:
    """A toolchain other than the project's holds what it pins: a Hugging Face model
    there needs transformers pinned (docs/toolchains.md), else the pair is invalid."""
    model = ["suite=huggingface", "model=BertForMaskedLM"]
    job = plan_job(composed(*model, "toolchain=torch-2.15"), 0, [])
    assert job.invalid is not None and "needs transformers, but toolchain=torch-2.15" in job.invalid
    pinned = [*model, "toolchain=torch-2.15", "+toolchain.pins.transformers=4.57.0"]
    assert plan_job(composed(*pinned), 0, []).invalid is None
    with pytest.raises(ConfigError, match=r"'ghostnet_100' with model\.source=huggingface"):
        overrides = ["suite=huggingface", "model=ghostnet_100", "model.source=huggingface"]
        plan_job(composed(*overrides), 0, overrides)


def test_a_suite_model_without_its_suite_is_refused_before_any_work(tmp_path: Path) -> None:
    result = run_cli(["-m", "suite=timm", "model=mobilevit_s,BertForMaskedLM"], tmp_path)
    assert result.returncode == 2
    assert "model=BertForMaskedLM is a huggingface model; allowed: add suite=huggingface" in (
        result.stderr
    )
    assert not (tmp_path / "multirun").exists()


def test_each_runner_has_its_own_tolerance() -> None:
    hf = plan_job(composed("suite=huggingface", "model=BertForMaskedLM"), 0, []).config.suite.rules
    assert hf_tolerance(hf, "BertForMaskedLM", "train", "amp", "cpu") == (2e-2, False)
    assert hf_tolerance(hf, "ElectraForCausalLM", "train", "amp", "cpu") == (1e-2, False)
    assert hf_tolerance(hf, "GPT2ForSequenceClassification", "eval", "bfloat16", "cpu")[0] == 5e-3
    assert hf_tolerance(hf, "GPT2ForSequenceClassification", "eval", "bfloat16", "cuda")[0] == 4e-3
    timm = plan_job(composed("suite=timm", "model=mobilevit_s"), 0, []).config.suite.rules
    assert timm_tolerance(timm, "beit_base_patch16_224", "train", "amp", "cpu")[0] == 16e-2
    assert timm_tolerance(timm, "inception_v3", "train", "amp", "cpu")[0] == 4e-2
    assert timm_tolerance(timm, "inception_v3", "eval", "bfloat16", "cpu")[0] == 1e-3


# --- `benchflow models suite=...` --------------------------------------------------


def test_models_lists_the_suites_models_and_whether_they_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert models_cli.main(["models", "suite=timm"][1:]) == 0  # `benchflow models suite=timm`
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert set(model_names(SUITES["timm"])) <= set(lines)
    assert lines["ghostnet_100"].split()[1:] == ["512", "yes"]
    assert models_cli.main(["models", "suite=huggingface"][1:]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert lines["GPTJForCausalLM"].endswith("no: train: skip.all; eval: skip.all")
    assert "no: train: skip.device.cpu" in lines["openai/whisper-tiny"]
    assert "Hugging Face Hub" in lines["T5Small"]
    assert lines["BertForMaskedLM"].split()[1:] == ["32", "yes"]
    with pytest.raises(SystemExit) as refused:
        models_cli.main(["suite=nope"])
    assert refused.value.code == 2
    assert "allowed: builtin, huggingface, timm, torchbench" in capsys.readouterr().err


def test_every_huggingface_model_listed_as_runnable_has_a_transformers_class(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What `benchflow models suite=huggingface` calls runnable, the job can build: a
    class of that name in transformers (its lazy module lists its names unimported)."""
    transformers = pytest.importorskip("transformers")
    assert models_cli.main(["suite=huggingface"]) == 0
    out = capsys.readouterr().out.splitlines()
    runnable = [ln.split()[0] for ln in out if ln.endswith(" yes") or " only (" in ln]
    assert "BertForMaskedLM" in runnable
    names = set(dir(transformers))  # each dir() of the lazy module lists it anew
    assert [name for name in runnable if name not in names] == []


# --- inputs as the runners make them -----------------------------------------------


def test_huggingface_inputs_follow_the_runner() -> None:
    transformers = pytest.importorskip("transformers")
    from benchflow.models.huggingface import make_inputs, sequence_length

    assert [sequence_length(n) for n in ("BertForMaskedLM", "GPT2ForSequenceClassification")] == [
        512,
        1024,
    ]
    assert sequence_length("DistilBertForMaskedLM") == 128  # no rule: the default
    gpt2 = make_inputs("GPT2ForSequenceClassification", transformers.GPT2Config(), 3)
    assert gpt2["input_ids"].shape == (3, 1024) and gpt2["labels"].shape == (3,)
    t5 = make_inputs("T5ForConditionalGeneration", transformers.T5Config(), 2)
    assert t5["decoder_input_ids"] is t5["input_ids"] and t5["labels"].shape == (2, 1024)
    roberta = make_inputs("RobertaForCausalLM", transformers.RobertaConfig(), 2)
    assert int(roberta["input_ids"].max()) == 0
    bart = make_inputs("BartForCausalLM", transformers.BartConfig(), 2)
    assert bart["input_ids"][:, -1].tolist() == [transformers.BartConfig().eos_token_id] * 2


def test_the_timed_train_step_uses_the_suites_loss() -> None:
    import torch

    from benchflow.models.held import HeldModel
    from benchflow.models.step import TimedStep
    from benchflow.models.timm_models import loss_for

    rules = plan_job(composed("suite=timm", "model=mobilevit_s"), 0, []).config.suite.rules
    inputs = (torch.randn(2, 4),)
    for name, scale in (("mobilevit_s", 1000.0), ("ghostnet_100", 1.0)):  # scaled_compute_loss
        module = torch.nn.Linear(4, 3)
        want = module(*inputs).mean().item()  # the dynamo benchmarks' reduction
        model = HeldModel(name, "train", module, inputs, loss_for(name, rules), 2)
        model.place(torch.device("cpu"), None)
        step = TimedStep(model, name=name, kind="module", test="train", prepare=None)
        assert step.loss == model.compute_loss
        assert step().item() == pytest.approx(want / scale, rel=1e-5)


# --- one real job per suite, through the CLI -----------------------------------------


@early("suite_models")
def _suite_sweeps(root: Path) -> dict[str, CliResult]:
    out = {}
    for suite, args in SWEEPS.items():
        (root / suite).mkdir()
        out[suite] = run_cli(args, root / suite)
    return out


def _rows(early_sweeps: EarlySweeps, suite: str) -> dict[str, dict[str, Any]]:
    return _by_model(early_sweeps.result("suite_models")[suite])


def _by_model(result: CliResult) -> dict[str, dict[str, Any]]:
    assert result.returncode == 0, result.stderr[-4000:]
    (sweep,) = result.sweep_dirs
    return {r["model"]["model_name"]: r for r in read_rows(sweep)}


def _check_timed(row: dict[str, Any], suite: str, dtype: str) -> None:
    assert row["status"] == "ok", row["error"]
    assert row["model"] == {
        "suite_name": suite,
        "model_name": row["model"]["model_name"],
        "model_source": suite,
    }
    exp = row["experiment"]
    assert (exp["batch_size"], exp["batch_size_source"]) == (2, "user")
    assert (exp["dtype"], exp["dtype_source"]) == (dtype, "suite")
    assert row["summary"]["per_iter_time_s"]["median"] > 0
    assert row["verification_code"] == "PASS", row["verification_detail"]


@pytest.mark.full
def test_a_real_huggingface_model_trains_offline(tmp_path: Path) -> None:
    rows = _by_model(run_cli(HUGGINGFACE, tmp_path))
    _check_timed(rows["ElectraForCausalLM"], "huggingface", "float32")  # training, CPU
    skipped = rows["GPTJForCausalLM"]
    assert skipped["status"] == "skipped" and "`skip.all`" in skipped["error"]


def test_a_real_timm_model_runs_offline(early_sweeps: EarlySweeps) -> None:
    _check_timed(_rows(early_sweeps, "timm")["mobilenetv2_100"], "timm", "bfloat16")


@pytest.mark.full
@pytest.mark.parametrize(
    ("args", "jobs"),
    [
        (["suite=timm", "model=mobilenetv2_100,ghostnet_100", "test=eval,train"], 12),
        (["suite=huggingface", "model=ElectraForCausalLM,GPT2ForSequenceClassification"], 6),
    ],
)
def test_suite_models_on_every_cpu_backend(args: list[str], jobs: int, tmp_path: Path) -> None:
    sweep = ["-m", *args, "dynamo=none,inductor,openxla", "batch_size=2", "repeat=2"]
    result = run_cli([*sweep, "iterations_per_run=1", "warmup=1"], tmp_path, timeout=3000)
    assert result.returncode == 0, result.stderr[-4000:]
    rows = result.rows()
    assert len(rows) == jobs
    bad = [(r["job"]["name"], r["status"], r["error"]) for r in rows if r["status"] != "ok"]
    assert not bad
