"""Where and how a result was made: host, hardware, code version, command, config hash."""

from __future__ import annotations

import platform
import subprocess
import sys
from functools import cache
from pathlib import Path

from benchflow.core.machine import cpu_model_name
from benchflow.results.row import Provenance


@cache
def git_sha(where: str = ".") -> str | None:
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
        timeout=5,
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def provenance(project_dir: Path) -> Provenance:
    """The parent's part; the row adds the child's versions (build_row)."""
    return Provenance(
        host=platform.node(),
        cpu_model=cpu_model_name(),
        platform=platform.platform(),
        git_sha=git_sha(str(project_dir)),
        command=_command_line(),
    )


def _command_line() -> str:
    argv0 = sys.argv[0]
    prog = "python -m benchflow" if argv0.endswith("benchflow/__main__.py") else Path(argv0).name
    return " ".join([prog, *sys.argv[1:]])
