"""docs/from-the-scripts.md: each benchmarks/dynamo and experiment-runner flag, and the
benchflow setting that does the same. Each form in its benchflow column runs with
`--cfg job` through the real CLI's entry, and the job it shows has each value the form
gives. The forms are many and `--cfg job` runs nothing: one niced process runs them
all, one after another, in the background from the session's start."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest import EarlySweeps, early
from tests.early import environ, nice_prefix

from benchflow.core.machine import cuda_present

PAGE = Path(__file__).resolve().parents[1] / "docs" / "from-the-scripts.md"
# What a cell says where benchflow needs no setting, or has none
PROSE = ("the default", "always", "not supported")
GROUPS = {"model", "dynamo", "xla", "test", "accelerator", "suite", "profile", "ir"}
NO_GPU = "no CUDA GPU is visible here"


def _rows() -> list[tuple[str, str]]:
    """(flag, benchflow cell) of each table row."""
    rows = []
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4 and cells[0] in ("dynamo", "runner"):
            rows.append((cells[1], cells[2]))
    return rows


def _forms() -> list[str]:
    """The benchflow forms of the table, each once."""
    found = (m.group(1) for _, cell in _rows() if (m := re.fullmatch(r"`([^`]+)`", cell)))
    return list(dict.fromkeys(found))


def _args(form: str) -> list[str]:
    args = form.split()
    return args if "--cfg" in args else [*args, "--cfg", "job"]


def show_all(out: str) -> None:
    """Each form through benchflow's CLI entry with --cfg job, in this process (the
    background run's): its exit code, stdout and stderr, as JSON in `out`."""
    from benchflow.cli.sweep import main

    said = {}
    for form in _forms():
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(_args(form))
            except SystemExit as exc:
                code = int(exc.code or 0)
        said[form] = (code, stdout.getvalue(), stderr.getvalue())
    Path(out).write_text(json.dumps(said))


@early("from_the_scripts")
def _shown(root: Path) -> dict[str, tuple[int, str, str]]:
    out = root / "shown.json"
    code = f"from tests.test_from_the_scripts import show_all; show_all({str(out)!r})"
    repo = str(PAGE.parents[1])
    subprocess.run(
        [*nice_prefix(True), sys.executable, "-c", code],
        cwd=root,
        env={**environ(), "PYTHONPATH": repo},
        check=True,
        timeout=600,
    )
    shown: dict[str, tuple[int, str, str]] = json.loads(out.read_text())
    assert [p.name for p in root.iterdir()] == ["shown.json"]  # nothing ran, no folder
    return shown


@pytest.fixture(scope="module")
def shown(early_sweeps: EarlySweeps) -> dict[str, tuple[int, str, str]]:
    result: dict[str, tuple[int, str, str]] = early_sweeps.result("from_the_scripts")
    return result


def test_every_row_gives_a_setting_or_says_why_not() -> None:
    rows = _rows()
    assert len(rows) > 60, len(rows)  # both tables read
    for flag, cell in rows:
        assert re.fullmatch(r"`[^`]+`", cell) or cell.startswith(PROSE), (flag, cell)
    flags = " ".join(flag for flag, _ in rows)
    for needed in ("--freezing", "--cpp-wrapper", "--dynamic-batch-only", "--xla-flags"):
        assert needed in flags, needed
    assert "--export-aot-inductor" in flags and "--dynamic-shapes" in flags


def _lookup(shown: dict[str, Any], key: str) -> Any:
    """The value at a dotted key of a shown job; a mapping section's keys may hold dots
    (`inductor.cpp.threads` is {"cpp": {"threads": 1}})."""
    node: Any = shown
    parts = key.split(".")
    while parts:
        if not isinstance(node, dict):
            raise KeyError(key)
        for n in range(len(parts), 0, -1):  # the longest key the section has
            if (head := ".".join(parts[:n])) in node:
                node, parts = node[head], parts[n:]
                break
        else:
            raise KeyError(key)
    return node


def _matches(found: Any, value: str) -> bool:
    return bool(found == yaml.safe_load(value) or str(found) == value)


@pytest.mark.parametrize("form", _forms())
def test_each_form_runs_with_cfg_job(form: str, shown: dict[str, tuple[int, str, str]]) -> None:
    code, out, err = shown[form]
    args = _args(form)
    if "accelerator=cuda" in args and not cuda_present():  # good input on a GPU machine
        assert code == 2 and NO_GPU in err, err
        return
    assert code == 0, err[-2000:]
    jobs = [doc for doc in yaml.safe_load_all(out) if doc]
    assert jobs, out
    for arg in args:
        if "=" not in arg or arg.startswith("-"):
            continue
        key, value = arg.split("=", 1)
        values = value.split(",") if "-m" in args else [value]
        for job in jobs:
            found = _lookup(job, key)
            if key in GROUPS and isinstance(found, dict):
                if "name" not in found:  # ir=: the formats it dumps
                    continue
                found = found["name"]
            assert any(_matches(found, v) for v in values), (form, key, found)
