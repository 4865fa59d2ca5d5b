"""Issue 26's figure: `benchflow history` reading 1,000 sweeps of 50 rows from a SQLite
MLflow store.

The store is made from one real sweep: 50 jobs (tiny llama, eager, seeds 0-49: 50
fingerprints, so 50 series) with benchflow's default sampling and MLflow on, run here
in --store. That sweep's runs are then copied inside the SQLite file, --sweeps - 1
times: each copy has new run ids, its times moved a day earlier than the copy after
it, its sweep folder named by that day, and its rows' job folders, run ids, row ids
and times moved with it. Each copied run gets the artifact `benchflow history` reads
(a job run's result.json, a sweep run's results.jsonl); the logs and Hydra files the
real runs also carry are left out (nothing reads them here, and 50,000 copies of them
would take gigabytes).

Then it times `benchflow history experiment:benchflow` on the store from the command
line, twice: first with the page cache dropped where it may (root: the files read from
disk), then again (the files in memory); and in-process by part: MLflow's search,
reading and parsing the rows, the series, the change points, the dashboard.

    .venv/bin/python benchmarks/history_read.py --store /tmp/history-store \
        --out benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from results_md import publish

DAY_S = 86400
SWEEP = [
    "-m",
    "model=llama",
    "model.size=tiny",
    "dynamo=none",
    "progress=false",
]


def real_sweep(store: Path, jobs: int) -> None:
    """One real sweep of `jobs` jobs into store/mlflow.db and store/mlartifacts."""
    store.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "benchflow", *SWEEP, f"seed=range(0,{jobs})"]
    print("running", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, cwd=store, check=True, stdout=subprocess.DEVNULL)


def _original(db: sqlite3.Connection) -> tuple[str, list[str], str]:
    """(the sweep run, its job runs, its sweep folder) of the one real sweep."""
    parent, folder = db.execute(
        "SELECT run_uuid, value FROM tags WHERE key = 'sweep_dir'"
    ).fetchone()
    children = [
        r[0]
        for r in db.execute(
            "SELECT run_uuid FROM tags WHERE key = 'mlflow.parentRunId' AND value = ?", (parent,)
        )
    ]
    return parent, children, folder


def _copy_rows(
    text: str, jsonl: bool, ids: dict[str, str], old: str, new: str, shift_s: int
) -> list[str]:
    """A result file's rows (one JSON object a line, or one object) as the copy's."""
    out = []
    for line in text.splitlines() if jsonl else [text]:
        for a, b in ((old, new), *ids.items()):
            line = line.replace(a, b)
        row = json.loads(line)
        row["row_id"] = uuid.uuid4().hex
        row["timestamp"] = (row.get("timestamp") or 0) + shift_s
        job = row.get("job") or {}
        if job.get("started_at"):
            job["started_at"] += shift_s
        out.append(json.dumps(row, separators=(",", ":")))
    return out


def replicate(store: Path, sweeps: int) -> None:
    """The real sweep's runs copied sweeps - 1 times (the module's docstring), their
    artifacts beside the real sweep's."""
    db = sqlite3.connect(store / "mlflow.db")
    parent, children, folder = _original(db)
    originals = [parent, *children]
    uri = db.execute("SELECT artifact_uri FROM runs WHERE run_uuid = ?", (parent,)).fetchone()[0]
    art = Path(uri.removeprefix("file://")).parent.parent  # <root>/<run id>/artifacts
    texts = {
        parent: (art / parent / "artifacts" / "results.jsonl").read_text(),
        **{c: (art / c / "artifacts" / "result.json").read_text() for c in children},
    }
    day_dir, clock = Path(folder).parent, Path(folder).name
    day0 = datetime.date.fromisoformat(day_dir.name)
    db.execute("CREATE TEMP TABLE m (old TEXT PRIMARY KEY, new TEXT)")
    cols = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    t0 = time.perf_counter()
    for k in range(1, sweeps):
        shift_s = -k * DAY_S
        new_folder = str(day_dir.parent / str(day0 - datetime.timedelta(days=k)) / clock)
        ids = {o: uuid.uuid4().hex for o in originals}
        db.execute("DELETE FROM m")
        db.executemany("INSERT INTO m VALUES (?, ?)", ids.items())
        shifted = {
            "run_uuid": "m.new",
            "start_time": f"r.start_time + {shift_s * 1000}",
            "end_time": f"r.end_time + {shift_s * 1000}",
            "artifact_uri": "replace(r.artifact_uri, r.run_uuid, m.new)",
            "name": f"replace(r.name, '{day_dir.name}', '{Path(new_folder).parent.name}')",
        }
        select = ", ".join(shifted.get(c, f"r.{c}") for c in cols)
        db.execute(
            f"INSERT INTO runs ({', '.join(cols)}) "
            f"SELECT {select} FROM runs r JOIN m ON r.run_uuid = m.old"
        )
        value = (
            "CASE WHEN t.key = 'mlflow.parentRunId' THEN (SELECT new FROM m WHERE old = t.value) "
            "ELSE replace(t.value, :old, :new) END"
        )
        db.execute(
            f"INSERT INTO tags (key, value, run_uuid) SELECT t.key, {value}, m.new "
            "FROM tags t JOIN m ON t.run_uuid = m.old",
            {"old": folder, "new": new_folder},
        )
        db.execute(
            "INSERT INTO params (key, value, run_uuid) SELECT p.key, "
            "replace(p.value, :old, :new), m.new FROM params p JOIN m ON p.run_uuid = m.old",
            {"old": folder, "new": new_folder},
        )
        for table in ("metrics", "latest_metrics"):
            db.execute(
                f"INSERT INTO {table} (key, value, timestamp, step, is_nan, run_uuid) "
                f"SELECT x.key, x.value, x.timestamp + {shift_s * 1000}, x.step, x.is_nan, m.new "
                f"FROM {table} x JOIN m ON x.run_uuid = m.old"
            )
        for o, n in ids.items():
            dest = art / n / "artifacts"
            dest.mkdir(parents=True)
            lines = _copy_rows(texts[o], o == parent, ids, folder, new_folder, shift_s)
            name = "results.jsonl" if o == parent else "result.json"
            (dest / name).write_text("\n".join(lines) + "\n")
        if k % 100 == 0:
            db.commit()
            print(f"  {k} copies, {time.perf_counter() - t0:.0f} s", flush=True)
    db.commit()
    db.close()


def cli_wall(store: Path, out: Path) -> tuple[float, str]:
    cmd = [
        sys.executable,
        "-m",
        "benchflow",
        "history",
        "experiment:benchflow",
        "--tracking-uri",
        f"sqlite:///{store / 'mlflow.db'}",
        "--no-mlflow",
        "--out",
        str(out),
    ]
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=store, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"history failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, done.stdout


READ = """
import sys, time
t = time.perf_counter()
from benchflow.report.sources import experiment_sweeps
sweeps = experiment_sweeps("benchflow", sys.argv[1])
print(time.perf_counter() - t, len(sweeps), sum(len(s.rows) for s in sweeps))
"""


def read_cold(store: Path) -> tuple[float, int, int, bool]:
    """(seconds, sweeps, rows, whether the page cache was dropped): a fresh process that
    imports benchflow and MLflow, searches the store and reads every row, from disk."""
    os.sync()
    dropped = _drop_page_cache()
    uri = f"sqlite:///{store / 'mlflow.db'}"
    done = subprocess.run([sys.executable, "-c", READ, uri], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"reading failed: {done.stderr[-2000:]}")
    wall, sweeps, rows = done.stdout.split()[-3:]
    return float(wall), int(sweeps), int(rows), dropped


def parts(store: Path, out: Path) -> dict[str, float]:
    """The same command's parts, timed in this process."""
    from mlflow.tracking import MlflowClient

    from benchflow.cli.history import write_dashboard
    from benchflow.history import changes
    from benchflow.history.series import build
    from benchflow.report import sources
    from benchflow.results.changepoints import THRESHOLD
    from benchflow.tracking.mlflow_runs import search_all

    uri = f"sqlite:///{store / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("benchflow")
    assert exp is not None, f"no experiment 'benchflow' at {uri}"
    fig: dict[str, float] = {}
    t = time.perf_counter()
    found = search_all(client, exp.experiment_id, sources.SWEEP_RUNS)
    fig["search the sweep runs, s"] = time.perf_counter() - t
    fig["sweep runs"] = len(found)
    t = time.perf_counter()
    sweeps = sources.experiment_sweeps("benchflow", uri)
    fig["search and read every row (experiment_sweeps), s"] = time.perf_counter() - t
    fig["sweeps read"] = len(sweeps)
    fig["rows read"] = sum(len(s.rows) for s in sweeps)
    t = time.perf_counter()
    ordered, series = build(sweeps)
    fig["series, s"] = time.perf_counter() - t
    t = time.perf_counter()
    cps = changes.find(series, len(ordered), THRESHOLD)
    fig["change points, s"] = time.perf_counter() - t
    t = time.perf_counter()
    write_dashboard(ordered, series, cps, out)
    fig["dashboard, s"] = time.perf_counter() - t
    fig["dashboard, MB"] = (out / "history.html").stat().st_size / 1e6
    return fig


def _drop_page_cache() -> bool:
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:  # not root
        return False


def _cell(key: str, value: float) -> str:
    return f"| {key} | {value:.2f} |" if isinstance(value, float) else f"| {key} | {value} |"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--store", type=Path, required=True, help="folder for the store (made if empty)"
    )
    ap.add_argument("--sweeps", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--out", type=Path, help="append the figures to this file (RESULTS.md)")
    args = ap.parse_args()
    store = args.store.resolve()
    if not (store / "mlflow.db").exists():
        real_sweep(store, args.jobs)
    db = sqlite3.connect(store / "mlflow.db")
    made = db.execute("SELECT count(*) FROM tags WHERE key = 'sweep_dir'").fetchone()[0]
    db.close()
    if made == 1:  # the real sweep alone: copy it
        t = time.perf_counter()
        replicate(store, args.sweeps)
        print(f"store built: {args.sweeps} sweeps in {time.perf_counter() - t:.0f} s")
    runs = sqlite3.connect(store / "mlflow.db").execute("SELECT count(*) FROM runs").fetchone()[0]
    read_s, read_sweeps, read_rows, read_dropped = read_cold(store)
    with tempfile.TemporaryDirectory() as tmp:
        os.sync()
        dropped = _drop_page_cache()
        cold, stdout = cli_wall(store, Path(tmp))
        warm, _ = cli_wall(store, Path(tmp))
        fig = parts(store, Path(tmp))
    summary = next((ln for ln in stdout.splitlines() if "sweep" in ln), "")
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [
        f"## {when}: `benchflow history` over a {runs}-run SQLite store, on "
        f"{platform.node()} ({os.cpu_count()} cores)",
        "",
        f"`benchflow history experiment:benchflow --tracking-uri sqlite:///.../mlflow.db "
        f"--no-mlflow` ({args.sweeps} sweeps of {args.jobs} rows; benchmarks/history_read.py)",
        "",
        "| figure | value |",
        "|---|---|",
        f"| read: a fresh process imports, searches and reads {read_rows} rows of "
        f"{read_sweeps} sweeps{', page cache dropped' if read_dropped else ''}, s "
        f"| {read_s:.1f} |",
        f"| command wall, {'page cache dropped' if dropped else 'first run'}, s | {cold:.1f} |",
        f"| command wall, again, s | {warm:.1f} |",
        *(
            f"| {k} | {v:.2f} |" if isinstance(v, float) else f"| {k} | {v} |"
            for k, v in fig.items()
        ),
        "",
        f"First line of its output: {summary.strip()}",
        "",
    ]
    text = "\n".join(lines)
    publish(text, args.out)
    shutil.rmtree(store / "history", ignore_errors=True)


if __name__ == "__main__":
    main()
