"""One build shared by jobs that run on more threads than it was built on (GNU
OpenMP does not survive a fork after a parallel region on 2 threads): in `make
test-full`, since its jobs take both cores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import EarlySweeps, SessionSweep, early, run_cli


@early("two_threads")
def _two_threads(root: Path) -> dict[str, Any]:
    """llama's eager and openxla jobs, on 2 threads and 2 cores, sharing one build (made
    on 1 thread); each job's build record kept."""
    args = ["-m", "model=llama", "model.size=tiny", "suite.skip_lists=false"]
    args += ["dynamo=none,openxla", "cpus_per_job=2", "num_threads=2", "repeat=2"]
    args += ["iterations_per_run=1", "warmup=1", "mlflow.enabled=false"]
    res = run_cli(args, root, BENCHFLOW_BUILD_RECORD=str(root / "builds.jsonl"))
    lines = (root / "builds.jsonl").read_text().splitlines() if res.returncode == 0 else []
    return {"res": res, "builds": [json.loads(line) for line in lines]}


@pytest.mark.full  # both cores for its jobs, which the default suite's others wait for
def test_jobs_on_two_threads_fork_from_a_build_made_on_one(
    early_sweeps: EarlySweeps, cases_sweep: SessionSweep
) -> None:
    """GNU OpenMP does not survive a fork after a parallel region on 2 threads: jobs on 2
    threads forked from a shared build (made on 1) run, and get the build a job on 1
    thread makes itself (the cases sweep's share_llama_eval_off)."""
    got = early_sweeps.result("two_threads")
    res = got["res"]
    assert res.returncode == 0, res.stderr[-3000:]
    rows = res.rows()
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    assert {r["experiment"]["num_threads"] for r in rows} == {2}
    assert all(r["timing"]["shared_build_s"] is not None for r in rows)
    builds = {str(Path(b["job"]).parent): b for b in got["builds"]}
    mine = [builds[r["job"]["dir"]] for r in rows]
    assert [b["prebuilt"] for b in mine] == [True, True]
    assert mine[0]["parent_pid"] == mine[1]["parent_pid"]  # one model zygote
    # each against the same backend's own build on 1 thread (a tensor on the XLA device
    # is recorded by its dtype and shape)
    cases = {None: "share_llama_eval_off", "openxla": "share_llama_eval_off_openxla"}
    for row, built in zip(rows, mine, strict=True):
        case = cases_sweep.case(cases[row["experiment"]["dynamo"]])
        own = cases_sweep.builds()[case["job"]["dir"]]
        assert own["prebuilt"] is False
        for what in ("weights", "inputs", "torch_rng", "numpy_rng", "python_rng"):
            assert built[what] == own[what], (row["experiment"]["dynamo"], what)
