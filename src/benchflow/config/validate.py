"""Validation at the edge: a composed config becomes a typed, resolved BenchConfig.

Every error names the key, the bad value and what is allowed, so the user can fix
the command line without reading code. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from benchflow.backends.catalog import (
    ACCELERATOR_CHOICES,
    BACKENDS,
    BASELINE_CHOICES,
    DTYPE_CHOICES,
    MATMUL_PRECISION_CHOICES,
    MODEL_SOURCE_CHOICES,
    RETRY_CHOICES,
    TEST_CHOICES,
    XLA_CHOICES,
    backend_label,
)
from benchflow.config.schema import BenchConfig, ModelConfig, SuiteConfig

SIZE_CHOICES = ("tiny", "small", "base", "large")
IR_FORMATS = ("text", "hlo", "stablehlo")


class ConfigError(ValueError):
    """A bad value: the run must not start."""


class InvalidCombination(ConfigError):
    """Two valid values that cannot go together; in a sweep the job is skipped."""


def _choice(key: str, value: Any, allowed: tuple[str, ...] | list[str]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not allowed; allowed values: {', '.join(allowed)}")


def _at_least(key: str, value: float | None, low: float, *, exclusive: bool = False) -> None:
    if value is None:
        return
    bad = value <= low if exclusive else value < low
    if bad:
        bound = f"> {low:g}" if exclusive else f">= {low:g}"
        raise ConfigError(f"{key}={value!r} is out of range; allowed: a number {bound}")


COMPILE_CACHE_CHOICES = ("cold", "warm")


def check_values(cfg: BenchConfig) -> None:
    """Single-key checks: choices and ranges."""
    _choice("dynamo", cfg.dynamo.name, list(BACKENDS))
    _choice("xla", cfg.xla.name, XLA_CHOICES)
    _choice("accelerator", cfg.accelerator.name, ACCELERATOR_CHOICES)
    _choice("test", cfg.test.name, TEST_CHOICES)
    _choice("model.source", cfg.model.source, MODEL_SOURCE_CHOICES)
    _choice("model.size", cfg.model.size, SIZE_CHOICES)
    _choice("matmul_precision", cfg.matmul_precision, MATMUL_PRECISION_CHOICES)
    _choice("baseline", cfg.baseline, list(BASELINE_CHOICES))
    _choice("retry", cfg.retry, RETRY_CHOICES)
    if cfg.dtype is not None:
        _choice("dtype", cfg.dtype, DTYPE_CHOICES)
    if cfg.memory_limit_gb is not None:
        _at_least("memory_limit_gb", cfg.memory_limit_gb, 0, exclusive=True)
    _at_least("repeat", cfg.repeat, 1)
    _at_least("iterations_per_run", cfg.iterations_per_run, 1)
    _at_least("warmup", cfg.warmup, 0)
    _at_least("batch_size", cfg.batch_size, 1)
    _at_least("timeout_s", cfg.timeout_s, 0, exclusive=True)
    _at_least("num_threads", cfg.num_threads, 1)
    _at_least("max_warmup", cfg.max_warmup, 1)
    _at_least("max_repeat", cfg.max_repeat, 1)
    _at_least("target_ci", cfg.target_ci, 0, exclusive=True)
    _choice("compile_cache", cfg.compile_cache, COMPILE_CACHE_CHOICES)
    if cfg.adaptive_repeat and cfg.max_repeat < cfg.repeat:
        raise ConfigError(
            f"max_repeat={cfg.max_repeat} is below repeat={cfg.repeat} with adaptive_repeat=true;"
            f" allowed: max_repeat >= {cfg.repeat}"
        )
    if cfg.cpus_per_job is not None:
        cores = len(os.sched_getaffinity(0))
        if not 1 <= cfg.cpus_per_job <= cores:
            raise ConfigError(
                f"cpus_per_job={cfg.cpus_per_job!r} is out of range; allowed: 1..{cores} "
                f"(the CPUs this host gives benchflow) or null (all of them)"
            )
    _choice("profile", cfg.profile.name, ("off", "torch"))
    for key in ("wait", "warmup", "repeat"):
        _at_least(f"profile.{key}", getattr(cfg.profile, key), 0)
    _at_least("profile.active", cfg.profile.active, 1)
    for fmt in cfg.ir.formats:
        _choice("ir.formats", fmt, IR_FORMATS)
    if not cfg.model.name:
        raise ConfigError("model.name is empty; choose a model, e.g. model=llama")
    if cfg.model.source == "builtin" and not cfg.model.builtin:
        raise ConfigError(
            f"model.source='builtin' but model {cfg.model.name!r} has no built-in implementation; "
            "allowed: model.source=auto or torchbench"
        )


def cuda_present() -> bool:
    """Cheap probe without importing torch: an NVIDIA driver node exists and is visible."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")


def resolve(cfg: BenchConfig) -> BenchConfig:
    """Resolve the `auto` choices and check that the choices fit together.

    Raises InvalidCombination naming both keys when they do not.
    """
    spec = BACKENDS[cfg.dynamo.name]
    accelerator = cfg.accelerator.name
    if accelerator == "auto":
        accelerator = "cuda" if cuda_present() else "cpu"
    xla = cfg.xla.name
    if xla == "auto":
        xla = "PJRT" if spec.needs_xla else "none"

    if spec.needs_xla and xla != "PJRT":
        raise InvalidCombination(
            f"dynamo={cfg.dynamo.name} runs on the XLA device, but xla={xla}; "
            "allowed: xla=PJRT or xla=auto with this backend"
        )
    if xla == "PJRT" and not spec.needs_xla and cfg.dynamo.name != "none":
        allowed = ", ".join(n for n, s in BACKENDS.items() if s.needs_xla or n == "none")
        raise InvalidCombination(
            f"dynamo={cfg.dynamo.name} does not compile for the XLA device, but xla=PJRT; "
            f"allowed with xla=PJRT: dynamo={{{allowed}}}, or use xla=none"
        )
    if spec.needs_cuda and accelerator != "cuda":
        raise InvalidCombination(
            f"dynamo={cfg.dynamo.name} needs a CUDA GPU, but accelerator={accelerator}"
            + (" (auto found no GPU)" if cfg.accelerator.name == "auto" else "")
            + "; allowed: accelerator=cuda on a GPU machine"
        )
    if cfg.dtype in ("float16", "amp_fp16") and accelerator == "cpu" and xla == "none":
        # Half-precision CPU kernels exist for few ops; runs would fail deep inside a model.
        raise InvalidCombination(
            f"dtype={cfg.dtype} is not supported with accelerator=cpu; "
            "allowed on cpu: float32, float64, bfloat16, amp, amp_bf16"
        )
    model, suite = _resolve_model_source(cfg)
    return dataclasses.replace(
        cfg,
        model=model,
        suite=suite,
        xla=dataclasses.replace(cfg.xla, name=xla),
        accelerator=dataclasses.replace(cfg.accelerator, name=accelerator),
    )


def _resolve_model_source(cfg: BenchConfig) -> tuple[ModelConfig, SuiteConfig]:
    """model.source auto -> torchbench (when TorchBench has the model) or builtin.

    The TorchBench root is written into the config as an absolute path, so the
    child, the fingerprint and the row all name the checkout that ran.
    """
    from benchflow.models.torchbench_index import TorchBenchNotFound, find_root, list_models

    try:
        root = find_root(cfg.suite.torchbench_root)
    except TorchBenchNotFound as exc:
        raise ConfigError(str(exc)) from None
    name, source = cfg.model.name, cfg.model.source
    in_torchbench = root is not None and (root / "torchbenchmark" / "models" / name).is_dir()
    if source == "auto":
        source = "torchbench" if in_torchbench else "builtin"
    if source == "torchbench" and root is None:
        from benchflow.models.torchbench_index import CLONE_HINT

        raise ConfigError(f"model.source=torchbench but no TorchBench was found; {CLONE_HINT}")
    if source == "torchbench" and not in_torchbench:
        assert root is not None
        raise ConfigError(
            f"model={name!r} is not a TorchBench model in {root}; allowed: "
            + ", ".join(list_models(root))
        )
    if source == "builtin" and not cfg.model.builtin:
        raise ConfigError(
            f"model={name!r} has no built-in implementation and TorchBench is not installed; "
            "allowed: a built-in model (llama, dlrm, resnet, bert) or set suite.torchbench_root"
        )
    suite = dataclasses.replace(cfg.suite, torchbench_root=str(root) if root else None)
    return dataclasses.replace(cfg.model, source=source), suite


def parse(composed: Any) -> BenchConfig:
    """Composed DictConfig (or dict) -> checked, unresolved BenchConfig. Raises ConfigError."""
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
    check_values(cfg)
    return cfg


def validate(composed: Any) -> BenchConfig:
    """Composed config -> checked and resolved BenchConfig. Raises ConfigError."""
    return resolve(parse(composed))


def job_name(cfg: BenchConfig) -> str:
    """Readable run name: model·backend·test, plus the non-default axes that distinguish it."""
    parts = [cfg.model.name, backend_name(cfg), cfg.test.name]
    if cfg.accelerator.name not in ("cpu", "auto"):
        parts.append(cfg.accelerator.name)
    if cfg.dtype:
        parts.append(cfg.dtype)
    return "·".join(parts)


def backend_name(cfg: BenchConfig) -> str:
    """The job's backend as reports label it (see catalog.backend_label)."""
    return backend_label(cfg.dynamo.name, cfg.xla.name == "PJRT")
