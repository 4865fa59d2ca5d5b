"""The preforked interpreter (prefork=true, the default): each job is a fresh child
forked from a process that already imported torch. Isolation holds: no state leaks
from one job to the next, and a crash or a timeout still ends only its own job."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from tests.conftest import (
    REPO,
    SEARCHPATH,
    ZYGOTES_INDUCTOR_CACHE,
    EarlySweeps,
    SessionSweep,
    early,
    left_behind,
    read_rows,
    run_cli,
    start_cli,
    wait_for_text,
)

from benchflow.backends.inductor import CACHE_KEYS, ISA_CHECK, ISA_CHECK_NAME
from benchflow.runner.zygote import KINDS

# The probe cases (tests.models.faults.ZygoteProbe) and the zygote each forks from.
PROBES = {"zygote_probe": "dynamo", "zygote_probe_inductor": "inductor", "zygote_probe_xla": "xla"}
# The sweep's log line of each zygote that got ready (runner/zygote.py: Zygote.wait_ready)
READY = re.compile(r"the (?P<kind>\w+) zygote \(pid \d+\) preloaded in [\d.]+ s: (?P<state>\{.*\})")


def probed(row: dict[str, Any]) -> list[dict[str, Any]]:
    """What a ZygoteProbe job printed: at build time, then after its first step."""
    out = (Path(row["job"]["dir"]) / "stdout.log").read_text().splitlines()
    return [json.loads(line) for line in out if line.startswith("{")]


def test_leaky_model_detects_shared_state(cases_sweep: SessionSweep) -> None:
    """The control: two Leaky models in one job's process do see each other's state."""
    row = cases_sweep.case("leaky_control")
    assert row["status"] == "failed", row["error"]
    error = row["error"]
    assert "state leaked from an earlier job: default dtype torch.float64" in error
    assert "environment variable BENCHFLOW_LEAK, module global _POLLUTED" in error
    assert "frame(s) in dynamo's cache" in error


def test_forked_jobs_share_no_state(cases_sweep: SessionSweep) -> None:
    # Each would fail at build time if it saw what the job before it left behind (the
    # control, just before them, leaves it all).
    rows = [cases_sweep.case(f"leaky_{n}") for n in (1, 2)]
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    assert {r["timing"]["launch"] for r in rows} == {"fork"}


def test_prefork_false_spawns(cases_sweep: SessionSweep) -> None:
    row = cases_sweep.case("spawned")
    assert row["status"] == "ok" and row["timing"]["launch"] == "spawn"
    # torch is imported in the spawned child, and not in a forked one: the harness's
    # start (fork or spawn, and the imports) is where it shows
    start = row["job"]["phases"]["start"]
    assert start > 0.2
    assert cases_sweep.case("leaky_1")["job"]["phases"]["start"] < start


def test_host_allocator_glibc_reaches_the_child_and_its_row(cases_sweep: SessionSweep) -> None:
    """host_allocator=glibc: the child leaves mallopt alone, and the row's config says so
    (a default job's config has no such key: its fingerprint is as before the setting)."""
    glibc, steady = cases_sweep.case("spawned"), cases_sweep.case("good")
    assert glibc["config"]["host_allocator"] == "glibc" and "host_allocator" not in steady["config"]
    for row, setting in ((glibc, "glibc"), (steady, "steady")):
        log = (Path(row["job"]["dir"]) / "stderr.log").read_text()
        assert f"host allocator: {setting}" in log


def test_crash_and_timeout_end_only_their_own_job(cases_sweep: SessionSweep) -> None:
    rows = [cases_sweep.case(name) for name in ("fault_segfault", "fault_hang", "good")]
    assert [r["status"] for r in rows] == ["crashed", "timeout", "ok"]
    assert "SIGSEGV" in rows[0]["error"]
    assert rows[2]["timing"]["launch"] == "fork"  # the zygote outlived both
    left = left_behind(cases_sweep.cwd)
    assert not left, left  # no job process, no grandchild (the hang's sleeper) left


def test_xla_jobs_fork_from_a_zygote_that_imported_torch_xla(cases_sweep: SessionSweep) -> None:
    """Lazy XLA and openxla jobs fork from the `xla` zygote (torch_xla already
    imported): each child creates its own PJRT client and runs. A warm XLA cache's
    variables are read at the first compile, not at import: that job forks from the
    same zygote, and its executables land in the shared cache."""
    names = ("xla_lazy_cold", "xla_openxla_cold", "xla_openxla_warm")
    rows = [cases_sweep.case(name) for name in names]
    assert [r["status"] for r in rows] == ["ok"] * 3, [r["error"] for r in rows]
    assert [r["backend"] for r in rows] == ["lazy_xla", "openxla", "openxla"]
    for row in rows:
        timing = row["timing"]
        assert timing["launch"] == "fork"
        expected = KINDS["xla"]  # torch_xla and dynamo
        assert timing["preloaded"] == list(expected), row["job"]["name"]
        assert row["experiment"]["xla"] == "PJRT"
        assert row["metrics"]["xla_ExecuteTime_number"][0] >= 2  # it really ran on XLA
        # torch_xla's import (6-9 s) is not paid by a job forked after it
        assert row["job"]["phases"]["start"] < 1.0, row["job"]["phases"]
    # the forked warm job's child set XLA's persistent cache at its first compile
    assert [p.name for p in (cases_sweep.cwd / "cache" / "xla").iterdir()]


def test_compiled_jobs_fork_from_a_zygote_that_imported_the_compile_stack(
    cases_sweep: SessionSweep,
) -> None:
    stack = list(KINDS["dynamo"])
    for name in ("recompiles_fixed", "acc_wrong_when_compiled", "profile_graph_breaks"):
        row = cases_sweep.case(name)
        assert row["timing"]["preloaded"] == stack, name
    # eager: the torch kind's modules alone (torch: the intervals need no scipy.stats)
    assert cases_sweep.case("good")["timing"]["preloaded"] == list(KINDS["torch"])
    # eager training too: building its optimizer imports dynamo, which it finds imported
    assert cases_sweep.case("tb_mlp_train")["timing"]["preloaded"] == stack
    # Inductor's own: the same, its C++ toolchain checked and the installs' cache keys
    # computed (calls, run in the zygote); the keys are no machine check
    inductor = cases_sweep.case("zygote_probe_inductor")["timing"]
    assert inductor["preloaded"] == [*stack, ISA_CHECK, CACHE_KEYS]
    assert set(inductor["machine_checks"]) == {ISA_CHECK}
    # The sweep's cache (BENCHFLOW_CACHE_DIR) began empty: the zygote ran the check, the
    # row and the report say so, and its answer is kept for the machine's next sweeps.
    check = inductor["machine_checks"][ISA_CHECK]
    assert check["from_cache"] is False and check["s"] > 0.1, check
    (kept,) = (cases_sweep.cwd / "cache" / "machine").glob("inductor-vec-isa-*.json")
    assert json.loads(kept.read_text())["valid"]
    (sweep,) = cases_sweep.result.sweep_dirs
    notes = (sweep / "report" / "report.md").read_text()
    assert f"{ISA_CHECK_NAME} ran in this sweep ({check['s']:.1f} s" in notes
    assert cases_sweep.case("good")["timing"]["machine_checks"] == {}  # the torch zygote ran none


def test_a_later_check_answers_every_test_build_from_the_machines_cache(
    cases_sweep: SessionSweep,
) -> None:
    """With the cases sweep's cache, a later process answers Inductor's vector-ISA check,
    and every test build past it (AVX-512's bf16, AMX's), without building or loading
    a library: Inductor's test build is made to fail, and the answer is the same."""
    (kept,) = (cases_sweep.cwd / "cache" / "machine").glob("inductor-vec-isa-*.json")
    answer = json.loads(kept.read_text())
    script = (
        "import json\n"
        "from torch._inductor import cpu_vec_isa\n"
        "def built(isa, code): raise AssertionError(f'a test build ran: {isa}')\n"
        "cpu_vec_isa.VecISA.check_build = built\n"
        "from benchflow.backends.inductor import check_vec_isa\n"
        "cached = check_vec_isa()\n"
        "print(json.dumps([cached, [str(i) for i in cpu_vec_isa.valid_vec_isa_list()]]))\n"
    )
    env = {**os.environ, "BENCHFLOW_CACHE_DIR": str(cases_sweep.cwd / "cache")}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cases_sweep.cwd / "isa-check-inductor-cache")
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    cached, valid = json.loads(out.stdout.splitlines()[-1])
    assert cached is True
    assert sorted(valid) == sorted(answer["valid"]) and answer["builds"]


def test_every_environment_of_one_python_shares_the_checks_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check's facts name the Python's version, not its interpreter's path: a new
    venv of the same Python and torch (a fresh clone's, a toolchain's) reads the answer
    the machine kept. Keyed by the path, each fresh clone of this repository ran the
    check again, and the cache held one answer a clone."""
    from benchflow.backends.inductor import _isa_facts

    here = _isa_facts()
    assert here["python"] == sys.version
    monkeypatch.setattr(sys, "executable", "/elsewhere/.venv/bin/python")
    assert _isa_facts() == here


def test_torchs_scratch_folder_goes_with_a_process_that_skips_its_teardown() -> None:
    """A job's child and a zygote end with os._exit; before it, the folder torch.distributed
    .nn's import made in TMPDIR, which only torch's atexit removes, is removed (the grid
    session sweep's TMPDIR is checked empty: test_headline.py)."""
    import torch.distributed.nn.jit.instantiator as made

    from benchflow.harness.process import remove_torch_scratch

    folder = Path(made.INSTANTIATED_TEMPLATE_DIR_PATH)
    assert folder.is_dir()
    remove_torch_scratch()
    assert not folder.exists()


def test_the_compile_stack_zygotes_start_nothing(cases_sweep: SessionSweep) -> None:
    """Imported (Inductor's toolchain checked), never used: a job forked from each
    compile-stack zygote (aot_eager's after other compiled jobs ran from it) finds no
    other process of it, and no thread but its main one. The zygotes were forked from
    the torch one, and a fork keeps only the thread that forked: any other would be one
    the preloads started (a PJRT client runs 6 on this VM, Inductor's pools their own)."""
    for case, kind in PROBES.items():
        row = cases_sweep.case(case)
        assert row["status"] == "ok", (case, row["error"])  # else: the zygote had processes
        assert row["timing"]["launch"] == "fork"
        assert row["timing"]["preloaded"] == list(KINDS[kind]), case
        built = probed(row)[0]
        assert built["zygote_threads"] == [built["zygote_pid"]], (case, built)
    compiled_before = cases_sweep.case("recompiles_fixed")["job"]["num"]
    assert compiled_before < cases_sweep.case("zygote_probe")["job"]["num"]


def test_the_zygotes_write_nothing_to_inductors_cache(cases_sweep: SessionSweep) -> None:
    """Inductor's toolchain check builds and loads a test library in Inductor's cache:
    the inductor zygote runs it with that cache in a folder of its own, removed after.
    The cache the zygotes inherit (the sweep's TORCHINDUCTOR_CACHE_DIR; each job sets
    its own) was never created, and the Inductor job's own was empty before it compiled."""
    assert not (cases_sweep.cwd / ZYGOTES_INDUCTOR_CACHE).exists()
    built = probed(cases_sweep.case("zygote_probe_inductor"))[0]
    assert built["cache_files"] == []
    # ... while the key Inductor's caches hash Triton's install into was computed there
    # (a job of the dynamo zygote, which does not compute it, is the control)
    assert built["triton_key_known"] is True
    assert probed(cases_sweep.case("zygote_probe"))[0]["triton_key_known"] is False


def test_no_zygote_holds_a_pjrt_client_or_a_cuda_context(cases_sweep: SessionSweep) -> None:
    """Before it forks anything, each zygote checks its own state (zygote.pristine:
    torch_xla's own test of whether its runtime exists, which creates none; CUDA's;
    its processes and threads) and would refuse to run jobs otherwise; the sweep's log
    says what it found."""
    log = cases_sweep.log()
    found = {m["kind"]: json.loads(m["state"]) for m in READY.finditer(log)}
    assert set(found) == set(KINDS), log[-3000:]
    assert not READY.search(cases_sweep.result.stdout + cases_sweep.result.stderr)  # the log's
    assert "torch_xla" in KINDS["xla"]  # its check is the runtime's own, not a default
    for kind, state in found.items():
        assert state["xla_runtime_initialized"] is False and state["cuda_initialized"] is False
        assert state["children"] == [], (kind, state)
        if kind != "torch":  # forked from the torch zygote (which has numpy's OpenBLAS threads)
            assert state["threads"] == 1, (kind, state)


def test_a_forked_inductor_job_finds_its_cpp_header_worked_out(cases_sweep: SessionSweep) -> None:
    """The inductor zygote asked for the C++ kernels' precompiled header as a kernel will
    (backends/inductor._cpu_header): its forked job's first kernel found the answer (0.12
    s of preprocessor and hash a process here), and worked nothing out again; the
    dynamo zygote, which does not ask, is the control."""
    built, stepped = probed(cases_sweep.case("zygote_probe_inductor"))
    assert built["cpp_header_asked"] == {"computed": 1, "found": 0}
    assert stepped["cpp_header_asked"]["computed"] == 1, stepped
    assert stepped["cpp_header_asked"]["found"] >= 1, stepped
    assert probed(cases_sweep.case("zygote_probe"))[0]["cpp_header_asked"]["computed"] == 0


def test_a_forked_inductor_job_compiles_cold_with_workers_of_its_own(
    cases_sweep: SessionSweep,
) -> None:
    """The zygote checked Inductor's toolchain; the job still compiles its graph itself,
    from an empty cache, and its first compile starts Inductor's compile workers (on
    the CPU a thread pool, `compile_threads` wide: TORCHINDUCTOR_COMPILE_THREADS=2 in
    the sweep's environment, as on 2 cores; one core gets none) in the job, while the
    zygote still has its one thread and no process. The aot_eager probe, which
    compiles no code, is the control: no such pool."""
    row = cases_sweep.case("zygote_probe_inductor")
    cold = row["metrics"]
    assert cold["cold_dynamo_compile_time_s"] > 0 and cold["cold_dynamo_unique_graphs"] >= 1
    assert cold["cold_inductor_fxgraph_cache_miss"] >= 1
    assert cold["cold_inductor_fxgraph_cache_hit"] == 0
    built, stepped = probed(row)
    assert stepped["compile_threads"] == 2
    assert any(t.startswith("ThreadPoolExecutor") for t in stepped["threads"]), stepped
    assert stepped["zygote_threads"] == [built["zygote_pid"]], stepped
    assert stepped["zygote_others"] == [] and stepped["own"] == []  # Triton's pool: CUDA only
    _, control = probed(cases_sweep.case("zygote_probe"))
    assert not any(t.startswith("ThreadPoolExecutor") for t in control["threads"]), control


def test_a_zygote_with_a_thread_or_a_process_refuses_to_fork() -> None:
    """The check a zygote runs before its first fork can fail: a thread started and a
    process left running after the preloads are named, and the zygote is not used."""
    code = (
        "import subprocess, threading, time, psutil\n"
        "from benchflow.runner.zygote import ZygoteError, pristine\n"
        "threads = pristine(1)['threads']\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "sleeper = subprocess.Popen(['sleep', '60'])\n"
        # under load, /proc may show a child's command line empty for a moment after exec
        "while not psutil.Process(sleeper.pid).cmdline():\n"
        "    time.sleep(0.01)\n"
        "try:\n"
        "    pristine(threads)\n"
        "except ZygoteError as exc:\n"
        "    print(exc)\n"
        "sleeper.kill()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "not forking from this zygote (threads: 2; children: ['sleep 60'])" in out.stdout, out


def test_the_compile_stack_zygote_is_forked_from_the_torch_one(cases_sweep: SessionSweep) -> None:
    """The sweep began with eager jobs (a torch zygote): its compile-stack zygote was
    forked from that one, so torch was imported once, and it belongs to no process of
    the sweep (it outlives neither: test_crash_and_timeout_end_only_their_own_job)."""
    row = cases_sweep.case("zygote_probe")
    seen = probed(row)[0]
    assert seen["zygote"][-3:-1] == ["benchflow.runner.zygote", "torch"], seen
    assert "benchflow" not in " ".join(seen["its_parent"]), seen  # not the sweep's child
    assert cases_sweep.case("good")["job"]["num"] < row["job"]["num"]  # an eager job first


@early("dead_zygote")
def _zygote_killed_under_a_job(root: Path) -> dict[str, Any]:
    """The zygote SIGKILLed while a job (a hang) runs: what the sweep did and left."""
    log = root / "stderr.log"
    proc = start_cli(
        [
            "-m",
            SEARCHPATH,
            "model=fault_hang,matmul_chain",
            "model.size=tiny",
            "dtype=float32",
            "repeat=1",
            "iterations_per_run=1",
            "warmup=0",
            "timeout_s=60",
            "mlflow.enabled=false",
        ],
        root,
        log,
    )
    try:
        wait_for_text(log, "[1/2] fault_hang", proc)
        child = root / "multirun"
        while not any("pid " in p.read_text() for p in child.glob("*/*/0/stderr.log")):
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)
        time.sleep(2)  # the hang's step (and its grandchild) is running
        zygotes = [
            p
            for p in psutil.Process(proc.pid).children()
            if "benchflow.runner.zygote" in " ".join(p.cmdline())
        ]
        for zygote in zygotes:
            zygote.kill()
        code = proc.wait(timeout=600)  # niced beside the sweeps: slow, not stuck
    finally:
        if proc.poll() is None:
            proc.kill()
    sweeps = list(root.glob("multirun/*/*"))
    return {
        "zygotes": len(zygotes),
        "code": code,
        "log": log.read_text(),
        "rows": read_rows(sweeps[0]) if sweeps else [],
        "left": left_behind(root),
    }


def test_a_dead_zygote_ends_only_the_running_job(early_sweeps: EarlySweeps) -> None:
    """The zygote SIGKILLed while a job runs (as the OOM killer might): that job is
    `crashed`, naming the zygote, no process of it is left, and the next job runs
    forked from a new zygote."""
    got = early_sweeps.result("dead_zygote")
    assert got["zygotes"] == 1 and got["code"] == 0, got["log"][-3000:]
    rows = got["rows"]
    assert [r["status"] for r in rows] == ["crashed", "ok"]
    assert "preforked interpreter" in rows[0]["error"]
    assert rows[1]["timing"]["launch"] == "fork"
    assert rows[0]["job"]["wall_time_s"] < 30  # not left to run into timeout_s
    assert not got["left"], got["left"]


@early("one_compile")
def _one_compile(root: Path) -> dict[str, Any]:
    """casts_its_cache (whose first call changes its state, so that its second call
    compiles again) in three processes, with Inductor and eager: the Inductor job's
    later processes fork with its step compiled (harness/prebuilt.warm_here)."""
    args = ["-m", SEARCHPATH, "model=casts_its_cache", "model.size=tiny", "dtype=float32"]
    args += ["dynamo=inductor,none", "processes=3", "repeat=3", "iterations_per_run=2"]
    res = run_cli([*args, "warmup=1", "mlflow.enabled=false"], root)
    (sweep,) = res.sweep_dirs
    steps = json.loads((sweep / "plan.json").read_text())["steps"]
    # AOTInductor's export and compile, which no cache serves
    (root / "aoti").mkdir()
    aoti = ["-m", SEARCHPATH, "model=matmul_chain", "model.size=tiny", "dtype=float32"]
    aoti += ["dynamo=aot_inductor", "processes=3", "repeat=3", "iterations_per_run=2"]
    aoti_res = run_cli([*aoti, "warmup=1", "mlflow.enabled=false"], root / "aoti")
    # each job's later processes: what the plan has them fork from
    later = [[s["warm"] for s in steps if s["job"] == n and s["process"]] for n in (0, 1)]
    return {"result": res, "later": later, "aoti": aoti_res}


def test_a_jobs_later_processes_fork_with_its_step_compiled(early_sweeps: EarlySweeps) -> None:
    """The plan gives the Inductor job a step key and the eager one none; the Inductor
    job's first process compiles cold (the row's compile), its two later ones fork from
    one interpreter that compiled the step by calling it, so their first call is a
    step, not a compile (nor the recompile the model's second call makes), and gives
    the first process's output."""
    got = early_sweeps.result("one_compile")
    res = got["result"]
    assert res.returncode == 0, res.stderr[-3000:]
    rows = {r["backend"]: r for r in res.rows()}
    assert [r["status"] for r in rows.values()] == ["ok", "ok"], res.stderr[-3000:]
    inductor, eager = got["later"]
    assert all(w["step"] for w in inductor) and not any(w["step"] for w in eager)
    processes = rows["inductor"]["timing"]["processes"]
    assert [p["shared_step_s"] is None for p in processes] == [True, False, False]
    assert len({p["shared_step_s"] for p in processes[1:]}) == 1  # one interpreter's calls
    cold = processes[0]["first_iter_time_s"]
    assert rows["inductor"]["metrics"]["first_iter_time_s"] == cold
    assert all(p["first_iter_time_s"] * 5 < cold for p in processes[1:]), processes
    assert all(p["shared_step_s"] is None for p in rows["eager"]["timing"]["processes"])
    folder = Path(rows["inductor"]["job"]["dir"])
    assert "compiled before the fork" in (folder / "process1.stderr.log").read_text()
    results = [json.loads(f.read_text()) for f in sorted(folder.glob("*child_result.json"))]
    # dynamo's own count of what each process's first call compiled: the first process
    # its graph; the later ones nothing (with one call before the fork, the recompile
    # the model's second call makes)
    compiled = [r["metrics"]["cold_dynamo_frames_ok"] for r in results]
    assert compiled == [1, 0, 0], compiled
    digests = [r["digest"] for r in results]
    assert all(d == digests[0] for d in digests), digests
    # the step's FLOPs are counted once, in the first process, whose they are in the row
    # (8 matmuls of 256 x 256 on a batch of 512: eager's as Inductor's)
    assert ["flops" in r for r in results] == [True, False, False]
    for row in rows.values():
        assert row["flops"]["per_step"] == results[0]["flops"]["per_step"] == 8 * 2 * 512 * 256**2
        assert row["flops"]["per_s_ci_low"] is not None  # three processes: an interval
    # an AOTInductor job's later processes too: no export or compile of their own
    aoti = got["aoti"]
    assert aoti.returncode == 0, aoti.stderr[-3000:]
    (row,) = aoti.rows()
    assert row["status"] == "ok", row["error"]
    processes = row["timing"]["processes"]
    assert [p["shared_step_s"] is None for p in processes] == [True, False, False]
    cold = processes[0]["first_iter_time_s"]
    assert all(p["first_iter_time_s"] * 5 < cold for p in processes[1:]), processes


SHARED = [(model, test) for model in ("llama", "tb") for test in ("eval", "train")]


def test_a_shared_build_is_the_build_a_job_makes_itself(cases_sweep: SessionSweep) -> None:
    """share_build=true: a built-in model and a TorchBench one, eval and train, built once
    in a zygote of their own and finished (cast, moved) in each job, give the job the
    weights, inputs and RNG state (torch, numpy, Python) of a job that built its own, the
    same first output and the same verify code."""
    builds = cases_sweep.builds()
    for model, test in SHARED:
        on, off = (cases_sweep.case(f"share_{model}_{test}_{v}") for v in ("on", "off"))
        assert [on["status"], off["status"]] == ["ok", "ok"], [on["error"], off["error"]]
        assert on["timing"]["shared_build_s"] is not None, model  # it did share
        assert off["timing"]["shared_build_s"] is None
        built_on, built_off = builds[on["job"]["dir"]], builds[off["job"]["dir"]]
        assert [built_on["prebuilt"], built_off["prebuilt"]] == [True, False]
        assert "error" not in built_on and "error" not in built_off, built_on
        for what in ("weights", "inputs", "torch_rng", "numpy_rng", "python_rng"):
            assert built_on[what] == built_off[what], (model, test, what)
        assert on["digest"] == off["digest"] and on["digest"], (model, test)
        assert on["verification_code"] == off["verification_code"] == "PASS", (model, test)


def test_jobs_of_one_build_fork_from_one_zygote_in_turn(cases_sweep: SessionSweep) -> None:
    """A second job of a build is forked from the zygote that built it, after the first
    one trained its own copy: it finds the model as built (the first one's writes stayed
    in that job), and the sweep ran it right after the first (listed apart)."""
    builds = cases_sweep.builds()
    for model in ("llama", "tb"):
        first, again = (cases_sweep.case(f"share_{model}_train_{v}") for v in ("on", "again"))
        assert again["status"] == "ok", again["error"]
        assert again["job"]["num"] == first["job"]["num"] + 1
        built_first, built_again = builds[first["job"]["dir"]], builds[again["job"]["dir"]]
        assert built_again["parent_pid"] == built_first["parent_pid"]  # the model's zygote
        assert again["timing"]["shared_build_s"] == first["timing"]["shared_build_s"]
        for what in ("weights", "inputs", "torch_rng", "numpy_rng", "python_rng"):
            assert built_again[what] == built_first[what], (model, what)
        assert again["digest"] == first["digest"], model
    # the zygote built the model it forks for: its jobs' parent is not the kind's zygote
    off = builds[cases_sweep.case("share_llama_train_off")["job"]["dir"]]
    assert (
        off["parent_pid"]
        != builds[cases_sweep.case("share_llama_train_on")["job"]["dir"]]["parent_pid"]
    )


ACROSS = {"eager": "", "openxla": "_openxla"}  # share_llama_eval_on…, share_llama_eval_off…


def test_one_build_serves_a_models_jobs_on_every_backend(cases_sweep: SessionSweep) -> None:
    """share_build across zygote kinds: llama's eager and openxla jobs (the torch and xla
    kinds) fork from one build, in one model zygote forked from a zygote that preloaded
    both kinds' modules (the xla kind's hold the torch kind's). Each job has the weights,
    inputs, RNG states, first output and verify code of the same job that built its own
    (on 2 threads: tests/test_build_threads.py, in make test-full)."""
    from benchflow.runner.zygote import preloads, union

    builds = cases_sweep.builds()
    on = {b: cases_sweep.case(f"share_llama_eval_on{s}") for b, s in ACROSS.items()}
    off = {b: cases_sweep.case(f"share_llama_eval_off{s}") for b, s in ACROSS.items()}
    for backend in ACROSS:
        mine, own = on[backend], off[backend]
        assert [mine["status"], own["status"]] == ["ok", "ok"], [mine["error"], own["error"]]
        for what in ("dynamo", "xla"):
            assert mine["experiment"][what] == own["experiment"][what], backend
        assert mine["experiment"]["num_threads"] == own["experiment"]["num_threads"]
        assert mine["timing"]["shared_build_s"] is not None, backend
        assert own["timing"]["shared_build_s"] is None, backend
        built, built_own = builds[mine["job"]["dir"]], builds[own["job"]["dir"]]
        assert [built["prebuilt"], built_own["prebuilt"]] == [True, False], backend
        for what in ("weights", "inputs", "torch_rng", "numpy_rng", "python_rng"):
            assert built[what] == built_own[what], (backend, what)
        assert mine["digest"] == own["digest"] and mine["digest"], backend
        assert mine["verification_code"] == own["verification_code"] == "PASS", backend
    # one build, one process: every job's parent is the same model zygote
    assert len({builds[on[b]["job"]["dir"]]["parent_pid"] for b in ACROSS}) == 1
    assert len({on[b]["timing"]["shared_build_s"] for b in ACROSS}) == 1
    both = union(["torch", "xla"])
    assert both == "xla"
    for backend in ACROSS:
        assert on[backend]["timing"]["preloaded"] == list(preloads(both)), backend
    assert off["eager"]["timing"]["preloaded"] == list(KINDS["torch"])
    # run one after another, at the place of the first
    nums = sorted(on[b]["job"]["num"] for b in ACROSS)
    assert nums == list(range(nums[0], nums[0] + len(ACROSS)))


def test_zygote_unions_name_the_fewest_kinds() -> None:
    """A union of zygotes drops a kind another one's preloads hold, keeps the
    environment's key, and preloads each module once, in its kinds' order."""
    from benchflow.runner.zygote import named, preloads, union

    assert union(["torch"]) == "torch"
    assert union(["torch", "dynamo"]) == "dynamo"
    assert union(["xla", "inductor", "dynamo", "torch"]) == "inductor+xla"
    assert union([named("torch", "k1"), named("xla", "k1")]) == named("xla", "k1")
    with pytest.raises(AssertionError, match="several environments"):
        union([named("torch", "k1"), "xla"])
    got = preloads("inductor+xla")
    assert len(got) == len(set(got)) == len(set(KINDS["inductor"]) | set(KINDS["xla"]))
    assert got[: len(KINDS["inductor"])] == KINDS["inductor"]


def test_a_message_right_behind_another_is_read_at_once() -> None:
    """The zygote's pid message and a fast job's exit code can arrive in one read: the
    second must be returned at once, not after the job's whole timeout (a sweep once
    sat 300 s after a job that failed in a second, under the suite's load)."""
    from benchflow.runner.zygote import (
        Exited,
        Forked,
        Lines,
        Zygote,
        ZygoteError,
        decode,
        encode,
    )

    r, w = os.pipe()
    zygote = Zygote.__new__(Zygote)  # the reader alone: no process behind it
    zygote._lines, zygote.proc, zygote.pid = Lines(r), None, 0
    last = encode(Exited(0, 7))
    os.write(w, encode(Forked(7)) + encode(Exited(1, 7)) + last[:6])
    started = time.monotonic()
    assert zygote._read(5.0) == Forked(7)
    assert zygote.wait(5.0) == 1
    assert time.monotonic() - started < 1.0
    assert zygote._read(0.2) is None  # half a message: not yet
    os.write(w, last[6:])
    assert zygote.wait(5.0) == 0
    os.close(w)
    with pytest.raises(ZygoteError, match="the zygote exited"):
        zygote._read(5.0)
    with pytest.raises(ZygoteError, match="not a message of the zygote's protocol"):
        decode(b'{"returned": 0}\n')


_BUILD_LOADING_A_BLAS = """
import json, sys
from benchflow.harness.process import unsafe_threads
if sys.argv[1] == "plain":  # does loading scipy's BLAS start a thread on this host?
    before = set(unsafe_threads())
    import scipy.linalg
    print(json.dumps({"started": len(set(unsafe_threads()) - before)}))
    sys.exit()
import torch
from tests.test_config import composed
from benchflow.config.validate import parse
from benchflow.harness.prebuilt import build_here
from benchflow.sweep.plan import plan_config
overrides = ["model=llama", "model.name=loads_a_blas", "model.size=tiny", "dtype=float32",
             "model.builtin=tests.models.faults:LoadsABlas"]
cfg = plan_config(parse(composed(*overrides)), 0, []).config
before = set(unsafe_threads())
assert "scipy" not in sys.modules  # its BLAS is loaded by the build, for the first time
built = build_here(cfg)
print(json.dumps({"started": len(set(unsafe_threads()) - before), "pid": built.pid}))
"""


def test_a_build_that_loads_a_blas_is_shared_all_the_same() -> None:
    """TorchBench's dlrm imports sklearn, whose scipy loads an OpenBLAS of its own that
    starts a pool of threads (one on 2 cores): the built warm process refused it ("building
    dlrm started 1 thread(s)") and each of the model's jobs built it again (15-20 s each).
    A build runs on one thread: a BLAS it loads starts no pool, and the build is shared."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("OPENBLAS_NUM_THREADS", None)

    def started(how: str) -> dict[str, Any]:
        code = [sys.executable, "-c", _BUILD_LOADING_A_BLAS, how]
        out = subprocess.run(code, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        return dict(json.loads(out.stdout.splitlines()[-1]))

    if len(os.sched_getaffinity(0)) < 2 or started("plain")["started"] == 0:
        pytest.skip("scipy's OpenBLAS starts no thread on one core: nothing to leave out")
    built = started("built")
    assert built["started"] == 0 and built["pid"] > 0, built


def test_only_threads_known_to_survive_a_fork_are_left_out_of_the_count() -> None:
    """A zygote forks jobs only with no thread of its own but those of
    FORK_SAFE_THREADS' names (jemalloc's background thread, which pyarrow starts): a
    thread of that name is not counted, any other is."""
    import ctypes
    import threading

    from benchflow.harness.process import FORK_SAFE_THREADS, threads_unsafe_to_fork

    libc = ctypes.CDLL(None, use_errno=True)
    before = threads_unsafe_to_fork()
    stop, named = threading.Event(), threading.Barrier(3)

    def run(name: bytes) -> None:
        libc.prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME: its comm
        named.wait()
        stop.wait()

    threads = [
        threading.Thread(target=run, args=(n,), daemon=True)
        for n in (b"jemalloc_bg_thd", b"some_pool")
    ]
    for t in threads:
        t.start()
    named.wait()
    try:
        assert "jemalloc_bg_thd" in FORK_SAFE_THREADS
        assert threads_unsafe_to_fork() == before + 1  # some_pool's alone
    finally:
        stop.set()
        for t in threads:
            t.join()


def test_what_a_warm_process_prints_goes_to_the_sweeps_log(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A warm process's own output (a library's warning as it imports, its traceback) is
    the machinery's: appended to the sweep's log (`Pool(output)`: sweep/run.py gives it
    benchflow.log), never on the terminal. A zygote of a kind it does not know ends at
    once, saying why, before any import of torch."""
    from benchflow.runner.zygote import Zygote, ZygoteError

    log = tmp_path / "benchflow.log"
    log.write_text("a line of the sweep's own\n")
    zygote = Zygote("nosuchkind", output=log)
    with pytest.raises(ZygoteError, match="the zygote exited"):
        zygote.wait_ready(60)
    zygote.close()
    said = log.read_text()
    assert said.startswith("a line of the sweep's own\n"), said
    assert "KeyError: 'nosuchkind'" in said, said
    assert "nosuchkind" not in capfd.readouterr().err
