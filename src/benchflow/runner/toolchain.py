"""A toolchain's environment (docs/toolchains.md): a virtual environment built with uv for
the toolchain's pins, once, under benchflow's cache, and the interpreter a job of that
toolchain runs in.

- What it holds: the packages the harness imports (`HARNESS`), at the versions this
  environment has, with the toolchain's pins on top (torch, torch_xla, a suite's
  library). Not mlflow, Hydra's launchers or the report's libraries: the child never
  imports them.
- Where: `<cache>/toolchains/<key>/` ($BENCHFLOW_CACHE_DIR, default ~/.cache/benchflow),
  the key a hash of the requirements and the Python version, so a second sweep with
  the same pins reuses it. uv installs from its own cache with hardlinks, so packages
  the environments share are stored once.
- Locked: `requirements.lock` beside it is what uv installed (`uv pip freeze`); its
  hash is the rows' `packages_sha256` and `lock_sha256`.
- benchflow itself is not installed there: the child finds it by a path entry on the
  folder that holds the `benchflow` package (a checkout's `src/`), which holds nothing
  else, so the child imports no package from the parent's environment (the user's own
  PYTHONPATH, their models' code, follows it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from benchflow.config.errors import ConfigError
from benchflow.config.schema import ToolchainConfig
from benchflow.core.layout import cache_root

# What the child imports (torch_xla and a suite's library only where pinned): at this
# environment's versions unless the toolchain pins them.
HARNESS = ("torch", "numpy", "scipy", "omegaconf", "pyyaml", "psutil", "orjson", "hydra-core")
READY = "ready"  # written last: an environment without it is half built
LOCK = "requirements.lock"


class ToolchainError(ConfigError):
    """A toolchain's environment could not be built; the message says which package."""


@dataclasses.dataclass(frozen=True)
class Environment:
    name: str
    folder: Path

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"

    @property
    def lock(self) -> Path:
        return self.folder / LOCK

    def lock_sha256(self) -> str:
        return hashlib.sha256(self.lock.read_bytes()).hexdigest()


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(toolchain: ToolchainConfig) -> list[str]:
    """The environment's requirements, `name==version`, sorted: HARNESS at this
    environment's versions, the pins over them."""
    pins = {_norm(k): str(v) for k, v in toolchain.pins.items()}
    out = dict(pins)
    for name in HARNESS:
        if _norm(name) not in out:
            out[_norm(name)] = metadata.version(name)
    return sorted(f"{name}=={version}" for name, version in out.items())


def key_of(toolchain: ToolchainConfig) -> str:
    python = ".".join(map(str, sys.version_info[:2]))
    blob = "\n".join([f"python=={python}", *requirements(toolchain)])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def root() -> Path:
    return cache_root() / "toolchains"


def environment(toolchain: ToolchainConfig) -> Environment | None:
    """The toolchain's environment where it is built; None for the project's own (or
    one not built yet)."""
    if toolchain.is_project:
        return None
    env = Environment(toolchain.name, root() / key_of(toolchain))
    return env if (env.folder / READY).exists() else None


def uv() -> str:
    """uv's binary: the `uv` package's (a dependency of benchflow), else one on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise ToolchainError("toolchains need uv: pip install uv") from None
        return found


def build(
    toolchain: ToolchainConfig, say: Callable[[str], None] = print
) -> tuple[Environment, float]:
    """The toolchain's environment, built where it is not yet (seconds it took: 0.0 when
    it was there). Raises ToolchainError naming the package uv could not install."""
    assert not toolchain.is_project
    folder = root() / key_of(toolchain)
    env = Environment(toolchain.name, folder)
    if (folder / READY).exists():
        return env, 0.0
    reqs = requirements(toolchain)
    say(f"benchflow: building toolchain {toolchain.name}'s environment ({', '.join(reqs)})")
    start = time.perf_counter()
    root().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root()))
    try:
        _run([uv(), "venv", "--quiet", "--python", sys.executable, str(tmp)], toolchain)
        python = tmp / "bin" / "python"
        (tmp / "requirements.in").write_text("\n".join(reqs) + "\n")
        install = [uv(), "pip", "install", "--python", str(python)]
        _run([*install, "-r", str(tmp / "requirements.in")], toolchain)
        site = Path(_run([str(python), "-c", SITE], toolchain).strip())
        if rest := share_bytecode(site):
            (tmp / "compile.txt").write_text("\n".join(map(str, rest)) + "\n")
            compile_rest = ["-m", "compileall", "-q", "-j", "0", "-i", str(tmp / "compile.txt")]
            _run([str(python), *compile_rest], toolchain)
        frozen = _run([uv(), "pip", "freeze", "--python", str(python)], toolchain)
        (tmp / LOCK).write_text(frozen)
        (tmp / READY).write_text(time.ctime() + "\n")
        try:
            tmp.rename(folder)
        except OSError:  # another sweep built it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return env, time.perf_counter() - start


SITE = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


def share_bytecode(site: Path) -> list[Path]:
    """The project environment's compiled bytecode, linked into `site` for each module
    whose source is the very same file (one inode: both environments hardlink uv's
    cache), so that the build compiles only the toolchain's own packages (torch's 2,600
    modules take 10 s). A .pyc is checked against its source's time and size at import,
    and Python gives its code the importing path. Returns the sources left to compile."""
    import sysconfig

    ours = Path(sysconfig.get_paths()["purelib"])
    tag = sys.implementation.cache_tag
    rest = []
    for source in site.rglob("*.py"):
        mine = ours / source.relative_to(site)
        pyc = mine.parent / "__pycache__" / f"{mine.stem}.{tag}.pyc"
        try:
            same = mine.stat().st_ino == source.stat().st_ino and pyc.is_file()
        except OSError:
            same = False
        if not same:
            rest.append(source)
            continue
        target = source.parent / "__pycache__" / pyc.name
        target.parent.mkdir(exist_ok=True)
        try:
            os.link(pyc, target)
        except OSError:
            shutil.copy2(pyc, target)
    return rest


def _run(cmd: list[str], toolchain: ToolchainConfig) -> str:
    # Hardlinks from uv's cache. Bytecode is compiled at the build (share_bytecode, then
    # compileall for the rest): where Python may not write it (PYTHONDONTWRITEBYTECODE),
    # each job's process would compile what it imports, about 3 s a process.
    env = {"UV_LINK_MODE": "hardlink", **os.environ}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        said = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
        why = " ".join(said[-6:]) or f"exit {done.returncode}"
        pins = ", ".join(f"{k}=={v}" for k, v in toolchain.pins.items())
        raise ToolchainError(
            f"toolchain={toolchain.name} (pins: {pins}): its environment could not be built: {why}"
        )
    return done.stdout


def harness_path() -> str:
    """The folder that holds the `benchflow` package, for the child's PYTHONPATH. It must
    hold nothing else of the parent's environment: a checkout's `src/`."""
    import benchflow

    folder = Path(benchflow.__file__).resolve().parent.parent
    if folder.name in ("site-packages", "dist-packages"):
        raise ToolchainError(
            f"toolchains run benchflow from a checkout (its src/ folder), but benchflow "
            f"is installed in {folder}, which holds the parent environment's packages too"
        )
    return str(folder)


def launch(toolchain: ToolchainConfig) -> tuple[str, dict[str, str]]:
    """(the interpreter, variables to add) a job of this toolchain starts with: this
    process's own for the project's toolchain."""
    if toolchain.is_project:
        return sys.executable, {}
    env = environment(toolchain)
    if env is None:
        raise ToolchainError(f"toolchain={toolchain.name}: its environment is not built")
    return interpreter(env.folder.name)


def interpreter(key: str) -> tuple[str, dict[str, str]]:
    """(the interpreter, variables to add) of the environment of `key` (key_of): what
    a job, or a zygote (runner/zygote.py), of that toolchain starts with."""
    # benchflow's folder first, then the user's own PYTHONPATH (their models' code)
    path = [harness_path(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    python = Environment(key, root() / key).python
    return str(python), {"PYTHONPATH": os.pathsep.join(path), "PYTHONNOUSERSITE": "1"}
