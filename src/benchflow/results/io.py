"""Files that must never be left half-written.

- ``write_json_atomic``: write to a temporary file in the same folder, fsync, rename.
- ``append_jsonl``: one ``os.write`` of a whole line under an exclusive lock
  (``results.jsonl.lock``), fsynced, so concurrent writers (parallel launchers)
  and crashes never leave a partial line in ``results.jsonl``.
- ``record_row``: the same, and a rerun job's earlier rows are marked
  ``superseded_by`` (whole-file atomic rewrite under the same lock): the history
  stays, and exactly one row per job is current.
- ``read_jsonl``: a reader that reports and skips lines it cannot parse.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Exclusive lock on `<path>.lock`: every writer of `path` holds it, so appends and
    whole-file rewrites (which replace the file's inode) never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _append_line(path: Path, row: dict[str, Any]) -> None:
    line = (json.dumps(row, default=str, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        # A previous writer killed mid-line would glue our row to its fragment:
        # start on a fresh line if the file does not end with one.
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def append_jsonl(path: Path, row: dict[str, Any]) -> None:
    with _locked(path):
        _append_line(path, row)


def record_row(path: Path, row: dict[str, Any], key: str = "fingerprint") -> list[dict[str, Any]]:
    """Append `row`; earlier current rows of the same job (same `job[key]`) are marked
    ``superseded_by`` = the new row's id, in place (the file is rewritten atomically).
    Returns the rows it superseded. Unparseable lines are kept as they are."""
    with _locked(path):
        job_key = row["job"][key]
        lines = (
            path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []
        )
        out, superseded = [], []
        for line in lines:
            try:
                old = json.loads(line)
            except json.JSONDecodeError:
                out.append(line)
                continue
            if (
                isinstance(old, dict)
                and old.get("job", {}).get(key) == job_key
                and not old.get("superseded_by")
            ):
                old["superseded_by"] = row["row_id"]
                superseded.append(old)
                line = json.dumps(old, default=str, separators=(",", ":"))
            out.append(line)
        if not superseded:
            _append_line(path, row)
            return []
        out.append(json.dumps(row, default=str, separators=(",", ":")))
        write_text_atomic(path, "\n".join(out) + "\n")
        return superseded


def current(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows no later attempt of the same job has replaced."""
    return [r for r in rows if not r.get("superseded_by")]


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
