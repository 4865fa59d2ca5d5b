"""Files that must never be left half-written.

- ``write_json_atomic``: write to a temporary file in the same folder, fsync, rename.
- ``append_jsonl``: one ``os.write`` of a whole line under an exclusive lock,
  fsynced, so concurrent writers (parallel launchers) and crashes never leave a
  partial line in ``results.jsonl``.
- ``read_jsonl``: a reader that reports and skips lines it cannot parse.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_jsonl(path: Path, row: dict[str, Any]) -> None:
    line = (json.dumps(row, default=str, separators=(",", ":")) + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # A previous writer killed mid-line would glue our row to its fragment:
        # start on a fresh line if the file does not end with one.
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        os.write(fd, line)
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All parseable rows; each bad line is logged with its number and skipped."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    with path.open(encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                log.warning("%s:%d: skipped a corrupt line (%s)", path, lineno, exc.msg)
                continue
            if isinstance(row, dict):
                rows.append(row)
            else:
                log.warning("%s:%d: skipped a line that is not a JSON object", path, lineno)
    return rows
