"""Load a real TorchBench model in the isolated child, with TorchBench's own interface.

Built on the host (on CUDA for accelerator=cuda), then moved; TorchBench's quirks are
handled here, each covered by a fixture test. Loading patches ``torch.manual_seed`` and
may set a default device for the whole process: hence only ever in a job's own child.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from benchflow.models.base import moved
from benchflow.models.errors import MissingDependency, ModelSkipped

log = logging.getLogger(__name__)


DOWNLOAD_HINTS = ("urlopen", "download", "connection", "resolve", "offline", "huggingface", "hub")


def prepare_import(root: Path) -> None:
    """Put the checkout first on sys.path and forget any foreign `utils` module."""
    root_s = str(root)
    if root_s in sys.path:
        sys.path.remove(root_s)
    sys.path.insert(0, root_s)
    for name in [n for n in sys.modules if n == "utils" or n.startswith("utils.")]:
        file = getattr(sys.modules[name], "__file__", None) or ""
        if not file.startswith(root_s):
            log.info("dropped foreign module %s (%s): it shadows TorchBench's utils", name, file)
            del sys.modules[name]


def _classify_load_error(name: str, exc: BaseException) -> BaseException:
    if (
        isinstance(exc, ModuleNotFoundError)
        and exc.name
        and not exc.name.startswith(("torchbenchmark", "utils"))
    ):
        return MissingDependency(
            f"TorchBench model {name!r} needs the package {exc.name!r}, which is not installed; "
            f"install it into .venv (or run the model's install.py) and retry"
        )
    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, OSError) or any(hint in text for hint in DOWNLOAD_HINTS):
        return MissingDependency(
            f"TorchBench model {name!r} tried to download weights or data while loading and "
            f"failed ({type(exc).__name__}: {exc}); this machine has no such network access: "
            "pre-download them into the checkout or pick another model"
        )
    return exc


def _move_attrs(obj: object, device: torch.device, dtype: torch.dtype | None) -> None:
    """Move each tensor and module `obj` keeps; and, in a holder of the model's own that
    is no module (BERT_pytorch keeps a trainer in self.model, nvidia_deeprecommender its
    encoder and inputs), each that the holder keeps."""
    for attr, value in list(vars(obj).items()):
        new = moved(value, device, dtype)
        if new is not value:
            setattr(obj, attr, new)
        elif _is_holder(value):
            _move_attrs(value, device, dtype)


def _is_holder(value: object) -> bool:
    """An instance of a class of TorchBench's models' own, neither a module nor a tensor."""
    kind = type(value)
    return (
        kind.__module__.startswith("torchbenchmark.models.")
        and hasattr(value, "__dict__")
        and not isinstance(value, (nn.Module, torch.Tensor, type))
    )


class TorchBenchModel:
    """A TorchBench BenchmarkModel behind benchflow's BenchModel interface."""

    def __init__(
        self,
        root: Path,
        name: str,
        test: str,
        accelerator: str,
        batch_size: int | None,
    ) -> None:
        """The model as TorchBench builds it (on CUDA for accelerator=cuda); `place` moves it."""
        prepare_import(root)
        try:
            module = importlib.import_module(f"torchbenchmark.models.{name}")
            self.init_device = "cuda" if accelerator == "cuda" else "cpu"
            self.tb = module.Model(
                test=test, device=self.init_device, batch_size=batch_size, extra_args=[]
            )
        except (ModelSkipped, NotImplementedError) as exc:
            raise ModelSkipped(f"TorchBench's {name} cannot run {test}: {exc}") from exc
        except Exception as exc:
            raise _classify_load_error(name, exc) from exc
        torch.set_default_device(None)  # some models set it for the whole process
        self.name, self.test = name, test
        self.batch_size = int(self.tb.batch_size)
        self._module_and_inputs: tuple[Any, Any] | None = None  # get_module()'s one answer

    def place(self, device: torch.device, dtype: torch.dtype | None) -> TorchBenchModel:
        """On the job's device, in its dtype (nothing to do where it was built as is)."""
        if device.type != self.init_device or dtype is not None:
            self._move_state(device, dtype)
        return self

    def _move_state(self, device: torch.device, dtype: torch.dtype | None) -> None:
        """Move every tensor and module the model keeps, so its own step runs there; an
        optimizer is rebuilt over the moved parameters (moving to XLA makes new ones)."""
        optimizer = self.tb.get_optimizer() if self.test == "train" else None
        # What get_module() returns is what is timed, asked once before anything moves (as
        # the experiment runner does: soft_actor_critic's runs its module on new float32
        # data at each call), then moved: its module in place, wherever the model keeps it
        module, inputs = self.get_module()
        _move_attrs(self.tb, device, dtype)
        if isinstance(module, nn.Module):
            moved(module, device, dtype)
        self._module_and_inputs = (module, tree_map(lambda v: moved(v, device, dtype), inputs))
        if isinstance(optimizer, torch.optim.Optimizer):
            self.tb.set_optimizer(type(optimizer)(module.parameters(), **optimizer.defaults))

    # -- BenchModel interface ----------------------------------------------------
    def get_module(self) -> tuple[nn.Module, Any]:
        """TorchBench's get_module(), asked once: its module and example inputs."""
        if self._module_and_inputs is None:
            self._module_and_inputs = self.tb.get_module()
        return self._module_and_inputs  # type: ignore[return-value]

    def set_module(self, module: nn.Module) -> None:
        self.tb.set_module(module)
        self._module_and_inputs = (module, self.get_module()[1])

    def train(self) -> Any:
        result = self.tb.train()
        if isinstance(result, BaseException):  # llama returns, not raises, its error
            raise ModelSkipped(f"TorchBench's {self.name}.train() returned {result!r}"[:500])
        return result

    def eval(self) -> tuple[Any, ...]:
        out = self.tb.eval()
        if isinstance(out, BaseException):
            raise ModelSkipped(f"TorchBench's {self.name}.eval() returned {out!r}"[:500])
        return out if isinstance(out, tuple) else (out,)
