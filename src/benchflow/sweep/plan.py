"""Plan: a composed config becomes a resolved, checked :class:`Job`, once per job: the `auto`
choices made, the backend looked up, the suite's rules applied. Nothing here imports torch:
the sweeper plans the whole grid before any job starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchflow import backends
from benchflow.config.errors import ConfigError, InvalidCombination
from benchflow.config.schema import (
    DYNAMO_MODE_CHOICES,
    INDUCTOR,
    MODE_KEY,
    SUITE_MODEL_SOURCES,
    XLA_FLAGS_KEY,
    BenchConfig,
    ModelConfig,
    SuiteConfig,
    dynamic_settings,
    setting_text,
    settings_of,
)
from benchflow.config.validate import parse
from benchflow.core.job import Job
from benchflow.core.machine import cuda_present
from benchflow.core.status import INVALID_PREFIX
from benchflow.runner.toolchain import lacks
from benchflow.runner.toolchain import resolve as resolve_toolchain
from benchflow.suite.suites import with_rules
from benchflow.sweep.process import why_not_env


def backend_of(cfg: BenchConfig) -> type[backends.Backend]:
    """The backend of a resolved config."""
    return backends.of_row(cfg.dynamo.name, cfg.xla.name)


def resolve(cfg: BenchConfig) -> BenchConfig:
    """Resolve the `auto` choices; check that they fit together and that this machine runs them."""
    if cfg.baseline not in backends.baseline_choices():
        raise ConfigError(
            f"baseline={cfg.baseline!r} is not allowed; allowed values: "
            + ", ".join(backends.baseline_choices())
        )
    accelerator = cfg.accelerator.name
    if accelerator == "auto":
        accelerator = "cuda" if cuda_present() else "cpu"
    elif accelerator == "cuda" and not cuda_present():
        raise ConfigError(
            "accelerator=cuda but no CUDA GPU is visible here (no NVIDIA driver, or "
            "CUDA_VISIBLE_DEVICES hides them); allowed: accelerator=cpu or accelerator=auto"
        )
    backend = backends.select(
        cfg.dynamo.name, cfg.xla.name, accelerator, auto_accelerator=cfg.accelerator.name == "auto"
    )
    toolchain = resolve_toolchain(cfg.toolchain)  # an interpreter: probed, its build
    if backend.on_xla and (lack := lacks(toolchain, "torch_xla")):
        raise InvalidCombination(
            f"dynamo={cfg.dynamo.name} xla={backend.xla_value()} runs on the XLA device, "
            f"which needs torch_xla, but {lack[0]}; allowed: {lack[1]}, or xla=none"
        )
    cfg = dataclasses.replace(cfg, toolchain=toolchain)
    if cfg.dtype in ("float16", "amp_fp16") and accelerator == "cpu" and not backend.on_xla:
        # Half-precision CPU kernels exist for few ops; runs would fail deep inside a model.
        raise InvalidCombination(
            f"dtype={cfg.dtype} is not supported with accelerator=cpu; "
            "allowed on cpu: float32, float64, bfloat16, amp, amp_bf16"
        )
    if cfg.test.name == "train" and not backend.trains:
        allowed = "|".join(sorted({b.dynamo for b in backends.REGISTRY.values() if b.trains}))
        raise InvalidCombination(
            f"dynamo={cfg.dynamo.name} compiles inference graphs only, but test=train; "
            f"allowed: test=eval, or dynamo={{{allowed}}} with test=train"
        )
    model, suite = _resolve_model_source(cfg)
    return dataclasses.replace(
        cfg,
        model=model,
        suite=suite,
        xla=dataclasses.replace(cfg.xla, name=backend.xla_value()),
        accelerator=dataclasses.replace(cfg.accelerator, name=accelerator),
    )


def _resolve_model_source(cfg: BenchConfig) -> tuple[ModelConfig, SuiteConfig]:
    """model.source auto -> factory, torchbench or builtin. The TorchBench root is made absolute,
    so that the child, the fingerprint and the row name the checkout."""
    if cfg.model.source in SUITE_MODEL_SOURCES:
        _check_suite_model(cfg)
        return cfg.model, cfg.suite
    from benchflow.models.torchbench_index import (
        CLONE_HINT,
        TorchBenchNotFound,
        find_root,
        list_models,
    )

    try:
        root = find_root(cfg.suite.torchbench_root)
    except TorchBenchNotFound as exc:
        raise ConfigError(str(exc)) from None
    name, source = cfg.model.name, cfg.model.source
    in_torchbench = root is not None and (root / "torchbenchmark" / "models" / name).is_dir()
    if source == "auto":
        source = "factory" if cfg.model.target else "torchbench" if in_torchbench else "builtin"
    if source == "factory":
        return _factory(cfg), cfg.suite
    if source == "torchbench" and root is None:
        raise ConfigError(f"model.source=torchbench but no TorchBench was found; {CLONE_HINT}")
    if source == "torchbench" and not in_torchbench:
        assert root is not None
        raise ConfigError(
            f"model={name!r} is not a TorchBench model in {root}; allowed: "
            + ", ".join(list_models(root))
        )
    if source == "builtin" and not cfg.model.builtin and name == "custom":
        raise ConfigError(
            "model=custom is your own model, which needs model.target=module:function (a "
            "function returning the module and its example inputs: docs/your-code.md); "
            "allowed: model=custom model.target=mymodels:build, or a built-in model"
        )
    if source == "builtin" and not cfg.model.builtin:
        raise ConfigError(
            f"model={name!r} has no built-in implementation and TorchBench is not installed; "
            "allowed: a built-in model (llama, dlrm, resnet, bert), set "
            "suite.torchbench_root, or your own model with model.target=module:function"
        )
    suite = dataclasses.replace(cfg.suite, torchbench_root=str(root) if root else None)
    return dataclasses.replace(cfg.model, source=source), suite


def _factory(cfg: BenchConfig) -> ModelConfig:
    """model.target names the user's factory: it must be findable before any job runs."""
    from benchflow.models.target import problem

    if not cfg.model.target:
        raise ConfigError(
            "model.source=factory needs model.target; allowed: model.target=module:function"
        )
    if why := problem(cfg.model.target):
        raise ConfigError(why)
    return dataclasses.replace(cfg.model, source="factory")


def _check_suite_model(cfg: BenchConfig) -> None:
    """A huggingface or timm model runs under its own suite, which must list it."""
    from benchflow.suite.suites import by_source, models_in

    name, source = cfg.model.name, cfg.model.source
    suite = by_source(source)
    assert suite is not None, f"no suite has model.source={source}"
    if cfg.suite.name != suite.name:
        raise InvalidCombination(
            f"model={name} is a {suite.name} model (model.source={source}), but "
            f"suite={cfg.suite.name}; allowed: suite={suite.name}"
        )
    names = models_in(cfg.suite.rules)
    if name not in names:
        raise ConfigError(
            f"model={name!r} with model.source={source} is not in suite {suite.name}; "
            f"allowed: {', '.join(names)}"
        )
    if suite.package and (lack := lacks(cfg.toolchain, suite.package)):
        raise InvalidCombination(
            f"model={name} is a {suite.name} model, which needs {suite.package}, but "
            f"{lack[0]}; allowed: {lack[1]}"
        )


def job_name(cfg: BenchConfig) -> str:
    """Readable name: model·backend[settings]·test and the non-default axes."""
    label = backend_of(cfg).label
    if settings := settings_of(cfg.inductor) | dynamic_settings(cfg.dynamo):
        shown = (k if v is True else f"{k}={setting_text(v)}" for k, v in settings.items())
        label += "[" + ",".join(shown) + "]"
    parts = [cfg.model.name, label, cfg.test.name]
    if cfg.accelerator.name not in ("cpu", "auto"):
        parts.append(cfg.accelerator.name)
    if cfg.dtype:
        parts.append(cfg.dtype)
    return "·".join(parts)


def _untaken(cfg: BenchConfig, backend: type[backends.Backend]) -> tuple[BenchConfig, list[str]]:
    """The config less the settings its backend does not take, and a note for each."""
    notes = []
    if settings_of(cfg.inductor) and not backend.takes(INDUCTOR):
        takers = "|".join(b.dynamo for b in backends.REGISTRY.values() if b.takes(INDUCTOR))
        notes.append(
            f"{INDUCTOR}.* settings ({', '.join(settings_of(cfg.inductor))}) apply to "
            f"dynamo={takers} only, but this job runs dynamo={cfg.dynamo.name}; allowed: "
            f"dynamo={takers}, or no inductor.* setting (in a sweep, such a job runs without them)"
        )
        cfg = dataclasses.replace(cfg, inductor={})
    if cfg.xla.flags and not backend.takes(XLA_FLAGS_KEY):
        notes.append(
            f"{XLA_FLAGS_KEY}={cfg.xla.flags} applies on the XLA device only, but this job "
            f"runs dynamo={cfg.dynamo.name} xla={backend.xla_value()}; allowed: xla=PJRT or "
            "dynamo=openxla, or no xla.flags (in a sweep, such a job runs without them)"
        )
        cfg = dataclasses.replace(cfg, xla=dataclasses.replace(cfg.xla, flags=None))
    dynamic_key = "dynamo.dynamic"  # a key of DYNAMIC: Backend.takes takes both or neither
    if (dynamic := dynamic_settings(cfg.dynamo)) and not backend.takes(dynamic_key):
        given = ", ".join(f"dynamo.{k}={setting_text(v)}" for k, v in dynamic.items())
        takers = "|".join(b.dynamo for b in backends.REGISTRY.values() if b.takes(dynamic_key))
        notes.append(
            f"{given} applies under torch.compile only, but this job runs "
            f"dynamo={cfg.dynamo.name}; allowed: dynamo={takers}, "
            "or no dynamo.dynamic* setting (in a sweep, such a job runs without them)"
        )
        static = dataclasses.replace(cfg.dynamo, dynamic=None, dynamic_batch=False)
        cfg = dataclasses.replace(cfg, dynamo=static)
    if (why := _mode_untaken(cfg, backend)) is not None:
        notes.append(f"{why} (in a sweep, such a job runs without it)")
        cfg = dataclasses.replace(cfg, dynamo=dataclasses.replace(cfg.dynamo, mode=None))
    return cfg, notes


def _mode_untaken(cfg: BenchConfig, backend: type[backends.Backend]) -> str | None:
    """Why the job's dynamo.mode does not apply (reduce-overhead: CUDA graphs, GPU only)."""
    mode = cfg.dynamo.mode
    if mode in (None, "default"):
        return None
    if not backend.takes(MODE_KEY):
        takers = "|".join(b.dynamo for b in backends.REGISTRY.values() if b.takes(MODE_KEY))
        return (
            f"{MODE_KEY}={mode} applies where Inductor compiles only, but this job "
            f"runs dynamo={cfg.dynamo.name}; allowed: dynamo={takers}, or no {MODE_KEY}"
        )
    if mode == "reduce-overhead" and cfg.accelerator.name != "cuda":
        others = "|".join(m for m in DYNAMO_MODE_CHOICES if m != mode)
        return (
            f"{MODE_KEY}={mode} captures CUDA graphs, which run on a GPU only, but this job "
            f"runs on accelerator={cfg.accelerator.name}; allowed: {MODE_KEY}={others}, "
            "or accelerator=cuda"
        )
    return None


def _skip_lists(cfg: BenchConfig, backend: type[backends.Backend]) -> list[str]:
    """The suite's skip lists this job honours beyond every job's (backend's, freezing)."""
    lists = [f"skip.{name}" for name in backend.suite_skips]
    if settings_of(cfg.inductor).get("freezing") is True:
        lists.append(f"skip.freezing.{cfg.accelerator.name}")
    return lists


def plan_job(composed: Any, num: int, overrides: Sequence[str], *, single: bool = False) -> Job:
    """One composed config -> its Job (ConfigError: a bad value; invalid: a Job never run)."""
    return plan_config(parse(composed), num, overrides, single=single)


def plan_config(
    cfg: BenchConfig, num: int, overrides: Sequence[str], *, single: bool = False
) -> Job:
    """:func:`plan_job` for a config already parsed and checked (config/validate.py)."""
    # first, so that an invalid pair's row names its toolchain and rules as a valid job's
    cfg = dataclasses.replace(
        cfg, toolchain=resolve_toolchain(cfg.toolchain), suite=with_rules(cfg.suite)
    )
    try:
        resolved = resolve(cfg)
    except InvalidCombination as exc:
        if single:
            raise
        return Job(
            num=num,
            name=job_name(cfg),
            overrides=tuple(overrides),
            config=cfg,
            backend=backends.of_row(cfg.dynamo.name, cfg.xla.name).label,
            invalid=f"{INVALID_PREFIX}{exc}",
        )
    return _with_rules(resolved, num, tuple(overrides), single)


def _with_rules(cfg: BenchConfig, num: int, overrides: tuple[str, ...], single: bool) -> Job:
    from benchflow.models.sharing import build_device
    from benchflow.models.torchbench_index import not_implemented
    from benchflow.suite.rules import decide

    backend = backend_of(cfg)
    if single and cfg.pair is not None:
        raise ConfigError(
            f"pair={cfg.pair} compares a sweep's two values of {cfg.pair}, but this is a "
            f"single run; allowed: a sweep, -m {cfg.pair}=A,B pair={cfg.pair}"
        )
    for var in settings_of(cfg.env):
        if why := why_not_env(var):
            raise ConfigError(why)
    cfg, notes = _untaken(cfg, backend)
    name = job_name(cfg)  # from the user's choices, before suite rules fill in dtype
    decision = decide(
        cfg.suite,
        cfg.model.name,
        cfg.test.name,
        cfg.accelerator.name,
        cfg.dtype,
        cfg.batch_size,
        lists=_skip_lists(cfg, backend),
    )
    cfg = dataclasses.replace(cfg, dtype=decision.dtype, batch_size=decision.batch_size)
    skip = decision.skip
    if cfg.ir.inductor_code and not backend.generates_code:
        notes.append(
            "ir.inductor_code=true needs dynamo="
            + "|".join(b.dynamo for b in backends.REGISTRY.values() if b.generates_code)
            + f", but this job runs dynamo={cfg.dynamo.name}: it generates no code"
        )
    if (cfg.ir.formats or cfg.ir.xla_dump) and not backend.on_xla:
        notes.append(
            f"ir.formats={list(cfg.ir.formats)} needs the XLA device, but this job runs "
            f"dynamo={cfg.dynamo.name} with xla={cfg.xla.name}: it has no XLA IR; "
            "allowed: xla=PJRT or dynamo=openxla (or ir=none)"
        )
    if cfg.share_build and cfg.prefork and not single and (where := build_device(cfg)) != "cpu":
        notes.append(
            f"share_build=true, but TorchBench builds {cfg.model.name} on the job's device "
            f"({where}), not the host: it builds its own model"
        )
    if notes and single and not skip:
        raise ConfigError(notes[0])  # a single run asked for something it cannot have
    if not skip and cfg.model.source == "torchbench":  # a fact of the model, not a setting
        assert cfg.suite.torchbench_root, "resolve() found the TorchBench root"
        root = Path(cfg.suite.torchbench_root)
        if said := not_implemented(root, cfg.model.name, cfg.accelerator.name, cfg.test.name):
            notes.append(said)
    return Job(
        num=num,
        name=name,
        overrides=overrides,
        config=cfg,
        backend=backend.label,
        skip=skip,
        notes=tuple(notes),
        sources={
            "dtype_source": decision.dtype_source,
            "batch_size_source": decision.batch_size_source,
        },
    )
