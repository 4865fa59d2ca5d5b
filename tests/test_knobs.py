"""inductor.<key>=: torch._inductor.config settings per job, checked against the job's
torch, set in its child, and part of its configuration; env.NAME= and xla.flags=, a
job's own variables (docs/compiler-settings.md). The refusals run through the real CLI
in tests/test_bad_input.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SessionSweep, run_cli

from benchflow.config.schema import (
    BenchConfig,
    ModelConfig,
    dynamic_settings,
    measured,
    measured_flat,
    settings_of,
)
from benchflow.core.job import fingerprint
from benchflow.report.entry import Config
from benchflow.report.model import Baseline
from benchflow.runner.knobs import InductorKeys


def _cfg(**kw: Any) -> BenchConfig:
    return BenchConfig(model=ModelConfig(name="llama"), **kw)


def test_an_inductor_setting_reaches_inductor_and_is_its_own_configuration(
    cases_sweep: SessionSweep,
) -> None:
    from mlflow.tracking import MlflowClient

    on, off = cases_sweep.case("knob_freezing"), cases_sweep.case("knob_freezing_off")
    assert on["status"] == off["status"] == "ok", (on["error"], off["error"])
    assert on["config"]["inductor.freezing"] is True
    assert off["config"]["inductor.freezing"] is False
    assert "·inductor[freezing]·" in on["job"]["name"]
    assert "·inductor[freezing=false,dynamic=false]·" in off["job"]["name"]
    assert on["job"]["fingerprint"] != off["job"]["fingerprint"]

    # Inductor ran freezing's passes in the one job only: they rewrite the graph (its
    # weights prepacked as constants), counted by Inductor's pattern matcher
    def rewrites(row: dict[str, Any]) -> float:
        return float(row["metrics"]["cold_inductor_pattern_matcher_count"])

    assert rewrites(on) > rewrites(off), (rewrites(on), rewrites(off))
    run = MlflowClient(cases_sweep.tracking_uri).get_run(on["job"]["mlflow_run_id"])
    assert run.data.params["inductor.freezing"] == "True"


def test_dynamic_shapes_reach_dynamo(cases_sweep: SessionSweep) -> None:
    """dynamo.dynamic=true and dynamo.dynamic_batch=true each compile the graph with a
    symbolic size (dynamo's compilation metrics), where dynamic=false compiles none."""
    static = cases_sweep.case("knob_freezing_off")
    dynamic, batch = cases_sweep.case("knob_dynamic"), cases_sweep.case("knob_dynamic_batch")
    for row in (dynamic, batch):
        assert row["status"] == "ok", row["error"]

    def symbolic(row: dict[str, Any]) -> float:
        return float(row["metrics"]["cold_dynamo_dynamic_graphs"])

    assert symbolic(static) == 0 and symbolic(dynamic) >= 1 and symbolic(batch) >= 1
    assert static["config"]["dynamo.dynamic"] is False
    assert (
        dynamic["config"]["dynamo.dynamic"] is True
        and "dynamo.dynamic_batch" not in dynamic["config"]
    )
    assert (
        batch["config"]["dynamo.dynamic_batch"] is True and "dynamo.dynamic" not in batch["config"]
    )
    assert "·inductor[dynamic]·" in dynamic["job"]["name"]
    assert "·inductor[dynamic_batch]·" in batch["job"]["name"]


def test_aot_inductor_exports_compiles_and_times_the_model(cases_sweep: SessionSweep) -> None:
    row = cases_sweep.case("aot_inductor")
    assert row["status"] == "ok", row["error"]
    assert row["backend"] == "aot_inductor"
    metrics = row["metrics"]
    export, compile_s = metrics["cold_aot_export_time_s"], metrics["cold_aot_compile_time_s"]
    # both in the cold call, apart, and nothing exported or compiled again after it
    assert export > 0 and compile_s > 0 and export + compile_s < metrics["first_iter_time_s"]
    assert set(metrics["aot_export_time_s"]) == set(metrics["aot_compile_time_s"]) == {0.0}
    # Inductor's C++ check answered once, in the zygote it forked from
    assert row["timing"]["launch"] == "fork"


@pytest.mark.full  # two models on Inductor and AOTInductor, tiny: ~40 s on 2 CPUs
def test_aot_inductor_beside_inductor_on_the_built_in_models(tmp_path: Path) -> None:
    args = ["-m", "model=llama,resnet", "dynamo=inductor,aot_inductor", "suite=builtin"]
    res = run_cli([*args, "model.size=tiny", "mlflow.enabled=false"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = {r["job"]["name"]: r for r in res.rows()}
    assert sorted(rows) == [
        "llama·aot_inductor·eval",
        "llama·inductor·eval",
        "resnet·aot_inductor·eval",
        "resnet·inductor·eval",
    ]
    assert {r["status"] for r in rows.values()} == {"ok"}, [r["error"] for r in rows.values()]
    for model in ("llama", "resnet"):
        metrics = rows[f"{model}·aot_inductor·eval"]["metrics"]
        assert metrics["cold_aot_export_time_s"] > 0 and metrics["cold_aot_compile_time_s"] > 0
    (sweep,) = res.sweep_dirs
    report = (sweep / "report" / "report.md").read_text()
    (line,) = [ln for ln in report.splitlines() if ln.startswith("| llama | eval | aot_inductor |")]
    assert "(export " in line and "x (" in line, line  # its export apart, a speedup


def test_a_jobs_own_variables_and_its_xla_flags_reach_its_child(
    cases_sweep: SessionSweep,
) -> None:
    def seen(row: dict[str, Any]) -> dict[str, Any]:
        out = (Path(row["job"]["dir"]) / "stdout.log").read_text().splitlines()
        (said,) = [json.loads(line) for line in out if line.startswith("{")]
        return dict(said)

    env = cases_sweep.case("env_probe")
    assert env["status"] == "ok", env["error"]
    assert env["config"]["env.ENV_PROBE"] == "42"
    # read in the child: a job with env. variables is spawned with them
    assert seen(env) == {"env_probe": "42", "xla_flags": None, "launch": "spawn"}
    assert env["timing"]["launch"] == "spawn" and env["provenance"]["env"]["ENV_PROBE"] == "42"
    xla = cases_sweep.case("xla_flags")
    assert xla["status"] == "ok", xla["error"]
    flags = "--xla_cpu_enable_fast_math=true"  # torch_xla's import sets it false
    assert xla["config"]["xla.flags"] == flags
    # forked from the xla zygote: the flags are the job's, after torch_xla's import's own
    said = seen(xla)
    assert said["launch"] == "fork" and said["xla_flags"].split()[-1] == flags, said
    assert xla["timing"]["launch"] == "fork" and xla["provenance"]["env"]["XLA_FLAGS"] == flags


def test_xla_reads_the_flags_of_a_job_forked_from_its_zygote(cases_sweep: SessionSweep) -> None:
    """XLA_FLAGS is read when the job's XLA client starts, after the fork: a flag XLA
    does not know stops the job there, by XLA's own check."""
    row = cases_sweep.case("xla_flags_unknown")
    (sweep,) = {Path(row["job"]["dir"]).parent}
    plan = json.loads((sweep / "plan.json").read_text())
    (warm,) = [s["warm"] for s in plan["steps"] if s["job"] == row["job"]["num"]]
    assert warm["zygote"] == "xla"
    assert row["status"] == "crashed", row["error"]
    assert "Unknown flag in XLA_FLAGS: --xla_benchflow_no_such_flag=1" in row["error"]


def test_settings_are_keyed_by_their_dotted_name_however_they_were_nested() -> None:
    nested = _cfg(inductor={"cpp": {"threads": 1}, "freezing": True})
    dotted = _cfg(inductor={"cpp.threads": 1, "freezing": True})
    assert measured_flat(nested)["inductor.cpp.threads"] == 1
    assert measured_flat(nested)["inductor.freezing"] is True
    assert fingerprint(nested) == fingerprint(dotted)
    assert fingerprint(nested) != fingerprint(_cfg(inductor={"freezing": True}))
    # none set: not in the config at all, so the rows written before keep theirs; a
    # null is no setting: torch's default stands, and the job is plain Inductor's
    assert "inductor" not in measured(_cfg())
    assert fingerprint(_cfg(inductor={"freezing": None, "cpp": {"threads": None}})) == (
        fingerprint(_cfg())
    )
    assert not any(k.startswith("inductor.") for k in measured_flat(_cfg()))


def test_a_setting_is_checked_against_what_torch_declares() -> None:
    keys = InductorKeys(
        "2.9.0",
        {
            "freezing": (["bool"], []),
            "cpp.threads": (["int"], []),
            "cpp.simdlen": (["int", "NoneType"], []),
            "max_autotune_gemm_search_space": ([], ["DEFAULT", "EXHAUSTIVE"]),
            "post_grad_custom_pass": ([], []),  # a callable: any value
        },
    )
    assert keys.why_not("freezing", True) is None
    assert keys.why_not("cpp.threads", 1) is None
    assert keys.why_not("cpp.simdlen", None) is None
    assert keys.why_not("max_autotune_gemm_search_space", "EXHAUSTIVE") is None
    assert keys.why_not("post_grad_custom_pass", "anything") is None
    typo = keys.why_not("freezng", True) or ""
    assert "inductor.freezng=true" in typo and "did you mean inductor.freezing?" in typo
    wrong = keys.why_not("freezing", 3) or ""
    assert "inductor.freezing=3" in wrong and "allowed: bool" in wrong
    assert "allowed: int, null" in (keys.why_not("cpp.simdlen", "wide") or "")
    assert "allowed: DEFAULT, EXHAUSTIVE" in (
        keys.why_not("max_autotune_gemm_search_space", "FAST") or ""
    )


def test_the_keys_are_asked_once_per_torch_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """inductor_keys asks an interpreter which torch it holds (no torch import), and runs
    the probe (which imports torch) only for a torch it has no answer for: kept in
    benchflow's cache. The interpreter is a stand-in that answers both questions as a
    torch install would and logs each probe, so that nothing here imports torch."""
    import sys

    from benchflow.runner.knobs import inductor_keys

    log = tmp_path / "probes.log"
    fake = tmp_path / "python"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "version = os.environ.get('FAKE_TORCH', '2.9.0')\n"
        "if 'metadata.distribution' in sys.argv[2]:\n"
        "    print(json.dumps([version, '/site/torch/_inductor/config.py', 1, 2]))\n"
        "else:\n"
        f"    open({str(log)!r}, 'a').write(version + '\\n')\n"
        "    print(json.dumps({'torch': version, 'keys': {'freezing': [['bool'], []]}}))\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "cache"))

    def asked(*env: tuple[str, str]) -> str:
        inductor_keys.cache_clear()  # a new command: nothing in memory
        return inductor_keys(str(fake), env).torch

    assert [asked(), asked(), asked(("FAKE_TORCH", "2.10.0")), asked()] == [
        "2.9.0",
        "2.9.0",
        "2.10.0",
        "2.9.0",
    ]
    assert log.read_text().split() == ["2.9.0", "2.10.0"]  # once per torch
    assert len(list((tmp_path / "cache" / "inductor-keys").glob("*.json"))) == 2
    inductor_keys.cache_clear()


def test_a_configuration_with_a_setting_is_compared_with_its_backend_at_its_defaults() -> None:
    freezing = Config("inductor", (("dtype", "float32"), ("inductor.freezing", "true")))
    plain = Config("inductor", (("dtype", "float32"), ("inductor.freezing", "-")))
    eager = Config("eager", (("dtype", "float32"), ("inductor.freezing", "-")))
    assert Baseline("inductor").reference(freezing) == plain
    assert Baseline("inductor").is_base(plain) and not Baseline("inductor").is_base(freezing)
    assert Baseline("eager").reference(freezing) == eager
    # dynamic shapes are the compiler's settings too: plain Inductor is automatic
    dynamic = Config("inductor", (("dynamo.dynamic", "true"), ("dynamo.dynamic_batch", "-")))
    automatic = Config("inductor", (("dynamo.dynamic", "-"), ("dynamo.dynamic_batch", "-")))
    assert Baseline("inductor").reference(dynamic) == automatic
    assert automatic.label == "inductor" and dynamic.label == "inductor dynamo.dynamic=true"


def test_dynamic_shape_settings_are_measured_only_where_set() -> None:
    from benchflow.config.schema import DynamoConfig

    plain = _cfg(dynamo=DynamoConfig(name="inductor"))
    assert "dynamic" not in measured(plain)["dynamo"]  # rows written before keep theirs
    assert "dynamic_batch" not in measured(plain)["dynamo"]
    static = _cfg(dynamo=DynamoConfig(name="inductor", dynamic=False))
    batch = _cfg(dynamo=DynamoConfig(name="inductor", dynamic_batch=True))
    prints = {fingerprint(c) for c in (plain, static, batch)}
    assert len(prints) == 3
    assert measured_flat(static)["dynamo.dynamic"] is False
    assert measured_flat(batch)["dynamo.dynamic_batch"] is True


def test_aot_inductor_honours_the_suites_export_lists_and_freezing_its_freezing_list() -> None:
    """The dynamo benchmarks skip skip.export_not_supported and skip.control_flow with
    --export-aot-inductor, skip.freezing.<device> with --freezing: so does the plan,
    naming the list."""
    from benchflow.config.schema import DynamoConfig, SuiteConfig
    from benchflow.sweep.plan import plan_config

    rules = {
        "skip": {
            "export_not_supported": ["llama"],
            "control_flow": ["dlrm"],
            "freezing": {"cpu": ["resnet"], "cuda": ["llama"]},
        }
    }
    suite = SuiteConfig(name="torchbench", rules=rules)

    def skip(model: str, backend: str, **kw: Any) -> str | None:
        cfg = BenchConfig(
            model=ModelConfig(name=model, source="builtin", builtin=f"benchflow.models.{model}"),
            dynamo=DynamoConfig(name=backend),
            suite=suite,
            accelerator=dataclasses.replace(BenchConfig().accelerator, name="cpu"),
            **kw,
        )
        return plan_config(cfg, 0, ()).skip

    export = skip("llama", "aot_inductor") or ""
    assert "`skip.export_not_supported` of suite torchbench" in export
    assert "`skip.control_flow`" in (skip("dlrm", "aot_inductor") or "")
    assert skip("llama", "inductor") is None and skip("resnet", "aot_inductor") is None
    assert "`skip.freezing.cpu`" in (skip("resnet", "inductor", inductor={"freezing": True}) or "")
    assert skip("resnet", "inductor") is None
    assert skip("llama", "inductor", inductor={"freezing": True}) is None  # cuda's list


@pytest.mark.full  # two cold Inductor compiles of llama: ~20 s on 2 CPUs
def test_a_sweep_over_a_setting_compares_it_with_plain_inductor(tmp_path: Path) -> None:
    args = ["-m", "model=llama", "dynamo=inductor", "inductor.freezing=null,true"]
    res = run_cli([*args, "model.size=tiny", "dtype=float32", "mlflow.enabled=false"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = res.rows()
    assert sorted(r["job"]["name"] for r in rows) == [
        "llama·inductor[freezing]·eval·float32",
        "llama·inductor·eval·float32",
    ]
    (sweep,) = res.sweep_dirs
    report = (sweep / "report" / "report.md").read_text()
    (line,) = [
        ln
        for ln in report.splitlines()
        if ln.startswith("| llama | eval | inductor inductor.freezing=true |")
    ]
    assert "x (" in line and "(baseline)" not in line  # a speedup, with its interval


def test_the_hud_experiment_sweeps_the_dashboards_configurations() -> None:
    """experiment=hud: each model on eager and on Inductor in each of the dashboard's
    CPU configurations (conf/hud/*.yaml), speedups over eager."""
    from hydra import compose, initialize_config_dir

    from benchflow.config.store import CONF_DIR, register
    from benchflow.config.validate import parse

    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=hud"], return_hydra_config=True)
        params = cfg.hydra.sweeper.params
        assert params["dynamo"] == "none,inductor"
        configurations = params["hud"].split(",")
        assert configurations == [
            *("default", "freezing", "cpp_wrapper", "dynamic", "aot_inductor", "max_autotune")
        ]
        chosen = {
            option: parse(compose("config", overrides=["dynamo=inductor", f"hud={option}"]))
            for option in configurations
        }
    assert parse(cfg).baseline == "none"
    settings = {
        option: (c.dynamo.name, settings_of(c.inductor) | dynamic_settings(c.dynamo))
        for option, c in chosen.items()
    }
    assert settings == {
        "default": ("inductor", {}),
        "freezing": ("inductor", {"freezing": True}),
        "cpp_wrapper": ("inductor", {"cpp_wrapper": True}),
        "dynamic": ("inductor", {"dynamic_batch": True}),
        "aot_inductor": ("aot_inductor", {}),
        "max_autotune": ("inductor", {"max_autotune": True}),
    }
    labels = [Config("inductor", (("inductor.freezing", v),)).label for v in ("-", "true")]
    assert labels == ["inductor", "inductor inductor.freezing=true"]  # set ones only


@pytest.mark.full  # 4 models x (eager + 6 configurations), tiny: ~6 min
def test_the_hud_experiment_runs_and_reports_the_configurations_side_by_side(
    tmp_path: Path,
) -> None:
    args = ["-m", "experiment=hud", "model.size=tiny"]
    res = run_cli([*args, "mlflow.enabled=false"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = res.rows()
    # TorchBench's llama is on the suite's export_not_supported list (by its name)
    skipped = {r["job"]["name"]: r["error"] for r in rows if r["status"] == "skipped"}
    assert list(skipped) == ["llama·aot_inductor·eval"], skipped
    assert "skip.export_not_supported" in skipped["llama·aot_inductor·eval"]
    assert {r["status"] for r in rows} == {"ok", "skipped"}, [r["error"] for r in rows]
    (sweep,) = res.sweep_dirs
    report = (sweep / "report" / "report.md").read_text()
    summary = report.split("## Per model", 1)[0]
    configurations = (
        *("inductor", "inductor inductor.freezing=true", "inductor inductor.cpp_wrapper=true"),
        *("inductor dynamo.dynamic_batch=true", "inductor inductor.max_autotune=true"),
    )
    for label in configurations:
        (line,) = [ln for ln in summary.splitlines() if ln.startswith(f"| {label} |")]
        assert "x (" in line and "over 4 of 4" in line, line  # a geomean speedup over eager
    (line,) = [ln for ln in summary.splitlines() if ln.startswith("| aot_inductor |")]
    assert "x (" in line and "over 3 of 3" in line, line
