"""Finding TorchBench and reading what it says about its models, without importing it.

The parent validates, lists and skips models from it; only the isolated child imports
torchbenchmark, since loading a model changes global torch state.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from benchflow.config.schema import read_yaml

ENV_ROOT = "TORCHBENCH_ROOT"
CLONE_HINT = "git clone https://github.com/pytorch/benchmark and set suite.torchbench_root=PATH"


class TorchBenchNotFound(ValueError):
    pass


def is_root(path: Path) -> bool:
    return (path / "torchbenchmark" / "models").is_dir()


def find_root(configured: str | None = None) -> Path | None:
    """suite.torchbench_root, else $TORCHBENCH_ROOT, else an importable torchbenchmark.

    A root that is set but holds no TorchBench is an error, never silently ignored.
    """
    for key, value in (("suite.torchbench_root", configured), (ENV_ROOT, os.environ.get(ENV_ROOT))):
        if value:
            path = Path(value).expanduser().resolve()
            if not is_root(path):
                raise TorchBenchNotFound(
                    f"{key}={value} has no torchbenchmark/models folder; "
                    f"allowed: the root of a pytorch/benchmark checkout ({CLONE_HINT})"
                )
            return path
    spec = importlib.util.find_spec("torchbenchmark")
    if spec and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))).parent
        return path if is_root(path) else None
    return None


def list_models(root: Path) -> list[str]:
    models = root / "torchbenchmark" / "models"
    return sorted(p.name for p in models.iterdir() if (p / "__init__.py").is_file())


def metadata(root: Path, model: str) -> dict[str, Any]:
    path = root / "torchbenchmark" / "models" / model / "metadata.yaml"
    if not path.is_file():
        return {}
    data = read_yaml(path.read_text())
    return data if isinstance(data, dict) else {}


def not_implemented(root: Path, model: str, device: str, test: str) -> str | None:
    """The model's own metadata.yaml says it does not run this device/test (a note: the
    references run it all the same, and some such models run: phlippe_densenet)."""
    for entry in metadata(root, model).get("not_implemented") or []:
        if not isinstance(entry, dict):
            continue
        if entry.get("device", device) == device and entry.get("test", test) == test:
            return (
                f"TorchBench's {model}/metadata.yaml lists {test} on {device} as "
                "not_implemented; it runs all the same, as the experiment runner and "
                "PyTorch's dynamo benchmarks run it (neither reads that list on a CPU)"
            )
    return None


def requirements(root: Path, model: str) -> list[str]:
    """Package names from the model's requirements.txt (what install.py would add)."""
    path = root / "torchbenchmark" / "models" / model / "requirements.txt"
    if not path.is_file():
        return []
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith(("-", "git+", "http")):
            continue
        for sep in ("==", ">=", "<=", "~=", "!=", ">", "<", "[", ";", " "):
            line = line.split(sep, 1)[0]
        names.append(line.strip())
    return [n for n in names if n]


def missing_packages(root: Path, model: str) -> list[str]:
    missing = []
    for name in requirements(root, model):
        module = {"scikit-learn": "sklearn", "pyyaml": "yaml", "opencv-python": "cv2"}.get(
            name.lower(), name.replace("-", "_")
        )
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def register_torchbench(configured: str | None = None) -> None:
    """The config schema, and every model of the TorchBench checkout found (if any) as a
    `model` option; a bad root is left for validation to report, naming the key."""
    from benchflow.config.store import register

    try:
        root = find_root(configured)
    except TorchBenchNotFound:
        root = None
    register(list_models(root) if root else ())
