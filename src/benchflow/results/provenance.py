"""Where and how a result was made: host, hardware, code, locked environment, command.

The parent's part is read here, without torch, once per process; the child adds what
only it sees (harness/child.py). results/environment.py says which facts matter.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import metadata
from pathlib import Path

from benchflow.config.schema import SUITE_MODEL_SOURCES
from benchflow.core import machine
from benchflow.core.gpus import ENV_VISIBLE
from benchflow.results.child import Versions
from benchflow.results.row import Hardware, Provenance

# The environment variables that change how fast a job runs (thread pools, the XLA and
# Inductor compilers, PJRT, which GPUs), by name or prefix.
SPEED_ENV = (
    "OMP_",
    "MKL_",
    "KMP_",
    "XLA_FLAGS",
    "PJRT_",
    "TORCHINDUCTOR_",
    "TORCH_",
    ENV_VISIBLE,  # a job's GPU slot sets it (core/gpus.py)
)
# Of those, where a job's compile caches live (a per-job folder, not a setting).
CACHE_PLACES = ("TORCHINDUCTOR_CACHE_DIR", "XLA_PERSISTENT_CACHE_")


def speed_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` that change speed (SPEED_ENV), caches' places left out."""
    return {
        k: v
        for k, v in sorted(environ.items())
        if k.startswith(SPEED_ENV) and not k.startswith(CACHE_PLACES)
    }


@cache
def git_sha(where: str = ".") -> str | None:
    """The commit checked out at `where`, "-dirty" when tracked files changed."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def lock_file(project_dir: Path) -> Path | None:
    """The uv.lock that built this environment: benchflow's checkout's when it runs
    from one, else the working folder's (a project that installs benchflow); None."""
    checkout = Path(__file__).resolve().parents[3]
    for folder in (checkout, project_dir):
        if (folder / "uv.lock").is_file() and (folder / "pyproject.toml").is_file():
            return folder / "uv.lock"
    return None


@cache
def _sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@cache
def packages() -> tuple[str, ...]:
    """The installed distributions, `name==version`, sorted (the parent run's artifact)."""
    found = set()
    for dist in metadata.distributions():
        name, version = _name_and_version(dist.read_text("METADATA") or dist.read_text("PKG-INFO"))
        found.add(f"{(name or '?').lower().replace('_', '-')}=={version}")
    return tuple(sorted(found))


def _name_and_version(text: str | None) -> tuple[str | None, str | None]:
    """A core-metadata file's Name and Version, as `dist.metadata` gives them, read from its
    headers alone: `dist.metadata` parses the whole file as an email, long descriptions
    and all (0.16 CPU-seconds over the 208 distributions of .venv, against 0.02)."""
    found: dict[str, str] = {}
    for line in (text or "").split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version"):
            found.setdefault(key, value.strip())
    return found.get("Name"), found.get("Version")


@cache
def packages_sha256() -> str:
    return hashlib.sha256("\n".join(packages()).encode()).hexdigest()


@cache
def hardware() -> Hardware:
    physical, logical = machine.core_counts()
    return Hardware(
        cpu_vendor=machine.cpu_vendor(),
        cpu_features=list(machine.cpu_features()),
        physical_cores=physical,
        logical_cores=logical,
        memory_bytes=machine.memory_bytes(),
    )


def provenance(project_dir: Path, torchbench_root: str | None = None) -> Provenance:
    """The parent's part of a row's provenance; `torchbench_root` for a TorchBench model."""
    lock = lock_file(project_dir)
    return Provenance(
        host=platform.node(),
        cpu_model=machine.cpu_model_name(),
        platform=platform.platform(),
        git_sha=git_sha(str(project_dir)),
        command=_command_line(),
        hardware=hardware(),
        lock_sha256=_sha256_of(lock) if lock else None,
        packages_sha256=packages_sha256(),
        torchbench_sha=git_sha(torchbench_root) if torchbench_root else None,
    )


def _command_line() -> str:
    argv0 = sys.argv[0]
    prog = "python -m benchflow" if argv0.endswith("benchflow/__main__.py") else Path(argv0).name
    return " ".join([prog, *sys.argv[1:]])


def job_env(names: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's speed settings and its `env.` variables `names`, as it was started:
    `environ` for a forked child (runner/zygote.py), else os.environ."""
    environ = os.environ if environ is None else environ
    return speed_env(environ) | {k: environ[k] for k in sorted(names) if k in environ}


def versions(model_source: str | None = None, pinned: Sequence[str] = ()) -> Versions:
    """The versions the row records: Python, torch, torch_xla, benchflow, the suite's
    library, and each package a toolchain pins (as this interpreter has them)."""

    def ver(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    import benchflow

    out = {
        "python": platform.python_version(),
        "torch": ver("torch"),
        "torch_xla": ver("torch_xla"),
        # a toolchain's environment finds benchflow by a path entry: no installed version
        "benchflow": ver("benchflow") or benchflow.__version__,
    }
    if model_source in SUITE_MODEL_SOURCES:  # the suite's library (suites.py: not imported
        from benchflow.suite.suites import by_source  # for other jobs, it brings Hydra's)

        if (suite := by_source(model_source)) and suite.package:
            out[suite.package] = ver(suite.package)
    for package in pinned:
        out.setdefault(package, ver(package))
    return out | torch_build()


# torch/version.py's names -> the versions' keys: the build's git revision, and the CUDA
# or ROCm it was built for (a CUDA wheel on a CPU-only host too).
TORCH_BUILD = {"git_version": "torch_git", "cuda": "torch_cuda", "hip": "torch_hip"}


def torch_build() -> dict[str, str]:
    """torch/version.py's git revision and CUDA or ROCm version, without importing torch."""
    import ast
    from importlib.util import find_spec

    spec = find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {}
    try:
        tree = ast.parse((Path(spec.submodule_search_locations[0]) / "version.py").read_text())
    except (OSError, SyntaxError):
        return {}
    out = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if not (isinstance(target, ast.Name) and target.id in TORCH_BUILD):
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
            out[TORCH_BUILD[target.id]] = value.value  # None or "": the build has none
    return out


def gpu_info() -> dict[str, str | None] | None:
    """The GPU a CUDA job runs on (None: none visible)."""
    import torch

    from benchflow.core.machine import nvidia_driver

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "driver": nvidia_driver(),
        "cuda": torch.version.cuda,
        "cudnn": str(cudnn) if cudnn else None,
    }
