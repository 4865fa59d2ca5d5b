"""A new SQLite store is a copy of MLflow's own empty one (tracking/mlflow_runs.py
seed_sqlite_store): the same tables at the same schema revision, opened by MLflow as a
new store, and never written over an existing one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchflow.tracking.mlflow_runs import seed_sqlite_store


def _schema(db: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Each table's and index's definition, and the alembic revision. A definition is
    its SQL's lines, sorted: MLflow's migrations list one table's constraints in no
    fixed order (two stores it made itself can differ so)."""
    with sqlite3.connect(db) as con:
        objects = con.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")
        definitions = {
            name: sorted(line.strip().rstrip(",") for line in sql.splitlines())
            for name, sql in objects
        }
        revision = [r[0] for r in con.execute("SELECT version_num FROM alembic_version")]
    return definitions, revision


def _experiments(uri: str) -> list[tuple[str, str, str]]:
    from mlflow.tracking import MlflowClient

    return [
        (e.experiment_id, e.name, e.artifact_location)
        for e in MlflowClient(tracking_uri=uri).search_experiments()
    ]


def test_a_seeded_store_is_mlflows_own_new_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "cache"))
    own, seeded = tmp_path / "own", tmp_path / "seeded"
    own.mkdir()
    seeded.mkdir()
    monkeypatch.chdir(own)
    own_experiments = _experiments(f"sqlite:///{own / 'mlflow.db'}")  # MLflow migrates
    monkeypatch.chdir(seeded)
    assert seed_sqlite_store(f"sqlite:///{seeded / 'mlflow.db'}")
    assert _schema(seeded / "mlflow.db") == _schema(own / "mlflow.db")
    assert _schema(seeded / "mlflow.db")[1]  # at a revision, MLflow's head
    # Opened as a new store: its Default experiment is made here, for this folder.
    seeded_experiments = _experiments(f"sqlite:///{seeded / 'mlflow.db'}")
    assert [e[:2] for e in seeded_experiments] == [e[:2] for e in own_experiments]
    assert seeded_experiments[0][2] == str(seeded / "mlruns" / "0")
    templates = list((tmp_path / "cache" / "mlflow").glob("*.db"))
    assert len(templates) == 1 and not list(seeded.glob(".*seed"))


def test_an_existing_store_or_another_uri_is_left_to_mlflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "cache"))
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"not a template")
    assert not seed_sqlite_store(f"sqlite:///{db}")
    assert db.read_bytes() == b"not a template"
    assert not seed_sqlite_store(f"sqlite:///{tmp_path / 'absent' / 'mlflow.db'}")
    assert not (tmp_path / "absent").exists()
    assert not seed_sqlite_store("http://127.0.0.1:5000")
    assert not seed_sqlite_store(f"sqlite:///{tmp_path / 'x.db'}?mode=ro")
    assert not (tmp_path / "cache").exists()  # nothing made for what was not seeded


TELEMETRY = """
import json, sys, threading
from pathlib import Path
from benchflow.config.schema import MlflowConfig
from benchflow.tracking.mlflow_runs import Tracker
from mlflow.telemetry.utils import is_telemetry_disabled

tracker = Tracker(MlflowConfig(), Path(sys.argv[1]))  # its experiment: an MLflow event
tracker.client.set_terminated(tracker.client.create_run(tracker.experiment_id).info.run_id)
print(json.dumps({"disabled": is_telemetry_disabled(),
                  "threads": [t.name for t in threading.enumerate()]}))
"""


def test_a_sweeps_mlflow_sends_no_telemetry_from_threads_beside_its_jobs(tmp_path: Path) -> None:
    """MLflow's usage telemetry is off in a sweep's process, unless the user turns it on.
    MLflow turns it off by itself where it sees a CI or pytest variable, so the process
    runs without them, as a user's sweep does."""
    import json
    import os
    import subprocess
    import sys

    from benchflow.tracking.mlflow_runs import MLFLOW_DEFAULTS

    seen = ("PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS", "MLFLOW_DISABLE_TELEMETRY")
    env = {k: v for k, v in os.environ.items() if k not in seen}
    out = subprocess.run(
        [sys.executable, "-c", TELEMETRY, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    got = json.loads(out.splitlines()[-1])
    assert MLFLOW_DEFAULTS["MLFLOW_DISABLE_TELEMETRY"] == "true"
    assert got["disabled"] is True
    assert not [t for t in got["threads"] if "Telemetry" in t], got["threads"]
