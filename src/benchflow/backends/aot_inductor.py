"""AOTInductor: the model exported (torch.export), compiled ahead of time into a package
by Inductor, loaded, and called on the inputs (the dynamo benchmarks'
--export-aot-inductor, the Inductor dashboard's `aotinductor`).

The export and the compile happen at the first call (the export traces its inputs), so
they are the job's cold start like any backend's compile, each counted apart
(backends/probes.ExportProbe).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from benchflow.backends.base import Backend, register
from benchflow.backends.probes import EXPORT_SPENT
from benchflow.core.environ import variable

if TYPE_CHECKING:
    from benchflow.config.schema import DynamoConfig


@register
class AotInductor(Backend):
    label = "aot_inductor"
    dynamo = "aot_inductor"
    summary = "AOTInductor: torch.export, compiled ahead of time into a package, loaded"
    generates_code = True
    compile_zygote = "inductor"  # Inductor's C++ toolchain check, once (backends/inductor.py)
    exports = True
    trains = False  # AOTInductor compiles inference graphs only
    # What the dynamo benchmarks leave out with --export-aot-inductor
    suite_skips = ("control_flow", "export_not_supported")

    @classmethod
    def prepare(cls, module: Any, dynamo: DynamoConfig) -> Any:
        return _Exported(module, dynamo.mode)


class _Exported:
    """The module, exported and compiled at its first call, then its package's model."""

    def __init__(self, module: Any, mode: str | None) -> None:
        self.module, self.mode = module, mode
        self.compiled: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.compiled is None:
            self.compiled = self._compile(args, kwargs)
        return self.compiled(*args, **kwargs)

    def _compile(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import torch
        from torch import _inductor

        t0 = time.perf_counter()
        exported = torch.export.export(self.module, args, kwargs)
        t1 = time.perf_counter()
        EXPORT_SPENT["export"] += t1 - t0
        # dynamo.mode as torch.compile takes it (max-autotune: Inductor's autotuning);
        # torch._inductor.config's own settings (inductor.<key>=) are patched around the job
        options = _inductor.list_mode_options(self.mode) if self.mode else {}
        with _scratch() as folder:
            path = _inductor.aoti_compile_and_package(
                exported, package_path=f"{folder}/model.pt2", inductor_configs=options
            )
            loaded = _inductor.aoti_load_package(path)
        EXPORT_SPENT["compile"] += time.perf_counter() - t1
        return loaded


@contextlib.contextmanager
def _scratch() -> Iterator[str]:
    """A folder for the package and what loading it unpacks (TMPDIR), under the job's
    Inductor cache; removed once loaded (the loaded library stays mapped)."""
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if root:
        os.makedirs(root, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="aoti-", dir=root)
    try:
        with variable("TMPDIR", folder):
            tempfile.tempdir = None  # read TMPDIR again
            yield folder
    finally:
        tempfile.tempdir = None  # and again, as it was
        shutil.rmtree(folder, ignore_errors=True)
