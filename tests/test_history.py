"""History (issue 26): change points in a job's times over sweeps (results/changepoints.py)
and `benchflow history` over sweep folders: the change found where it is, explained by
what changed in the environment, and --fail-on-new's exit codes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from tests.conftest import cli_command, run_cli, sweep_runs
from tests.early import environ

from benchflow.cli.history import main as history_main
from benchflow.cli.history import sweeps_of
from benchflow.config.schema import MlflowConfig
from benchflow.history import changes
from benchflow.history.changes import Change
from benchflow.history.dashboard import change_id, model_anchor
from benchflow.history.series import build
from benchflow.results import changepoints
from benchflow.tracking.mlflow_runs import Tracker

RNG_SEED = 26


def _series(n: int, step_at: int | None, step: float, noise: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    values = np.exp(rng.normal(0.0, noise, n)) * 0.010
    if step_at is not None:
        values[step_at:] *= 1 + step
    return [float(v) for v in values]


def test_a_flat_series_has_no_change_point() -> None:
    for seed in range(20):
        assert changepoints.find(_series(40, None, 0.0, 0.03, seed)) == [], seed


def test_a_step_is_found_where_it_is_with_its_size_and_intervals() -> None:
    values = _series(30, 18, 0.30, 0.03, RNG_SEED)
    (found,) = changepoints.find(values)
    assert found.index == 18
    assert found.change == pytest.approx(0.30, abs=0.05)
    assert found.ratio_ci is not None and found.ratio_ci.contains(1.30)
    assert found.before_ci is not None and found.before_ci.contains(0.010)
    assert found.after_ci is not None and found.after_ci.contains(0.013)
    assert found.p_value < 0.05
    # a step the wrong way is an improvement, found the same way
    (down,) = changepoints.find(_series(30, 12, -0.25, 0.03, RNG_SEED))
    assert down.index == 12 and down.change == pytest.approx(-0.25, abs=0.05)


def test_steps_below_the_threshold_and_single_outliers_are_not_change_points() -> None:
    quiet = _series(30, 15, 0.03, 0.002, RNG_SEED)  # 3%, measured well: real, but small
    (small,) = changepoints.find(quiet, threshold=0.02)
    assert small.index == 15
    assert changepoints.find(quiet) == []  # under the 5% default
    spike = _series(30, None, 0.0, 0.02, RNG_SEED)
    spike[10] *= 2.0  # one sweep on a bad host
    assert changepoints.find(spike) == []


def _row(num: int, time_s: float, at: float, affinity: str, torch: str) -> dict[str, Any]:
    times = [time_s * f for f in (0.98, 0.99, 0.995, 1.0, 1.0, 1.005, 1.01, 1.02)]  # an interval
    return {
        "row_id": f"r{int(at)}{num}",
        "model": {"model_name": f"m{num}"},
        "experiment": {"dynamo": "inductor", "test": "eval"},
        "status": "ok",
        "metrics": {"per_iter_time_s": times},
        "summary": {"per_iter_time_s": {"median": time_s}},
        "timestamp": at,
        "job": {
            "name": f"m{num}·inductor·eval",
            "num": num,
            "fingerprint": f"fp{num}",
            "started_at": at,
        },
        "provenance": {
            "cpu_model": "AMD EPYC",
            "versions": {"torch": torch},
            "hardware": {"affinity": affinity, "cpu_features": ["avx512f"]},
        },
    }


def _history(root: Path, sweeps: int, change_at: int) -> Path:
    """`sweeps` sweep folders of two jobs: m0 slows 40% from sweep `change_at` on (the
    sweeps from there ran on one core of two), m1 stays flat."""
    rng = np.random.default_rng(RNG_SEED)
    for k in range(sweeps):
        folder = root / "multirun" / "2026-11-25" / f"10-{k:02d}-00"
        folder.mkdir(parents=True)
        slow = k >= change_at
        affinity = "0" if slow else "0-1"
        rows = [
            _row(
                0,
                0.010 * (1.4 if slow else 1.0) * float(np.exp(rng.normal(0, 0.02))),
                1e9 + 3600 * k,
                affinity,
                "2.9.0",
            ),
            _row(
                1, 0.020 * float(np.exp(rng.normal(0, 0.02))), 1e9 + 3600 * k + 5, affinity, "2.9.0"
            ),
        ]
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "multirun"


def _sweeps(root: Path, levels: list[tuple[float, dict[str, Any]]]) -> Path:
    """One sweep folder per (time, provenance facts), in that order of time: one job,
    m0, whose time is the level times a little noise."""
    rng = np.random.default_rng(RNG_SEED)
    for k, (level, prov) in enumerate(levels):
        folder = root / "multirun" / f"s{k:02d}"
        folder.mkdir(parents=True)
        row = _row(0, level * float(np.exp(rng.normal(0, 0.01))), 1e9 + 3600 * k, "0-1", "x")
        row["provenance"] |= prov
        (folder / "results.jsonl").write_text(json.dumps(row) + "\n")
    return root / "multirun"


def test_history_in_the_order_of_torch_versions_finds_the_release_that_slowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sweeps of two torch releases and 2.10.0 interleaved in time (bisecting, say), 2.10.0
    30% slower: in time order the level jumps back and forth, in version order (PEP 440:
    2.9.1 < 2.10.0, which a string sort gets wrong) it steps once, at 2.10.0."""
    versions = ["2.10.0", "2.9.0", "2.9.1", "2.10.0", "2.9.0", "2.10.0", "2.9.1", "2.9.0"] * 2
    levels = [(0.013 if v == "2.10.0" else 0.010, {"versions": {"torch": v}}) for v in versions]
    root = _sweeps(tmp_path, levels)
    out = tmp_path / "h"
    assert (
        history_main([str(root), "--order-by", "version.torch", "--no-mlflow", "--out", str(out)])
        == 0
    )
    text = capsys.readouterr().out
    assert "1 change point(s)" in text, text
    assert "what changed: version.torch: 2.9.1 -> 2.10.0" in text, text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("m0·inductor·eval: +")]
    assert 0.25 <= float(line.split("+")[1].split("%")[0]) / 100 <= 0.35, line
    # in time order no single step explains the series
    assert history_main([str(root), "--no-mlflow", "--out", str(out)]) == 0
    assert "version.torch: 2.9.1 -> 2.10.0" not in capsys.readouterr().out


def test_history_in_the_order_of_commits_follows_the_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--order-by git_sha puts the sweeps in the order of --repo's commits (run out of
    order here), and names a commit the checkout does not have."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    shas = []
    for n in range(4):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"c{n}"], check=True)
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
        shas.append(head.stdout.strip())
    ran = [3, 0, 2, 1, 0, 3, 1, 2, 2, 0, 3, 1]  # the commit each sweep ran, in time order
    levels = [(0.010 * (1.4 if c >= 2 else 1.0), {"git_sha": shas[c]}) for c in ran]
    root = _sweeps(tmp_path, levels)
    by_commit = [str(root), "--order-by", "git_sha", "--repo", str(repo), "--no-mlflow"]
    assert history_main([*by_commit, "--out", str(tmp_path / "h")]) == 0
    text = capsys.readouterr().out
    assert "1 change point(s)" in text and f"git_sha: {shas[1]} -> {shas[2]}" in text, text
    stranger = [str(root), "--order-by", "git_sha", "--repo", str(tmp_path), "--no-mlflow"]
    assert history_main(stranger) == 2
    assert "is not a git checkout" in capsys.readouterr().err
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    subprocess.run(["git", "-C", str(other), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "x"], check=True)  # fmt: skip
    assert history_main([*by_commit[:3], "--repo", str(other), "--no-mlflow"]) == 2
    assert "not in" in capsys.readouterr().err


def history_changes(root: Path) -> list[Change]:
    """The change points `benchflow history` finds under `root`, found in this process."""
    ordered, series = build(sweeps_of([str(root)], None))
    return changes.find(series, len(ordered), changepoints.THRESHOLD)


def test_history_finds_the_change_names_what_changed_and_gates_new_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _history(tmp_path, 12, 8)
    got = run_cli(["history", str(root), "--fail-on-new", "--window", "5"], tmp_path)
    assert got.returncode == 1, got.stderr[-3000:]  # the change is new: in the last 5
    out = got.stdout
    assert "12 sweep(s), 2 job(s), 1 change point(s)" in out, out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("m0·inductor·eval: +")]
    assert 0.30 <= float(line.split("+")[1].split("%")[0]) / 100 <= 0.50, line  # 40% planted
    assert "m1·inductor·eval" not in out
    assert "/10-08-00 (3 sweep(s) ago)" in out  # the first sweep after the change
    assert "what changed: job.cpus: 2 -> 1\n" in out  # the affinity, as recorded
    assert "rerun the run before: benchflow rerun " in out
    # the dashboard: written, and logged to MLflow as a `history` run's artifact
    page = (tmp_path / "history" / "history.html").read_text()
    (change,) = history_changes(root)
    assert f"href='#{model_anchor(change.series)}'>m0·inductor·eval</a>" in page
    assert f"id='{model_anchor(change.series)}'" in page  # the model's plot it links to
    assert f'id="{change_id(change)}"' in page  # the change point's line in that plot
    assert f'id="band-{change.series.fingerprint[:12]}"' in page  # the interval's band
    assert page.count("<figure class='model'>") == 2 and "<figure class='config'>" in page
    (run,) = [r for r in sweep_runs(f"sqlite:///{tmp_path / 'mlflow.db'}")[0]]
    assert run.info.run_name == "history" and run.data.metrics["history.change_points"] == 1
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert [a.path for a in client.list_artifacts(run.info.run_id, "history")] == [
        "history/history.html"
    ]
    # the gate, in this process: the change's first sweep (the 9th of 12) is among the
    # last 4, not among the last 3; without --fail-on-new it exits 0
    assert history_main([str(root), "--no-mlflow", "--out", str(tmp_path / "h")]) == 0
    for window, code in (("4", 1), ("3", 0)):
        gate = [str(root), "--fail-on-new", "--window", window, "--no-mlflow"]
        assert history_main([*gate, "--out", str(tmp_path / "h")]) == code, window
    assert "new regression: m0·inductor·eval +" in capsys.readouterr().err


def _logged(root: Path, uri: str) -> dict[str, list[str]]:
    """The sweep folders under `root` logged to the MLflow store `uri` as benchflow logs
    them: the first ones as sweep runs with their results.jsonl (and job runs), the
    second-last as a sweep run that never got its results.jsonl (stopped before its
    end: its job runs' result.json), the last as job runs of no sweep run. Returns the
    job runs of each kind."""
    from benchflow.tracking.mlflow_runs import KIND_SWEEP, KIND_TAG, SWEEP_DIR_TAG

    tracker = Tracker(MlflowConfig(tracking_uri=uri), root.parent)
    folders = sorted(p.parent for p in root.glob("*/*/results.jsonl"))
    made: dict[str, list[str]] = {"in results.jsonl": [], "stopped": [], "lone": []}
    for k, folder in enumerate(folders):
        kind = "lone" if k == len(folders) - 1 else "stopped" if k == len(folders) - 2 else ""
        parent = None
        if kind != "lone":
            tags = {KIND_TAG: KIND_SWEEP, SWEEP_DIR_TAG: str(folder)}
            parent = tracker.start_run(f"sweep {folder.name}", tags=tags)
            if not kind:
                tracker.log_files(parent, [folder / "results.jsonl"])
        for line in (folder / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            row["job"]["dir"] = str(folder / str(row["job"]["num"]))
            run_id = tracker.start_run(row["job"]["name"], parent_id=parent)
            tracker.client.log_text(run_id, json.dumps(row), "result.json")
            made[kind or "in results.jsonl"].append(run_id)
    return made


def test_history_of_an_mlflow_experiment_reads_a_file_a_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An experiment is read a sweep run at a time, from its results.jsonl; job runs are
    read only where no sweep run's results.jsonl holds them. The series and change
    points are the folders' own; an MLflow server older than IS NULL in its search
    filters gets the same sweeps."""
    from benchflow.report import sources

    root = _history(tmp_path, 12, 8)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    made = _logged(root, uri)
    read: list[str] = []
    rows_of = sources._rows_of

    def recorded(client: Any, runs: list[Any]) -> Any:
        read.extend(r.info.run_id for r in runs)
        return rows_of(client, runs)

    monkeypatch.setattr(sources, "_rows_of", recorded)
    expected = [
        (c.series.name, c.after.order, round(c.point.change, 6)) for c in history_changes(root)
    ]
    for lone_filter in (sources.LONE_RUNS, "tags.x IS NOTHING"):  # the second: refused
        monkeypatch.setattr(sources, "LONE_RUNS", lone_filter)
        read.clear()
        sweeps = sweeps_of(["experiment:benchflow"], uri)
        assert sorted(read) == sorted(made["stopped"] + made["lone"]), lone_filter
        assert sorted(s.label for s in sweeps) == sorted(
            str(p.parent) for p in root.glob("*/*/results.jsonl")
        )
        assert [len(s.rows) for s in sweeps] == [2] * 12
        ordered, series = build(sweeps)
        found = changes.find(series, len(ordered), changepoints.THRESHOLD)
        assert [(c.series.name, c.after.order, round(c.point.change, 6)) for c in found] == expected
    # a report of the experiment: every sweep's rows in one
    assert len(sources.load("experiment:benchflow", uri).rows) == 24


def test_history_of_the_sweeps_before_the_change_is_flat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _history(tmp_path, 7, 8)  # the first 7 sweeps: no change yet
    assert history_main([str(root), "--fail-on-new", "--no-mlflow", "--out", str(tmp_path)]) == 0
    assert "7 sweep(s), 2 job(s), 0 change point(s)" in capsys.readouterr().out
    page = (tmp_path / "history.html").read_text()
    assert "none: every job's time kept its level" in page and "id='change-" not in page


def test_history_refuses_a_bad_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        history_main([str(tmp_path), "--window", "0"])
    assert exc.value.code == 2
    assert "--window='0'; allowed: an integer >= 1" in capsys.readouterr().err


# A real history: sweeps of one built-in job, the 8th and later under `taskset -c 0`
# (one core of two: the same command and fingerprint, the affinity recorded as the
# job's CPUs), each into a folder of its own under multirun/.
REAL_SWEEPS, REAL_CHANGE_AT = 12, 8
REAL_JOB = [
    "-m",
    "model=resnet",
    "model.size=small",
    "dtype=float32",
    "repeat=10",  # one process; each repeat calibrated to min_run_time_s (50 ms)
    "warmup=2",
    "mlflow.enabled=false",
    "progress=false",
]


@pytest.mark.full
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to take one away")
def test_a_real_history_finds_the_core_taken_away_at_its_8th_sweep(tmp_path: Path) -> None:
    for k in range(REAL_SWEEPS):
        one_core = ["taskset", "-c", "0"] if k >= REAL_CHANGE_AT - 1 else []
        args = [*REAL_JOB, f"hydra.sweep.dir=multirun/s{k:02d}", "cpus_per_job=null"]
        done = subprocess.run(
            [*one_core, *cli_command(args)], cwd=tmp_path, capture_output=True, text=True,
            env={**environ(), "PYTHONUNBUFFERED": "1"}, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    root = tmp_path / "multirun"
    (change,) = history_changes(root)
    assert change.after.order == REAL_CHANGE_AT - 1  # the 8th sweep is the first after
    assert change.regression and change.point.change > 0.2, change.point
    assert "job.cpus: 2 -> 1" in change.explained, change.explained
    # the nightly gate: quiet on the first 7 sweeps alone, loud once the 8th is in
    first = tmp_path / "first7"
    first.mkdir()
    for k in range(REAL_CHANGE_AT - 1):
        (root / f"s{k:02d}").rename(first / f"s{k:02d}")
    quiet = [str(first), "--fail-on-new", "--no-mlflow", "--out", str(tmp_path / "h")]
    assert history_main(quiet) == 0
    for k in range(REAL_CHANGE_AT - 1):
        (first / f"s{k:02d}").rename(root / f"s{k:02d}")
    loud = [str(root), "--fail-on-new", "--no-mlflow", "--out", str(tmp_path / "h")]
    assert history_main(loud) == 1


def test_a_configuration_with_nothing_to_plot_says_so() -> None:
    """A panel with no point (eager's compile time, a configuration with no baseline
    row) says why, where it drew an empty axis from -0.05 to 0.05."""
    from benchflow.history.dashboard import config_figure
    from benchflow.report.entry import Config
    from benchflow.report.model import Summary
    from benchflow.report.plots import to_svg
    from benchflow.report.sources import Sweep

    lone = Summary(Config("eager"), 1, 1, 0, 0, None, 0, None, None, None, 0, compiles=False)
    sweeps = [Sweep(f"s{i}", []) for i in range(2)]
    svg = to_svg(config_figure("eager", [(0, lone), (1, lone)], sweeps))
    assert "no speedup: no baseline row" in svg and "no compile: its backend" in svg
    assert "no memory ratio" in svg and "-0.05" not in svg
    assert "no share of peak" in svg
