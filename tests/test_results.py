"""Units: statistics, fingerprints, the results files, the typed records they hold."""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import signal
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchflow.config.schema import BenchConfig, DynamoConfig, MlflowConfig, ModelConfig
from benchflow.core.files import write_json_atomic
from benchflow.core.job import Job, JobSpec, Plan, fingerprint
from benchflow.core.layout import SweepDir
from benchflow.core.status import Status
from benchflow.results.child import ChildResult, ChildTimings, Timing, Unsteady
from benchflow.results.flops import Flops, Peak
from benchflow.results.io import current, read_rows, record_row
from benchflow.results.row import (
    SCHEMA_VERSION,
    Hardware,
    JobInfo,
    Provenance,
    ResultRow,
    RowError,
    build_row,
)
from benchflow.results.stats import geomean, quantile, summarize


def test_summarize_matches_statistics_module() -> None:
    vals = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    s = summarize(vals)
    assert s["median"] == statistics.median(vals)
    assert s["mean"] == pytest.approx(statistics.fmean(vals))
    assert s["std"] == pytest.approx(statistics.stdev(vals))
    assert (s["min"], s["max"]) == (1.0, 9.0)
    # numpy's linear quantiles: q1=1.75, q3=5.25 for this data
    assert s["iqr"] == pytest.approx(5.25 - 1.75)
    assert s["cv"] == pytest.approx(s["std"] / s["mean"])
    assert summarize([2.0])["std"] == 0.0


def test_quantile_and_geomean() -> None:
    assert quantile([1, 2, 3, 4], 0.5) == 2.5
    assert quantile([5], 0.9) == 5
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def _cfg(**kw) -> BenchConfig:
    return BenchConfig(model=ModelConfig(name="llama"), **kw)


def test_fingerprint_is_stable_and_tracks_measured_keys_only() -> None:
    base = fingerprint(_cfg())
    assert base == fingerprint(_cfg()) and len(base) == 64
    for changed in (
        _cfg(repeat=7),
        _cfg(dtype="bfloat16"),
        _cfg(dynamo=DynamoConfig(name="inductor")),
        _cfg(batch_size=3),
    ):
        assert fingerprint(changed) != base
    # Where results are logged or how long we wait does not change the measurement.
    assert fingerprint(_cfg(timeout_s=5, mlflow=MlflowConfig(experiment="x"))) == base


def test_write_json_atomic_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def _writer(path: str, wid: int, n: int) -> None:
    for i in range(n):
        num = wid * n + i  # a line twice PIPE_BUF long: one write is not atomic by itself
        job = dataclasses.replace(_job(), num=num, config=_cfg(seed=num), notes=("x" * 5000,))
        record_row(Path(path), build_row(job, status=Status.OK, error=None, child=_child()))


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    """Four processes recording rows at once: every line a whole row, none lost."""
    path = tmp_path / "results.jsonl"
    procs = [multiprocessing.Process(target=_writer, args=(str(path), w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert len(path.read_text().splitlines()) == 100
    assert sorted(r.job.num for r in read_rows(path)) == list(range(100))


def test_reader_skips_corrupt_lines_and_appender_repairs_a_torn_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "results.jsonl"
    rows = _three_rows()
    record_row(path, rows[0])
    with path.open("a") as f:
        f.write("not json\n")  # a corrupt line in the middle stays, and is skipped
    record_row(path, rows[1])
    with caplog.at_level("WARNING"):
        assert read_rows(path) == rows[:2]
    assert "corrupt line" in caplog.text and ":2:" in caplog.text


def test_a_writer_killed_mid_line_leaves_a_tail_readers_ignore_and_the_next_append_cuts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A real writer killed (SIGKILL) between the two halves of a row's line: readers
    ignore the torn tail, and the next append cuts it off (kept in results.jsonl.torn)
    before it writes, so every line of the file is a whole row again."""
    path = tmp_path / "results.jsonl"
    rows = _three_rows()
    record_row(path, rows[0])
    line = (json.dumps(rows[1].to_dict()) + "\n").encode()
    half = line[: len(line) // 2]
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITE_HALF_THEN_WAIT, str(path), half.hex()],
        stdout=subprocess.PIPE,
    )
    assert writer.stdout is not None and writer.stdout.readline() == b"half\n"
    writer.kill()
    assert writer.wait(timeout=10) == -signal.SIGKILL
    assert path.read_bytes().endswith(half)  # torn: the file ends mid-row
    with caplog.at_level("WARNING"):
        assert read_rows(path) == [rows[0]]
    assert "corrupt" not in caplog.text  # ignored as torn, not reported as corrupt
    record_row(path, rows[2])
    assert read_rows(path) == [rows[0], rows[2]]
    assert all(json.loads(x) for x in path.read_text().splitlines())  # whole rows only
    assert path.with_name("results.jsonl.torn").read_bytes() == half + b"\n"
    assert "cut off a torn last line" in caplog.text
    # the torn row's job has no row: resume runs it again
    record_row(path, rows[1])
    assert {r.job.num for r in read_rows(path)} == {0, 1, 2}


# A writer of results.jsonl that dies mid-line: half a row written, then SIGKILLed.
WRITE_HALF_THEN_WAIT = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, bytes.fromhex(sys.argv[2]))
print("half", flush=True)
time.sleep(60)
"""


def test_dataclass_round_trip_through_job_file() -> None:
    spec = JobSpec("llama·eager·eval", _cfg(repeat=3, dtype="amp"), "/tmp/r.json")
    assert JobSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    later = dataclasses.replace(spec, process=2)  # a job's third process
    assert JobSpec.from_dict(later.to_dict()) == later and "process" not in spec.to_dict()
    ir = dataclasses.replace(spec, ir=True)
    assert ir.to_dict()["mode"] == "ir" and JobSpec.from_dict(ir.to_dict()) == ir


# --- typed records: what the files hold, read back -------------------------------------


def _job(**kw: Any) -> Job:
    cfg = _cfg(dynamo=DynamoConfig(name="inductor"), verify=True, **kw)
    return Job(num=3, name="llama·inductor·eval", overrides=("model=llama",), config=cfg,
               backend="inductor", notes=("a note",),
               sources={"dtype_source": "user", "batch_size_source": "model"})  # fmt: skip


def _child() -> ChildResult:
    return ChildResult(
        versions={"torch": "2.9.0", "torch_xla": None},
        batch_size=4,
        dtype="bfloat16",
        metrics={"per_iter_time_s": [0.1, 0.2, 0.3], "first_iter_time_s": 1.0},
        summary={"per_iter_time_s": {"median": 0.2, "iqr": 0.1}},
        timing=Timing(steady_state=False, unsteady_repeats=[Unsteady(0, "dynamo made 1 graph")]),
        child_timings=ChildTimings(import_s=1.0, build_s=2.0, timed_s=3.0, verify_s=0.5, done=9.5),
        verification_code="PASS",
        child_wall_s=7.0,
    )


_PEAK = Peak(
    flop_per_s=1e11, dtype="bfloat16", device="cpu", threads=2, matmul_precision="high",
    key="k", measured_at=1.0, method="torch.mm", sizes=[256], runs=[[1e11, 9e10, 9e10]],
)  # fmt: skip


def _three_rows() -> list[ResultRow]:
    """Three ok rows of three jobs (seeds 0, 1, 2)."""
    return [
        build_row(dataclasses.replace(_job(), num=i, config=_cfg(seed=i)), status=Status.OK,
                  error=None, child=_child())
        for i in range(3)
    ]  # fmt: skip


def test_the_package_list_is_each_distributions_name_and_version() -> None:
    """provenance.packages (the parent run's packages.txt, the rows' packages_sha256) reads
    each distribution's Name and Version from its metadata's headers: what
    importlib.metadata's whole parse gives, for every distribution here; a header folded
    onto a second line, or a Name in the description below the headers, is not taken."""
    from importlib import metadata

    from benchflow.results.provenance import _name_and_version, packages

    names = {
        d: (d.metadata["Name"] or "?").lower().replace("_", "-") for d in metadata.distributions()
    }
    want = {f"{name}=={d.version}" for d, name in names.items()}
    assert set(packages()) == want and "torch==2.9.0" in want
    text = "Metadata-Version: 2.1\nName: a_b\nSummary: one\n  Version: 0\nVersion: 1.0\n\nName: c\n"
    assert _name_and_version(text) == ("a_b", "1.0")
    assert _name_and_version(None) == (None, None)


def test_a_row_reads_back_as_it_was_written() -> None:
    info = JobInfo.of(_job(), "/sweep/3")
    info.cpus, info.wall_time_s, info.returncode = "0-1", 9.0, 0
    info.phases = {"gap": 0.5, "start": 1.0, "build": 2.0, "other": 6.0}
    child = dataclasses.replace(
        _child(),
        env={"OMP_NUM_THREADS": "2"},
        affinity="0-1",
        gpu={"name": "H200", "capability": "9.0", "driver": "550", "cuda": "12.8", "cudnn": None},
        digest={"of": "inductor", "tensors": 1, "leaves": [{"shape": [2], "mean": 0.5}]},
        flops=Flops(per_step=1e9, counted="forward", top={"aten.mm": 1e9}, peak=_PEAK),
    )
    hardware = Hardware(cpu_vendor="GenuineIntel", cpu_features=["avx2"], logical_cores=2)
    row = build_row(_job(), status=Status.OK, error=None, info=info, child=child,
                    provenance=Provenance(host="h", git_sha="abc", hardware=hardware,
                                          lock_sha256="l"))  # fmt: skip
    data = json.loads(json.dumps(row.to_dict()))  # as results.jsonl holds it
    assert ResultRow.from_dict(data) == row
    prov = data["provenance"]  # the parent's facts, and the child's
    assert prov["hardware"]["affinity"] == "0-1" and prov["hardware"]["cpu_features"] == ["avx2"]
    assert prov["hardware"]["gpu"]["name"] == "H200" and prov["env"] == {"OMP_NUM_THREADS": "2"}
    assert prov["lock_sha256"] == "l" and data["digest"]["of"] == "inductor"
    # the child's count and peak, judged by the row's median time (0.2 s; no interval)
    assert data["flops"]["per_s"] == pytest.approx(5e9) and data["flops"]["per_s_ci_low"] is None
    assert data["flops"]["share_of_peak"] == pytest.approx(0.05)
    assert data["flops"]["peak"]["key"] == "k" and data["flops"]["top"] == {"aten.mm": 1e9}
    assert data["status"] == "ok" and data["schema_version"] == SCHEMA_VERSION == 7
    assert data["backend"] == "inductor" and data["config"]["model.name"] == "llama"
    assert data["experiment"]["dtype"] == "bfloat16" and data["experiment"]["batch_size"] == 4
    assert data["timing"]["unsteady_repeats"] == [{"repeat": 0, "reason": "dynamo made 1 graph"}]
    assert data["provenance"]["versions"]["torch"] == "2.9.0"
    job = data["job"]
    assert job["notes"] == ["a note"] and job["fingerprint"] == _job().fingerprint
    assert job["mlflow_run_id"] is None and "ir_files" not in job  # never got there
    assert list(job)[:4] == ["name", "num", "overrides", "dir"] and list(job)[-1] == "fingerprint"
    never_resolved = dataclasses.replace(_job(), sources={}, invalid="invalid combination: x")
    invalid = build_row(never_resolved, status=Status.INVALID, error=never_resolved.invalid)
    assert "dtype_source" not in invalid.to_dict()["experiment"]
    assert ResultRow.from_dict(invalid.to_dict()) == invalid


def test_a_schema_1_row_reads_as_schema_2() -> None:
    """Before `backend`, `config` and `invalid`: an invalid combination was `skipped`."""
    old = {
        "row_id": "r1",
        "model": {"suite_name": "builtin", "model_name": "llama", "model_source": None},
        "experiment": {"accelerator": "cpu", "xla": "PJRT", "dynamo": "inductor", "test": "eval"},
        "metrics": {},
        "summary": {},
        "status": "skipped",
        "error": "invalid combination: dynamo=inductor does not compile for the XLA device",
        "job": {"name": "llama·inductor·eval", "overrides": ["dynamo=inductor", "xla=PJRT"]},
    }
    row = ResultRow.from_dict(old)
    assert row.schema_version == 1 and row.config is None and row.timing is None
    assert row.status is Status.INVALID
    assert row.backend == "inductor"  # an invalid pair's: the dynamo option's own label
    lazy = ResultRow.from_dict({**old, "experiment": {"xla": "PJRT", "test": "eval"}})
    assert lazy.backend == "lazy_xla"
    skipped = ResultRow.from_dict({**old, "error": "listed in skip"})
    assert skipped.status is Status.SKIPPED
    with pytest.raises(RowError):
        ResultRow.from_dict({"n": 1})
    with pytest.raises(RowError):
        ResultRow.from_dict({**old, "status": "exploded"})


def test_a_schema_6_row_reads_its_signals_from_its_counters() -> None:
    """Before `signals` (schema 7): the counts its cold call's and timed repeats' counters
    give (no reasons, no recompiles); a row without counters has none; a row of schema 7
    keeps its own, reasons and all."""
    from benchflow.results.signals import OLDER_STEPS, Break, Signals

    old = {
        "schema_version": 6,
        "model": {"suite_name": "torchbench", "model_name": "dlrm"},
        "experiment": {"xla": "PJRT", "dynamo": "openxla", "test": "eval"},
        "iterations_per_run": 2,
        "metrics": {
            "cold_dynamo_unique_graphs": 2.0,
            "dynamo_unique_graphs": [0.0, 0.0],
            "cold_dynamo_graph_breaks": 1.0,
            "dynamo_graph_breaks": [0.0, 0.0],
            "cold_xla_CompileTime_number": 3.0,
            "xla_CompileTime_number": [0.0, 1.0],
            "xla_ExecuteTime_number": [4.0, 4.0],
        },
        "status": "ok",
    }
    assert ResultRow.from_dict(old).signals == Signals(
        steps=OLDER_STEPS,
        graphs=2,
        graph_breaks=1,
        xla_repeat_compiles=1,  # the timed repeats' only
        xla_executions_per_step=2.0,  # 8 executions over 2 repeats of 2 steps
    )
    assert ResultRow.from_dict({**old, "metrics": {}}).signals is None
    own = Signals(graphs=1, graph_breaks=1, recompiles=0, breaks=[Break("why", "m.py:3", 2)])
    new = {**old, "schema_version": 7, "signals": own.to_dict()}
    assert ResultRow.from_dict(new).signals == own
    assert ResultRow.from_dict({**new, "signals": None}).signals is None


def test_a_crashed_childs_result_reads_as_a_child_result() -> None:
    """A child that raised writes status, error, versions and its wall time only."""
    minimal = {"status": "failed", "error": "RuntimeError: boom", "versions": {"torch": "2.9.0"},
               "child_wall_s": 1.5}  # fmt: skip
    child = ChildResult.from_dict(minimal)
    assert (child.status, child.error, child.child_wall_s) == (Status.FAILED, minimal["error"], 1.5)
    assert child.metrics == {} and child.timing is None and child.child_timings is None
    assert child.to_dict() == {"schema_version": 1, **minimal}  # nothing it never got to
    full = _child()
    assert ChildResult.from_dict(json.loads(json.dumps(full.to_dict()))) == full
    row = build_row(_job(), status=child.status, error=child.error, child=child)
    assert row.verification_code == "VERIFIER_DIDNT_RUN" and row.timing is None
    assert row.to_dict()["timing"] == {} and row.experiment.dtype is None  # the config's


def test_read_rows_skips_what_is_no_row(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "results.jsonl"
    row = build_row(_job(), status=Status.OK, error=None, child=_child())
    path.write_text('{"n": 1}\n')  # a JSON object, but no row
    assert record_row(path, row) == []
    with caplog.at_level("WARNING"):
        assert read_rows(path) == [row]
    assert ":1: skipped a line that is no result row" in caplog.text
    again = dataclasses.replace(row, row_id="second")
    (replaced,) = record_row(path, again)
    assert replaced.row_id == row.row_id and replaced.superseded_by == "second"
    assert current(read_rows(path)) == [again]


def test_rows_with_what_json_writes_beyond_the_standard_are_read(tmp_path: Path) -> None:
    """Rows are parsed by orjson, which refuses the NaN and Infinity that json.dumps
    writes; such a row is read all the same (by json), and a corrupt line is skipped."""
    path = tmp_path / "results.jsonl"
    row = build_row(_job(), status=Status.OK, error=None, child=_child())
    data = row.to_dict()
    data["metrics"] = {**data["metrics"], "odd": float("nan"), "far": float("inf")}
    path.write_text(json.dumps(data) + "\n" + "{not json\n")
    (read,) = read_rows(path)
    assert math.isnan(read.metrics["odd"]) and read.metrics["far"] == math.inf
    assert read.row_id == row.row_id


def test_a_plan_types_only_the_job_asked_for(tmp_path: Path) -> None:
    """plan.json as written and read back: each job typed once, when asked for."""
    jobs = [dataclasses.replace(_job(), num=n) for n in range(3)]
    sweep = SweepDir(tmp_path)
    sweep.write_plan(Plan.of(jobs, args=["-m", "x=1,2"]))
    plan = sweep.read_plan()
    assert plan is not None and (plan.total, plan.sweep_args) == (3, ("-m", "x=1,2"))
    assert plan.job(1) == jobs[1] and plan.job(1) is plan.job(1)  # typed once
    with pytest.raises(KeyError):
        plan.job(7)
    assert SweepDir(tmp_path / "none").read_plan() is None


def test_a_plan_names_the_baseline_its_jobs_share() -> None:
    """What `benchflow report` falls back to when no --baseline is given."""
    job = _job()
    on = [dataclasses.replace(job, num=n) for n in range(2)]
    eager = dataclasses.replace(job, num=2, config=dataclasses.replace(job.config, baseline="none"))
    assert Plan.of(on).baseline == job.config.baseline
    assert Plan.of([*on, eager]).baseline is None  # they differ: none is the sweep's
    assert Plan.of([]).baseline is None


def test_a_row_is_one_append_unless_it_supersedes_one(tmp_path: Path) -> None:
    """A job's first row is appended after one search of the file for its fingerprint;
    a rerun's row marks the earlier one superseded, the file rewritten whole (its torn
    tail cut off first)."""
    path = tmp_path / "results.jsonl"
    rows = _three_rows()
    for row in rows[:2]:
        assert record_row(path, row) == []
    with path.open("ab") as f:
        f.write(b'{"row_id": "half-writ')  # a writer killed in the middle of its line
    assert record_row(path, rows[2]) == []
    assert read_rows(path) == rows
    again = dataclasses.replace(rows[0], row_id="again")
    assert [r.row_id for r in record_row(path, again)] == [rows[0].row_id]
    read = read_rows(path)
    assert [r.row_id for r in read] == [*(r.row_id for r in rows), "again"]
    assert read[0].superseded_by == "again" and not read[-1].superseded_by
