"""Toolchains (issue 27), with a cheap difference: two environments built by uv with the
project's torch, differing in one small package (six 1.16.0 and 1.15.0; the project
has 1.17.0). A real sweep over them and the project's own environment: each job ran
in its toolchain's interpreter and imported nothing from the parent's environment,
the rows and the report tell them apart, a later run reuses the environments, and a
pin uv cannot install is refused before any job. The real torch releases: -m full."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import pytest
from tests.conftest import REPO, SEARCHPATH, CliResult, EarlySweeps, early, run_cli

from benchflow.cli.report import main as report_main
from benchflow.report.model import TOOLCHAIN_AXIS, build_report
from benchflow.results.io import read_rows

SIX = {"project": "1.17.0", "six-a": "1.16.0"}
JOB = ["model=where", "dynamo=none", "repeat=3", "warmup=1", "mlflow.enabled=false"]
NO_XLA = ("torch_xla", "_XLAC")  # what own_interpreter leaves out


def own_interpreter(folder: Path, leave_out: tuple[str, ...] = NO_XLA) -> Path:
    """An interpreter of the test's own making, as a user's venv is: a venv of the base
    Python whose packages are links to this environment's, less `leave_out` (torch_xla:
    a torch with no torch_xla, as a user's torch 2.11 has). Its bin/python."""
    import sysconfig
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    linked = folder / "linked"
    linked.mkdir()
    ours = Path(sysconfig.get_paths()["purelib"])
    for entry in ours.iterdir():
        if not entry.name.startswith(leave_out) and entry.suffix != ".pth":
            (linked / entry.name).symlink_to(entry)
    site = folder / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "linked.pth").write_text(f"{linked}\n")
    return folder / "bin" / "python"


def _inside(entry: str, roots: list[Path]) -> bool:
    path = Path(entry or ".").resolve()
    return any(path == r or path.is_relative_to(r) for r in roots)


@early("toolchains")
def _three_toolchains(root: Path) -> CliResult:
    """The sweep over three toolchains below, from the first test on."""
    env = {
        "BENCHFLOW_CACHE_DIR": str(root / "cache"),
        "BENCHFLOW_TEST_WHERE": str(root / "where.jsonl"),
        "BENCHFLOW_TEST_PYTHON": str(own_interpreter(root / "own")),
    }
    return run_cli(["-m", SEARCHPATH, "toolchain=project,six-a,own", *JOB], root, **env)


def test_jobs_run_in_their_toolchains_environment_and_reports_tell_them_apart(
    early_sweeps: EarlySweeps,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Three environments: the project's, one built by uv for pins (six-a) and an
    existing interpreter (own: toolchain.python, made by the test, with no torch_xla)."""
    from benchflow.results.provenance import torch_build

    got: CliResult = early_sweeps.result("toolchains")
    root = got.cwd
    cache, where, own = root / "cache", root / "where.jsonl", root / "own" / "bin" / "python"
    assert got.returncode == 0, got.stderr[-3000:]
    assert (got.stdout + got.stderr).count("building toolchain") == 1  # six-a; own is there
    (results,) = root.glob("multirun/*/*/results.jsonl")
    rows = {str((r.config or {}).get("toolchain.name", "project")): r for r in read_rows(results)}
    build = torch_build()
    own_name = f"torch-2.9.0+cu128-{build['torch_git'][:7]}"  # named by what it holds
    assert sorted(rows) == sorted(["project", "six-a", own_name])
    for name, row in rows.items():
        assert row.status.value == "ok", (name, row.error)
        if name == "six-a":  # the versions of a toolchain's pins
            assert row.provenance.versions["six"] == SIX[name]
        assert row.provenance.versions["torch"] == "2.9.0"
        assert row.provenance.versions["torch_git"] == build["torch_git"]  # as it is
    mine = rows[own_name]
    assert mine.config["toolchain.python"] == str(own)
    assert mine.config["toolchain.build"] == f"2.9.0+cu128 git {build['torch_git']}"
    assert mine.provenance.versions["torch_xla"] is None  # the interpreter has none
    # each toolchain's packages hash is its own lock's; the project's is its own set
    hashes = {row.provenance.packages_sha256 for row in rows.values()}
    assert len(hashes) == 3
    locks = {p.parent: p.read_text() for p in (cache / "toolchains").glob("*/requirements.lock")}
    assert len(locks) == 2 and any("six==1.16.0" in text for text in locks.values())
    (given,) = [f for f in locks if (f / "python").is_file()]  # own's: its package list
    assert (given / "python").read_text().strip() == str(own)
    assert "torch==2.9.0" in locks[given] and "torch_xla" not in locks[given]
    digest = hashlib.sha256((given / "requirements.lock").read_bytes()).hexdigest()
    assert mine.provenance.packages_sha256 == digest
    # where each job ran: its toolchain's interpreter, torch from its environment, and
    # a sys.path of that environment, the base interpreter's standard library, benchflow's
    # src/ and the test's PYTHONPATH (this checkout, for tests.models), nothing else
    seen = [json.loads(line) for line in where.read_text().splitlines()]
    assert len(seen) == 3
    venv = Path(sys.prefix).resolve()
    (six_a,) = [s for s in seen if s["six"] == SIX["six-a"]]
    prefix = Path(six_a["prefix"]).resolve()
    assert prefix.is_relative_to(cache / "toolchains") and prefix != venv
    assert Path(six_a["executable"]).parent.resolve() == prefix / "bin"
    assert Path(six_a["torch"]).resolve().is_relative_to(prefix)
    allowed = [prefix, Path(sys.base_prefix).resolve(), REPO / "src", REPO, root]
    strays = [p for p in six_a["path"] if not _inside(p, allowed)]
    assert strays == [], strays
    assert not any(_inside(p, [venv]) for p in six_a["path"])  # the parent's environment
    (in_own,) = [s for s in seen if s["executable"] == str(own)]  # the interpreter given
    assert Path(in_own["prefix"]) == root / "own"
    assert Path(in_own["torch"]).parent.parent == root / "own" / "linked"
    # every job forked from a zygote of its own toolchain's environment
    assert [s["launch"] for s in seen] == ["fork"] * len(seen)
    (in_project,) = [s for s in seen if s not in (six_a, in_own)]
    assert Path(in_project["prefix"]).resolve() == venv
    # the report: the toolchain is part of each configuration's label, and with a
    # baseline toolchain, each is compared with itself on that toolchain
    report = build_report(list(rows.values()), baseline_toolchain="six-a")
    assert TOOLCHAIN_AXIS in report.axes
    labels = {s.config.label: s for s in report.summaries}
    assert set(labels) == {f"eager toolchain={n}" for n in rows}
    assert labels["eager toolchain=six-a"].baseline
    for name in ("project", own_name):
        (entry,) = [e for e in report.entries if e.config.axis(TOOLCHAIN_AXIS) == name]
        assert entry.speedup is not None and entry.speedup_ci is not None, entry.note
        base = next(e for e in report.entries if e.config.axis(TOOLCHAIN_AXIS) == "six-a")
        assert entry.speedup == base.time_s / entry.time_s  # type: ignore[operator]
    out = root / "by-toolchain"
    args = [str(results.parent), "--baseline-toolchain", "six-a", "--out", str(out)]
    assert report_main([*args, "--no-mlflow"]) == 0
    assert "speedup: toolchain=six-a time / this time" in (out / "report.md").read_text()
    assert f"eager toolchain={own_name}" in (out / "report.md").read_text()
    # the terminal's table (within 120 columns, and the terminal's width: a long label
    # is cut in its middle) names the baseline toolchain
    assert "six-a" in capsys.readouterr().out
    # a later sweep finds the environments built: it builds nothing
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(cache))
    from benchflow.config.schema import ToolchainConfig
    from benchflow.runner.toolchain import build as build_env

    pins = {"torch": "2.9.0", "six": SIX["six-a"]}
    env_of, took = build_env(ToolchainConfig("six-a", pins), say=pytest.fail)
    assert took == 0.0 and env_of.folder.parent == cache / "toolchains"
    # the interpreter has no torch_xla: the XLA backends are invalid pairs, saying so
    from tests.test_config import composed

    from benchflow.config.validate import parse
    from benchflow.sweep.plan import plan_config

    # (a package installed there since the sweep: the next sweep's lock lists it)
    added = root / "own" / "linked" / "added_pkg-1.0.dist-info"
    added.mkdir()
    (added / "METADATA").write_text("Metadata-Version: 2.1\nName: added-pkg\nVersion: 1.0\n")
    xla = plan_config(parse(composed(f"toolchain.python={own}", "dynamo=openxla")), 0, [])
    assert xla.invalid, xla
    assert f"toolchain={own_name} ({own}) has none (its torch: 2.9.0)" in xla.invalid
    assert "allowed: torch_xla 2.9.x installed there" in xla.invalid
    assert xla.invalid.endswith(", or xla=none")
    assert xla.config.toolchain.build == mine.config["toolchain.build"]
    # a build given must be the interpreter's (no second probe: this process asked once)
    from benchflow.runner.interpreter import ToolchainError

    other = composed(f"toolchain.python={own}", "toolchain.build=2.9.0+cu128 git 0000000")
    with pytest.raises(ToolchainError, match=r"now holds torch 2\.9\.0\+cu128 git "):
        plan_config(parse(other), 0, [])
    env_of, took = build_env(xla.config.toolchain, say=pytest.fail)
    assert took == 0.0 and env_of.folder == given  # the same environment, its lock now
    assert "added-pkg==1.0" in env_of.lock.read_text()  # what it holds, as it is


def test_a_pin_uv_cannot_install_is_refused_before_any_job(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    bad = ["-m", SEARCHPATH, "toolchain=six-a", "toolchain.pins.six=0.0.1", *JOB]
    got = run_cli(bad, tmp_path, BENCHFLOW_CACHE_DIR=str(cache))
    assert got.returncode == 2, got.stderr[-2000:]
    assert "toolchain=six-a" in got.stderr and "six==0.0.1" in got.stderr, got.stderr[-2000:]
    assert not (tmp_path / "multirun").exists()  # refused before the sweep's folder
    assert not any((cache / "toolchains").glob("*/ready"))  # and no half environment
    version = ["-m", SEARCHPATH, "toolchain=six-a", "toolchain.pins.six=latest", *JOB]
    got = run_cli(version, tmp_path)
    assert got.returncode == 2 and "toolchain.pins.six='latest'" in got.stderr, got.stderr


def test_the_project_toolchain_is_in_no_fingerprint_and_xla_needs_torch_xla() -> None:
    """toolchain=project leaves every fingerprint as before toolchains (no key of it in
    the measured config); another is measured. An XLA backend with a toolchain that has
    no torch_xla is an invalid pair that says why; one that pins torch_xla is valid."""
    from tests.test_config import composed

    from benchflow.config.schema import measured, measured_flat
    from benchflow.config.validate import parse
    from benchflow.sweep.plan import plan_config

    project = parse(composed("model=llama", "toolchain=project"))
    assert "toolchain" not in measured(project)
    assert not any(k.startswith("toolchain") for k in measured_flat(project))
    newer = parse(composed("model=llama", "toolchain=torch-2.15"))
    assert measured(newer)["toolchain"] == {"name": "torch-2.15", "pins": {"torch": "2.15.0"}}
    plan = plan_config(
        parse(composed("model=llama", "toolchain=torch-2.15", "dynamo=openxla")), 0, []
    )
    assert plan.invalid and "needs torch_xla, but toolchain=torch-2.15 has none" in plan.invalid
    assert "allowed: a toolchain that pins torch_xla (toolchain.pins.torch_xla=" in plan.invalid
    assert plan.invalid.endswith(", or xla=none")
    lazy = plan_config(parse(composed("model=llama", "toolchain=torch-2.15", "xla=PJRT")), 0, [])
    assert lazy.invalid and "torch_xla" in lazy.invalid
    eager = plan_config(
        parse(composed("model=llama", "toolchain=torch-2.15", "dynamo=none")), 0, []
    )
    assert eager.invalid is None
    older = plan_config(
        parse(composed("model=llama", "toolchain=torch-2.8", "dynamo=openxla")), 0, []
    )
    assert older.invalid is None and older.config.toolchain.pins["torch_xla"] == "2.8.0"


def test_each_shipped_toolchain_resolves_for_this_python(tmp_path: Path) -> None:
    """The shipped options' environments are built in -m full (gigabytes); here uv
    resolves each one's requirements for this interpreter from the registry, the pins
    as wheels, as its build would: a pin with no wheel for this Python fails here."""
    import subprocess

    from tests.test_config import composed

    from benchflow.config.validate import parse
    from benchflow.runner.toolchain import requirements, uv

    shipped = sorted(p.stem for p in (REPO / "conf" / "toolchain").glob("*.yaml"))
    assert len(shipped) >= 3
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for name in shipped:
        tc = parse(composed(f"toolchain={name}")).toolchain
        if tc.is_project:
            continue
        wheels = [arg for package in tc.pins for arg in ("--only-binary", package)]
        done = subprocess.run(
            [uv(), "pip", "compile", "-q", "--no-header", *wheels, "-", "--python-version", python],
            input="\n".join(requirements(tc)),
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
        assert done.returncode == 0, (name, done.stderr[-2000:])
        for package, version in tc.pins.items():
            assert f"{package.replace('_', '-')}=={version}" in done.stdout, (name, package)


def test_a_file_not_in_this_pythons_syntax_does_not_fail_the_build(tmp_path: Path) -> None:
    """torch 2.15 ships torch/testing/_internal/py312_intrinsics.py, in Python 3.12's
    syntax: compileall exits 1 on it under 3.11, and printed why on stdout only. The
    build compiles the rest and names the file; a tool that fails is quoted, from stdout
    where it said nothing on stderr."""
    from benchflow.config.schema import ToolchainConfig
    from benchflow.runner.interpreter import ToolchainError
    from benchflow.runner.toolchain import _run, compile_bytecode

    good, newer = tmp_path / "good.py", tmp_path / "py312_only.py"
    good.write_text("x = 1\n")
    newer.write_text("type Alias = list[int]\n")  # a SyntaxError before Python 3.12
    python = Path(sys.executable)
    skipped = compile_bytecode(python, [good, newer], tmp_path / "compile.txt")
    assert list((tmp_path / "__pycache__").glob("good.*.pyc"))  # the rest is compiled
    if sys.version_info < (3, 12):
        assert skipped == [str(newer)]
        assert not list((tmp_path / "__pycache__").glob("py312_only.*.pyc"))
    else:
        assert skipped == []
    says = "import sys; print('the tool said this on stdout'); sys.exit(3)"
    with pytest.raises(ToolchainError) as exc:
        _run([sys.executable, "-c", says], ToolchainConfig("t", {"six": "1.0.0"}))
    assert "toolchain=t (pins: six==1.0.0)" in str(exc.value)
    assert "exit 3: the tool said this on stdout" in str(exc.value)


def test_an_installed_benchflow_reaches_a_toolchain_through_a_folder_of_its_own(
    tmp_path: Path,
) -> None:
    """Installed as a wheel, benchflow's folder is site-packages, which holds the
    parent environment's packages too: a toolchain's child gets a folder that holds a
    link to the package and nothing else (it was refused before)."""
    import shutil
    import subprocess

    site = tmp_path / "lib" / "site-packages"
    shutil.copytree(REPO / "src" / "benchflow", site / "benchflow")
    ask = "from benchflow.runner.interpreter import harness_path; print(harness_path())"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "BENCHFLOW_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # the second finds the link made
        done = subprocess.run([sys.executable, "-c", ask], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        folder = Path(done.stdout.strip())
        assert folder.is_relative_to(tmp_path / "harness")
        assert [p.name for p in folder.iterdir()] == ["benchflow"]
        assert (folder / "benchflow").resolve() == (site / "benchflow").resolve()


def test_an_interpreter_toolchain_is_checked_before_any_work(tmp_path: Path) -> None:
    """The config's own checks (toolchain.python with pins, a build with no python),
    and one name for two environments in a sweep, refused before anything is built."""
    from tests.test_config import composed

    from benchflow.config.errors import ConfigError
    from benchflow.config.validate import parse
    from benchflow.core.job import Job
    from benchflow.runner.interpreter import ToolchainError
    from benchflow.sweep.toolchains import build_toolchains

    with pytest.raises(ConfigError, match="name two environments"):
        parse(composed("toolchain=torch-2.15", "toolchain.python=/usr/bin/python3"))
    with pytest.raises(ConfigError, match=r"toolchain.build='x'.*toolchain.python is null"):
        parse(composed("toolchain.build=x"))
    one = parse(composed("model=llama", "toolchain=torch-2.8"))
    other = dataclasses.replace(one.toolchain, pins={"torch": "2.8.0"})  # same name
    jobs = [
        Job(n, "j", (), dataclasses.replace(one, toolchain=tc), "eager")
        for n, tc in enumerate([one.toolchain, other])
    ]
    with pytest.raises(ToolchainError, match=r"toolchain\.name=torch-2\.8 names two environments"):
        build_toolchains(jobs)


@pytest.mark.full
def test_two_torch_releases_in_one_sweep_and_report(tmp_path: Path) -> None:
    """The real thing (-m full: torch 2.15.0 downloaded once, about 5 GB): a sweep over
    the project's torch 2.9.0 and torch 2.15.0, the XLA backend an invalid pair on 2.15,
    and the report's speedups of 2.15 over the project's."""
    sweep = ["-m", "toolchain=project,torch-2.15", "model=llama,dlrm", "dynamo=none,inductor"]
    small = ["model.size=tiny", "repeat=3", "mlflow.enabled=false"]
    got = run_cli([*sweep, *small], tmp_path)
    assert got.returncode == 0, got.stderr[-3000:]
    (results,) = tmp_path.glob("multirun/*/*/results.jsonl")
    rows = read_rows(results)
    assert len(rows) == 8 and all(r.status.value == "ok" for r in rows), [
        (r.job.name, r.error) for r in rows
    ]
    torch_of = {r.provenance.versions["torch"] for r in rows}
    assert torch_of == {"2.9.0", "2.15.0"}
    day, clock = results.parent.parent.name, results.parent.name  # run in tmp_path
    by_tc = ["report", f"multirun/{day}/{clock}", "--baseline-toolchain", "project"]
    got = run_cli(by_tc, tmp_path)
    assert got.returncode == 0, got.stderr[-3000:]
    assert "inductor toolchain=torch-2.15" in got.stdout
    xla = ["-m", "toolchain=project,torch-2.15", "model=llama", "dynamo=openxla", *small]
    got = run_cli(xla, tmp_path)
    assert got.returncode == 0, got.stderr[-3000:]
    (_, results) = sorted(tmp_path.glob("multirun/*/*/results.jsonl"))
    by = {(r.config or {}).get("toolchain.name", "project"): r for r in read_rows(results)}
    assert by["project"].status.value == "ok"
    assert by["torch-2.15"].status.value == "invalid"
    assert "needs torch_xla, but toolchain=torch-2.15 has none" in (by["torch-2.15"].error or "")


def test_bisection_finds_the_boundary_in_few_steps() -> None:
    from benchflow.history.bisect import Step, search

    releases = [f"1.{n}.0" for n in range(10)]
    for boundary in (0, 3, 9, 10):  # 10: every release good, the bad toolchain the first bad
        low, high, steps = search(
            releases, lambda r, at=boundary: Step(r, releases.index(r) >= at, "")
        )
        assert (low, high) == (boundary - 1, boundary)
        judged = [s.release for s in steps]
        assert len(judged) <= 4 and len(set(judged)) == len(judged)  # log2(11); none twice
        assert all(s.bad == (releases.index(s.release) >= boundary) for s in steps)


def test_the_registry_gives_the_releases_between_two_pins() -> None:
    from benchflow.history.bisect import releases_between

    assert releases_between("six", "1.12.0", "1.17.0") == ["1.13.0", "1.14.0", "1.15.0", "1.16.0"]


@pytest.mark.full
def test_bisect_finds_the_first_release_that_slowed_the_model(tmp_path: Path) -> None:
    """Real jobs in real environments (the project's torch, six from 1.12.0 to 1.17.0):
    the model waits 4 ms a step from six 1.16.0 on, and bisect names 1.16.0, with 1.15.0
    the last good release, from PyPI's releases between the two pins."""
    job = ["model=six_paced", "dynamo=none", "mlflow.enabled=false"]  # 3 processes a step
    bisect = ["bisect", "--good", "six-1.12", "--bad", "six-1.17", "--package", "six"]
    got = run_cli([*bisect, "--config-dir", str(REPO / "tests" / "conf"), *job], tmp_path)
    assert got.returncode == 1, got.stdout[-3000:] + got.stderr[-3000:]
    out = got.stdout
    assert "4 release(s) between: 1.13.0, 1.14.0, 1.15.0, 1.16.0" in out, out
    assert "the first release that regressed: six-1.16.0 (the last good one: six-1.15.0)" in out
    assert "what changed: version.six: 1.15.0 -> 1.16.0" in out
    assert "rerun the first bad: benchflow rerun " in out
    assert out.count("  ran ") <= 2 + 3  # the two toolchains, then at most 3 halvings
