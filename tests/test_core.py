"""Units on the typed core: statuses, the measured mark, the backend registry, the plan.

No sweep runs here: each stage is called on typed records directly."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from tests.conftest import REPO

from benchflow import backends
from benchflow.config.errors import ConfigError, InvalidCombination
from benchflow.config.schema import (
    BenchConfig,
    MlflowConfig,
    ModelConfig,
    SuiteConfig,
    is_measured,
    measured_flat,
)
from benchflow.config.store import CONF_DIR, register
from benchflow.core.job import Job, fingerprint
from benchflow.core.status import INVALID_PREFIX, Status, status_of
from benchflow.sweep.plan import plan_job, resolve
from benchflow.sweep.resume import defining

register()


def _cfg(**kw: object) -> BenchConfig:
    return BenchConfig(model=ModelConfig(name="llama", builtin="x:Y"), **kw)  # type: ignore[arg-type]


def composed(*overrides: str):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


# --- Status ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "failed", "none", "all_"),
    [
        (Status.OK, False, False, True),
        (Status.FAILED, True, False, True),
        (Status.OOM, True, False, True),
        (Status.CRASHED, True, False, True),
        (Status.TIMEOUT, True, False, True),
        (Status.INTERRUPTED, True, True, True),
        (Status.SKIPPED, True, True, True),
        (Status.INVALID, True, True, True),
    ],
)
def test_each_status_says_whether_it_runs_again(
    status: Status, failed: bool, none: bool, all_: bool
) -> None:
    assert (status.runs_again("failed"), status.runs_again("none"), status.runs_again("all")) == (
        failed,
        none,
        all_,
    )


def test_statuses_close_mlflow_runs_and_count_as_configurations() -> None:
    closing = {s: s.mlflow_run_status for s in Status}
    assert closing[Status.OK] == closing[Status.SKIPPED] == "FINISHED"
    assert closing[Status.INTERRUPTED] == "KILLED"
    assert {s for s, c in closing.items() if c == "FAILED"} == {
        Status.FAILED,
        Status.OOM,
        Status.CRASHED,
        Status.TIMEOUT,
    }
    assert [s for s in Status if not s.counts_as_configuration] == [Status.INVALID]
    # exit 1 alone, fail_fast in a sweep: a failure or an interruption, not a skip
    assert {s for s in Status if s.went_wrong} == {
        Status.FAILED,
        Status.OOM,
        Status.CRASHED,
        Status.TIMEOUT,
        Status.INTERRUPTED,
    }
    assert [s for s in Status if not s.counts_in_passrate] == [Status.SKIPPED, Status.INVALID]
    assert all(s.meaning for s in Status)


def test_rows_written_before_invalid_existed_read_as_invalid() -> None:
    assert status_of("skipped", INVALID_PREFIX + "dynamo=inductor ... xla=PJRT") is Status.INVALID
    assert status_of("skipped", "listed in skip.all") is Status.SKIPPED
    assert status_of("ok") is Status.OK
    with pytest.raises(ValueError):
        status_of("exploded")


# --- the measured mark ---------------------------------------------------------------


def test_the_measured_mark_is_read_by_fingerprint_params_and_resume() -> None:
    base = _cfg()
    # not measured: the fingerprint does not move, the flat settings do not hold it
    for change in (
        {"timeout_s": 5.0},
        {"mlflow": MlflowConfig(experiment="x")},
        {"prefork": False},
        {"share_build": True},
        {"retry": "all"},
        {"baseline": "eager"},
        {"memory_limit_gb": 2.0},
    ):
        assert fingerprint(dataclasses.replace(base, **change)) == fingerprint(base), change
        for key in change:
            assert not is_measured(key)
            assert not any(k.split(".")[0] == key for k in measured_flat(base))
    # measured: it moves, and it is a flat setting
    for key, value in (("repeat", 9), ("dtype", "bfloat16"), ("seed", 1), ("warmup", 0)):
        assert fingerprint(dataclasses.replace(base, **{key: value})) != fingerprint(base)
        assert is_measured(key) and key in measured_flat(base)
    assert is_measured("model.size") and is_measured("dynamo") and is_measured("suite.rules.x")
    assert not is_measured("mlflow.experiment") and not is_measured("experiment")
    # bulky: in the fingerprint, not in the flat view
    ruled = dataclasses.replace(base, suite=SuiteConfig(rules={"skip": {"all": ["llama"]}}))
    assert fingerprint(ruled) != fingerprint(base)
    assert not any(k.startswith("suite.rules") for k in measured_flat(ruled))
    # resume: a sweep is defined by its measured overrides and its named experiment
    args = ["model=llama,dlrm", "timeout_s=5", "mlflow.experiment=x", "retry=all", "repeat=3"]
    assert defining([*args, "experiment=headline"]) == sorted(
        ["model=llama,dlrm", "repeat=3", "experiment=headline"]
    )


# --- the backend registry -----------------------------------------------------------


def test_every_dynamo_option_has_a_backend_and_every_backend_an_option() -> None:
    yaml_options = {p.stem for p in (CONF_DIR / "dynamo").glob("*.yaml")}
    assert yaml_options == set(backends.dynamo_choices())
    labels = list(backends.REGISTRY)
    assert len(labels) == len(set(labels))
    assert {"eager", "lazy_xla", "dynamo_eager", "inductor", "openxla"} <= set(labels)
    # each dynamo option has exactly one backend that xla=auto picks
    for option in backends.dynamo_choices():
        assert sum(b.auto for b in backends.REGISTRY.values() if b.dynamo == option) == 1


@pytest.mark.parametrize(
    ("dynamo", "xla", "label"),
    [
        ("none", "auto", "eager"),
        ("none", "none", "eager"),
        ("none", "PJRT", "lazy_xla"),
        ("eager", "auto", "dynamo_eager"),
        ("inductor", "auto", "inductor"),
        ("openxla", "auto", "openxla"),
        ("openxla", "PJRT", "openxla"),
    ],
)
def test_select_resolves_xla_auto(dynamo: str, xla: str, label: str) -> None:
    backend = backends.select(dynamo, xla, "cpu")
    assert backend.label == label
    assert backends.of_row(dynamo, backend.xla_value()).label == label


@pytest.mark.parametrize(
    ("dynamo", "xla", "accelerator", "says"),
    [
        ("inductor", "PJRT", "cpu", "does not compile for the XLA device"),
        ("openxla", "none", "cpu", "runs on the XLA device"),
        ("cudagraphs", "auto", "cpu", "needs a CUDA GPU"),
    ],
)
def test_select_refuses_what_cannot_exist(
    dynamo: str, xla: str, accelerator: str, says: str
) -> None:
    with pytest.raises(InvalidCombination, match=says):
        backends.select(dynamo, xla, accelerator)


def test_backends_answer_what_the_stages_ask() -> None:
    eager, lazy, ind, oxla = (backends.get(n) for n in ("eager", "lazy_xla", "inductor", "openxla"))
    assert not eager.has_compile_step and ind.has_compile_step and lazy.has_compile_step
    assert lazy.on_xla and oxla.on_xla and not ind.on_xla  # ir=hlo and the XLA dump apply
    assert ind.generates_code and not oxla.generates_code
    assert oxla.zygote({}) == "xla" and lazy.zygote({}) == "xla"
    assert ind.zygote({}) == "inductor" and eager.zygote({}) == "torch"  # + its C++ toolchain
    assert backends.get("aot_eager").zygote({}) == "dynamo"
    # an optimizer's construction imports dynamo: training forks from the compile stack
    assert eager.zygote({}, trains=True) == "dynamo" and lazy.zygote({}, trains=True) == "xla"
    # any other XLA variable counts as read at torch_xla's import, which then happens
    # after the fork
    assert oxla.zygote({"XLA_USE_BF16": "1"}) == "dynamo"
    # the IR dump's variables are read at the first sync, XLA_FLAGS at the first device
    # use, the persistent cache's at the first compile
    ir_env = {"XLA_SAVE_TENSORS_FILE": "/g", "XLA_SAVE_TENSORS_FMT": "hlo", "XLA_FLAGS": "--x"}
    warm = {"XLA_PERSISTENT_CACHE_PATH": "/c", "XLA_PERSISTENT_CACHE_READ_ONLY": "0"}
    assert oxla.zygote(ir_env) == "xla" and ind.zygote(ir_env) == "inductor"
    assert oxla.zygote(warm) == "xla" and lazy.zygote(warm) == "xla"
    assert backends.baseline_label("none") == "eager"


def test_the_registry_and_planning_import_no_torch() -> None:
    code = (
        "import sys; import benchflow.backends, benchflow.sweep.plan;"
        "print(sorted(m for m in ('torch', 'torch_xla', 'mlflow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the plan stage -----------------------------------------------------------------


def test_plan_makes_a_job_once_with_its_identity() -> None:
    job = plan_job(composed("model=llama", "dynamo=openxla", "model.size=tiny"), 3, ["x=y"])
    assert job.backend == "openxla" and job.num == 3 and job.overrides == ("x=y",)
    assert job.config.xla.name == "PJRT" and job.config.dtype == "bfloat16"  # the suite's
    assert job.invalid is None and job.skip is None
    assert job.sources["dtype_source"] == "suite"
    again = Job.from_dict(job.to_dict())
    assert again == job and again.fingerprint == job.fingerprint
    # xla=auto and xla=PJRT with openxla are the same configuration
    same = plan_job(composed("model=llama", "dynamo=openxla", "xla=PJRT", "model.size=tiny"), 4, [])
    assert same.fingerprint == job.fingerprint


def test_an_invalid_pair_is_a_job_that_never_runs_and_an_error_alone() -> None:
    overrides = ("model=llama", "dynamo=inductor", "xla=PJRT")
    job = plan_job(composed(*overrides), 0, overrides)
    assert job.invalid and job.invalid.startswith(INVALID_PREFIX) and "xla=PJRT" in job.invalid
    assert job.backend == "inductor"
    with pytest.raises(InvalidCombination):
        plan_job(composed(*overrides), 0, overrides, single=True)


def test_settings_that_do_not_apply_are_notes_in_a_sweep_and_errors_alone() -> None:
    overrides = ("model=llama", "dynamo=inductor", "ir=text")
    job = plan_job(composed(*overrides), 0, overrides)
    assert any("has no XLA IR" in n for n in job.notes)
    with pytest.raises(ConfigError, match="has no XLA IR"):
        plan_job(composed(*overrides), 0, overrides, single=True)


def test_jobs_share_a_build_only_where_the_build_is_the_same() -> None:
    from benchflow.models.sharing import build_key
    from benchflow.sweep.steps import build_key as job_key

    def job(*overrides: str) -> Job:
        return plan_job(composed("model=llama", "share_build=true", *overrides), 0, overrides)

    base = job()
    assert job_key(base) == build_key(base.config) is not None
    # what the build does not read: the backend, timing, verify
    for other in (("dynamo=inductor",), ("repeat=2", "warmup=0"), ("verify=true",)):
        assert job_key(job(*other)) == job_key(base), other
    # what it reads, or the dtype it is cast to
    for other in (("seed=1",), ("test=train",), ("batch_size=2",), ("model.size=tiny",)):
        assert job_key(job(*other)) != job_key(base), other
    # glibc's own malloc thresholds: a build made with the steady ones would fix them
    assert job_key(job("host_allocator=glibc")) != job_key(base)
    assert job_key(job("dtype=float32")) != job_key(base)  # llama's suite default: bfloat16
    assert job_key(job("prefork=false")) is None
    assert job_key(plan_job(composed("model=llama"), 0, [])) == job_key(base)  # on by default
    assert job_key(plan_job(composed("model=llama", "share_build=false"), 0, [])) is None


def test_the_plan_compiles_a_step_once_for_a_jobs_later_processes_where_it_can() -> None:
    """A compiled warm process (sweep/steps.step_key): an Inductor, aot_eager or
    AOTInductor job of several processes, in eval on the host, with share_build; its key
    is the config's but for what each process is told apart. None elsewhere: eager, XLA,
    training, one process, share_build=false, prefork=false, an env. variable (spawned)."""
    from benchflow.models.sharing import step_key as config_key
    from benchflow.sweep.process import process_config
    from benchflow.sweep.steps import plan_steps, step_key

    def job(*overrides: str) -> Job:
        return plan_job(composed("model=llama", *overrides), 0, overrides)

    base = job("dynamo=inductor")
    assert step_key(base) == config_key(base.config) is not None
    assert step_key(job("dynamo=aot_eager")) is not None
    # (llama is on the suite's list of models export cannot take: skipped, no step)
    assert step_key(job("dynamo=aot_inductor")) is None
    resnet = ("model=resnet", "dynamo=aot_inductor")
    assert step_key(plan_job(composed(*resnet), 0, resnet)) is not None
    first, *later = plan_steps([base], True, {})
    assert first.warm and first.warm.step is None and first.warm.stage == "imported"
    assert [s.warm.step if s.warm else None for s in later] == [step_key(base)] * 2
    told = process_config(base.config, steps=7)  # a later process's own config
    assert told != base.config and config_key(told) == step_key(base)
    assert step_key(job("dynamo=inductor", "+inductor.freezing=true")) != step_key(base)
    for other in (
        ("dynamo=none",),
        ("dynamo=openxla",),
        ("dynamo=inductor", "test=train"),
        ("dynamo=inductor", "repeat=3"),  # one process
        ("dynamo=inductor", "share_build=false"),
        ("dynamo=inductor", "prefork=false"),
        ("dynamo=inductor", "+env.SOME_VAR=1"),
    ):
        assert step_key(job(*other)) is None, other


def test_a_sweeps_jobs_of_one_build_share_it_across_backends() -> None:
    """The processes of a build key share it where two or more of them run, whatever
    their jobs' zygote kinds: from one zygote that preloads them all. A key of one
    process builds in its job; so does a lone Inductor job (its own interpreter builds
    the model once for its processes) and a lone built-in model (it builds in less than
    forking from a build costs); a lone model of the user's own shares it."""
    from benchflow.sweep.steps import in_run_order, shared_builds

    grid = [
        ("dynamo=none",),
        ("dynamo=none", "seed=2"),  # a built-in model alone with its build
        ("dynamo=inductor",),
        ("dynamo=inductor", "xla=PJRT"),  # an invalid pair: runs nothing
        ("dynamo=openxla",),
        ("dynamo=none", "xla=PJRT"),  # lazy XLA
        ("dynamo=none", "share_build=false"),
        ("dynamo=none", "prefork=false"),
    ]
    jobs = [plan_job(composed("model=llama", *o), n, o) for n, o in enumerate(grid)]
    shared = shared_builds(jobs)
    assert sorted(shared) == [0, 2, 4, 5]
    assert {s.zygote for s in shared.values()} == {"inductor+xla"}
    assert len({s.build for s in shared.values()}) == 1
    # the build's jobs run together, at its first job's place; the rest keep their order
    ordered = in_run_order(jobs)
    assert [j.overrides for j in ordered] == [grid[i] for i in (0, 2, 4, 5, 1, 3, 6, 7)]
    assert [j.num for j in ordered] == list(range(len(grid)))
    # a built-in model alone shares nothing: it is built in its job; nor does a job
    # planned twice (the same fingerprint runs once)
    assert shared_builds(jobs[:2]) == {}
    assert shared_builds([jobs[0], dataclasses.replace(jobs[0], num=9)]) == {}
    # the user's model, alone with its build: its processes share it, unless it has one
    # process, or is an Inductor job (its own interpreter builds it once)
    own = ("model=custom", "model.target=tests.test_your_code:build")
    mine = [
        plan_job(composed(*own, *o), n, o)
        for n, o in enumerate([("dynamo=none",), ("dynamo=openxla", "seed=3")])
    ]
    apart = [
        plan_job(composed(*own, *o), n, o)
        for n, o in enumerate([("dynamo=none", "repeat=3"), ("dynamo=inductor", "seed=3")])
    ]
    assert [(s.zygote, n) for n, s in shared_builds(mine).items()] == [("torch", 0), ("xla", 1)]
    assert shared_builds(apart) == {}


def test_the_plan_says_what_each_process_forks_from() -> None:
    """plan.json holds every process of every job that runs as a step (core/job.Step),
    worked out once: its round, and the warm process it forks from (the kind's zygote,
    the model's shared build, or the job's compiled step for its later processes); a
    job that runs nothing has none; under a launcher of Hydra's, none forks."""
    from benchflow.core.job import Plan, Warm
    from benchflow.sweep.steps import build_key, in_run_order, plan_steps

    grid = [
        ("model=llama", "dynamo=none"),
        ("model=llama", "dynamo=inductor"),
        ("model=llama", "dynamo=inductor", "xla=PJRT"),  # an invalid pair: runs nothing
        ("model=resnet", "dynamo=none", "repeat=2"),  # one process: round 0 only
        ("model=bert", "dynamo=none"),  # a built-in model alone with its build
        ("model=custom", "model.target=tests.test_your_code:build"),  # the user's, alone
    ]
    jobs = in_run_order([plan_job(composed(*o), n, o) for n, o in enumerate(grid)])
    steps = plan_steps(jobs, True, {})
    plan = Plan.from_dict(Plan.of(jobs, steps).to_dict())  # as read back
    assert plan.steps == tuple(steps)
    job = {j.overrides: j for j in jobs}
    of = {o: [s for s in steps if s.job == job[o].num] for o in grid}
    assert of[grid[2]] == []
    assert [s.round for s in of[grid[0]]] == [0, 1, 2] and [s.round for s in of[grid[3]]] == [0]
    llama, inductor = of[grid[0]], of[grid[1]]
    built = Warm("inductor", build_key(job[grid[0]]))  # the kinds' union
    assert built.build and all(s.warm == built for s in llama) and inductor[0].warm == built
    assert [s.warm.stage for s in inductor[1:] if s.warm] == ["compiled"] * 2
    assert [s.warm for s in of[grid[4]]] == [Warm("torch")] * 3  # bert builds in each
    # the user's model, alone: its three processes share one build
    assert [s.warm for s in of[grid[5]]] == [Warm("torch", build_key(job[grid[5]]))] * 3
    # the steps in run order: round by round, each in the jobs' order
    assert [(s.round, s.job) for s in steps] == sorted((s.round, s.job) for s in steps)
    assert all(s.warm is None for s in plan_steps(jobs, False, {}))


def test_cuda_without_a_gpu_and_too_many_threads_are_refused() -> None:
    from benchflow.config.validate import parse
    from benchflow.core.machine import cuda_present

    if not cuda_present():
        with pytest.raises(ConfigError, match="no CUDA GPU is visible"):
            resolve(parse(composed("model=llama", "accelerator=cuda")))
    import os

    cores = len(os.sched_getaffinity(0))
    with pytest.raises(ConfigError, match=rf"num_threads={cores + 1} .*allowed: 1\.\.{cores}"):
        parse(composed("model=llama", f"num_threads={cores + 1}"))
    assert parse(composed("model=llama", f"num_threads={cores}")).num_threads == cores
    if cores > 1:
        with pytest.raises(ConfigError, match="cpus_per_job=1"):
            parse(composed("model=llama", "cpus_per_job=1", "num_threads=2"))


# --- layers ---------------------------------------------------------------------------

# The architecture is import-linter's contracts in pyproject.toml (`make lint` checks
# them too): the layers, lowest last there, and no two modules of a package importing
# each other. Every import counts, inside functions and under TYPE_CHECKING too.


def _layers() -> list[str]:
    from importlinter.api import read_configuration

    contracts = read_configuration(str(REPO / "pyproject.toml"))["contracts_options"]
    return next(c["layers"] for c in contracts if c["id"] == "layers")


def test_the_import_contracts_hold() -> None:
    """benchflow's packages import only from their own layer or below, and no module
    circle exists (lint-imports exits 1 on a tree whose harness imports runner)."""
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--no-cache", "pyproject.toml"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_every_package_has_its_layer_and_the_docs_say_the_same_order() -> None:
    import re

    import benchflow

    layers = _layers()
    src = Path(benchflow.__file__).parent
    packages = {p.name for p in src.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages | {"__main__"} == set(layers), "a new package needs its layer and the docs"
    text = (REPO / "docs" / "architecture.md").read_text()
    line = re.search(r"\*\*Layers\*\*, lowest first: (.*?)\. A module", text, re.S)
    assert line, "docs/architecture.md states the layers"
    assert re.findall(r"`([\w.]+)`", line.group(1)) == list(reversed(layers))


def test_a_stop_waits_while_a_row_is_written() -> None:
    """core/interrupts: a sweep's stop raises at once, or, inside `held` (a finished
    job's bookkeeping), once the outermost section ends; a real SIGTERM through its
    installed handler does the same, as Terminated (the command's exit 143)."""
    import os
    import signal

    from benchflow.core.interrupts import Stops, Terminated

    stops = Stops()
    with pytest.raises(Terminated):
        stops.stop(signal.SIGTERM)
    done = []
    with pytest.raises(KeyboardInterrupt), stops.held():
        with stops.held():
            stops.stop(signal.SIGINT)
            done.append("inner")
        done.append("outer")  # the inner section's end does not raise
    assert done == ["inner", "outer"]
    before = signal.getsignal(signal.SIGTERM)
    with stops.installed(), pytest.raises(Terminated), stops.held():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100):  # the handler runs between bytecodes
            done.append("written")
    assert signal.getsignal(signal.SIGTERM) is before  # as it was after
    assert done.count("written") == 100
    with stops.held():  # nothing pending afterwards
        pass


def test_an_early_run_starts_its_subprocesses_from_the_session_s_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A variable a test sets with monkeypatch (for every thread of the process) reaches
    no early run's subprocesses, which start from the session's environment as the
    early runs found it (tests/early.py; a planted PYTHONPATH once made an early
    sweep's zygote refuse to fork); the test's own subprocesses see it."""
    from tests import early

    session = {"AS_THE_SESSION_WAS": "1"}
    monkeypatch.setenv("SET_BY_A_TEST", "1")
    seen: dict[str, dict[str, str]] = {}

    def in_an_early_run() -> None:
        seen["env"] = dict(early._run(lambda _: early.environ(), Path("."), False, session))

    thread = threading.Thread(target=in_an_early_run)
    thread.start()
    thread.join()
    assert seen["env"] == session
    assert early.environ()["SET_BY_A_TEST"] == "1"


def test_a_variable_set_for_a_block_is_as_it_was_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """core/environ.variable, which the zygote's scratch Inductor cache and NVML check
    and AOTInductor's scratch TMPDIR use: unset stays unset, a value comes back, an
    exception too."""
    from benchflow.core.environ import variable

    monkeypatch.delenv("BENCHFLOW_X", raising=False)
    with variable("BENCHFLOW_X", "1"):
        assert os.environ["BENCHFLOW_X"] == "1"
    assert "BENCHFLOW_X" not in os.environ
    monkeypatch.setenv("BENCHFLOW_X", "mine")
    with pytest.raises(RuntimeError), variable("BENCHFLOW_X", "2"):
        assert os.environ["BENCHFLOW_X"] == "2"
        raise RuntimeError
    assert os.environ["BENCHFLOW_X"] == "mine"
