"""Composition layer: every config file composes and validates; bad values are named."""

from __future__ import annotations

import dataclasses

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import MissingConfigException
from omegaconf import OmegaConf
from tests.conftest import REPO, SessionSweep

from benchflow.config.errors import ConfigError, InvalidCombination
from benchflow.config.schema import BenchConfig
from benchflow.config.store import CONF_DIR, register
from benchflow.config.validate import parse
from benchflow.sweep.plan import job_name, resolve

register()


def composed(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize("group", ["model", "dynamo", "xla", "test", "accelerator", "toolchain"])
def test_every_group_option_composes_and_parses(group: str) -> None:
    for option in group_options(group):
        cfg = parse(composed(f"{group}={option}"))
        assert isinstance(cfg, BenchConfig)
        node = getattr(cfg, group)
        assert node.name == (option if group != "model" else node.name)


@pytest.mark.parametrize("experiment", group_options("experiment"))
def test_every_experiment_composes_with_a_sweep_grid(experiment: str) -> None:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config", overrides=[f"experiment={experiment}"], return_hydra_config=True
        )
    params = cfg.hydra.sweeper.params
    assert params and "model" in params, "an experiment must declare its grid"
    parse(cfg)


def test_headline_defaults() -> None:
    cfg = resolve(parse(composed("model=llama", "dynamo=openxla")))
    # dynamo=openxla picks the XLA device by itself.
    assert cfg.xla.name == "PJRT"
    assert cfg.accelerator.name in ("cpu", "cuda")
    assert job_name(cfg) == "llama·openxla·eval"
    assert resolve(parse(composed("dynamo=inductor"))).xla.name == "none"


@pytest.mark.parametrize(
    ("overrides", "keys"),
    [
        (["dynamo=inductor", "xla=PJRT"], ["dynamo=inductor", "xla=PJRT"]),
        (["dynamo=openxla", "xla=none"], ["dynamo=openxla", "xla=none"]),
        (["dynamo=aot_eager", "xla=PJRT"], ["dynamo=aot_eager", "xla=PJRT"]),
        (["dynamo=cudagraphs", "accelerator=cpu"], ["dynamo=cudagraphs", "accelerator=cpu"]),
        (["dtype=float16", "accelerator=cpu"], ["dtype=float16", "accelerator=cpu"]),
    ],
)
def test_invalid_combinations_name_both_keys(overrides: list[str], keys: list[str]) -> None:
    cfg = parse(composed(*overrides))
    with pytest.raises(InvalidCombination) as err:
        resolve(cfg)
    for key in keys:
        assert key in str(err.value)
    assert "allowed" in str(err.value)


@pytest.mark.parametrize(
    ("override", "key", "value", "allowed"),
    [
        ("repeat=0", "repeat", "0", ">= 1"),
        ("iterations_per_run=0", "iterations_per_run", "0", ">= 1"),
        ("warmup=-1", "warmup", "-1", ">= 0"),
        ("timeout_s=-5", "timeout_s", "-5", "> 0"),
        ("batch_size=0", "batch_size", "0", ">= 1"),
        ("dtype=fp8", "dtype", "fp8", "bfloat16"),
        ("matmul_precision=low", "matmul_precision", "low", "highest"),
        ("host_allocator=jemalloc", "host_allocator", "jemalloc", "steady, glibc"),
        ("model.size=huge", "model.size", "huge", "tiny"),
        ("model.source=pypi", "model.source", "pypi", "torchbench"),
        ("baseline=tvm", "baseline", "tvm", "inductor"),
    ],
)
def test_bad_values_name_key_value_and_allowed(
    override: str, key: str, value: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as err:
        resolve(parse(composed(override)))  # parse checks single keys; the backend label: resolve
    msg = str(err.value)
    assert f"{key}=" in msg and value in msg and allowed in msg


def test_wrong_type_fails_at_composition_naming_the_key() -> None:
    with pytest.raises(Exception) as err:
        composed("repeat=abc")
    assert "repeat" in str(err.value) and "abc" in str(err.value)


def test_unknown_model_lists_available_models() -> None:
    with pytest.raises(MissingConfigException) as err:
        composed("model=nope")
    msg = str(err.value)
    assert "nope" in msg
    for name in ("llama", "dlrm", "resnet", "bert"):
        assert name in msg


def test_unknown_key_is_rejected() -> None:
    with pytest.raises(Exception) as err:
        composed("repeats=3")  # Hydra: not in the struct
    assert "repeats" in str(err.value)
    with pytest.raises(ConfigError) as err2:
        parse(composed("+repeats=3"))  # forced in with '+': benchflow still refuses it
    assert "repeats" in str(err2.value) and "repeat," in str(err2.value)


def test_every_schema_field_has_a_comment() -> None:
    import inspect

    from benchflow.config import schema

    lines = inspect.getsource(schema).splitlines()
    classes = [c for c in vars(schema).values() if dataclasses.is_dataclass(c)]
    assert len(classes) >= 7
    for cls in classes:
        for f in dataclasses.fields(cls):
            i = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"{f.name}:"))
            commented = "#" in lines[i] or lines[i - 1].strip().startswith("#")
            assert commented or "default_factory" in lines[i], (
                f"{cls.__name__}.{f.name} lacks a comment (on its line or the line above)"
            )


def test_a_written_config_reads_back_as_omegaconf_types_it(cases_sweep: SessionSweep) -> None:
    """config_from_dict's direct path (what asdict wrote) gives what OmegaConf's merge
    onto the schema gives, for every job of the cases sweep; a value of another type
    takes the merge, which converts it, and an unknown key is named."""
    import dataclasses
    import json

    from omegaconf import OmegaConf

    from benchflow.config.schema import BenchConfig, config_from_dict

    (plan,) = cases_sweep.cwd.glob("multirun/*/*/plan.json")
    jobs = json.loads(plan.read_text())["jobs"]
    assert len(jobs) > 50
    schema = OmegaConf.structured(BenchConfig)  # (merge copies it: made once)
    for job in jobs:
        data = job["config"]
        merged = OmegaConf.to_object(OmegaConf.merge(schema, data))
        assert config_from_dict(data) == merged, job["name"]
    data = jobs[0]["config"]
    edited = config_from_dict({**data, "repeat": "7", "target_ci": 1})
    assert edited.repeat == 7 and edited.target_ci == 1.0  # converted, as Hydra would
    assert dataclasses.replace(edited, repeat=data["repeat"], target_ci=data["target_ci"]) == (
        config_from_dict(data)
    )
    with pytest.raises(Exception, match="no_such_key"):
        config_from_dict({**data, "no_such_key": 1})


def test_dynamo_modes_are_torch_compiles() -> None:
    """The config layer's list of torch.compile modes (no torch at validation) is
    torch's own: Inductor's mode table, whose `default` torch.compile also takes."""
    import torch._inductor

    from benchflow.config.schema import DYNAMO_MODE_CHOICES

    assert sorted(DYNAMO_MODE_CHOICES) == sorted({"default", *torch._inductor.list_mode_options()})
    for mode in (*DYNAMO_MODE_CHOICES, "fastest"):
        composed = OmegaConf.merge(
            OmegaConf.structured(BenchConfig), {"model": {"name": "x"}, "dynamo": {"mode": mode}}
        )
        if mode in DYNAMO_MODE_CHOICES:
            parse(composed)
        else:
            with pytest.raises(ConfigError, match=r"dynamo\.mode='fastest'.*max-autotune"):
                parse(composed)


def test_benchflows_yaml_reader_gives_what_pyyamls_safe_load_gives() -> None:
    """read_yaml (libyaml's parser) reads every file of conf/ and tests/conf/ as
    yaml.safe_load does, and says where a file is broken as it does."""
    import yaml

    from benchflow.config.schema import read_yaml

    files = [*CONF_DIR.rglob("*.yaml"), *(REPO / "tests" / "conf").rglob("*.yaml")]
    assert len(files) > 50
    for path in files:
        text = path.read_text()
        assert read_yaml(text) == yaml.safe_load(text), path
    broken = "a: [1, 2\nb: 3\n"
    with pytest.raises(yaml.MarkedYAMLError) as fast:
        read_yaml(broken)
    with pytest.raises(yaml.MarkedYAMLError) as plain:
        yaml.safe_load(broken)
    assert fast.value.problem_mark is not None and plain.value.problem_mark is not None
    assert fast.value.problem_mark.line == plain.value.problem_mark.line


def test_field_comments_are_the_schemas_own() -> None:
    """--help's one line per key: the comment on the field's line, else the block above
    it, less a section's title."""
    from benchflow.config.keys import field_comments
    from benchflow.config.schema import MlflowConfig

    mlflow = field_comments(MlflowConfig)
    assert mlflow["experiment"] == "MLflow experiment name"
    assert mlflow["enabled"] == "log runs to MLflow"
    top = field_comments(BenchConfig)
    assert top["timeout_s"] == "Hard limit for one job's child process, compile included."
    assert top["prefork"] == "Fork jobs from a process that imported torch (+torch_xla)."
    assert top["cpus_per_job"] == "cores per job, pinned; null: all, one job at a time"
    assert (
        top["repeat"].startswith("Timed repeats: null: adaptive") and "exactly N" in top["repeat"]
    )
    for f in dataclasses.fields(BenchConfig):
        if not dataclasses.is_dataclass(f.type) and f.default_factory is dataclasses.MISSING:
            assert top[f.name], f.name
