"""Reproducing results: provenance in every row, `benchflow rerun`, comparability.

One real sweep (two eager jobs, MLflow on, the project's own store) is recorded, then
rerun from its folder, and one of its jobs from its MLflow run id with one extra
override. The comparison tests edit copies of the recorded rows' provenance: two
machines cannot be had here, and the copy says which facts it changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import REPO, CliResult, EarlySweeps, early, read_rows, run_cli

from benchflow.results.digest import DIFFERS, OTHER_CONFIG, REPRODUCED, check, digest
from benchflow.results.environment import FACTS, differences, facts
from benchflow.results.row import Hardware, Provenance

SWEEP = [
    "-m",
    "model=llama",
    "model.size=tiny",
    "dynamo=none",
    "seed=1,2",
    "repeat=3",
    "iterations_per_run=2",
]


@early("rerun", long=True)
def _recorded_and_rerun(root: Path) -> dict[str, CliResult]:
    work = root / "work"
    work.mkdir()
    out = {"sweep": run_cli(SWEEP, work)}
    (folder,) = out["sweep"].sweep_dirs
    out["folder"] = run_cli(["rerun", str(folder)], work)
    first = read_rows(folder)[0]
    out["run_id"] = run_cli(["rerun", first["job"]["mlflow_run_id"], "repeat=4"], work)
    # One results.jsonl line, as if it came from an environment locked otherwise.
    second = read_rows(folder)[1]
    second["provenance"]["lock_sha256"] = OTHER_LOCK
    # ... into a folder named as for any sweep, which a second rerun then finds taken.
    out["line"] = run_cli(["rerun", json.dumps(second), "hydra.sweep.dir=named"], work)
    out["taken"] = run_cli(["rerun", json.dumps(second), "hydra.sweep.dir=named"], work)
    return out


OTHER_LOCK = "0" * 64


def _runs(early_sweeps: EarlySweeps) -> dict[str, CliResult]:
    runs: dict[str, CliResult] = early_sweeps.result("rerun")
    for name, res in runs.items():
        assert res.returncode == (2 if name == "taken" else 0), (name, res.stderr[-3000:])
    return runs


def test_a_sweep_folder_rerun_gives_its_fingerprints_and_links_each_row(
    early_sweeps: EarlySweeps,
) -> None:
    runs = _runs(early_sweeps)
    (original,) = [
        d for d in runs["sweep"].sweep_dirs if not d.name.endswith(("-rerun", "-rerun2"))
    ]
    old = {r["row_id"]: r for r in read_rows(original)}
    reruns = [d for d in runs["folder"].sweep_dirs if "-rerun" in d.name]
    new = [r for d in reruns for r in read_rows(d) if r["job"]["rerun_of"] in old]
    new = [r for r in new if r["config"]["repeat"] == 3 and not r["job"]["rerun_env"]]
    assert sorted(r["job"]["rerun_of"] for r in new) == sorted(old)  # not the edited line's
    for row in new:
        before = old[row["job"]["rerun_of"]]
        assert row["row_id"] != before["row_id"] and row["status"] == "ok"
        assert row["job"]["fingerprint"] == before["job"]["fingerprint"]
        assert row["config"] == before["config"]
        assert row["job"]["dir"] != before["job"]["dir"]  # a new sweep folder
        assert row["job"]["mlflow_run_id"] != before["job"]["mlflow_run_id"]  # a new run
        # Same machine, same eager model, same seed: the output is the same.
        assert row["job"]["rerun_digest"] == REPRODUCED, row["job"]
        assert row["job"]["rerun_env"] == []
    out = runs["folder"].stdout
    assert "environment: the same as recorded" in out
    for before in old.values():  # the old and new medians side by side
        median = before["summary"]["per_iter_time_s"]["median"]
        assert f"{median * 1e3:.3f}ms" in out

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{runs['sweep'].cwd / 'mlflow.db'}")
    for row in new:
        tags = client.get_run(row["job"]["mlflow_run_id"]).data.tags
        assert tags["benchflow.rerun_of"] == row["job"]["rerun_of"]
        assert tags["rerun_digest"] == REPRODUCED


def test_a_rerun_from_an_mlflow_run_id_with_an_override_gets_a_new_fingerprint(
    early_sweeps: EarlySweeps,
) -> None:
    runs = _runs(early_sweeps)
    first = read_rows(runs["sweep"].sweep_dirs[0])[0]
    rows = [
        r
        for d in runs["run_id"].sweep_dirs
        if "-rerun" in d.name
        for r in read_rows(d)
        if r["config"]["repeat"] == 4
    ]
    (row,) = rows
    assert row["job"]["rerun_of"] == first["row_id"]
    assert row["job"]["fingerprint"] != first["job"]["fingerprint"]
    # The override changed repeat and nothing else the job measures.
    assert {k for k in row["config"] if row["config"][k] != first["config"][k]} == {"repeat"}
    assert len(row["metrics"]["per_iter_time_s"]) == 4
    assert row["job"]["rerun_digest"] == OTHER_CONFIG
    assert "NEW fingerprint" in runs["run_id"].stdout


def test_a_rerun_in_another_locked_environment_says_so_in_its_row(
    early_sweeps: EarlySweeps,
) -> None:
    runs = _runs(early_sweeps)
    second = read_rows(runs["sweep"].sweep_dirs[0])[1]
    lock = hashlib.sha256((REPO / "uv.lock").read_bytes()).hexdigest()
    out = runs["line"].stdout
    assert f"lock_sha256: {OTHER_LOCK} -> {lock}   (can change speed)" in out  # before it ran
    # hydra.sweep.dir=named: its row there, and no multirun/ folder of its own
    (row,) = read_rows(runs["line"].cwd / "named")
    assert row["job"]["dir"] == str(runs["line"].cwd / "named" / "0"), row["job"]["dir"]
    assert len([d for d in runs["line"].sweep_dirs if "-rerun" in d.name]) == 2  # the others'
    taken = runs["taken"]
    assert "hydra.sweep.dir=named: the folder is not empty" in taken.stderr
    assert "allowed: a new or empty folder" in taken.stderr
    assert len(read_rows(runs["line"].cwd / "named")) == 1  # nothing ran
    assert row["job"]["rerun_of"] == second["row_id"]
    assert row["job"]["fingerprint"] == second["job"]["fingerprint"]
    assert row["job"]["rerun_env"] == [f"lock_sha256: {OTHER_LOCK} -> {lock}"]
    assert row["job"]["rerun_digest"] == REPRODUCED  # the output did not change
    assert f"environment differs: lock_sha256: {OTHER_LOCK} -> {lock}" in out


def _cpuinfo_features() -> set[str]:
    text = Path("/proc/cpuinfo").read_text()
    line = next(x for x in text.splitlines() if x.startswith(("flags", "Features")))
    return set(line.split(":", 1)[1].split())


def test_provenance_is_true_on_this_machine(early_sweeps: EarlySweeps) -> None:
    runs = _runs(early_sweeps)
    (folder,) = [d for d in runs["sweep"].sweep_dirs if "-rerun" not in d.name]
    row = read_rows(folder)[0]
    prov = row["provenance"]
    hw = prov["hardware"]
    flags = _cpuinfo_features()
    wanted = {"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "sve", "bf16"}
    assert set(hw["cpu_features"]) <= flags
    assert wanted & flags <= set(hw["cpu_features"])  # every one this CPU has
    vendor = next(
        x.split(":", 1)[1].strip()
        for x in Path("/proc/cpuinfo").read_text().splitlines()
        if x.startswith(("vendor_id", "CPU implementer"))
    )
    assert hw["cpu_vendor"] in (vendor, {"0x41": "ARM"}.get(vendor))
    assert hw["logical_cores"] == os.cpu_count()
    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    assert hw["memory_bytes"] == mem_kb * 1024
    assert hw["affinity"] == row["job"]["cpus"]  # the CPU slot the job was given
    assert prov["env"]["OMP_NUM_THREADS"] == "1"  # cpus_per_job=1
    assert prov["lock_sha256"] == hashlib.sha256((REPO / "uv.lock").read_bytes()).hexdigest()
    assert prov["versions"]["torch"] == "2.9.0"

    # MLflow: the parent run holds the package list the rows' hash is of; each job run
    # holds the short facts as tags (what the UI's columns show).
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{runs['sweep'].cwd / 'mlflow.db'}")
    parent = (folder / "mlflow_parent_run.txt").read_text().strip()
    listed = Path(client.download_artifacts(parent, "packages.txt", str(runs["sweep"].cwd)))
    lines = listed.read_text().splitlines()
    assert "torch==2.9.0" in lines and "torch-xla==2.9.0" in lines
    assert hashlib.sha256("\n".join(lines).encode()).hexdigest() == prov["packages_sha256"]
    tags = client.get_run(row["job"]["mlflow_run_id"]).data.tags
    assert tags["cpu.features"] == ",".join(hw["cpu_features"])
    assert tags["lock_sha256"] == prov["lock_sha256"]
    assert tags["env.OMP_NUM_THREADS"] == "1"
    assert client.get_run(parent).data.tags["cpu.features"] == tags["cpu.features"]
    # The digest of the eager output: the tiny llama's logits.
    assert row["digest"]["of"] == "eager" and row["digest"]["leaves"][0]["shape"][-1] > 1


def _edited_copy(folder: Path, dest: Path, edit: Any) -> Path:
    shutil.copytree(folder, dest)
    lines = []
    for row in read_rows(dest):
        edit(row["provenance"])
        lines.append(json.dumps(row))
    (dest / "results.jsonl").write_text("\n".join(lines) + "\n")
    return dest


def test_comparing_sweeps_from_other_environments_says_what_differs(
    early_sweeps: EarlySweeps, tmp_path: Path
) -> None:
    runs = _runs(early_sweeps)
    (folder,) = [d for d in runs["sweep"].sweep_dirs if "-rerun" not in d.name]

    def other_machine(prov: dict[str, Any]) -> None:  # an older CPU (none of the features
        prov["hardware"]["cpu_features"] = []  # an x86 VM here has), a newer torch
        prov["versions"]["torch"] = "2.10.0"
        prov["host"] = "elsewhere"

    same = _edited_copy(folder, tmp_path / "same", lambda prov: None)
    other = _edited_copy(folder, tmp_path / "other", other_machine)
    common = ["--no-mlflow", "--format", "md", "--threshold", "1000%"]

    strict = run_cli(
        ["report", str(other), "--compare", str(folder), "--require-same-env", *common], tmp_path
    )
    assert strict.returncode == 2
    assert "--require-same-env" in strict.stderr and "cpu.features" in strict.stderr
    assert not (other / "compare").exists()  # refused before any report was written

    res = run_cli(["report", str(other), "--compare", str(folder), *common], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    features = ",".join(read_rows(folder)[0]["provenance"]["hardware"]["cpu_features"])
    assert features and f"cpu.features: {features} -> " in res.stdout
    assert "version.torch: 2.9.0 -> 2.10.0" in res.stdout
    assert "a slowdown may come from the environment" in res.stdout
    assert "also different: host:" in res.stdout  # printed, but not a speed fact

    ok = run_cli(
        ["report", str(same), "--compare", str(folder), "--require-same-env", *common], tmp_path
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "environment: the same on both sides" in ok.stdout


# --- the rules themselves, on values -------------------------------------------------


def test_a_digest_is_reproduced_within_the_tolerance_and_says_where_it_differs() -> None:
    import torch

    out = torch.linspace(-2, 2, 1000)
    old = digest([out], of="eager")
    assert check(old, digest([out.clone()], of="eager"), 1e-4) == REPRODUCED
    assert check(old, digest([out * (1 + 1e-6)], of="eager"), 1e-4) == REPRODUCED
    differs = check(old, digest([out + 0.01], of="eager"), 1e-4)
    assert differs.startswith(DIFFERS) and "tensor 0 mean" in differs
    assert "shape" in check(old, digest([out[:-1]], of="eager"), 1e-4)
    assert "nonfinite" in check(old, digest([torch.cat([out[:-1], out[:1] / 0])], "eager"), 1)
    assert check(old, None, 1e-4) == "not recorded"


def test_speed_facts_decide_comparability_and_unrecorded_ones_differ() -> None:
    here = Provenance(
        host="a",
        cpu_model="Xeon",
        versions={"torch": "2.9.0"},
        hardware=Hardware(cpu_features=["avx2", "amx_bf16"], affinity="0-1"),
        lock_sha256="x",
        env={"OMP_NUM_THREADS": "2"},
    )
    assert facts(here)["job.cpus"] == "2" and facts(here)["env.OMP_NUM_THREADS"] == "2"
    assert differences([here], [here]) == []
    moved = Provenance(**{**here.__dict__, "host": "b"})
    (diff,) = differences([here], [moved])
    assert diff.fact == "host" and not diff.speed
    old = Provenance(host="a", cpu_model="Xeon", versions={"torch": "2.9.0"})  # before ISA facts
    found = {d.fact: d for d in differences([old], [here])}
    assert found["cpu.features"].base == ("(not recorded)",) and found["cpu.features"].speed
    assert found["env.OMP_NUM_THREADS"].speed and found["lock_sha256"].speed
    assert {f.name for f in FACTS if f.speed} >= {"cpu.features", "version.torch", "torchbench_sha"}
