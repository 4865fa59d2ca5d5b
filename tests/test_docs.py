"""Every command shown in the docs is one that a test runs.

A command is a line of a fenced block in README.md or docs/*.md that starts with one of
PROGRAMS (after an optional `$ ` prompt; a line ending in `\\` goes on with the next).
The block must follow a marker naming the tests that run it,

    <!-- tested-by: tests/test_cli.py::test_help_and_cfg_job_do_not_import_heavy_modules -->

and one of the named functions (a test, a fixture or an `@early` run, top-level in its
file) must hold the command's arguments, in order, as string items of one list or tuple
literal: in its own source or in a name it uses that its file assigns (`[*SWEEP,
"resume=true"]` reads SWEEP). Other items may come between (a test adds
`model.size=tiny`, its search path, `mlflow.enabled=false`). `<...>` in a command is a
placeholder for a value the test computes (a folder, a run id) and matches any item.
A command no test can run here is in ALLOWED, with the reason.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

PROGRAMS = ("python -m benchflow", "benchflow", "make", "uv")
MARKER = re.compile(r"<!--\s*tested-by:\s*(.*?)\s*-->")
FENCE = re.compile(r"^\s*(```|~~~)")
PLACEHOLDER = re.compile(r"<[^<>\s]+>")
ANY = "{}"  # an item the test computes: an f-string's value, a variable, a call

# The only commands the docs show that no test runs, each with why. A command matches
# its entry exactly (comments and spacing aside; for make, its VAR=value settings too).
ALLOWED = {
    "make test": "it is the test suite itself (CI's command: .ci/run)",
    "make docs": "`make test` depends on it, so every `make test` (and CI) runs it",
    "make run": "the headline sweep on small models, minutes; the grid session sweep "
    "(tests/conftest.py GRID) runs the same models and backends, widened, on tiny ones",
    "python -m benchflow -m model=llama,dlrm dynamo=openxla,inductor": "what `make run` runs",
    "make compare-xr": "needs pytorch/xla and TorchBench checkouts outside this repository",
    "python -m benchflow -m suite=huggingface model=BertForMaskedLM,GPT2ForSequenceClassification "
    "dynamo=none,inductor,openxla": "the suites' figures, many minutes at the suites' batch "
    "sizes; test_suite_models_on_every_cpu_backend (full) runs every CPU backend on them",
    "python -m benchflow -m suite=huggingface model=BertForMaskedLM,GPT2ForSequenceClassification "
    "dynamo=none,inductor,openxla repeat=3 iterations_per_run=2": "the figures' sweep, as above",
    "python -m benchflow -m suite=timm model=mobilenetv2_100,tf_efficientnet_b0,"
    "deit_tiny_patch16_224.fb_in1k,mobilevit_s,ghostnet_100 dynamo=none,inductor,openxla "
    "repeat=3 iterations_per_run=2": "the figures' sweep, as above",
}


@dataclass(frozen=True)
class Command:
    where: str  # file:line
    line: str  # the command, continuation lines joined
    tested_by: tuple[str, ...]  # what its block's marker names


def program(line: str) -> str | None:
    """Which of PROGRAMS a command line runs, if any."""
    return next((p for p in PROGRAMS if line == p or line.startswith(p + " ")), None)


def arguments(line: str) -> list[str]:
    """A command's arguments after its program, as the shell splits them."""
    return shlex.split(line[len(program(line) or "") :], comments=True)


def commands(text: str, name: str) -> list[Command]:
    """The commands in the fenced blocks of one Markdown text."""
    found: list[Command] = []
    lines = text.splitlines()
    marker: tuple[str, ...] = ()
    in_block, pending, start = False, "", 0
    for num, raw in enumerate(lines, 1):
        if FENCE.match(raw):
            in_block = not in_block
            if not in_block:
                marker = ()
            continue
        if not in_block:
            if raw.strip():  # the marker is the last non-blank line before the fence
                m = MARKER.search(raw)
                marker = tuple(t.strip() for t in m.group(1).split(",")) if m else ()
            continue
        line = raw.strip().removeprefix("$ ")
        if pending:
            line, pending = pending + " " + line, ""
        elif program(line) is None:
            continue
        else:
            start = num
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        found.append(Command(f"{name}:{start}", line, marker))
    return found


def _item(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> list[str]:
    """A literal's item as the strings it stands for (a starred list: its items)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [
            "".join(
                v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else ANY
                for v in node.values
            )
        ]
    target = node.value if isinstance(node, ast.Starred) else node
    if isinstance(target, ast.Name) and target.id in names and depth < 3:
        value = names[target.id]
        if isinstance(node, ast.Starred) and isinstance(value, ast.List | ast.Tuple):
            return [s for elt in value.elts for s in _item(elt, names, depth + 1)]
        if not isinstance(node, ast.Starred):
            return _item(value, names, depth + 1)
    return [ANY]


def literals(path: Path, func: str) -> list[list[str]]:
    """The list and tuple literals of a top-level function, and of the names it uses
    that its file assigns (its own or the module's), as strings."""
    tree = ast.parse(path.read_text())
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    if func not in defs:
        raise LookupError(f"{path.relative_to(REPO)} has no top-level function {func}")
    names: dict[str, ast.expr] = {}
    for node in [*tree.body, *ast.walk(defs[func])]:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
    seen: set[str] = set()
    todo: list[ast.AST] = [defs[func]]
    found: list[list[str]] = []
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.List | ast.Tuple):
                found.append([s for elt in node.elts for s in _item(elt, names)])
            elif isinstance(node, ast.Name) and node.id not in seen:
                seen.add(node.id)
                if node.id in names:
                    todo.append(names[node.id])
                elif node.id in defs:
                    todo.append(defs[node.id])
    return found


def _matches(arg: str, item: str) -> bool:
    pattern = ".+".join(re.escape(p) for p in PLACEHOLDER.split(arg))
    return bool(re.fullmatch(pattern, item))


def holds(items: list[str], args: list[str]) -> bool:
    """Whether `args` appear in `items` in order (other items may come between)."""
    at = 0
    for arg in args:
        while at < len(items) and not _matches(arg, items[at]):
            at += 1
        if at == len(items):
            return False
        at += 1
    return True


def allowed(line: str) -> bool:
    """Whether a command is in ALLOWED."""
    args = arguments(line)
    if program(line) == "make":
        args = [a for a in args if not re.match(r"[A-Z_]+=", a)]
    return " ".join([program(line) or "", *args]) in ALLOWED


def problems(cmds: list[Command]) -> list[str]:
    """What is wrong with each command: untested, or its tests do not hold it."""
    found = []
    for cmd in cmds:
        if allowed(cmd.line):
            continue
        if not cmd.tested_by:
            found.append(f"{cmd.where}: `{cmd.line}` has no tested-by marker before its block")
            continue
        args = arguments(cmd.line)
        ok = False
        for ref in cmd.tested_by:
            path, _, func = ref.partition("::")
            try:
                ok = ok or any(holds(lit, args) for lit in literals(REPO / path, func))
            except (OSError, LookupError) as exc:
                found.append(f"{cmd.where}: tested-by {ref}: {exc}")
        if not ok:
            found.append(
                f"{cmd.where}: `{cmd.line}`: no literal in {', '.join(cmd.tested_by)} holds {args}"
            )
    return found


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_every_command_in_the_docs_is_run_by_a_test() -> None:
    cmds = [c for f in doc_files() for c in commands(f.read_text(), str(f.relative_to(REPO)))]
    assert len(cmds) > 10  # the extractor finds them
    assert problems(cmds) == []


def test_the_check_reports_an_untested_command_and_a_wrong_marker() -> None:
    md = (
        "Run it:\n\n```shell\npython -m benchflow model=llama  # one job\n```\n\n"
        "<!-- tested-by: tests/test_cli.py::test_help_and_cfg_job_do_not_import_heavy_modules -->\n"
        "```\n$ python -m benchflow model=dlrm dynamo=openxla --cfg job\n"
        "python -m benchflow model=bert \\\n    dynamo=tvm\nsome output\n```\n"
        "<!-- tested-by: tests/test_cli.py::no_such_test -->\n```\nmake lint\n```\n"
    )
    cmds = commands(md, "x.md")
    assert [c.line for c in cmds] == [
        "python -m benchflow model=llama  # one job",
        "python -m benchflow model=dlrm dynamo=openxla --cfg job",
        "python -m benchflow model=bert dynamo=tvm",
        "make lint",
    ]
    found = problems(cmds)
    assert len(found) == 4, found
    assert found[0].startswith("x.md:4: `python -m benchflow model=llama  # one job` has no")
    assert "x.md:10" in found[1] and "['model=bert', 'dynamo=tvm']" in found[1]
    assert "x.md:16" in found[2] and "no top-level function no_such_test" in found[2]
    assert "x.md:16" in found[3] and "holds ['lint']" in found[3]


def test_placeholders_and_starred_names_match() -> None:
    items = ["-m", ANY, "model=a,b", "hydra.sweep.dir=s", ANY, "retry=none"]
    assert holds(items, ["-m", "hydra.sweep.dir=<folder>", "retry=none"])
    assert holds(items, ["model=a,b", "<sweep>"])
    assert not holds(items, ["retry=none", "model=a,b"])  # order counts
    assert not holds(items, ["model=a"])  # whole items, not parts
    assert allowed("make compare-xr XLA_CHECKOUT=~/x TORCHBENCH_ROOT=~/y  # a comment")
    assert not allowed("python -m benchflow -m model=llama,dlrm dynamo=openxla,inductor repeat=1")
    lits = literals(REPO / "tests" / "test_resume.py", "_sigterm_then_resume")
    assert any(holds(lit, ["-m", "model=sleepy,fault_raise", "resume=true"]) for lit in lits)


def test_make_help_lists_the_documented_targets() -> None:
    out = subprocess.run(
        ["make", "help"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    for target in ("run", "test", "docs", "compare-xr", "lint", "ui"):
        assert f"make {target} " in out, out
