"""Whole-file writes that are never seen half-done: a temporary file in the same
folder, fsynced, then renamed over the target (readers see the old or the new); and
reading such a record back into its dataclass (`pick`)."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path, text: str) -> None:
    """Temporary file in the same folder, fsync, rename: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def read_text(path: Path) -> str | None:
    """A file's text, stripped; None where it is missing, unreadable or blank."""
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def read_json(path: Path) -> Any:
    """What a JSON file holds; None where it is missing or unreadable (a cache's miss)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def pick(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of `cls` (readers skip keys they do not know)."""
    names = _field_names(cls)
    return {k: v for k, v in data.items() if k in names}
