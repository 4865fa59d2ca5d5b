"""The expected-results file (`benchflow expected`, docs/expected.md) and the sweep that
feeds it (timing=false), on real sweeps of a test model with a graph break, an accuracy
failure and a recompile planted (tests.models.faults.Planted, PlantedAll): the file
written from a clean sweep, checked against the planted sweep (exit 1, each change
named) and against a second clean sweep (exit 0). Three tiny sweeps of one job each,
untimed, without MLflow; every other check reads their rows in this process."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import REPO, CliResult, EarlySweeps, early, run_cli

from benchflow.history.series import build
from benchflow.report.compare import NOT_TIMED, compare
from benchflow.report.expected import BETTER, check, lines, read, to_csv
from benchflow.report.model import UNTIMED_NOTE, build_report
from benchflow.report.pairs import PairError, split
from benchflow.report.sources import Sweep, load
from benchflow.results.row import ResultRow
from benchflow.results.signals import UNTIMED_STEPS

# docs/expected.md's worked example, as it runs there: an accuracy sweep of the checkout's
# test model (aot_eager: dynamo's graphs, compiled in seconds; each job builds, compiles,
# runs two steps and checks accuracy, untimed), the file written from it; the same model
# with its changes planted (model=planted_on), checked; a second clean sweep, checked;
# the planted lines taken as expected. Run from a folder whose tests/ is the checkout's.
BEFORE = ["-m", "--config-dir", "tests/conf", "model=planted", "dynamo=aot_eager",
          "model.size=tiny", "timing=false", "hydra.sweep.dir=multirun/before",
          "mlflow.enabled=false"]  # fmt: skip
AFTER = ["-m", "--config-dir", "tests/conf", "model=planted_on", "dynamo=aot_eager",
         "model.size=tiny", "timing=false", "hydra.sweep.dir=multirun/after",
         "mlflow.enabled=false"]  # fmt: skip
AGAIN = ["-m", "--config-dir", "tests/conf", "model=planted", "dynamo=aot_eager",
         "model.size=tiny", "timing=false", "hydra.sweep.dir=multirun/again",
         "mlflow.enabled=false"]  # fmt: skip
FILE = "expected/planted.csv"
UPDATE = ["expected", "multirun/before", FILE, "--update"]
CHECK = ["expected", "multirun/after", FILE]
CHECK_AGAIN = ["expected", "multirun/again", FILE]
TAKE = ["expected", "multirun/after", FILE, "--update"]


@early("expected")
def _before_after_again(cwd: Path) -> dict[str, CliResult | str]:
    """The clean model's sweep, the planted one's, the clean one's again; the file written
    from the first (its text kept), checked against the other two, then written from the
    planted sweep."""
    (cwd / "tests").symlink_to(REPO / "tests")
    got: dict[str, CliResult | str] = {}
    for name, args in (("before", BEFORE), ("after", AFTER), ("again", AGAIN)):
        got[name] = res = run_cli(args, cwd)
        if res.returncode != 0:
            return got
    got["update"] = run_cli(UPDATE, cwd)
    got["file"] = (cwd / FILE).read_text() if (cwd / FILE).exists() else ""
    got["check"] = run_cli(CHECK, cwd)
    got["check_again"] = run_cli(CHECK_AGAIN, cwd)
    got["take"] = run_cli(TAKE, cwd)
    return got


@pytest.fixture(scope="module")
def runs(early_sweeps: EarlySweeps) -> dict[str, Any]:
    got: dict[str, Any] = early_sweeps.result("expected")
    for name in ("before", "after", "again"):
        assert got[name].returncode == 0, got[name].stderr[-3000:]
    return got


def rows_of(runs: dict[str, Any], name: str) -> list[ResultRow]:
    return load(str(runs["before"].cwd / "multirun" / name)).rows


def test_the_file_holds_the_clean_sweeps_line(runs: dict[str, Any]) -> None:
    update = runs["update"]
    assert update.returncode == 0, update.stderr
    assert update.stdout.strip() == f"wrote {FILE}: 1 line(s) from multirun/before"
    text = runs["file"]
    assert text.splitlines() == [
        "suite,model,test,configuration,accuracy,graphs,graph_breaks,recompiles,"
        "xla_repeat_compiles,xla_executions_per_step,break_reasons,recompile_guards",
        "torchbench,planted,eval,aot_eager,PASS,1,0,0,,,,",
    ]
    # stable: the second clean sweep's lines are the same file
    assert to_csv(lines(rows_of(runs, "again"))) == text


def test_the_planted_sweep_fails_the_check_naming_each_change(runs: dict[str, Any]) -> None:
    res = runs["check"]
    assert res.returncode == 1, res.stdout + res.stderr
    out = res.stdout.splitlines()
    assert out[0] == "worse:"
    changes = [line.strip() for line in out[1:5]]
    assert changes[0].startswith("planted eval aot_eager: accuracy PASS → FAIL (leaf 0: max abs")
    assert changes[1] == "planted eval aot_eager: graphs 1 → 2"
    # the break: its place in the model's code and dynamo's reason
    assert changes[2].startswith(
        "planted eval aot_eager: graph breaks 0 → 1 (at models/faults.py:"
    ), changes[2]
    assert ": Data-dependent branching: " in changes[2]
    assert changes[3].startswith("planted eval aot_eager: recompiles 0 → 1 (at models/faults.py:")
    assert "(forward): tensor 'self._buffers['scale']' dtype mismatch" in changes[3]
    assert out[5:] == [
        f"multirun/after against {FILE}: 4 worse, 0 better, 0 changed",
        f"to take the sweep's lines as expected: benchflow expected multirun/after {FILE} --update",
    ]


def test_a_reason_names_an_installed_file_from_its_package_and_no_address(
    runs: dict[str, Any],
) -> None:
    # the file a checkout keeps is the same from every checkout and environment (a train
    # job's break names dynamo's own file: `reduce_to_scalar_loss`, the training loss)
    (row,) = rows_of(runs, "after")
    assert row.signals is not None and row.signals.breaks
    said = (
        "Attempted to call function marked as skipped: `reduce_to_scalar_loss` in file "
        "`{}/lib/python3.11/site-packages/torch/_dynamo/testing.py` (<function f at 0x7f3a9c>)"
    )
    found = set()
    for venv in ("/work/main/.venv", "/home/someone/project/.venv"):
        moved = dataclasses.replace(row.signals.breaks[0], reason=said.format(venv))
        signals = dataclasses.replace(row.signals, breaks=[moved])
        (line,) = lines([dataclasses.replace(row, signals=signals)])
        found.add(line.reasons)
    assert found == {
        (
            "Attempted to call function marked as skipped: `reduce_to_scalar_loss` in file "
            "`torch/_dynamo/testing.py` (<function f at 0x…>)",
        )
    }


def test_a_second_clean_sweep_is_as_expected(runs: dict[str, Any]) -> None:
    res = runs["check_again"]
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == f"multirun/again against {FILE}: as expected (1 line(s))"


def test_the_update_takes_the_planted_lines(runs: dict[str, Any]) -> None:
    take = runs["take"]
    assert take.returncode == 0, take.stderr
    (line,) = read(take.cwd / FILE)
    assert line.values == {
        "accuracy": "FAIL",
        "graphs": "2",
        "graph_breaks": "1",
        "recompiles": "1",
        "xla_repeat_compiles": "",
        "xla_executions_per_step": "",
    }
    assert len(line.reasons) == 1 and line.reasons[0].startswith("Data-dependent branching: ")
    assert line.guards == (
        "tensor 'self._buffers['scale']' dtype mismatch. expected Int, actual Long",
    )


def test_an_improvement_is_listed_with_the_command_that_updates_the_file(
    runs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The planted sweep's file (the update's), checked against the clean sweep: every
    change better, exit 0, and the command that takes the sweep's lines; a line of one
    side only named."""
    from benchflow.cli.expected import main

    file, before = runs["take"].cwd / FILE, str(runs["take"].cwd / "multirun" / "before")
    assert main([before, str(file)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "better (update the file):"
    assert [line.strip().split(": ", 1)[1] for line in out[1:5]] == [
        "accuracy FAIL → PASS",
        "graphs 2 → 1",
        "graph breaks 1 → 0",
        "recompiles 1 → 0",
    ]
    assert out[-1] == (
        f"to take the sweep's lines as expected: benchflow expected {before} {file} --update"
    )
    # a line the sweep lacks: named, not worse
    (line,) = read(file)
    other = dataclasses.replace(line, key=(*line.key[:3], "inductor"))
    found = check([line, other], lines(rows_of(runs, "before")))
    assert found.only_in_file == ["planted eval inductor"] and found.only_in_sweep == []
    assert not found.worse and [c.kind for c in found.changes] == [BETTER] * 4
    assert check([line], lines(rows_of(runs, "after"))).same


def test_untimed_rows_say_so_and_are_never_taken_for_timed(runs: dict[str, Any]) -> None:
    clean, planted = rows_of(runs, "before"), rows_of(runs, "after")
    for row in (*clean, *planted):
        assert row.untimed and row.config and row.config["timing"] is False
        assert row.timing is None and row.repeat == 0 and row.warmup == 0
        assert "per_iter_time_s" not in row.metrics and not row.summary
        assert row.flops is None  # no time to judge FLOP/s by
        assert row.signals is not None and row.signals.steps == UNTIMED_STEPS
    assert [r.verification_code for r in (*clean, *planted)] == ["PASS", "FAIL"]
    report = build_report(clean, baseline="aot_eager")
    (entry,) = report.entries
    assert entry.time_s is None and entry.note == UNTIMED_NOTE
    (summary,) = report.summaries
    assert summary.geomean_speedup is None and summary.left_out == [("planted", UNTIMED_NOTE)]
    # a comparison judges accuracy, never a time
    again = build_report(rows_of(runs, "again"), baseline="aot_eager")
    (same,) = compare(report, again, 0.05)
    assert same.verdict == NOT_TIMED and not same.fails
    (broken,) = compare(report, build_report(planted, baseline="aot_eager"), 0.05)
    assert broken.verdict == "broken" and broken.fails
    with pytest.raises(PairError, match="timing=false"):
        split([*clean, *planted], "model.builtin")
    # a history follows timed jobs only: these make no series
    sweeps = [Sweep(label=name, rows=rows_of(runs, name)) for name in ("before", "again")]
    ordered, series = build(sweeps)
    assert len(ordered) == 2 and series == []


def test_the_signals_and_the_graph_break_table(runs: dict[str, Any]) -> None:
    """The planted row's signals, and its sweep's report: the terminal's graph-break table
    within 120 columns, report.md's with its reason and place."""
    (row,) = rows_of(runs, "after")
    signals = row.signals
    assert signals is not None
    assert (signals.graphs, signals.graph_breaks, signals.recompiles) == (2, 1, 1)
    (brk,) = signals.breaks
    assert brk.reason.startswith("Data-dependent branching: ")
    assert re.fullmatch(r"/.+/tests/models/faults\.py:\d+", brk.frame), brk.frame
    (guard,) = signals.guards
    assert "dtype mismatch. expected Int, actual Long" in guard.guard and "(forward)" in guard.frame
    assert signals.xla_repeat_compiles is None and signals.inductor_kernels is None
    out = runs["after"].stdout
    assert max(map(len, out.splitlines())) <= 120
    said = out.splitlines()  # (the table's title: the per-model table has the column too)
    table = said[next(i for i, line in enumerate(said) if line.strip() == "graph breaks") :]
    assert table[1].split() == ["config", "│", "model", "│", "test", "│", "breaks", "│",
                                "reason", "│", "where"]  # fmt: skip
    cells = [c.strip() for c in table[3].split("│")]
    assert cells[:4] == ["aot_eager", "planted", "eval", str(brk.count)]
    assert cells[5] == "models/faults.py:" + brk.frame.rsplit(":", 1)[1]
    md = (runs["after"].cwd / "multirun" / "after" / "report" / "report.md").read_text()
    assert "## Graph breaks" in md
    assert f"| aot_eager | planted | eval | {brk.count} | {brk.reason} |" in md


def test_an_accuracy_sweep_shows_its_checks_not_empty_times(runs: dict[str, Any]) -> None:
    """timing=false: each job's line says its accuracy and dynamo's counts as it ends, the
    terminal's table has those in place of the timing columns (none would be filled), and
    the full report's table and CSV have the counts beside the check's code."""
    for name, code, counts in (("before", "PASS", (1, 0, 0)), ("after", "FAIL", (2, 1, 1))):
        res = runs[name]
        said = "graphs {}, graph breaks {}, recompiles {}".format(*counts)
        progress = f"[1/1] ok          planted·aot_eager·eval       accuracy {code}; {said} · "
        assert progress in res.stderr, res.stderr
        header = next(line for line in res.stdout.splitlines() if line.startswith("model "))
        assert [c.strip() for c in header.split("│")] == [
            "model", "test", "config", "status", "accuracy", "graphs", "graph breaks",
            "recompiles", "note"]  # fmt: skip
        (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("planted ")]
        cells = [c.strip() for c in line.split("│")]
        assert cells[:8] == ["planted", "eval", "aot_eager", "ok", code, *map(str, counts)]
        (row,) = rows_of(runs, name)
        detail = row.verification_detail or ""  # the check's detail, whole or cut to fit
        assert cells[8] == detail or (cells[8].endswith("…") and detail.startswith(cells[8][:-1]))
        # the full report's row has the counts too, after the check's code, and its CSV
        report = res.cwd / "multirun" / name / "report"
        assert f"| {code} | {' | '.join(map(str, counts))} |" in (report / "report.md").read_text()
        (csv_row,) = list(csv.DictReader(io.StringIO((report / "report.csv").read_text())))
        got = [csv_row[k] for k in ("graphs", "graph_breaks", "recompiles")]
        assert got == list(map(str, counts))


def test_timing_false_is_one_process_with_its_accuracy_checked_and_no_timed_setting() -> None:
    from benchflow.config.schema import TIMING_ONLY, BenchConfig, ModelConfig, ProfileConfig
    from benchflow.config.validate import ConfigError, check_values

    cfg = BenchConfig(model=ModelConfig(name="planted", builtin="tests.models.faults:Planted"))
    assert cfg.process_count == 3 and not cfg.checks_accuracy  # timed, adaptive: 3
    untimed = dataclasses.replace(cfg, timing=False)
    assert untimed.process_count == 1 and untimed.checks_accuracy
    check_values(untimed)  # every timed setting at its default: taken
    given = {"warmup": 5, "processes": 2, "pair": "dtype", "adaptive_repeat": True}
    assert set(given) <= set(TIMING_ONLY)
    for key, value in given.items():
        with pytest.raises(ConfigError, match=f"^{key}=.* applies to the timed repeats"):
            check_values(dataclasses.replace(untimed, **{key: value}))
    with pytest.raises(ConfigError, match="profile=torch profiles after the timed repeats"):
        check_values(dataclasses.replace(untimed, profile=ProfileConfig(name="torch")))
