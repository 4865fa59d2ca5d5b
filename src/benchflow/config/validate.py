"""Validation at the edge: a composed config becomes a typed BenchConfig, each key
checked alone (how keys go together is benchflow.sweep.plan's). Every error names the
key, the bad value and what is allowed. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from benchflow.config.errors import ConfigError, InvalidCombination
from benchflow.config.schema import (
    ACCELERATOR_CHOICES,
    COMPILE_CACHE_CHOICES,
    DTYPE_CHOICES,
    DYNAMO_MODE_CHOICES,
    FIRST_LOOK,
    HOST_ALLOCATOR_CHOICES,
    IR_FORMATS,
    LOWER_BOUNDS,
    MATMUL_PRECISION_CHOICES,
    MODEL_SOURCE_CHOICES,
    PAIRED_ROUNDS,
    PROFILE_CHOICES,
    RETRY_CHOICES,
    SIZE_CHOICES,
    STEP_CHOICES,
    TEST_CHOICES,
    TIMING_ONLY,
    XLA_CHOICES,
    BenchConfig,
    ToolchainConfig,
    setting_text,
)

__all__ = ["ConfigError", "InvalidCombination", "check_values", "parse", "typed"]


def _choice(key: str, value: Any, allowed: tuple[str, ...] | list[str]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not allowed; allowed values: {', '.join(allowed)}")


def _check_toolchain(tc: ToolchainConfig) -> None:
    """A toolchain's pins are exact releases (what uv installs and its environment's key hashes)."""
    from packaging.version import InvalidVersion, Version

    for package, version in tc.pins.items():
        try:
            Version(str(version))
        except InvalidVersion:
            raise ConfigError(
                f"toolchain.pins.{package}={version!r} is not a release version; allowed: "
                f"an exact version such as {package}=2.9.0 (toolchain={tc.name})"
            ) from None
    # One environment a toolchain: built for pins, or an existing interpreter.
    if tc.python is not None and tc.pins:
        pins = ", ".join(f"{k}=={v}" for k, v in tc.pins.items())
        raise ConfigError(
            f"toolchain.python={tc.python} and toolchain.pins ({pins}) name two "
            f"environments (toolchain={tc.name}); allowed: one of them (toolchain=project "
            "toolchain.python=..., or a toolchain of pins)"
        )
    if tc.build is not None and tc.python is None:
        raise ConfigError(
            f"toolchain.build={tc.build!r} describes an existing interpreter, but "
            "toolchain.python is null; allowed: toolchain.python=/path/to/bin/python"
        )


def check_values(cfg: BenchConfig) -> None:
    """Single-key checks: choices and ranges."""
    _choice("xla", cfg.xla.name, XLA_CHOICES)
    _choice("accelerator", cfg.accelerator.name, ACCELERATOR_CHOICES)
    _choice("test", cfg.test.name, TEST_CHOICES)
    _choice("model.source", cfg.model.source, MODEL_SOURCE_CHOICES)
    _choice("model.size", cfg.model.size, SIZE_CHOICES)
    _choice("model.step", cfg.model.step, STEP_CHOICES)
    _choice("matmul_precision", cfg.matmul_precision, MATMUL_PRECISION_CHOICES)
    _choice("host_allocator", cfg.host_allocator, HOST_ALLOCATOR_CHOICES)
    _choice("retry", cfg.retry, RETRY_CHOICES)
    if cfg.dtype is not None:
        _choice("dtype", cfg.dtype, DTYPE_CHOICES)
    if cfg.dynamo.mode is not None:
        _choice("dynamo.mode", cfg.dynamo.mode, DYNAMO_MODE_CHOICES)
    if cfg.dynamo.dynamic is False and cfg.dynamo.dynamic_batch:
        raise ConfigError(
            "dynamo.dynamic_batch=true marks the batch dimension dynamic, but "
            "dynamo.dynamic=false makes every size static; allowed: dynamo.dynamic=null "
            "(torch's automatic) or true with it, or dynamo.dynamic_batch=false"
        )
    if not cfg.mlflow.experiment.strip():
        raise ConfigError(
            f"mlflow.experiment={cfg.mlflow.experiment!r} is empty; allowed: a name, "
            "e.g. mlflow.experiment=benchflow (the default)"
        )
    for key, bound in LOWER_BOUNDS.items():
        value: Any = functools.reduce(getattr, key.split("."), cfg)  # null passes
        if value is not None and (value <= bound.low if bound.exclusive else value < bound.low):
            raise ConfigError(f"{key}={value!r} is out of range; allowed: a number {bound}")
    _choice("compile_cache", cfg.compile_cache, COMPILE_CACHE_CHOICES)
    _check_untimed(cfg)  # first: timing=false makes one process, which a pair refuses
    _check_pair(cfg)
    if cfg.adaptive_repeat and cfg.repeat is not None and cfg.max_repeat < cfg.repeat:
        raise ConfigError(
            f"max_repeat={cfg.max_repeat} is below repeat={cfg.repeat} with adaptive_repeat=true;"
            f" allowed: max_repeat >= {cfg.repeat}"
        )
    cores = len(os.sched_getaffinity(0))
    if cfg.cpus_per_job is not None and not 1 <= cfg.cpus_per_job <= cores:
        raise ConfigError(
            f"cpus_per_job={cfg.cpus_per_job!r} is out of range; allowed: 1..{cores} "
            f"(the CPUs this host gives benchflow) or null (all of them)"
        )
    # More threads than the job's cores only oversubscribe them: OpenMP's pools then
    # time the scheduler, not the model.
    usable = cfg.cpus_per_job or cores
    if cfg.num_threads is not None and not 1 <= cfg.num_threads <= usable:
        where = f"cpus_per_job={cfg.cpus_per_job}" if cfg.cpus_per_job else "this host"
        raise ConfigError(
            f"num_threads={cfg.num_threads!r} is out of range; allowed: 1..{usable} "
            f"(the cores {where} gives a job) or null (one per core)"
        )
    _choice("profile", cfg.profile.name, PROFILE_CHOICES)
    for fmt in cfg.ir.formats:
        _choice("ir.formats", fmt, IR_FORMATS)
    _check_toolchain(cfg.toolchain)
    if not cfg.model.name:
        raise ConfigError("model.name is empty; choose a model, e.g. model=llama")
    if cfg.model.source == "builtin" and not cfg.model.builtin:
        raise ConfigError(
            f"model.source='builtin' but model {cfg.model.name!r} has no built-in implementation; "
            "allowed: model.source=auto or torchbench"
        )


def _check_pair(cfg: BenchConfig) -> None:
    """A paired sweep's own settings (its axis is sweep/pairs.py's to check)."""
    if cfg.pair is None:
        return
    if not cfg.interleave:
        raise ConfigError(
            f"pair={cfg.pair} pairs the two sides' processes round by round, but "
            "interleave=false runs a job's processes back to back; allowed: interleave=true"
        )
    if cfg.process_count < FIRST_LOOK:
        raise ConfigError(
            f"processes={cfg.process_count} with pair={cfg.pair}: a pair is first judged "
            f"after {FIRST_LOOK} rounds; allowed: processes >= {FIRST_LOOK}, or null "
            f"({PAIRED_ROUNDS})"
        )


def _check_untimed(cfg: BenchConfig) -> None:
    """timing=false runs no warm-up or timed repeat: a setting of theirs would not apply."""
    if cfg.timing:
        return
    defaults = BenchConfig()
    for key in TIMING_ONLY:
        value, default = getattr(cfg, key), getattr(defaults, key)
        if value != default:
            raise ConfigError(
                f"{key}={setting_text(value)} applies to the timed repeats, but timing=false "
                f"runs none; allowed: {key}={setting_text(default)} (its default) with "
                "timing=false, or timing=true"
            )
    if cfg.profile.name != defaults.profile.name:
        raise ConfigError(
            f"profile={cfg.profile.name} profiles after the timed repeats, but timing=false "
            f"runs none; allowed: profile={defaults.profile.name} with timing=false, or "
            "timing=true"
        )


def parse(composed: Any) -> BenchConfig:
    """Composed DictConfig (or dict) -> checked, unresolved BenchConfig. Raises ConfigError."""
    cfg = typed(composed)
    check_values(cfg)
    return cfg


def typed(composed: Any) -> BenchConfig:
    """Composed DictConfig (or dict) -> BenchConfig: its keys and types checked, not yet
    its values (:func:`check_values`). Raises ConfigError."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        node = composed if isinstance(composed, DictConfig) else OmegaConf.create(composed)
        fields = [f.name for f in dataclasses.fields(BenchConfig)]
        unknown = sorted(set(node.keys()) - set(fields) - {"hydra"})
        if unknown:
            raise ConfigError(
                f"unknown key(s) {', '.join(map(str, unknown))}; allowed top-level keys: "
                + ", ".join(fields)
            )
        # Only the schema's keys: a composed config may also carry the `hydra` node.
        ours = OmegaConf.masked_copy(node, fields)
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(BenchConfig), ours))
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None)
        raise ConfigError(f"{key}: {exc.msg}" if key else str(exc)) from None
    assert isinstance(cfg, BenchConfig)
    return cfg
