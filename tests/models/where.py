"""A tiny model that writes down where its job ran: the interpreter, sys.path, the file
torch was imported from, six's version and how the process started, as a JSON line
appended to $BENCHFLOW_TEST_WHERE (tests/test_toolchains.py)."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from torch import nn

from benchflow.models.base import BenchModel


class Where(BenchModel):
    DEFAULT_TRAIN_BSIZE = 4
    DEFAULT_EVAL_BSIZE = 4
    SIZES = {s: {"width": 16} for s in ("tiny", "small", "base", "large")}

    def build_module(self, width: int) -> nn.Module:
        import six
        import torch

        seen = {
            "executable": sys.executable,
            "prefix": sys.prefix,
            "path": sys.path,
            "torch": torch.__file__,
            "six": six.__version__,
            "launch": os.environ.get("BENCHFLOW_LAUNCH"),  # fork: from a zygote
        }
        with open(os.environ["BENCHFLOW_TEST_WHERE"], "a") as f:
            f.write(json.dumps(seen) + "\n")
        return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))

    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        import torch

        return (torch.randn(batch_size, 16),)


class _Paced(nn.Module):
    """A tiny MLP whose forward also waits 4 ms where six is 1.16 or later: a real
    difference between releases of a package, as this model sees it."""

    def __init__(self, width: int, wait_s: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
        self.wait_s = wait_s

    def forward(self, x: Any) -> Any:
        if self.wait_s:
            time.sleep(self.wait_s)
        return self.net(x)


class SixPaced(Where):
    """Where's model, 4 ms slower a step from six 1.16.0 on (tests/test_toolchains.py)."""

    def build_module(self, width: int) -> nn.Module:
        import six
        from packaging.version import Version

        return _Paced(width, 0.004 if Version(six.__version__) >= Version("1.16.0") else 0.0)
