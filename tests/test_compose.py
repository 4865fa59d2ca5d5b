"""Fast planning (benchflow.config.compose): each job of a varied grid, typed from a
base composed once per set of group choices, must equal Hydra's own composition of it
parsed, and plan the same Job; errors too."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import OmegaConf

from benchflow.config.compose import Composer
from benchflow.config.errors import ConfigError
from benchflow.config.store import CONF_DIR, register
from benchflow.config.validate import parse
from benchflow.suite.suites import register_suite_models
from benchflow.sweep.plan import plan_config, plan_job

register()
register_suite_models(["suite=huggingface"])

# A user's config folder (--config-dir / hydra.searchpath): a model of their own, and an
# experiment whose values refer to others (an interpolation in the base).
USER_FILES = {
    "model/mine.yaml": "name: mine\nbuiltin: benchflow.models.llama:Llama\nsize: tiny\n",
    "experiment/linked.yaml": (
        "# @package _global_\n"
        "defaults:\n  - override /dynamo: inductor\n"
        "repeat: 4\nwarmup: ${repeat}\nmax_repeat: ${repeat}\n"
    ),
}

# Jobs as the sweeper hands them over: each a list of overrides. Group choices (model,
# dynamo, test, xla, suite, accelerator, profile, ir, experiment, the user's), plain
# values of every type (quoted, null, lists, a float from an int, a string from a
# number), `+`/`++`/`~`, interpolations, and bad values that must fail the same way.
GRID: list[list[str]] = [  # each model, backend and mode once; other rows vary the rest
    [f"model={m}", f"dynamo={d}", f"test={t}", "model.size=tiny", "seed=7"]
    for m, d, t in (
        ("llama", "none", "eval"),
        ("dlrm", "inductor", "train"),
        ("llama", "openxla", "train"),
        ("dlrm", "openxla", "eval"),
    )
]
GRID += [
    ["model=bert", "xla=PJRT", "dynamo=none", "repeat=2", "warmup=0", "iterations_per_run=1"],
    ["model=resnet", "xla=none", "dtype=bfloat16", "batch_size='4'", "verify=true"],
    ["model=llama", "dtype=null", "timeout_s=30", "memory_limit_gb=2", "progress=false"],
    ["model=llama", "ir=hlo", "xla=PJRT", "ir.formats=[hlo,text]", "ir.xla_dump=true"],
    ["model=llama", "ir.formats=[]", "profile=torch", "profile.active=2", "profile.gzip=true"],
    ["model=dlrm", "suite=builtin", "suite.skip_lists=false", "suite.fast=true"],
    ["model=llama", "suite=torchbench", "test=train", "model.step=torchbench"],
    ["suite=huggingface", "model=BertForMaskedLM", "test=train"],
    ["model=llama", "accelerator=cpu", "dynamo=aot_eager", "dynamo.mode=max-autotune"],
    ["model=llama", "dynamo=eager", "dynamo.fullgraph=true", "matmul_precision=highest"],
    ["model=custom", "model.target=tests.models.sleepy:build", "model.name=mlp"],
    ["model=llama", "model.name='with space'", 'mlflow.experiment="x=y"', "retry=all"],
    ["experiment=backends_smoke", "model=dlrm", "dynamo=aot_eager"],
    ["experiment=headline", "model=llama", "dynamo=openxla", "seed=11"],
    ["+experiment=backends_smoke", "seed=2"],
    ["model=llama", "~experiment"],
    ["model=mine", "dynamo=none", "seed=5"],
    ["model=mine", "experiment=linked", "seed=5"],
    ["model=mine", "experiment=linked", "repeat=9"],  # warmup follows: ${repeat}
    ["model=llama", "warmup=${repeat}", "repeat=6"],  # an interpolation as a value
    ["model=llama", "++seed=8", "++repeat=3"],
    ["model=llama", "~seed"],
    ["model=llama", "~dtype"],
    ["model=llama", "+suite.rules.extra=1"],
    ["model=llama", "suite.rules={skip:{all:[llama]}}", "suite=torchbench"],
    ["model=llama", "dynamo={name:inductor}"],  # a dict for a group: a value override
    ["model=llama", "seed=1", "seed=2"],  # the last one wins, as in Hydra
    ["model=llama", "num_threads=1", "cpus_per_job=1", "adaptive_repeat=true"],
    ["model=llama", "adaptive_repeat=true", "max_repeat=2", "repeat=5"],  # a bad pair
    ["model=llama", "repeat=0"],  # a bad value: ConfigError naming the key
    ["model=llama", "dtype=3"],  # a number for a string: "3", then not allowed
    ["model=llama", "target_ci=1"],  # an int for a float
    ["model=llama", "verify=yes"],  # a bool from a YAML-ish word
    ["model=llama", "repeat=abc"],  # the wrong type: Hydra's own error
    ["model=llama", "verify=maybe"],
    ["model=llama", "ir.formats=hlo"],  # a string for a list
    ["model=llama", "repeats=3"],  # no such key
    ["model=llama", "+repeats=3"],  # added anyway: benchflow's unknown key
    ["model=nope"],  # no such option
    ["model=llama", "model.size=${seed}"],
    ["model=llama", "hydra.job.name=other", "seed=4"],  # a hydra key: composed in full
]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """Hydra's loader and the sweep's config, as a multirun with the user's folder has
    them (hydra.searchpath is what --config-dir adds to the search path)."""
    user = tmp_path_factory.mktemp("user_conf")
    for name, text in USER_FILES.items():
        (user / name).parent.mkdir(parents=True, exist_ok=True)
        (user / name).write_text(text)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration(
            "config",
            [
                f"hydra.searchpath=[file://{user}]",
                f"hydra.sweep.dir={tmp_path_factory.mktemp('sweep')}",
                "mlflow.enabled=false",
                "seed=range(0,3)",
            ],
            RunMode.MULTIRUN,
        )
        yield loader, master


def _outcome(make: Any) -> tuple[str, Any]:
    """What a call gave: ("ok", value), or its error's type and message."""
    try:
        return "ok", make()
    except Exception as exc:  # compared, never swallowed: both sides must agree
        return type(exc).__name__, str(exc) or traceback.format_exception_only(exc)[-1]


def _container(cfg: Any) -> Any:
    return OmegaConf.to_container(cfg, resolve=False)


def _resolved(cfg: Any) -> Any:
    """The schema part resolved (the hydra node needs a running job to resolve)."""
    return OmegaConf.to_container(
        OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]), resolve=True
    )


def _planned(cfg: Any, overrides: list[str]) -> dict[str, Any]:
    job = plan_config(cfg, 3, overrides)
    return job.to_dict() | {"fingerprint": job.fingerprint}


# The default suite's rows: each kind above once (a backend and test of each model kind,
# every suite, a user's model and experiment, quoting, an interpolation, `+`/`++`/`~`, the
# last value winning, a hydra key, and each kind of bad value); `make test-full` the rest.
DEFAULT_ROWS = {1, 2, 5, 7, 10, 11, 14, 15, 17, 21, 23, 24, 25, 30, 33, 34, 36, 37, 40, 42, 44}


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param(DEFAULT_ROWS, id="default"),
        pytest.param(set(range(len(GRID))) - DEFAULT_ROWS, id="rest", marks=pytest.mark.full),
    ],
)
def test_fast_composition_equals_hydras_on_a_varied_grid(
    sweep: tuple[Any, Any], rows: set[int]
) -> None:
    loader, master = sweep
    composer = Composer(loader, master)
    planned_ok = 0
    for overrides in (GRID[i] for i in sorted(rows)):
        full = _outcome(lambda o=overrides: loader.load_sweep_config(master, list(o)))
        expected = full if full[0] != "ok" else _outcome(lambda c=full[1]: parse(c))
        got = _outcome(lambda o=overrides: composer.typed(o))
        assert got[0] == expected[0], (overrides, expected, got)
        if expected[0] != "ok":
            assert got[1] == expected[1], overrides
            continue
        assert got[1] == expected[1], overrides
        assert _planned(got[1], overrides) == _planned(expected[1], overrides), overrides
        planned_ok += 1
    assert planned_ok > len(rows) // 2
    # Most jobs took the fast path; those it cannot be sure of fell back to Hydra's.
    assert composer.counts["typed"] > len(rows) // 2, composer.counts
    assert composer.counts["full"] >= 1, composer.counts  # hydra.job.name=..., errors


def test_the_typed_path_is_taken_only_where_certain(sweep: tuple[Any, Any]) -> None:
    """Each kind of override takes the path the module promises: plain values typed;
    interpolations, `+`/`~`/`++`, a base that interpolates and a hydra key through
    Hydra's composition."""
    loader, master = sweep

    def path_of(overrides: list[str]) -> str:
        composer = Composer(loader, master)
        composer.typed(overrides)
        (taken,) = composer.counts
        return taken

    assert path_of(["model=llama", "seed=3", "ir.formats=[hlo]", "dtype=null"]) == "typed"
    assert path_of(["model=llama", "max_repeat=${max_warmup}"]) == "full"
    assert path_of(["model=llama", "~seed"]) == "full"
    assert path_of(["model=llama", "++seed=3"]) == "full"
    assert path_of(["model=mine", "experiment=linked", "seed=1"]) == "full"
    assert path_of(["model=llama", "suite.rules={}"]) == "full"
    assert path_of(["model=llama", "hydra.job.name=x"]) == "full"


def test_bad_values_fail_the_plan_as_before(sweep: tuple[Any, Any]) -> None:
    """A bad value is the same ConfigError the full composition's parse gives, naming
    the key, the value and what is allowed."""
    loader, master = sweep
    composer = Composer(loader, master)
    for overrides in (["model=llama", "repeat=0"], ["model=llama", "model.size=huge"]):
        with pytest.raises(ConfigError) as fast:
            composer.typed(overrides)
        with pytest.raises(ConfigError) as full:
            plan_job(loader.load_sweep_config(master, overrides), 0, overrides)
        assert str(fast.value) == str(full.value)
        assert "allowed" in str(fast.value)
    assert composer.counts["typed"] == 2


def test_a_sweeps_plan_composes_each_base_once(sweep: tuple[Any, Any]) -> None:
    """The plan types every job of a grid of 4 models x 3 backends: each base is
    composed by Hydra once, however many jobs share it."""
    loader, master = sweep
    composer = Composer(loader, master)
    models = ["llama", "dlrm", "bert", "resnet"]
    dynamos = ["none", "inductor", "openxla"]
    jobs = [
        [f"model={m}", f"dynamo={d}", f"seed={s}"] for m in models for d in dynamos for s in (1, 2)
    ]
    for overrides in jobs:
        composer.typed(overrides)
    assert composer.bases_composed == len(models) * len(dynamos)
    assert composer.counts["typed"] == len(jobs)


def test_user_folder_is_searched(sweep: tuple[Any, Any]) -> None:
    """The user's options compose through the same search path as Hydra's."""
    loader, master = sweep
    cfg = Composer(loader, master).typed(["model=mine", "seed=2"])
    assert (cfg.model.name, cfg.model.size, cfg.seed) == ("mine", "tiny", 2)
