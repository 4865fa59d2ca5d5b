"""Files that must never be left half-written (whole files: ``benchflow.core.files``).

``record_row`` appends a whole line in one ``os.write`` under an exclusive lock, so
parallel writers never interleave; a torn last line is ignored by readers and cut off
by the next append. It marks a rerun job's earlier rows ``superseded_by``,
so one row per job is current. Readers skip, and log, what they cannot parse.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import logging
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from benchflow.core.files import write_text_atomic
from benchflow.results.row import ResultRow, RowError

log = logging.getLogger(__name__)


def loads(text: str | bytes) -> Any:
    """A row's JSON: orjson (faster, for histories of many rows), else json, which also
    reads the NaN and Infinity orjson refuses, and raises json.JSONDecodeError."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """Python's cycle collector paused while many rows are read, and what was read frozen
    out of later collections: rows hold no cycles (benchmarks/RESULTS.md)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


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


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, default=str, separators=(",", ":"))


TORN_SUFFIX = ".torn"  # beside results.jsonl: the torn lines a later append cut off
TORN_TAIL_MAX = 1 << 20  # a last line longer than this is no torn row: left as it is


def _append_line(path: Path, data: dict[str, Any]) -> None:
    line = (_line(data) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if not _repair_torn_tail(path, fd):
            line = b"\n" + line  # a last line left as it was: ours starts on a fresh one
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _repair_torn_tail(path: Path, fd: int) -> bool:
    """Before an append, under the lock: a torn last line is cut off into `<path>.torn`,
    or given its newline where it is whole JSON. False where the tail is left as it was."""
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return True
    start = max(0, size - TORN_TAIL_MAX)
    tail = os.pread(fd, size - start, start)
    newline = tail.rfind(b"\n")
    if newline < 0 and start > 0:
        return False
    fragment = tail[newline + 1 :]
    try:
        loads(fragment)
    except json.JSONDecodeError:
        with open(path.with_name(path.name + TORN_SUFFIX), "ab") as kept:
            kept.write(fragment + b"\n")
        os.ftruncate(fd, size - len(fragment))
        log.warning(
            "%s: cut off a torn last line of %d bytes (a writer killed mid-line), kept in %s",
            path,
            len(fragment),
            path.name + TORN_SUFFIX,
        )
        return True
    os.write(fd, b"\n")
    return True


def record_row(path: Path, row: ResultRow) -> list[ResultRow]:
    """Append `row`, marking the job's earlier current rows ``superseded_by`` it (an atomic
    rewrite that keeps unparseable lines); returns the rows it superseded."""
    with _locked(path):
        if path.exists():  # a torn last line is cut off before the file is read
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
            try:
                _repair_torn_tail(path, fd)
            finally:
                os.close(fd)
        # Most jobs have no earlier row: one search of the bytes for the fingerprint, and
        # one append; only a rerun's job reads the file whole.
        needle = _line({"fingerprint": row.job.fingerprint})[1:-1].encode()
        if not path.exists() or needle not in path.read_bytes():
            _append_line(path, row.to_dict())
            return []
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        out, superseded = [], []
        for lineno, line in enumerate(lines, 1):
            try:
                old = json.loads(line)
            except json.JSONDecodeError:
                out.append(line)
                continue
            if (
                isinstance(old, dict)
                and (old.get("job") or {}).get("fingerprint") == row.job.fingerprint
                and not old.get("superseded_by")
            ):
                old["superseded_by"] = row.row_id
                superseded.append((lineno, old))
                line = _line(old)
            out.append(line)
        if not superseded:
            _append_line(path, row.to_dict())
            return []
        out.append(_line(row.to_dict()))
        write_text_atomic(path, "\n".join(out) + "\n")
    replaced = (_row_of(old, path, lineno) for lineno, old in superseded)
    return [r for r in replaced if r is not None]


def current(rows: list[ResultRow]) -> list[ResultRow]:
    """The rows no later attempt of the same job has replaced."""
    return [r for r in rows if not r.superseded_by]


def tally(rows: list[ResultRow]) -> Counter[str]:
    """How many rows ended in each status (the progress line, the sweep run's tags)."""
    return Counter(r.status.value for r in rows)


def read_rows(path: Path) -> list[ResultRow]:
    """All readable rows of a results.jsonl; each bad line is logged and skipped."""
    rows = (_row_of(data, path, lineno) for lineno, data in _objects(path))
    return [r for r in rows if r is not None]


def _row_of(data: dict[str, Any], path: Path, lineno: int) -> ResultRow | None:
    try:
        return ResultRow.from_dict(data)
    except RowError as exc:
        log.warning("%s:%d: skipped a line that is no result row (%s)", path, lineno, exc)
        return None


def _objects(path: Path) -> list[tuple[int, dict[str, Any]]]:
    found: list[tuple[int, dict[str, Any]]] = []
    if not path.exists():
        return found
    with path.open(encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.endswith("\n") and not _whole(line):
                # a torn last line (its writer killed mid-line): no row, and the next
                # append repairs it (_repair_torn_tail)
                log.info("%s:%d: ignored a torn last line", path, lineno)
                continue
            if (data := _parse(line, path, lineno)) is not None:
                found.append((lineno, data))
    return found


def _whole(line: str) -> bool:
    try:
        loads(line)
    except json.JSONDecodeError:
        return False
    return True


def _parse(line: str, path: Path, lineno: int) -> dict[str, Any] | None:
    """One line's JSON object (None: blank, or logged as not one)."""
    if not line.strip():
        return None
    try:
        data = loads(line)
    except json.JSONDecodeError as exc:
        log.warning("%s:%d: skipped a corrupt line (%s)", path, lineno, exc.msg)
        return None
    if not isinstance(data, dict):
        log.warning("%s:%d: skipped a line that is not a JSON object", path, lineno)
        return None
    return data
