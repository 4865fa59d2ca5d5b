"""The backend registry: every backend is a module of this package (see base.py).

Importing the package imports each module, and each registers its class; no torch here.
Adding a backend = one module here + one ``conf/dynamo/<option>.yaml``
(docs/adding-a-backend.md).
"""

from __future__ import annotations

import importlib
import pkgutil

from benchflow.backends.base import NO_XLA, REGISTRY, XLA_DEVICE, Backend, DynamoBackend
from benchflow.config.errors import ConfigError, InvalidCombination

_NOT_BACKENDS = {"base", "device", "probes"}  # modules of this package that define none

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name not in _NOT_BACKENDS:
        importlib.import_module(f"{__name__}.{_info.name}")

from benchflow.backends.inductor import ISA_CHECK, ISA_CHECK_NAME  # noqa: E402

# The machine checks a zygote may run before its jobs (runner/zygote.py KINDS), in words.
MACHINE_CHECKS = {ISA_CHECK: ISA_CHECK_NAME}

__all__ = [
    "MACHINE_CHECKS",
    "REGISTRY",
    "Backend",
    "DynamoBackend",
    "baseline_choices",
    "dynamo_choices",
    "get",
    "of_row",
    "select",
]


def get(label: str) -> type[Backend]:
    return REGISTRY[label]


def dynamo_choices() -> list[str]:
    """The `dynamo=` options, in registry order (`none`: no torch.compile)."""
    return list(dict.fromkeys(b.dynamo for b in REGISTRY.values()))


def baseline_choices() -> list[str]:
    """What `baseline=` and `report --baseline` accept: a label, or `none` for eager."""
    return [*REGISTRY, "none"]


def baseline_label(choice: str) -> str:
    """`none` (no dynamo) means eager."""
    return "eager" if choice == "none" else choice


def of_row(dynamo: str | None, xla: str | None) -> type[Backend]:
    """The backend of a recorded job (None: `dynamo=none` / no XLA device)."""
    dynamo = dynamo or "none"
    on_xla = xla not in (None, NO_XLA, "auto")
    for backend in REGISTRY.values():
        if backend.dynamo == dynamo and backend.on_xla == on_xla:
            return backend
    for backend in REGISTRY.values():  # rows of an invalid pair: the dynamo option's own
        if backend.dynamo == dynamo and backend.auto:
            return backend
    raise KeyError(f"no backend for dynamo={dynamo} xla={xla}")


def select(
    dynamo: str, xla: str, accelerator: str, *, auto_accelerator: bool = False
) -> type[Backend]:
    """The backend a job's choices name, with `xla=auto` resolved; raises
    InvalidCombination naming both keys when they cannot go together."""
    options = [b for b in REGISTRY.values() if b.dynamo == dynamo]
    if not options:
        raise ConfigError(
            f"dynamo={dynamo!r} is not allowed; allowed values: {', '.join(dynamo_choices())}"
        )
    if xla == "auto":
        chosen = next(b for b in options if b.auto)
    else:
        found = next((b for b in options if b.xla_value() == xla), None)
        if found is None and xla == XLA_DEVICE:
            allowed = ", ".join(b.dynamo for b in REGISTRY.values() if b.on_xla)
            raise InvalidCombination(
                f"dynamo={dynamo} does not compile for the XLA device, but xla={XLA_DEVICE}; "
                f"allowed with xla={XLA_DEVICE}: dynamo={{{allowed}}}, or use xla={NO_XLA}"
            )
        if found is None:
            raise InvalidCombination(
                f"dynamo={dynamo} runs on the XLA device, but xla={xla}; "
                f"allowed: xla={XLA_DEVICE} or xla=auto with this backend"
            )
        chosen = found
    if accelerator not in chosen.accelerators:
        cuda_only = chosen.accelerators == ("cuda",)
        raise InvalidCombination(
            f"dynamo={dynamo} needs {'a CUDA GPU' if cuda_only else '/'.join(chosen.accelerators)}"
            f", but accelerator={accelerator}"
            + (" (auto found no GPU)" if auto_accelerator else "")
            + f"; allowed: accelerator={'|'.join(chosen.accelerators)}"
            + (" on a GPU machine" if cuda_only else "")
        )
    return chosen
