"""Models that misbehave on purpose, to prove the harness survives them.

Each is a tiny MLP whose step crashes the interpreter, hangs, raises, or spawns
a grandchild that outlives it. Tests select them through tests/conf/model/.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from torch import nn

from benchflow.models.base import BenchModel


class _Tiny(BenchModel):
    DEFAULT_TRAIN_BSIZE = 4
    DEFAULT_EVAL_BSIZE = 4
    SIZES = {s: {"width": 16} for s in ("tiny", "small", "base", "large")}

    def build_module(self, width: int) -> nn.Module:
        return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))

    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        import torch

        return (torch.randn(batch_size, 16),)


class Crash(_Tiny):
    """Aborts the interpreter (SIGABRT) on the first step."""

    def eval(self) -> Any:
        os.abort()


class Hang(_Tiny):
    """Sleeps forever in the first step, with a grandchild that sleeps too."""

    def eval(self) -> Any:
        # Stands in for a compile worker: must die with the job on timeout.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        while True:
            time.sleep(1)


class Sleepy(_Tiny):
    """A step that takes 0.25 s of sleep (no CPU): a job whose length is the same on any
    machine and under any load, for tests that signal a sweep while a job runs."""

    def eval(self) -> Any:
        time.sleep(0.25)
        return self.model(*self.example_inputs)


class Jittery(_Tiny):
    """A step that sleeps 0.1 s times its process's factor: 1 at model.size=tiny; at
    small, process n's is FACTORS[n] (+6%, -6%, 0, ...). Paired on model.size, its
    rounds' ratios are +6%, -6% and 0: a change within a 2% threshold whose spread no 8
    rounds could narrow to it, the case a paired sweep stops as out of reach. A process
    counts itself at its first step, in a file per size under JITTERY_DIR (a model
    built once for a job's processes is forked into each)."""

    FACTORS = (1.06, 1 / 1.06, 1.0, 1.06, 1 / 1.06, 1.0, 1.06, 1 / 1.06)

    def eval(self) -> Any:
        if getattr(self, "_pid", None) != os.getpid():
            self._pid, self._factor = os.getpid(), 1.0
            if self.size == "small":
                count = Path(os.environ["JITTERY_DIR"]) / f"{self.size}.count"
                with count.open("a+") as f:
                    f.seek(0)
                    n = len(f.read())
                    f.write(".")
                self._factor = self.FACTORS[n % len(self.FACTORS)]
        time.sleep(0.1 * self._factor)
        return self.model(*self.example_inputs)


class Segfault(_Tiny):
    """Dereferences address 0 through ctypes on the first step (SIGSEGV)."""

    def eval(self) -> Any:
        import ctypes

        ctypes.string_at(0)


class Oom(_Tiny):
    """Allocates 256 MiB tensors, holding them, until memory runs out (or 64 GiB)."""

    def eval(self) -> Any:
        import torch

        held = [torch.ones(64 * 1024 * 1024) for _ in range(256)]
        return held[-1]


# A chaos sweep's faults (tests/test_chaos.py): which of its jobs misbehave and how is
# a function of the job's seed alone, so the test knows what each row must say.
CHAOS_SEED = 43  # in seeds 0-39: one fault of each kind (and a second exit), 5 of 40
CHAOS_SHARE = 0.1  # of the jobs
CHAOS_FAULTS = ("segfault", "exit", "hang", "oom")


def chaos_fault(seed: int) -> str | None:
    """The fault the chaos job of this seed injects, or None (it runs ok)."""
    rng = random.Random(f"{CHAOS_SEED}:{seed}")
    return rng.choice(CHAOS_FAULTS) if rng.random() < CHAOS_SHARE else None


class Chaos(_Tiny):
    """A tiny MLP whose first step, in about one job in ten (chaos_fault of the job's
    seed, which the harness gave torch), crashes (SIGSEGV, or os._exit(3) with no
    result), hangs, or allocates past memory_limit_gb."""

    def eval(self) -> Any:
        import torch

        fault = chaos_fault(torch.initial_seed())
        if fault == "segfault":
            import ctypes

            ctypes.string_at(0)
        elif fault == "exit":
            os._exit(3)
        elif fault == "hang":
            while True:
                time.sleep(1)
        elif fault == "oom":
            held = [torch.ones(64 * 1024 * 1024) for _ in range(256)]
            return held[-1]
        return self.model(*self.example_inputs)


class RaisesWhileLoading(_Tiny):
    """Fails while the model is built, before any step (a broken checkpoint, say)."""

    def build_module(self, width: int) -> nn.Module:
        raise OSError("injected failure while loading the model: checkpoint.pt is truncated")


class Raise(_Tiny):
    """Raises a Python exception on the first step."""

    def eval(self) -> Any:
        raise RuntimeError("injected failure in eval step")


class MatmulChain(BenchModel):
    """A few traced ops whose execution is expensive: the lazy-XLA timing check.

    Tracing 8 matmuls costs microseconds; executing them costs tens of ms. A
    harness that stopped its timer before the device finished would report a
    per-iteration time close to the tracing time.
    """

    DEFAULT_TRAIN_BSIZE = 512
    DEFAULT_EVAL_BSIZE = 512
    SIZES = {"tiny": {"n": 256}, "small": {"n": 512}, "base": {"n": 768}, "large": {"n": 1024}}

    def build_module(self, n: int) -> nn.Module:
        return nn.Sequential(*[nn.Linear(n, n, bias=False) for _ in range(8)])

    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        import torch

        n = module[0].in_features  # type: ignore[index]
        return (torch.randn(batch_size, n) / n**0.5,)


class LoadsABlas(MatmulChain):
    """MatmulChain, whose build loads a BLAS library that starts a pool of threads on
    loading: scipy's own OpenBLAS, as TorchBench's dlrm loads it (through sklearn)."""

    def build_module(self, n: int) -> nn.Module:
        import scipy.linalg  # noqa: F401

        return super().build_module(n)


class _CastsItsCache(nn.Sequential):
    """MatmulChain's 8 matmuls and a cache that the first call casts to its input's
    dtype, as TorchBench's llama casts its KV cache: the second call fails dynamo's
    guard on the cache's dtype and compiles again."""

    def __init__(self, n: int) -> None:
        import torch

        super().__init__(*[nn.Linear(n, n, bias=False) for _ in range(8)])
        self.cache = torch.zeros(n, dtype=torch.float64)  # an attribute, not a buffer

    def forward(self, x: Any) -> Any:
        self.cache = self.cache.to(x)
        return super().forward(x) + self.cache


class CastsItsCache(MatmulChain):
    """MatmulChain whose first call changes its own state (_CastsItsCache)."""

    def build_module(self, n: int) -> nn.Module:
        return _CastsItsCache(n)


class SlowedMatmulChain(MatmulChain):
    """MatmulChain with ten times the work per step: a planted regression.

    Ten times, so that a busy host (the suite's other sweeps run beside the gate's)
    cannot make the two sweeps' spreads overlap: at three times, one CI run saw
    eager's repeats overlap and the gate say "slower, within noise", as it should.

    Its config (tests/conf/model/work_slowed.yaml) gives it the same model name
    as MatmulChain's (work.yaml), as a slower commit of the same model would.
    """

    def build_module(self, n: int) -> nn.Module:
        return nn.Sequential(*[nn.Linear(n, n, bias=False) for _ in range(80)])


class _AccuracyProbe(_Tiny):
    """A tiny MLP whose forward misbehaves in one way; `_twist` says how."""

    def build_module(self, width: int) -> nn.Module:
        import torch

        twist = self._twist

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.body = nn.Sequential(
                    nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width)
                )

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return twist(self.body(x))

        return Net()

    @staticmethod
    def _twist(y: Any) -> Any:
        return y


class WrongWhenCompiled(_AccuracyProbe):
    """Correct in eager, 50% off once torch.compile traces it: must get FAIL."""

    @staticmethod
    def _twist(y: Any) -> Any:
        import torch

        return y * 1.5 if torch.compiler.is_compiling() else y


class Nondeterministic(_AccuracyProbe):
    """Adds noise from an OS-seeded generator: two eager runs differ."""

    @staticmethod
    def _twist(y: Any) -> Any:
        import torch

        gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
        return y + torch.randn(y.shape, generator=gen).to(y.dtype)


class RaisesInEager(_AccuracyProbe):
    """Raises in eager only; compiled, the check is traced away: must get EAGER_FAILED."""

    @staticmethod
    def _twist(y: Any) -> Any:
        import torch

        if not torch.compiler.is_compiling():
            raise RuntimeError("injected eager failure")
        return y


class Planted(_Tiny):
    """A tiny MLP with a buffer, clean: one graph, no recompile, accurate. PlantedAll,
    under the same model name (tests/conf/model/planted_on.yaml), plants a change of each
    signal at once, as a bad commit might (tests/test_expected.py)."""

    PLANTS: frozenset[str] = frozenset()  # of break, wrong, recompile

    def build_module(self, width: int) -> nn.Module:
        import torch

        plants = self.PLANTS

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.body = nn.Sequential(
                    nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width)
                )
                self.scale: torch.Tensor
                self.register_buffer("scale", torch.ones((), dtype=torch.int32))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                if "recompile" in plants and self.scale.dtype != torch.int64:
                    self.scale = self.scale.to(torch.int64)  # the second call's guard fails
                y = self.body(x) * self.scale.to(x.dtype)
                if "wrong" in plants and torch.compiler.is_compiling():
                    y = y * 1.5  # 50% off once compiled: accuracy FAIL
                if "break" in plants and y.sum() > 0:  # a data-dependent branch: a break
                    y = y + 0
                return y

        return Net()


class PlantedAll(Planted):
    """Planted with a graph break, an accuracy failure and a recompile planted."""

    PLANTS = frozenset(("break", "wrong", "recompile"))


class GraphBreaks(_Tiny):
    """Four linear layers with torch._dynamo.graph_break() between them: 3 breaks a step."""

    def build_module(self, width: int) -> nn.Module:
        import torch

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(4))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                x = self.layers[0](x)
                torch._dynamo.graph_break()
                x = self.layers[1](x)
                torch._dynamo.graph_break()
                x = self.layers[2](x)
                torch._dynamo.graph_break()
                return self.layers[3](x)

        return Net()


class RecompilesOnce(MatmulChain):
    """MatmulChain whose buffer changes dtype on the first forward, as TorchBench's
    llama does with its cache: the second call runs a different graph, so dynamo
    recompiles (its guard on the buffer's dtype fails) and lazy XLA compiles anew.
    From the third call on, the graph is stable."""

    def build_module(self, n: int) -> nn.Module:
        import torch

        chain = super().build_module(n)

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.chain = chain
                self.scale: torch.Tensor
                self.register_buffer("scale", torch.ones((), dtype=torch.int32))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                if self.scale.dtype != torch.int64:
                    self.scale = self.scale.to(torch.int64)  # once, on the first call
                return self.chain(x) * self.scale.to(x.dtype)

        return Net()

    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        import torch

        n = module.chain[0].in_features  # type: ignore[index,union-attr]
        return (torch.randn(batch_size, n) / n**0.5,)


_POLLUTED = False  # set by Leaky's step; a later job that sees it shares our process


class Leaky(_Tiny):
    """Checks, while it is built, that no earlier job left state behind in this
    process; then, in its step, leaves some: a default dtype, an environment
    variable, a module global, a compiled function in dynamo's cache. A second job
    of it fails at build time if jobs share anything (the preforked interpreter's
    isolation test). Its cases compile it (aot_eager), so its jobs fork from the
    zygote that imported the compile stack: the dynamo check also shows that the
    zygote compiled nothing, and costs no import of dynamo in the job."""

    def build_module(self, width: int) -> nn.Module:
        import torch

        leaks = []
        if torch.get_default_dtype() != torch.float32:
            leaks.append(f"default dtype {torch.get_default_dtype()}")
        if os.environ.get("BENCHFLOW_LEAK"):
            leaks.append("environment variable BENCHFLOW_LEAK")
        if _POLLUTED:
            leaks.append("module global _POLLUTED")
        from torch._dynamo.utils import counters

        if counters["frames"]["ok"]:
            leaks.append(f"{counters['frames']['ok']} frame(s) in dynamo's cache")
        if leaks:
            raise RuntimeError("state leaked from an earlier job: " + ", ".join(leaks))
        return super().build_module(width)

    def eval(self) -> Any:
        global _POLLUTED
        import torch

        out = self.model(*self.example_inputs)
        torch.compile(lambda x: x * 2, backend="eager")(out)
        torch.set_default_dtype(torch.float64)
        os.environ["BENCHFLOW_LEAK"] = "1"
        _POLLUTED = True
        return out


class LeakyTwice(Leaky):
    """The control for Leaky: one job that runs a Leaky step and then builds a Leaky
    again in the same process; that second build must fail, naming every leak."""

    def build_module(self, width: int) -> nn.Module:
        Leaky("eval", size="tiny").eval()  # leaves its state in this process
        return super().build_module(width)  # sees it: raises


class ZygoteProbe(_Tiny):
    """Looks, from a job forked from a preforked interpreter, at what that zygote
    started or made: the compile stack is imported there, never used. At build time
    (the job has made its device, not compiled) it fails if the zygote has any process
    besides this job's child (a compile-worker pool, say), and prints as JSON on its
    stdout the zygote's command line and its parent's (a zygote forked from the torch
    one keeps that one's command line, and no process of the sweep is its parent), the
    zygote's threads, the files already in this job's Inductor cache, and whether
    Triton's install key and the C++ kernels' header were computed before this job
    compiled anything. After its
    first step (the compile) it prints the threads and processes that step started
    (Inductor's compile workers: this job's, not the zygote's) and the zygote's again.
    Spawned, it checks and prints nothing."""

    def build_module(self, width: int) -> nn.Module:
        import psutil

        from benchflow.runner.zygote import ENV_PRELOADED

        self.first_step = bool(os.environ.get(ENV_PRELOADED))  # forked: report it
        if self.first_step:
            zygote = psutil.Process(os.getppid())
            others = _others_of(zygote)
            if others:
                raise RuntimeError("the zygote started processes: " + "; ".join(others))
            parent = zygote.parent()
            cache = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
            _say(
                zygote=zygote.cmdline(),
                its_parent=parent.cmdline() if parent else [],
                zygote_pid=zygote.pid,
                zygote_threads=[t.id for t in zygote.threads()],
                cache_files=[str(f) for f in cache.rglob("*")] if cache.exists() else [],
                triton_key_known=_triton_key_known(),
                cpp_header_asked=_cpp_header_asked(),
            )
        return super().build_module(width)

    def eval(self) -> Any:
        out = super().eval()
        if self.first_step:
            self.first_step = False
            import threading

            import psutil
            from torch._inductor import config

            me = psutil.Process()
            zygote = me.parent()
            _say(
                after_first_step=me.pid,
                compile_threads=config.compile_threads,
                threads=sorted(t.name for t in threading.enumerate()),
                own=[[p.ppid(), *p.cmdline()] for p in me.children(recursive=True)],
                zygote_threads=[t.id for t in zygote.threads()],
                zygote_others=_others_of(zygote),
                cpp_header_asked=_cpp_header_asked(),
            )
        return out


def _triton_key_known() -> bool | None:
    """Whether this process has computed Triton's install key (None: no Triton)."""
    from torch._inductor.runtime.triton_compat import HAS_TRITON, triton_key

    return triton_key.cache_info().currsize > 0 if HAS_TRITON else None


def _cpp_header_asked() -> dict[str, int]:
    """How often this process (or its zygote before the fork) worked out Inductor's
    precompiled header for its C++ kernels, and found it worked out already."""
    from torch._inductor.codecache import _precompile_header

    info = _precompile_header.cache_info()
    return {"computed": info.misses, "found": info.hits}


def _others_of(zygote: Any) -> list[str]:
    """The zygote's processes, but for the job that asks (its child)."""
    me = os.getpid()
    procs = zygote.children(recursive=True)
    return [f"{p.pid}: {' '.join(p.cmdline())}" for p in procs if p.pid != me]


class EnvProbe(_Tiny):
    """Prints, as JSON on its stdout, the job's own variables as its child sees them
    at build time (`env.ENV_PROBE=` and `xla.flags=`: XLA_FLAGS), and how it started."""

    def build_module(self, width: int) -> nn.Module:
        _say(
            env_probe=os.environ.get("ENV_PROBE"),
            xla_flags=os.environ.get("XLA_FLAGS"),
            launch=os.environ.get("BENCHFLOW_LAUNCH", "spawn"),
        )
        return super().build_module(width)


def _say(**seen: Any) -> None:
    import json

    print(json.dumps(seen), flush=True)
