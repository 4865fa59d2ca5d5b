"""What a backend is: one class per option, stating everything the stages ask of it.

A backend is what a report's column names: eager PyTorch, lazy XLA, or a
``torch.compile`` backend. Its class attributes need no torch (the parent plans from
them); the methods that need torch import it and run only in the job's child.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from benchflow.backends.device import Device
    from benchflow.config.schema import DynamoConfig

REGISTRY: dict[str, type[Backend]] = {}  # label -> class, in registration order

# The lazy-tensor XLA device: the `xla=` value that selects it, and "no XLA device".
XLA_DEVICE = "PJRT"
NO_XLA = "none"


# torch_xla variables a child forked after torch_xla's import may still set: torch_xla
# reads them later (at the first sync, the PJRT client's creation, the first compile).
XLA_PERSISTENT_CACHE = ("XLA_PERSISTENT_CACHE_PATH", "XLA_PERSISTENT_CACHE_READ_ONLY")
XLA_ENV_READ_LATER = frozenset(
    {"XLA_SAVE_TENSORS_FILE", "XLA_SAVE_TENSORS_FMT", "XLA_FLAGS", *XLA_PERSISTENT_CACHE}
)


class Backend:
    """One backend. Subclasses set the class attributes and override what differs."""

    label: ClassVar[str]  # the column's name in reports, run names, the MLflow param
    dynamo: ClassVar[str]  # the `dynamo=` option that selects it (`none`: no torch.compile)
    summary: ClassVar[str]  # one line for --help and messages
    on_xla: ClassVar[bool] = False  # runs on the lazy XLA device (`xla=PJRT`; `ir=` applies)
    auto: ClassVar[bool] = True  # the one `xla=auto` picks among the same `dynamo=` option
    compiles: ClassVar[bool] = False  # goes through torch.compile (dynamo counters apply)
    has_compile_step: ClassVar[bool] = True  # its first call compiles (the report's compile)
    accelerators: ClassVar[tuple[str, ...]] = ("cpu", "cuda")  # resolved accelerator values
    # Compiles with Inductor: its generated source can be kept (ir.inductor_code), and
    # torch._inductor.config's settings apply (inductor.<key>=)
    generates_code: ClassVar[bool] = False
    compile_zygote: ClassVar[str] = "dynamo"  # the zygote (runner/zygote.py KINDS) it compiles in
    # Compiles an export of the model ahead of its first call (--export-aot-inductor):
    # its step calls the compiled model, not a compiled step function
    exports: ClassVar[bool] = False
    trains: ClassVar[bool] = True  # can time test=train
    # The suite's skip lists (suite/mirrors/*.yaml `skip.<list>`) its jobs honour beyond
    # every backend's (suite/rules.py)
    suite_skips: ClassVar[tuple[str, ...]] = ()

    # --- facts derived from the above (parent side, no torch) -----------------------

    @classmethod
    def xla_value(cls) -> str:
        """The `xla=` value this backend runs with."""
        return XLA_DEVICE if cls.on_xla else NO_XLA

    @classmethod
    def takes(cls, key: str) -> bool:
        """Does a measured setting (a dotted key, or a section) apply to its jobs? The
        `inductor` section and `dynamo.mode` only with Inductor, dynamic shapes only under
        torch.compile, `xla.flags` only on the XLA device."""
        from benchflow.config.schema import DYNAMIC, INDUCTOR, MODE_KEY, XLA_FLAGS_KEY

        if key in DYNAMIC:
            return cls.compiles
        if key == MODE_KEY or key.partition(".")[0] == INDUCTOR:
            return cls.generates_code
        return cls.on_xla if key == XLA_FLAGS_KEY else True

    @classmethod
    def zygote(cls, env: dict[str, str], trains: bool = False) -> str:
        """The preforked interpreter its jobs fork from (runner/zygote.py): torch_xla's
        where the environment leaves its import alone; the compile stack for backends that
        compile (`compile_zygote`) and for training (a torch.optim optimizer imports
        torch._dynamo)."""
        read_at_import = [
            k for k in env if k.startswith(("XLA_", "PJRT_")) and k not in XLA_ENV_READ_LATER
        ]
        if cls.on_xla and not read_at_import:
            return "xla"
        if cls.compiles or cls.exports:
            return cls.compile_zygote
        return "dynamo" if trains else "torch"

    @classmethod
    def cache_env(cls, root: str, persistent: bool) -> dict[str, str]:
        """Compile-cache variables for a job whose caches live under `root`; persistent
        (compile_cache=warm) also keeps XLA's compiled executables across jobs."""
        env = {"TORCHINDUCTOR_CACHE_DIR": f"{root}/inductor"}
        if persistent:
            env |= dict(zip(XLA_PERSISTENT_CACHE, (f"{root}/xla", "0"), strict=True))
        return env

    # --- the job's child (torch imported) -----------------------------------------

    @classmethod
    def make_device(cls, accelerator: str) -> Device:
        """Where the model runs and how the timer waits for it."""
        from benchflow.backends.device import XlaDevice, native_device

        return XlaDevice(accelerator) if cls.on_xla else native_device(accelerator)

    @classmethod
    def prepare(cls, module: Any, dynamo: DynamoConfig) -> Any:
        """The module as this backend runs it (the same module: no compiler)."""
        return module

    @classmethod
    def probes(cls) -> list[Any]:
        """Counters read around each timed repeat (see backends/probes.py)."""
        from benchflow.backends.probes import DynamoProbe, ExportProbe, XlaMetricsProbe

        out: list[Any] = []
        if cls.on_xla:
            out.append(XlaMetricsProbe())
        if cls.compiles or cls.exports:  # Inductor's counters; dynamo's stay 0 on export
            out.append(DynamoProbe())
        if cls.exports:
            out.append(ExportProbe())
        return out


class DynamoBackend(Backend):
    """A `torch.compile` backend: dynamo captures graphs, the named backend compiles them."""

    compiles = True

    @classmethod
    def prepare(cls, module: Any, dynamo: DynamoConfig) -> Any:
        import torch

        return torch.compile(
            module,
            backend=cls.dynamo,
            mode=dynamo.mode,
            fullgraph=dynamo.fullgraph,
            dynamic=dynamo.dynamic,
        )


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator: add a backend to the registry (its label must be new)."""
    if cls.label in REGISTRY:
        raise ValueError(f"backend label {cls.label!r} registered twice")
    REGISTRY[cls.label] = cls
    return cls
