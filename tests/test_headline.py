"""The README's headline sweep widened to every CPU backend, end to end on tiny models
with verify=true (the session's grid sweep, tests/conftest.py: GRID):

    -m model=llama,dlrm dynamo=none,inductor,openxla xla=auto,PJRT

eight ok rows (eager, lazy XLA, Inductor, openxla per model) with verification codes,
the two invalid pairs recorded as `invalid` and listed apart in the report, the
duplicate configuration (openxla with xla=auto and xla=PJRT) run once, one parent
MLflow run with a child run per job, and the model x backend table."""

from __future__ import annotations

import json
import re

from tests.conftest import HOST_INDUCTOR_CACHE, SessionSweep, sweep_runs

from benchflow.report.render import ENTRY_HEADER, SUMMARY_HEADER
from benchflow.results.row import SCHEMA_VERSION

BACKENDS = ["eager", "lazy_xla", "inductor", "openxla"]


def test_ok_rows_per_backend_and_invalid_pairs_apart(grid_sweep: SessionSweep) -> None:
    rows = grid_sweep.rows()
    ok = [r for r in rows if r["status"] == "ok"]
    invalid = [r for r in rows if r["status"] == "invalid"]
    assert len(ok) == 8 and len(invalid) == 2 and len(rows) == 10, [r["status"] for r in rows]
    assert sorted((r["model"]["model_name"], r["backend"]) for r in ok) == sorted(
        (m, b) for m in ("llama", "dlrm") for b in BACKENDS
    )
    for r in invalid:
        assert r["job"]["overrides"][1:3] == ["dynamo=inductor", "xla=PJRT"]
        assert "does not compile for the XLA device" in r["error"]
        assert r["metrics"] == {} and r["job"]["wall_time_s"] == 0.0
    for r in ok:
        assert r["schema_version"] == SCHEMA_VERSION and r["config"]["model.size"] == "tiny"
        assert r["model"]["model_source"] == "builtin"
        assert r["experiment"]["accelerator"] == "cpu"
        assert r["experiment"]["batch_size"] > 0
        # torchbench.yaml's rule: inference in bfloat16, decided by the suite
        assert (r["experiment"]["dtype"], r["experiment"]["dtype_source"]) == ("bfloat16", "suite")
        m = r["metrics"]
        assert len(m["per_iter_time_s"]) == 3
        if r["backend"] != "eager":  # eager compiles nothing: its first call is a call
            # cold start (with compilation) is reported apart from the steady state
            assert m["first_iter_time_s"] > r["summary"]["per_iter_time_s"]["median"]
        if r["backend"] in ("inductor", "openxla"):
            assert m["cold_dynamo_compile_time_s"] > 0
            assert m["dynamo_graph_breaks"] == [0.0, 0.0, 0.0]
        else:
            assert "dynamo_graph_breaks" not in m  # no dynamo: no dynamo counters
        if r["backend"] in ("lazy_xla", "openxla"):
            assert "trace_per_iter_time_s" in m and "xla_ExecuteTime_number" in m
        else:
            assert "trace_per_iter_time_s" not in m
        assert m["peak_host_rss_bytes"] > 100e6
        assert r["summary"]["per_iter_time_s"]["iqr"] >= 0
        # accuracy checked in the same job as the timing
        assert r["verification_code"] == "PASS", r["verification_detail"]
        assert 0.99 < m["accuracy_cosine_similarity"] <= 1.0 + 1e-9


def test_the_duplicate_configuration_runs_once(grid_sweep: SessionSweep) -> None:
    """openxla with xla=auto resolves to xla=PJRT: the same fingerprint, so the sweep
    launches the first grid point only, and says so, instead of timing it again."""
    said = [ln for ln in grid_sweep.result.stderr.splitlines() if "the same job as" in ln]
    assert len(said) == 2, said  # each by its name and the override it alone has
    assert all("openxla·eval (xla=PJRT): the same job as [" in ln for ln in said), said
    assert all(ln.endswith("] (xla=auto), run once as it") for ln in said), said
    openxla = [r for r in grid_sweep.rows() if r["backend"] == "openxla"]
    assert len(openxla) == 2 and len({r["job"]["fingerprint"] for r in openxla}) == 2
    assert all("xla=auto" in r["job"]["overrides"] for r in openxla)  # the first of each
    (sweep,) = grid_sweep.result.sweep_dirs
    assert len([p for p in sweep.iterdir() if p.name.isdigit()]) == 10  # of 12 planned


def test_the_sweep_leaves_nothing_in_its_temporary_folder(grid_sweep: SessionSweep) -> None:
    """What its processes made in TMPDIR (the sweep's was a folder of its own) is gone once
    it ends: torch.distributed.nn's folder, which the compile stack's import makes and only
    an atexit removes, was left by each zygote's os._exit, one a sweep. What stays is the
    link the conftest made to the host's Inductor cache, where torch keeps its precompiled
    headers in TMPDIR by design."""
    tmp = grid_sweep.result.cwd / "tmp"
    assert {p.name for p in tmp.iterdir()} == {HOST_INDUCTOR_CACHE.name}
    assert (tmp / HOST_INDUCTOR_CACHE.name).is_symlink()


def test_report_has_every_backend_with_speedups_and_the_invalid_pairs_apart(
    grid_sweep: SessionSweep,
) -> None:
    (sweep,) = grid_sweep.result.sweep_dirs
    md = (sweep / "report" / "report.md").read_text()
    summary = md.split("## Summary")[1].split("## Per model")[0]
    lines = {ln.split("|")[1].strip(): ln for ln in summary.splitlines() if ln.startswith("| ")}
    for backend in BACKENDS:
        assert backend in lines, summary
        assert "2/2 (100%)" in lines[backend]
        # every model in the geomean, with the geomean's interval, none left out (over two
        # models, t with one degree of freedom: on a busy host its bound may pass 10x)
        cells = [c.strip() for c in lines[backend].split("|")[1:-1]]
        geomean = r"\d+\.\d\dx \(\d+\.\d\d-\d+\.\d\d\) over 2 of 2"
        assert re.fullmatch(geomean, cells[2]) or (backend == "inductor"), lines[backend]
        assert cells[3] == "none", lines[backend]
    assert "| inductor | 2/2 (100%) | 1.00x over 2 of 2 | none |" in summary  # the baseline
    # eager compiles nothing: its compile time is "–", not a number
    eager = [c.strip() for c in lines["eager"].split("|")[1:-1]]
    assert eager[SUMMARY_HEADER.index("mean compile")] == "–"
    per_model = md.split("## Per model")[1]
    llama_eager = next(
        ln for ln in per_model.splitlines() if ln.startswith("| llama | eval | eager |")
    )
    assert "| – |" in llama_eager
    invalid = md.split("## Invalid combinations")[1]
    assert invalid.count("dynamo=inductor xla=PJRT") == 2
    assert "replaced by later ones" not in md
    assert "llama" in grid_sweep.result.stdout and "geomean speedup" in grid_sweep.result.stdout


def test_mlflow_parent_with_a_child_per_job(grid_sweep: SessionSweep) -> None:
    parents, children = sweep_runs(grid_sweep.tracking_uri)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    names = sorted(c.info.run_name for c in children)
    expected = [f"{m}·{b}·eval" for m in ("llama", "dlrm") for b in BACKENDS]
    assert names == sorted([*expected, "llama·inductor·eval", "dlrm·inductor·eval"])
    ok = [c for c in children if c.data.tags["status"] == "ok"]
    assert len(ok) == 8
    for c in ok:
        assert c.info.status == "FINISHED"
        assert c.data.params["backend"] in BACKENDS
        assert c.data.params["model.size"] == "tiny"
        assert "timeout_s" not in c.data.params  # not measured: not a param
        assert c.data.tags["version.torch"] == "2.9.0"
        assert c.data.tags["verification_code"] == "PASS"
        assert c.data.metrics["headline.per_iter_time_s"] > 0
        if c.data.params["backend"] != "inductor":
            assert c.data.metrics["headline.speedup_vs_inductor"] > 0
        if c.data.params["backend"] == "eager":
            assert "headline.compile_time_s" not in c.data.metrics
        assert 0 < c.data.metrics["headline.share_of_peak"] < 1
    invalid = [c for c in children if c.data.tags["status"] == "invalid"]
    assert len(invalid) == 2 and all(c.info.status == "FINISHED" for c in invalid)
    assert parents[0].data.tags["jobs.ok"] == "8" and parents[0].data.tags["jobs.invalid"] == "2"
    # the report's files and plots are on the parent run
    from mlflow.tracking import MlflowClient

    client = MlflowClient(grid_sweep.tracking_uri)
    logged = {a.path for a in client.list_artifacts(parents[0].info.run_id, "report")}
    assert {"report/report.html", "report/speedup.png", "report/report.csv"} <= logged
    for backend in BACKENDS:
        assert parents[0].data.metrics[f"report.{backend}.passrate"] == 1.0
        assert 0 < parents[0].data.metrics[f"report.{backend}.geomean_share_of_peak"] < 1


def test_every_backends_row_has_its_models_flops_and_a_share_of_the_peak(
    grid_sweep: SessionSweep,
) -> None:
    """A model's FLOPs are its eager arithmetic: one count for all four backends (on
    lazy XLA and openxla too, where the counted step is traced, never run); each row's
    FLOP/s are that count over its median, a share strictly between 0 and 1 of the
    peak the rows were judged against (bfloat16, on the job's one thread), which the
    report names and shows beside each row and each configuration."""
    ok = [r for r in grid_sweep.rows() if r["status"] == "ok"]
    counts: dict[str, set[float]] = {}
    for r in ok:
        f, name = r["flops"], r["job"]["name"]
        assert f["error"] is None and f["uncounted"] == [] and f["per_step"] > 0, (name, f)
        assert f["counted"].startswith("forward of the eager module"), name
        counts.setdefault(r["model"]["model_name"], set()).add(f["per_step"])
        median = r["summary"]["per_iter_time_s"]["median"]
        assert f["per_s"] == f["per_step"] / median, name
        assert 0 < f["share_of_peak"] < 1 and f["per_s_ci_low"] is None, name  # 3 repeats
        assert f["share_of_peak"] == f["per_s"] / f["peak"]["flop_per_s"], name
        assert (f["peak"]["dtype"], f["peak"]["threads"]) == ("bfloat16", 1), name
    assert {m: len(c) for m, c in counts.items()} == {"llama": 1, "dlrm": 1}, counts
    assert len({r["flops"]["peak"]["key"] for r in ok}) == 1  # one peak, read by all
    (sweep,) = grid_sweep.result.sweep_dirs
    md = (sweep / "report" / "report.md").read_text()
    per_model = md.split("## Per model")[1]
    share_at = ENTRY_HEADER.index("share of peak (95% CI)")
    for line in per_model.splitlines():
        if line.startswith(("| llama | eval |", "| dlrm | eval |")) and "| ok |" in line:
            cells = [c.strip() for c in line.split("|")[1:-1]]
            assert re.fullmatch(r"\d+(\.\d+)? [kMG]FLOP/s", cells[share_at - 1]), line
            assert re.fullmatch(r"\d+\.\d%", cells[share_at]), line
    summary = md.split("## Summary")[1].split("## Per model")[0]
    share_col = SUMMARY_HEADER.index("geomean share of peak")
    for backend in BACKENDS:
        line = next(ln for ln in summary.splitlines() if ln.startswith(f"| {backend} |"))
        cell = [c.strip() for c in line.split("|")[1:-1]][share_col]
        assert re.fullmatch(r"\d+\.\d% over 2 of 2", cell), line
    assert "share of peak: of " in md and "bfloat16, 1 thread(s)" in md  # the peak, named
    assert (sweep / "report" / "share.png").is_file()


def test_each_job_ran_with_hydras_own_composition_of_its_overrides(
    grid_sweep: SessionSweep,
) -> None:
    """The sweeper types each job fast (config/compose.py): every job folder's config
    must still be what planning Hydra's own composition of that job's overrides gives."""
    from hydra import compose, initialize_config_dir

    from benchflow.config.schema import config_from_yaml
    from benchflow.config.store import CONF_DIR, register
    from benchflow.sweep.plan import plan_job

    register()
    (sweep,) = grid_sweep.result.sweep_dirs
    jobs = sorted(
        (p for p in sweep.iterdir() if (p / "config.yaml").is_file()), key=lambda p: p.name
    )
    assert len(jobs) == 10  # of 12 planned: the two duplicate openxla jobs never ran
    seen = set()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for job in jobs:
            overrides = json.loads((job / "result.json").read_text())["job"]["overrides"]
            planned = plan_job(compose("config", overrides), 0, overrides)
            ran = config_from_yaml(job / "config.yaml")
            assert ran == planned.config, job.name
            seen.add((ran.model.name, ran.dynamo.name, ran.xla.name))
    assert len(seen) == 10  # ten different jobs, each with its own config
