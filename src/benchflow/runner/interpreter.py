"""The interpreter a toolchain's job runs in (runner/toolchain.py): the path entry that
gives it benchflow's harness and nothing else of this environment, and what an existing
interpreter holds (docs/your-torch.md), asked once at planning.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from benchflow.config.errors import ConfigError
from benchflow.core.layout import cache_root

# What the child imports, at this environment's versions unless the toolchain pins them.
HARNESS = ("torch", "numpy", "scipy", "omegaconf", "pyyaml", "psutil", "orjson", "hydra-core")
PROBE_TIMEOUT_S = 180.0  # a first `import torch` from a cold disk takes a while


class ToolchainError(ConfigError):
    """A toolchain's environment could not be built or used; the message says why."""


def harness_path() -> str:
    """A folder that holds the `benchflow` package and nothing else, for the child's PYTHONPATH:
    a checkout's `src/`, else (site-packages holds every package) a cache folder with a link."""
    import benchflow

    package = Path(benchflow.__file__).resolve().parent
    if package.parent.name not in ("site-packages", "dist-packages"):
        return str(package.parent)
    tag = hashlib.sha256(str(package).encode()).hexdigest()[:12]
    folder = cache_root() / "harness" / tag
    link = folder / "benchflow"
    if not link.is_symlink() or link.resolve() != package:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".benchflow-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(package, target_is_directory=True)
        tmp.replace(link)  # atomic: a sweep beside this one sees the old or the new
    return str(folder)


def last_lines(done: subprocess.CompletedProcess[str], count: int = 6) -> str:
    """What a failed tool said last, from stderr, else stdout (compileall prints there)."""
    for stream in (done.stderr, done.stdout):
        said = [ln.strip() for ln in (stream or "").splitlines() if ln.strip()]
        if said:
            return " ".join(said[-count:])
    return f"exit {done.returncode}, nothing printed"


class Unanswered(Exception):
    """An interpreter asked something (`ask`) gave no answer: why."""


def ask(python: str, script: str, env: dict[str, str]) -> Any:
    """Run `script` in `python` with `env` added; the JSON it printed last, or Unanswered."""
    try:
        done = subprocess.run(
            [python, "-c", script],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unanswered(f"it could not be run ({exc})") from None
    said = [ln for ln in done.stdout.splitlines() if ln.strip()]
    try:
        return json.loads(said[-1])
    except (IndexError, ValueError):
        raise Unanswered(
            f"it did not answer as a Python interpreter does (exit {done.returncode}): "
            f"{last_lines(done)}"
        ) from None


def harness_env() -> dict[str, str]:
    """A toolchain's interpreter's variables: benchflow's folder, then the user's PYTHONPATH."""
    path = [harness_path(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(path), "PYTHONNOUSERSITE": "1"}


# Valid in any Python, so that one too old is told apart from one that fails.
PROBE = """
import json, sys
out = {"python": "%d.%d.%d" % tuple(sys.version_info[:3])}
if sys.version_info >= (3, 10):
    from importlib import metadata
    try:
        import torch
        out["torch"] = str(torch.__version__)
    except Exception as exc:
        out["no_torch"] = "%s: %s" % (type(exc).__name__, exc)
    else:
        try:
            from benchflow.results.provenance import torch_build
            out.update(torch_build())
        except Exception as exc:
            out["no_harness"] = "%s: %s" % (type(exc).__name__, exc)
    names = set()
    for dist in metadata.distributions():
        if dist.metadata["Name"]:
            names.add("%s==%s" % (dist.metadata["Name"], dist.version))
    out["packages"] = sorted(names)
print(json.dumps(out))
"""


@dataclasses.dataclass(frozen=True)
class Interpreter:
    """What an existing interpreter holds, as it answered the probe."""

    python: str  # its path, as given (a venv's bin/python is a link: never resolved)
    torch: str
    git: str | None  # torch.version.git_version
    packages: tuple[str, ...]  # name==version, sorted

    @property
    def build(self) -> str:
        return f"{self.torch} git {self.git or 'unknown'}"

    @property
    def label(self) -> str:
        """The toolchain's name where the user gave none: torch's version and revision."""
        rev = f"-{self.git[:7]}" if self.git and self.git != "Unknown" else ""
        return f"torch-{self.torch}{rev}"

    def versions(self) -> dict[str, str]:
        parts = (line.partition("==") for line in self.packages)
        return {canonicalize_name(name): version for name, _, version in parts}


def _supported() -> tuple[str, str]:
    """(Python's, torch's) version specifiers benchflow supports, from its own metadata."""
    from packaging.requirements import Requirement

    try:
        python = metadata.metadata("benchflow")["Requires-Python"] or ""
        reqs = [Requirement(r) for r in metadata.requires("benchflow") or []]
    except metadata.PackageNotFoundError:
        return ">=3.10", ""
    torch = next((str(r.specifier) for r in reqs if r.name == "torch" and not r.marker), "")
    return python, torch


def _spelled(spec: str) -> str:
    """<3.14,>=3.10 -> >=3.10,<3.14: the lower bound first, as people write it."""
    return ",".join(sorted(spec.split(","), key=lambda s: not s.startswith(">")))


def _fits(version: str, spec: str) -> bool:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return not spec or SpecifierSet(spec).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return True  # a source build's odd version: the harness's import decides


@functools.lru_cache(maxsize=16)
def probe(python: str) -> Interpreter:
    """Ask `python` what it holds; ToolchainError where it cannot run benchflow's jobs."""
    key = f"toolchain.python={python}"
    if not os.path.exists(python):
        raise ToolchainError(
            f"{key}: no such file; allowed: the path of an existing Python interpreter "
            "(a venv's or conda environment's bin/python)"
        )
    try:
        out = ask(python, PROBE, harness_env())
    except Unanswered as exc:
        raise ToolchainError(f"{key}: {exc}") from None
    want_python, want_torch = _supported()
    if not _fits(out["python"], want_python) or "packages" not in out:
        lower = ",".join(b for b in want_python.split(",") if b.startswith(">"))
        old = not _fits(out["python"], lower)
        raise ToolchainError(
            f"{key} is Python {out['python']}, too {'old' if old else 'new'} for benchflow's "
            f"harness; allowed: an interpreter of Python {_spelled(want_python)}"
        )
    if "no_torch" in out:
        raise ToolchainError(
            f"{key} has no torch ({out['no_torch']}); allowed: an interpreter whose "
            f"environment holds torch{want_torch}"
        )
    if not _fits(out["torch"], want_torch):
        raise ToolchainError(
            f"{key} has torch {out['torch']}, older than benchflow supports; allowed: "
            f"torch{want_torch}"
        )
    if "no_harness" in out:
        raise ToolchainError(
            f"{key} cannot import benchflow's harness ({out['no_harness']}); allowed: an "
            f"interpreter that holds the harness's packages ({', '.join(HARNESS)}): "
            "install benchflow's wheel there, which keeps its torch (docs/your-torch.md)"
        )
    return Interpreter(python, out["torch"], out.get("torch_git"), tuple(out["packages"]))
