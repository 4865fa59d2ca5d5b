"""Every command shown in the docs is one that a test runs, and runs as written.

A command is a line of a fenced block in README.md or docs/*.md that starts with one of
PROGRAMS (after an optional `$ ` prompt; a line ending in `\\` goes on with the next).

Run as written: each command that starts no job (`--help`, `--cfg job`, `models`,
`make help`) runs here exactly as the page shows it, in a fresh shell with no venv
activated (test_commands_that_start_no_job_run_as_written); the README's own-model
command does too, in tests/test_your_code.py (one job); the other commands that start
jobs run so in `make test-full` (test_commands_that_start_jobs_run_as_written). What
cannot run as written is in NOT_RUN, with the reason, or holds a `<placeholder>`.

Held by a test: each block must follow a marker naming the tests that run it,

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
import os
import re
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest import REPO
from tests.early import environ

# `.venv/bin/benchflow`: the checkout's console script, run from the checkout with no
# venv activated; `benchflow`: the script of an installed wheel (docs/your-code.md).
BENCHFLOW = (".venv/bin/benchflow", "benchflow")
PROGRAMS = (*BENCHFLOW, "make", ".uv/bin/uv")
# Programs a fresh shell after `make setup` does not have (no venv is active, and the
# machine may have python3 only): a page must not show a command that starts with one.
NOT_IN_A_FRESH_SHELL = ("python", "python3", "pip", "uv", "mkdocs", "pytest")
MARKER = re.compile(r"<!--\s*tested-by:\s*(.*?)\s*-->")
FENCE = re.compile(r"^\s*(```|~~~)")
PLACEHOLDER = re.compile(r"<[^<>\s]+>")
ANY = "{}"  # an item the test computes: an f-string's value, a variable, a call

# The only commands the docs show that no test runs, each with why. A command matches
# its entry exactly (comments and spacing aside; for make, its VAR=value settings too).
_HEADLINE = ".venv/bin/benchflow -m model=llama,dlrm dynamo=openxla,inductor"
_HF_FIGURES = (
    ".venv/bin/benchflow -m suite=huggingface model=BertForMaskedLM,GPT2ForSequenceClassification "
    "dynamo=none,inductor,openxla"
)
_TIMM_FIGURES = (
    ".venv/bin/benchflow -m suite=timm model=mobilenetv2_100,tf_efficientnet_b0,"
    "deit_tiny_patch16_224.fb_in1k,mobilevit_s,ghostnet_100 dynamo=none,inductor,openxla "
    "repeat=3 iterations_per_run=2"
)
ALLOWED = {
    "make test": "it is the test suite itself (CI's command: .ci/run)",
    "make run": "the headline sweep on small models, minutes; the grid session sweep "
    "(tests/conftest.py GRID) runs the same models and backends, widened, on tiny ones",
    _HEADLINE: "what `make run` runs",
    "make compare-xr": "needs pytorch/xla and TorchBench checkouts outside this repository",
    "make coverage": "needs both checkouts, as compare-xr; tests/test_coverage.py checks "
    "its table from per-model results",
    "make setup": "every make target runs it first (`make test` included); "
    "test_every_sync_keeps_the_extras_make_setup_installs checks what it installs",
    _HF_FIGURES: "the suites' figures, many minutes at the suites' batch "
    "sizes; test_suite_models_on_every_cpu_backend (full) runs every CPU backend on them",
    _HF_FIGURES + " repeat=3 iterations_per_run=2": "the figures' sweep, as above",
    _TIMM_FIGURES: "the figures' sweep, as above",
    "make test-gpu": "the gpu lane runs on a GPU machine, with its python3 and the wheels "
    "`make gpu-wheels` made (docs/gpu.md); tests/test_gpu.py holds the lane",
    ".venv/bin/benchflow -m model=llama,resnet dynamo=none,inductor,cudagraphs accelerator=cuda": (
        "needs a CUDA GPU; tests/test_gpu.py runs these models and backends on one"
    ),
}

# Commands without a placeholder that even `make test-full` does not run as written,
# each with why (a command matches as for ALLOWED).
NOT_RUN = {
    "make test": "the test suite itself: it would run this test again",
    "make setup": "it would change the environment the running tests import from",
    "make run": "what _HEADLINE runs, and it would write into the checkout's multirun/",
    "make compare-xr": "needs pytorch/xla and TorchBench checkouts outside this repository",
    "make coverage": "as make compare-xr, for every model: hours",
    _HEADLINE: "the headline sweep on small models: minutes, into the checkout's multirun/",
    _HF_FIGURES: "many minutes at the suites' batch sizes (see ALLOWED)",
    _HF_FIGURES + " repeat=3 iterations_per_run=2": "as above",
    _TIMM_FIGURES: "as above",
    "make test-gpu": "needs a GPU machine (see ALLOWED)",
    ".venv/bin/benchflow -m model=llama,resnet dynamo=none,inductor,cudagraphs accelerator=cuda": (
        "needs a CUDA GPU (see ALLOWED)"
    ),
    ".venv/bin/benchflow expected multirun/after expected/planted.csv": (
        "exits 1, as docs/expected.md shows: the planted sweep fails the check "
        "(tests/test_expected.py runs it and reads its output)"
    ),
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


def _key(line: str) -> str:
    """A command as ALLOWED and NOT_RUN name it: comments and spacing aside, and for
    make, its VAR=value settings too."""
    args = arguments(line)
    if program(line) == "make":
        args = [a for a in args if not re.match(r"[A-Z_]+=", a)]
    return " ".join([program(line) or "", *args])


def allowed(line: str) -> bool:
    """Whether a command is in ALLOWED."""
    return _key(line) in ALLOWED


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
        "Run it:\n\n```shell\n.venv/bin/benchflow model=llama  # one job\n```\n\n"
        "<!-- tested-by: tests/test_cli.py::test_help_and_cfg_job_do_not_import_heavy_modules -->\n"
        "```\n$ .venv/bin/benchflow model=dlrm dynamo=openxla --cfg job\n"
        ".venv/bin/benchflow model=bert \\\n    dynamo=tvm\nsome output\n```\n"
        "<!-- tested-by: tests/test_cli.py::no_such_test -->\n```\nmake lint\n```\n"
    )
    cmds = commands(md, "x.md")
    assert [c.line for c in cmds] == [
        ".venv/bin/benchflow model=llama  # one job",
        ".venv/bin/benchflow model=dlrm dynamo=openxla --cfg job",
        ".venv/bin/benchflow model=bert dynamo=tvm",
        "make lint",
    ]
    found = problems(cmds)
    assert len(found) == 4, found
    assert found[0].startswith("x.md:4: `.venv/bin/benchflow model=llama  # one job` has no")
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
    assert not allowed(".venv/bin/benchflow -m model=llama,dlrm dynamo=openxla,inductor repeat=1")
    lits = literals(REPO / "tests" / "test_resume.py", "_sigterm_then_resume")
    assert any(holds(lit, ["-m", "model=sleepy,fault_raise", "resume=true"]) for lit in lits)


def test_make_help_lists_the_documented_targets() -> None:
    out = subprocess.run(
        ["make", "help"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    for target in ("run", "test", "docs", "compare-xr", "coverage", "lint", "ui"):
        assert f"make {target} " in out, out


# --- run as written, in a fresh shell -------------------------------------------------


def all_commands() -> list[Command]:
    return [c for f in doc_files() for c in commands(f.read_text(), str(f.relative_to(REPO)))]


def fresh_env(**extra: str) -> dict[str, str]:
    """A new login's environment after `make setup`: no venv activated (no VIRTUAL_ENV,
    .venv/bin not on PATH), nothing of the test session's Python on its paths."""
    venv_bin = (REPO / ".venv" / "bin").resolve()
    path = [
        p
        for p in environ().get("PATH", "/usr/bin:/bin").split(os.pathsep)
        if p and Path(p).resolve() != venv_bin
    ]
    env = {
        k: v
        for k, v in environ().items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX", "PATH")
    }
    return {**env, "PATH": os.pathsep.join(path), **extra}


def run_as_written(
    line: str, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """A documented command line, exactly as the page shows it, in a fresh bash (no
    profile, no rc file) in `cwd`."""
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", line],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def starts_no_job(cmd: Command) -> bool:
    """A command that reads config and prints, and runs no model: its help, a composed
    config, the model listing, or make's target list."""
    args = arguments(cmd.line)
    if program(cmd.line) == "make":
        return args == ["help"]
    return program(cmd.line) in BENCHFLOW and (
        "--help" in args or "--cfg" in args or args[:1] == ["models"]
    )


def runnable(cmd: Command) -> bool:
    """Whether a command can run as written: no placeholder, not in NOT_RUN."""
    return not PLACEHOLDER.search(cmd.line) and _key(cmd.line) not in NOT_RUN


def installed_wheel_path(root: Path) -> str:
    """PATH of a shell where benchflow is installed (docs/your-code.md's `benchflow`):
    a folder holding a link to the checkout's console script, then the fresh PATH.
    tests/test_your_code.py runs the real wheel's."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    link = bin_dir / "benchflow"
    if not link.exists():
        link.symlink_to(REPO / ".venv" / "bin" / "benchflow")
    return f"{bin_dir}{os.pathsep}{fresh_env()['PATH']}"


def where_to_run(cmd: Command, root: Path) -> tuple[Path, dict[str, str]]:
    """The checkout for `.venv/bin/...` and make; for an installed wheel's `benchflow`,
    the user's repository of docs/your-code.md (its bench/ config folder), in `root`."""
    if program(cmd.line) != "benchflow":
        return REPO, fresh_env()
    from tests.test_your_code import user_repo

    repo = root / "their_repo"
    if not repo.exists():
        user_repo(repo)
    return repo, fresh_env(PATH=installed_wheel_path(root))


def test_no_command_needs_an_activated_venv_or_a_python_on_path() -> None:
    """A fresh shell after `make setup` has no venv active and perhaps no `python`:
    every command a page shows names the checkout's .venv/bin or .uv/bin."""
    found = []
    for f in doc_files():
        in_block = False
        for num, raw in enumerate(f.read_text().splitlines(), 1):
            if FENCE.match(raw):
                in_block = not in_block
                continue
            line = raw.strip().removeprefix("$ ")
            if in_block and line.split(" ", 1)[0] in NOT_IN_A_FRESH_SHELL:
                found.append(f"{f.relative_to(REPO)}:{num}: {line}")
    pages = {where.split(":")[0] for where in found}
    assert sorted(pages - set(REWRITTEN_ELSEWHERE)) == [], found
    assert sorted(set(REWRITTEN_ELSEWHERE) - pages) == []  # fixed: drop its entry


# Pages another change is rewriting, which still show `python -m benchflow`: each must
# still do so (an entry goes once its page is fixed).
REWRITTEN_ELSEWHERE: dict[str, str] = {}


def test_the_run_lists_name_documented_commands() -> None:
    """ALLOWED and NOT_RUN name only commands a page shows: no stale entry."""
    shown = {_key(c.line) for c in all_commands()}
    assert sorted(set(ALLOWED) - shown) == []
    assert sorted(set(NOT_RUN) - shown) == []


def test_commands_that_start_no_job_run_as_written(tmp_path: Path) -> None:
    """Each documented command that starts no job, exactly as written, in a fresh shell
    from the checkout (an installed wheel's `benchflow` from the user's repository):
    it exits 0 and prints something."""
    cmds = [c for c in all_commands() if starts_no_job(c) and runnable(c)]
    lines = sorted({c.line: c for c in cmds}.values(), key=lambda c: c.where)
    assert len(lines) >= 5, [c.line for c in lines]  # the classifier finds them
    started = time.monotonic()
    # Two at a time: each is mostly one Python start-up (nothing heavy is imported).
    with ThreadPoolExecutor(2) as pool:
        done = list(
            pool.map(lambda c: (c, run_as_written(c.line, *where_to_run(c, tmp_path), 120)), lines)
        )
    failed = [
        f"{c.where}: `{c.line}` exit {r.returncode}: {r.stderr[-800:]}"
        for c, r in done
        if r.returncode != 0 or not r.stdout.strip()
    ]
    assert failed == []
    print(f"{len(done)} commands in {time.monotonic() - started:.1f} s")


@pytest.mark.full
# 28 commands, most of them real sweeps, one after the other: past the suite's 900 s on
# a 2-core VM (the 22nd, the paired sweep, was still running at 900 s on 2026-12-05)
@pytest.mark.timeout(3600)
def test_commands_that_start_jobs_run_as_written(tmp_path: Path) -> None:
    """Each documented command that starts jobs and holds no placeholder, exactly as
    written, in a fresh shell: from a folder laid out as the checkout (.venv, .uv and
    tests linked, so its runs and MLflow store land in the test's folder, not the checkout),
    or, for an installed wheel's `benchflow`, from the user's repository. Each exits 0."""
    cmds = [c for c in all_commands() if not starts_no_job(c) and runnable(c)]
    assert cmds, "no command starts jobs?"
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in (".venv", ".uv", "tests"):  # tests/: the test models docs/expected.md runs
        (checkout / name).symlink_to(REPO / name)
    from tests.test_your_code import ONE_FILE

    (checkout / "mlp.py").write_text(ONE_FILE)
    failed = []
    for cmd in cmds:
        cwd, env = where_to_run(cmd, tmp_path)
        if program(cmd.line) != "benchflow":
            cwd = checkout
        res = run_as_written(cmd.line, cwd, env, 1800)
        if res.returncode != 0:
            failed.append(f"{cmd.where}: `{cmd.line}` exit {res.returncode}: {res.stderr[-800:]}")
    assert failed == []


# --- extras: one definition, kept by every sync a page shows ---------------------------


def make_setup_extras() -> set[str]:
    """The extras `make setup` installs: the Makefile's EXTRAS, its one definition."""
    (value,) = re.findall(r"^DEFAULT_EXTRAS := (.+)$", (REPO / "Makefile").read_text(), re.M)
    return set(value.split())


def syncs(text: str) -> list[str]:
    """Every `uv sync ...` and `make ... EXTRAS=...` a text shows, inline or in a block."""
    found = re.findall(r"(?:\.uv/bin/)?uv sync[^`\n]*", text)
    found += re.findall(r"make [^`\n]*EXTRAS=(?:\"[^\"]*\"|'[^']*'|\S+)", text)
    return found


def keeps(command: str, extras: set[str]) -> bool:
    """Whether a sync keeps every extra in `extras` (uv sync is exact: it removes the
    extras it is not given)."""
    if command.startswith("make"):
        value = command.split("EXTRAS=", 1)[1].strip("\"'")
        return extras <= set(value.split())
    return "--all-extras" in command or extras <= set(re.findall(r"--extra[ =](\S+)", command))


def test_every_sync_keeps_the_extras_make_setup_installs() -> None:
    extras = make_setup_extras()
    assert extras and {"ray", "suites"} <= extras  # the tests need both
    texts = {str(f.relative_to(REPO)): f.read_text() for f in doc_files()}
    for path in (REPO / "src").rglob("*.py"):  # hints the program prints
        texts[str(path.relative_to(REPO))] = path.read_text()
    shown = [(where, cmd) for where, text in texts.items() for cmd in syncs(text)]
    assert any(cmd.startswith("make") for _, cmd in shown)  # models.md's torchbench extra
    assert [(w, c) for w, c in shown if not keeps(c, extras)] == []
    # the check itself
    assert not keeps("uv sync --locked --extra ray", extras)
    assert not keeps('make setup EXTRAS="torchbench"', extras)
    assert keeps('make setup EXTRAS="ray suites torchbench"', {"ray", "suites"})
    assert sorted(syncs('run `make setup EXTRAS="a b"` or `uv sync --extra a`')) == [
        'make setup EXTRAS="a b"',
        "uv sync --extra a",
    ]


def test_make_setup_syncs_again_when_the_extras_change() -> None:
    """The stamp holds the extras of the last sync: asking for others syncs again (a
    dry run: nothing is installed)."""
    stamp = (REPO / ".venv" / ".synced").read_text().split()
    other = " ".join(sorted({*stamp, "torchbench"} if "torchbench" not in stamp else {"ray"}))

    def dry(*args: str) -> str:
        return subprocess.run(
            ["make", "-n", "setup", *args], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout

    assert f'!= "{" ".join(sorted(stamp))}"' in dry(f"EXTRAS={' '.join(stamp)}")
    assert f'!= "{other}"' in dry(f"EXTRAS={other}")
    for extra in other.split():
        assert f"--extra {extra}" in dry(f"EXTRAS={other}")


def test_a_target_without_extras_keeps_those_the_venv_was_made_with(tmp_path: Path) -> None:
    """After `make setup EXTRAS="ray suites xla torchbench"`, a target run without
    EXTRAS= (make slurm-up, make test) syncs to the same list, so uv's exact sync
    removes nothing; an EXTRAS= that leaves one out removes it (a dry run on a stamp of
    the test's own)."""
    stamp = tmp_path / ".synced"

    def asked(*args: str) -> str:
        out = subprocess.run(
            ["make", "-n", "setup", f"STAMP={stamp}", *args],
            cwd=REPO, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        (line,) = [x for x in out.splitlines() if "sync --locked" in x and "echo" in x]
        return " ".join(x for x in line.split() if not x.startswith("-") and x != "\\")

    stamp.write_text("ray suites torchbench xla\n")
    assert asked().endswith('ray suites torchbench xla";'), asked()
    assert asked("EXTRAS=ray suites xla").endswith('ray suites xla";')
    stamp.unlink()  # a fresh clone: the default list
    assert asked().endswith('ray suites xla";'), asked()


# --- every setting and every flag has a line in the docs -------------------------------


def schema_keys(cls: type | None = None, prefix: str = "") -> list[str]:
    """Every key of the schema, dotted (`model.step`), walked from its dataclasses."""
    import dataclasses
    import typing

    from benchflow.config.schema import BenchConfig

    cls = cls or BenchConfig
    hints = typing.get_type_hints(cls)
    keys = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if dataclasses.is_dataclass(hints[f.name]):
            keys += schema_keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def test_every_setting_is_named_in_usage() -> None:
    """docs/usage.md names every key of the schema, as `key` (its group's option sets a
    group's `name`, which the page names too)."""
    page = (REPO / "docs" / "usage.md").read_text()
    keys = schema_keys()
    assert {"repeat", "model.step", "dynamo.fullgraph", "suite.rules"} <= set(keys)
    assert [k for k in keys if f"`{k}`" not in page and f"`{k}=" not in page] == []


def test_every_group_option_is_in_the_usage_table() -> None:
    """The groups table of docs/usage.md lists every option of every group in conf/."""
    from benchflow.config.store import CONF_DIR

    page = (REPO / "docs" / "usage.md").read_text()
    rows = {m[0]: m[1] for m in re.findall(r"^\| `(\w+)` \| (.*?) \|", page, re.M)}
    missing = []
    for group in sorted(p for p in CONF_DIR.iterdir() if p.is_dir() and p.name != "hydra"):
        row = rows.get(group.name, "")
        missing += [
            f"{group.name}={f.stem}" for f in group.glob("*.yaml") if f"`{f.stem}`" not in row
        ]
    assert "model" in rows and sorted(missing) == []


def cli_parsers() -> dict[str, object]:
    """Each command beside the sweep with its argparse parser (its module's parser())."""
    import importlib

    from benchflow.cli import COMMANDS

    found = {}
    for name, (module, _) in COMMANDS.items():
        make = getattr(importlib.import_module(module), "parser", None)
        if make is not None:
            found[name] = make()
    return found


# Commands without an argparse parser, and why.
NO_PARSER = {
    "models": "it takes a sweep's arguments (key=value, --config-dir), which Hydra's own "
    "flags and the schema's keys cover",
}


def test_every_flag_of_every_command_is_named_in_the_docs() -> None:
    import argparse

    from benchflow.cli import COMMANDS

    parsers = cli_parsers()
    assert sorted(set(parsers) | set(NO_PARSER)) == sorted(COMMANDS)
    text = "\n\n".join(f.read_text() for f in doc_files())
    flags = [
        (name, flag)
        for name, p in parsers.items()
        for action in p._actions  # type: ignore[attr-defined]
        if not isinstance(action, argparse._HelpAction)
        for flag in action.option_strings
        if flag.startswith("--")
    ]
    assert ("report", "--format") in flags  # the walk finds them
    # named in a paragraph that names its command, as a whole flag (not --out in --out-dir)
    paragraphs = re.split(r"\n\s*\n", text)

    def named(command: str, flag: str) -> bool:
        return any(
            re.search(re.escape(flag) + r"(?![\w-])", p) and re.search(rf"\b{command}\b", p)
            for p in paragraphs
        )

    assert [(n, f) for n, f in flags if not named(n, f)] == []


# --- facts the docs state, read from the code ----------------------------------------


def marked(key: str, cls: type | None = None, prefix: str = "") -> list[str]:
    """The schema's fields whose metadata has `key` (`measured`: False, `optional`),
    dotted; a marked dataclass field is named, not its inner keys."""
    import dataclasses
    import typing

    from benchflow.config.schema import BenchConfig

    cls = cls or BenchConfig
    hints = typing.get_type_hints(cls)
    found = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = f"{prefix}{f.name}"
        if key in f.metadata:
            found.append(name)
        elif dataclasses.is_dataclass(hints[f.name]):
            found += marked(key, hints[f.name], f"{name}.")
    return found


def test_the_fingerprint_keys_are_listed_once_as_the_schema_marks_them() -> None:
    """docs/resume.md lists the keys left out of the fingerprint, exactly the schema's
    UNMEASURED ones, and the keys counted only when set (OPTIONAL); results.md links
    there instead of keeping a list of its own."""
    page = (REPO / "docs" / "resume.md").read_text()
    listed = page.split("<!-- unmeasured-keys -->", 1)[1].split("\n\n", 1)[0]
    unmeasured = marked("measured")
    assert {"mlflow", "processes", "timeout_s"} <= set(unmeasured)
    assert sorted(re.findall(r"`([\w.]+)`", listed)) == sorted(unmeasured)  # `mlflow.*` aside
    optional = marked("optional")
    (sentence,) = [p for p in page.split("\n\n") if "count only when set" in p]
    assert sorted(re.findall(r"`([\w.]+)`", sentence)) == sorted(optional)
    results = (REPO / "docs" / "results.md").read_text()
    assert "(resume.md#what-identifies-a-job)" in results
    assert "`retry`" not in results and "`prefork`" not in results  # no second list


def test_results_states_the_schema_version_the_code_writes() -> None:
    from benchflow.results.row import SCHEMA_VERSION

    page = (REPO / "docs" / "results.md").read_text()
    assert re.findall(r"`schema_version` \((\d+)", page) == [str(SCHEMA_VERSION)]
