"""A toolchain's environment and the interpreter its jobs run in (docs/toolchains.md,
docs/your-torch.md): benchflow's own, one built with uv for the pins, or an existing one
(`toolchain.python`, probed once at planning). A built one holds only what the child
imports, under `<cache>/toolchains/<key>/` (a hash of what it holds, so that a later sweep
reuses it); its `requirements.lock` is what the rows hash.
"""

from __future__ import annotations

import contextlib
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

from packaging.utils import canonicalize_name

from benchflow.config.schema import PROJECT_TOOLCHAIN, ToolchainConfig
from benchflow.core.files import write_text_atomic
from benchflow.core.layout import cache_root
from benchflow.runner.interpreter import (
    HARNESS,
    Interpreter,
    ToolchainError,
    harness_env,
    last_lines,
    probe,
)

READY = "ready"  # written last: an environment without it is half built
LOCK = "requirements.lock"
GIVEN = "python"  # in an existing interpreter's folder: that interpreter's path


@dataclasses.dataclass(frozen=True)
class Environment:
    folder: Path

    @property
    def python(self) -> Path:
        given = self.folder / GIVEN
        if given.is_file():  # an existing interpreter, by the path the user gave
            return Path(given.read_text().strip())
        return self.folder / "bin" / "python"

    @property
    def lock(self) -> Path:
        return self.folder / LOCK

    def lock_sha256(self) -> str:
        return hashlib.sha256(self.lock.read_bytes()).hexdigest()


def requirements(toolchain: ToolchainConfig) -> list[str]:
    """The environment's requirements: HARNESS at this environment's versions, pins over them."""
    out = {canonicalize_name(k): str(v) for k, v in toolchain.pins.items()}
    for name in HARNESS:
        if canonicalize_name(name) not in out:
            out[canonicalize_name(name)] = metadata.version(name)
    return sorted(f"{name}=={version}" for name, version in out.items())


def key_of(toolchain: ToolchainConfig) -> str:
    """The environment's folder name: a hash of what it holds (or of an interpreter and build)."""
    if toolchain.python is not None:
        lines = [f"interpreter=={toolchain.python}", f"build=={toolchain.build}"]
    else:
        python = ".".join(map(str, sys.version_info[:2]))
        lines = [f"python=={python}", *requirements(toolchain)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def root() -> Path:
    return cache_root() / "toolchains"


def environment(toolchain: ToolchainConfig) -> Environment | None:
    """The toolchain's environment; None for the project's own, or one not built yet."""
    if toolchain.is_project:
        return None
    env = Environment(root() / key_of(toolchain))
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


def resolve(toolchain: ToolchainConfig) -> ToolchainConfig:
    """The toolchain as jobs run it (an interpreter's absolute path, `build` and name);
    ToolchainError where it cannot run jobs or does not hold the `toolchain.build` given."""
    if toolchain.python is None:
        return toolchain
    python = os.path.abspath(os.path.expanduser(toolchain.python))
    found = probe(python)
    if toolchain.build is not None and toolchain.build != found.build:
        raise ToolchainError(
            f"toolchain.build={toolchain.build!r}, but toolchain.python={python} now holds "
            f"torch {found.build}; allowed: {found.build!r}, or leave toolchain.build out"
        )
    name = found.label if toolchain.name == PROJECT_TOOLCHAIN else toolchain.name
    return dataclasses.replace(toolchain, name=name, python=python, build=found.build)


def _release(version: str) -> str:
    """2.9.0+cu128 -> 2.9: the release torch_xla is built for."""
    return ".".join(version.split("+")[0].split(".")[:2])


def lacks(toolchain: ToolchainConfig, package: str) -> tuple[str, str] | None:
    """Why the toolchain's environment lacks `package`, and how to add it (None: it has it)."""
    if toolchain.pins:
        if package in toolchain.pins:
            return None
        pins = ", ".join(f"{k}=={v}" for k, v in toolchain.pins.items())
        return (
            f"toolchain={toolchain.name} has none (its pins: {pins})",
            f"a toolchain that pins {package} (toolchain.pins.{package}=<version>)",
        )
    if toolchain.python is not None:
        have = probe(toolchain.python).versions()
        where = f"toolchain={toolchain.name} ({toolchain.python})"
    else:
        have = {}
        for name in {"torch", package}:  # this environment's, without an import
            with contextlib.suppress(metadata.PackageNotFoundError):
                have[canonicalize_name(name)] = metadata.version(name)
        where = f"benchflow's environment ({sys.prefix})"
    torch = have.get("torch", "?")
    if canonicalize_name(package) not in have:
        if package == "torch_xla":
            return (
                f"{where} has none (its torch: {torch})",
                f"torch_xla {_release(torch)}.x installed there (torch_xla is built for "
                "one torch release: its own)",
            )
        return f"{where} has none", f"{package} installed there (pip install '{package}')"
    if package == "torch_xla" and _release(have["torch-xla"]) != _release(torch):
        return (
            f"{where} has torch_xla {have['torch-xla']}, built for torch "
            f"{_release(have['torch-xla'])}, beside torch {torch}",
            f"torch_xla {_release(torch)}.x there, or a toolchain whose torch and "
            "torch_xla are one release (toolchain=torch-2.8)",
        )
    return None


# --- building --------------------------------------------------------------------------


def build(
    toolchain: ToolchainConfig, say: Callable[[str], None] = print
) -> tuple[Environment, float]:
    """The toolchain's environment, built where it is not yet, and the seconds it took."""
    assert not toolchain.is_project
    folder = root() / key_of(toolchain)
    env = Environment(folder)
    if (folder / READY).exists():
        if toolchain.python is not None:  # its packages as they are now, not as first seen
            _record_packages(probe(toolchain.python), folder)
        return env, 0.0
    start = time.perf_counter()
    root().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root()))
    try:
        if toolchain.python is not None:  # its path, and its package list as the lock
            found = probe(toolchain.python)
            (tmp / GIVEN).write_text(found.python + "\n")
            _record_packages(found, tmp)
        else:
            _install(toolchain, tmp, say)
        (tmp / READY).write_text(time.ctime() + "\n")
        try:
            tmp.rename(folder)
        except OSError:  # another sweep built it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return env, time.perf_counter() - start


def _record_packages(found: Interpreter, folder: Path) -> None:
    """The interpreter's packages as its lock, rewritten where changed (its key omits them)."""
    text = "\n".join(found.packages) + "\n"
    lock = folder / LOCK
    if not lock.is_file() or lock.read_text() != text:
        write_text_atomic(lock, text)


def _install(toolchain: ToolchainConfig, tmp: Path, say: Callable[[str], None]) -> None:
    reqs = requirements(toolchain)
    say(f"benchflow: building toolchain {toolchain.name}'s environment ({', '.join(reqs)})")
    _run([uv(), "venv", "--quiet", "--python", sys.executable, str(tmp)], toolchain)
    python = tmp / "bin" / "python"
    (tmp / "requirements.in").write_text("\n".join(reqs) + "\n")
    install = [uv(), "pip", "install", "--python", str(python)]
    _run([*install, "-r", str(tmp / "requirements.in")], toolchain)
    site = Path(_run([str(python), "-c", SITE], toolchain).strip())
    rest = share_bytecode(site)
    if rest and (skipped := compile_bytecode(python, rest, tmp / "compile.txt")):
        say(
            f"benchflow: toolchain {toolchain.name}: {len(skipped)} file(s) are not "
            f"Python {'.'.join(map(str, sys.version_info[:2]))} and were left "
            f"uncompiled ({', '.join(Path(s).name for s in skipped[:3])}"
            f"{', ...' if len(skipped) > 3 else ''}); nothing imports them here"
        )
    frozen = _run([uv(), "pip", "freeze", "--python", str(python)], toolchain)
    (tmp / LOCK).write_text(frozen)


SITE = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
COMPILE_ERROR = re.compile(r"^\*\*\* Error compiling '(.+)'\.\.\.$", re.M)


def compile_bytecode(python: Path, sources: list[Path], listing: Path) -> list[str]:
    """Compile `sources` with `python`; returns those not valid in it (never imported), as is."""
    listing.write_text("\n".join(map(str, sources)) + "\n")
    cmd = [str(python), "-m", "compileall", "-q", "-j", "0", "-i", str(listing)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    skipped = COMPILE_ERROR.findall(done.stdout)
    if done.returncode != 0 and not skipped:  # not a file's error: compileall's own
        raise ToolchainError(f"bytecode could not be compiled: {last_lines(done)}")
    return skipped


def share_bytecode(site: Path) -> list[Path]:
    """The project environment's bytecode, linked into `site` for each module whose source is
    the same inode, so that the build compiles only the toolchain's own; the rest, returned."""
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
    # hardlinks from uv's cache; bytecode is compiled at the build, not in each job's process
    env = {"UV_LINK_MODE": "hardlink", **os.environ}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        pins = ", ".join(f"{k}=={v}" for k, v in toolchain.pins.items())
        raise ToolchainError(
            f"toolchain={toolchain.name} (pins: {pins}): its environment could not be "
            f"built: {Path(cmd[0]).name} exit {done.returncode}: {last_lines(done)}"
        )
    return done.stdout


# --- how a job of a toolchain starts ---------------------------------------------------


def launch(toolchain: ToolchainConfig) -> tuple[str, dict[str, str]]:
    """(the interpreter, variables to add) a job of this toolchain starts with."""
    if toolchain.is_project:
        return sys.executable, {}
    env = environment(toolchain)
    if env is None:
        raise ToolchainError(f"toolchain={toolchain.name}: its environment is not built")
    return interpreter(env.folder.name)


def interpreter(key: str) -> tuple[str, dict[str, str]]:
    """(the interpreter, variables to add) a job or zygote of `key`'s environment uses."""
    return str(Environment(root() / key).python), harness_env()
