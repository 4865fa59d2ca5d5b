"""Units: statistics, fingerprints, the results files and the summary table."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import statistics
from pathlib import Path

import pytest

from benchflow.config.schema import BenchConfig, DynamoConfig, MlflowConfig, ModelConfig
from benchflow.core.job import JobSpec, fingerprint
from benchflow.results.io import append_jsonl, read_jsonl, write_json_atomic
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
        append_jsonl(Path(path), {"writer": wid, "i": i, "pad": "x" * 5000})


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    procs = [multiprocessing.Process(target=_writer, args=(str(path), w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 160
    assert sorted((r["writer"], r["i"]) for r in rows) == [
        (w, i) for w in range(4) for i in range(40)
    ]


def test_reader_skips_corrupt_lines_and_appender_repairs_a_torn_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "results.jsonl"
    append_jsonl(path, {"n": 1})
    with path.open("a") as f:
        f.write('{"n": 2, "broken')  # a writer killed mid-line
    append_jsonl(path, {"n": 3})
    with caplog.at_level("WARNING"):
        rows = read_jsonl(path)
    assert [r["n"] for r in rows] == [1, 3]
    assert "corrupt line" in caplog.text and ":2:" in caplog.text


def test_dataclass_round_trip_through_job_file() -> None:
    spec = JobSpec("llama·eager·eval", _cfg(repeat=3, dtype="amp"), "/tmp/r.json")
    assert JobSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    ir = dataclasses.replace(spec, ir=True)
    assert ir.to_dict()["mode"] == "ir" and JobSpec.from_dict(ir.to_dict()) == ir
