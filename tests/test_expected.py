"""The expected-results file (`benchflow expected`, docs/expected.md) and the sweep that
feeds it (timing=false), on real sweeps of a test model with a graph break, an accuracy
failure and a recompile planted (tests.models.faults.Planted, PlantedAll): the file
written from a clean sweep, checked against the planted sweep (exit 1, each change
named) and against a second clean sweep (exit 0). Three tiny sweeps of one job each,
untimed, without MLflow; every other check reads their rows in this process."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from tests.conftest import SEARCHPATH, CliResult, EarlySweeps, early, run_cli

from benchflow.report.compare import NOT_TIMED, compare
from benchflow.report.expected import BETTER, WORSE, check, lines, read, to_csv
from benchflow.report.model import UNTIMED_NOTE, build_report
from benchflow.report.pairs import PairError, split
from benchflow.report.sources import load
from benchflow.results.row import ResultRow
from benchflow.results.signals import UNTIMED_STEPS

# An accuracy sweep of one model under dynamo (aot_eager: dynamo's graphs, compiled in
# seconds): each job builds, compiles, runs two steps and checks accuracy, untimed.
SWEEP = [
    "-m",
    SEARCHPATH,
    "dynamo=aot_eager",
    "model.size=tiny",
    "timing=false",
    "mlflow.enabled=false",
]
FILE = "expected/planted.csv"


@early("expected")
def _clean_planted_clean(cwd: Path) -> dict[str, CliResult]:
    """The clean model's sweep, the planted one's, the clean one's again; the file written
    from the first, then checked against the other two."""
    got = {}
    for name, model in (("clean", "planted"), ("planted", "planted_on"), ("again", "planted")):
        got[name] = run_cli([*SWEEP, f"model={model}", f"hydra.sweep.dir=multirun/{name}"], cwd)
        if got[name].returncode != 0:
            return got
    got["update"] = run_cli(["expected", "multirun/clean", FILE, "--update"], cwd)
    got["check"] = run_cli(["expected", "multirun/planted", FILE], cwd)
    got["check_again"] = run_cli(["expected", "multirun/again", FILE], cwd)
    return got


@pytest.fixture(scope="module")
def runs(early_sweeps: EarlySweeps) -> dict[str, CliResult]:
    got: dict[str, CliResult] = early_sweeps.result("expected")
    for name in ("clean", "planted", "again"):
        assert got[name].returncode == 0, got[name].stderr[-3000:]
    return got


def rows_of(runs: dict[str, CliResult], name: str) -> list[ResultRow]:
    return load(str(runs["clean"].cwd / "multirun" / name)).rows


def test_the_file_holds_the_clean_sweeps_line(runs: dict[str, CliResult]) -> None:
    update = runs["update"]
    assert update.returncode == 0, update.stderr
    assert f"wrote {FILE}: 1 line(s) from multirun/clean" in update.stdout
    text = (update.cwd / FILE).read_text()
    assert text.splitlines() == [
        "suite,model,test,configuration,accuracy,graphs,graph_breaks,recompiles,"
        "xla_repeat_compiles,xla_executions_per_step,break_reasons,recompile_guards",
        "torchbench,planted,eval,aot_eager,PASS,1,0,0,,,,",
    ]
    # stable: the second clean sweep writes the same file
    assert to_csv(lines(rows_of(runs, "again"))) == text


def test_the_planted_sweep_fails_the_check_naming_each_change(runs: dict[str, CliResult]) -> None:
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
    assert out[5] == f"multirun/planted against {FILE}: 4 worse, 0 better, 0 changed"
    assert out[6] == (
        f"to take the sweep's lines as expected: benchflow expected multirun/planted {FILE} "
        "--update"
    )


def test_a_second_clean_sweep_is_as_expected(runs: dict[str, CliResult]) -> None:
    res = runs["check_again"]
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == f"multirun/again against {FILE}: as expected (1 line(s))"


def test_an_improvement_is_listed_with_the_command_that_updates_the_file(
    runs: dict[str, CliResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The planted sweep's file, checked against the clean sweep: every change better,
    exit 0, and the command that takes the sweep's lines; a line of one side only named."""
    from benchflow.cli.expected import main

    planted, clean = (str(runs["clean"].cwd / "multirun" / n) for n in ("planted", "clean"))
    file = tmp_path / "planted.csv"
    assert main([planted, str(file), "--update"]) == 0
    capsys.readouterr()
    assert main([clean, str(file)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "better (update the file):"
    assert [line.strip().split(": ", 1)[1] for line in out[1:5]] == [
        "accuracy FAIL → PASS",
        "graphs 2 → 1",
        "graph breaks 1 → 0",
        "recompiles 1 → 0",
    ]
    assert (
        out[-1]
        == f"to take the sweep's lines as expected: benchflow expected {clean} {file} --update"
    )
    # a line the sweep lacks and one the file lacks: named, neither worse
    (line,) = read(file)
    other = dataclasses.replace(line, key=(*line.key[:3], "inductor"))
    found = check([line, other], lines(rows_of(runs, "clean")))
    assert found.only_in_file == ["planted eval inductor"] and found.only_in_sweep == []
    assert not found.worse and [c.kind for c in found.changes] == [BETTER] * 4
    assert check([line], lines(rows_of(runs, "planted"))).of(WORSE) == []


def test_untimed_rows_say_so_and_are_never_taken_for_timed(runs: dict[str, CliResult]) -> None:
    clean, planted = rows_of(runs, "clean"), rows_of(runs, "planted")
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


def test_the_signals_and_the_graph_break_table(runs: dict[str, CliResult]) -> None:
    """The planted row's signals, and its sweep's report: the terminal's graph-break table
    within 120 columns, report.md's with its reason and place."""
    (row,) = rows_of(runs, "planted")
    signals = row.signals
    assert signals is not None
    assert (signals.graphs, signals.graph_breaks, signals.recompiles) == (2, 1, 1)
    (brk,) = signals.breaks
    assert brk.reason.startswith("Data-dependent branching: ")
    assert re.fullmatch(r"/.+/tests/models/faults\.py:\d+", brk.frame), brk.frame
    (guard,) = signals.guards
    assert "dtype mismatch. expected Int, actual Long" in guard.guard and "(forward)" in guard.frame
    assert signals.xla_repeat_compiles is None and signals.inductor_kernels is None
    out = runs["planted"].stdout
    assert max(map(len, out.splitlines())) <= 120
    table = out[out.index("graph breaks") :].splitlines()
    assert table[1].split() == ["config", "│", "model", "│", "test", "│", "breaks", "│",
                                "reason", "│", "where"]  # fmt: skip
    cells = [c.strip() for c in table[3].split("│")]
    assert cells[:4] == ["aot_eager", "planted", "eval", str(brk.count)]
    assert cells[5] == "models/faults.py:" + brk.frame.rsplit(":", 1)[1]
    md = (runs["planted"].cwd / "multirun" / "planted" / "report" / "report.md").read_text()
    assert "## Graph breaks" in md
    assert f"| aot_eager | planted | eval | {brk.count} | {brk.reason} |" in md
