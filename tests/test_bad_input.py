"""Bad input, through the real CLI: a non-zero exit before any work, with one message
that names the key, the bad value and what is allowed. docs/bad-input.md's table is this one."""

from __future__ import annotations

import glob
import json
import re
import tempfile
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest import CliResult, EarlySweeps, early, run_cli_forked
from tests.early import niced

from benchflow.core.machine import cuda_present


@dataclass(frozen=True)
class Case:
    kind: str
    args: tuple[str, ...]
    says: tuple[str, ...]  # the key, the bad value and (part of) what is allowed
    code: int = 2  # benchflow's own check; 1: Hydra's (its composition failed)
    gpu_less: bool = False  # only bad on a machine with no visible NVIDIA GPU


CASES = [
    Case("unknown model", ("model=nope",), ("model=nope", "no option 'nope'", "llama, ")),
    Case(
        "unknown model in a sweep",
        ("-m", "model=llama,nope"),
        ("model=nope", "no option 'nope'", "dlrm, "),
    ),
    Case("unknown backend", ("dynamo=tvm",), ("dynamo=tvm", "inductor", "openxla")),
    Case(
        "misspelt backend",
        ("dynamo=inductr",),
        ("dynamo=inductr", "did you mean dynamo=inductor?", "openxla"),
    ),
    Case("unknown experiment", ("-m", "experiment=nope"), ("experiment=nope", "headline")),
    Case("unknown key", ("repeats=3",), ("repeats", "did you mean repeat?", "allowed keys")),
    Case(
        "unknown nested key",
        ("model.sizee=tiny",),
        ("model.sizee", "allowed keys of model", "size"),
    ),
    Case(
        "a + key the schema would drop",
        ("+dynamo.options.freezing=true",),
        ("dynamo.options", "allowed keys of dynamo", "fullgraph"),
    ),
    Case(
        "unknown Inductor setting",
        ("dynamo=inductor", "inductor.freezng=true"),
        ("inductor.freezng=true", "did you mean inductor.freezing", "torch._inductor.config"),
    ),
    Case(
        "wrong type: Inductor setting",
        ("-m", "dynamo=inductor", "inductor.freezing=true,3"),
        ("inductor.freezing=3", "allowed: bool", "nothing was run"),
    ),
    Case(
        "Inductor setting on another backend",
        ("dynamo=openxla", "inductor.freezing=true"),
        ("inductor.* settings (freezing)", "dynamo=aot_inductor|inductor", "dynamo=openxla"),
    ),
    Case(
        "dynamic shapes on a backend that does not compile",
        ("dynamo.dynamic=true",),
        ("dynamo.dynamic=true", "under torch.compile only", "dynamo=none"),
    ),
    Case(
        "a compile mode on a backend Inductor does not compile",
        ("dynamo=none", "dynamo.mode=max-autotune"),
        ("dynamo.mode=max-autotune applies where Inductor compiles only", "dynamo=none"),
    ),
    Case(
        "CUDA graphs' mode on a CPU",
        ("dynamo=inductor", "dynamo.mode=reduce-overhead", "accelerator=cpu"),
        (
            "dynamo.mode=reduce-overhead captures CUDA graphs",
            "accelerator=cpu",
            "or accelerator=cuda",
        ),
    ),
    Case(
        "a dynamic batch with static shapes",
        ("dynamo=inductor", "dynamo.dynamic=false", "dynamo.dynamic_batch=true"),
        ("dynamo.dynamic_batch=true", "dynamo.dynamic=false", "allowed: dynamo.dynamic=null"),
    ),
    Case(
        "a paired sweep's axis the sweep lacks",
        ("-m", "model=llama", "slowdown=null,0.05", "pair=slowdow"),
        ("pair=slowdow is not an axis", "did you mean pair=slowdown?", "allowed: slowdown"),
    ),
    Case(
        "AOTInductor training",
        ("dynamo=aot_inductor", "test=train"),
        ("dynamo=aot_inductor", "test=train", "allowed: test=eval"),
    ),
    Case(
        "a variable benchflow sets",
        ("env.OMP_NUM_THREADS=1",),
        ("env.OMP_NUM_THREADS", "benchflow sets", "num_threads=N"),
    ),
    Case(
        "XLA flags on another backend",
        ("dynamo=inductor", "xla.flags=--xla_dump_to=x"),
        ("xla.flags=--xla_dump_to=x", "XLA device only", "xla=PJRT"),
    ),
    Case(
        "your model without a target",
        ("model=custom",),
        ("model=custom", "model.target=module:function", "docs/your-code.md"),
    ),
    Case(
        "wrong type (int)",
        ("repeat=abc",),
        ("repeat=abc: not an integer", "allowed: an integer >= 1 or null"),
    ),
    Case("wrong type (float)", ("target_ci=fast",), ("target_ci=fast", "allowed: a number > 0")),
    Case("wrong type (bool)", ("verify=maybe",), ("verify=maybe", "allowed: true or false")),
    Case(
        "wrong type in a sweep",
        ("-m", "warmup=1,two"),
        ("warmup=two: not an integer", "allowed: an integer >= 0"),
    ),
    Case(
        "a sweep of no job",
        ("-m", "model=llama", "seed=range(5,5)"),
        ("seed=range(5,5) gives no value", "allowed: at least one value"),
    ),
    Case("out of range: repeat", ("repeat=0",), ("repeat=0", ">= 1")),
    Case("out of range: warmup", ("warmup=-1",), ("warmup=-1", ">= 0")),
    Case("out of range: timeout", ("timeout_s=-5",), ("timeout_s=-5", "> 0")),
    Case("out of range: cpus_per_job", ("cpus_per_job=0",), ("cpus_per_job=0", "allowed: 1..")),
    Case("out of range: num_threads", ("num_threads=4096",), ("num_threads=4096", "allowed: 1..")),
    Case(
        "accelerator without a GPU",
        ("accelerator=cuda",),
        ("accelerator=cuda", "no CUDA GPU is visible", "accelerator=cpu"),
        gpu_less=True,
    ),
    Case("bad choice: dtype", ("dtype=fp8",), ("dtype=", "fp8", "bfloat16")),
    Case("bad choice: model.step", ("model.step=jit",), ("model.step=", "jit", "torchbench")),
    Case("bad choice: retry", ("-m", "retry=sometimes"), ("retry=", "sometimes", "failed")),
    Case(
        "bad value in a sweep",
        ("-m", "repeat=3,0"),
        ("nothing was run", "job 1", "repeat=0", ">= 1"),
    ),
    Case(
        "conflict: backend vs device",
        ("dynamo=inductor", "xla=PJRT"),
        ("dynamo=inductor", "xla=PJRT", "allowed"),
    ),
    Case(
        "conflict: backend vs accelerator",
        ("dynamo=cudagraphs", "accelerator=cpu"),
        ("dynamo=cudagraphs", "accelerator=cpu", "allowed"),
    ),
    Case(
        "missing TorchBench root",
        ("suite.torchbench_root=/nonexistent/benchmark",),
        ("suite.torchbench_root", "/nonexistent/benchmark", "torchbenchmark"),
    ),
    Case(
        "malformed experiment YAML",
        ("-m", "experiment=broken"),
        ("experiment/broken", "mapping"),
    ),
    Case(
        "unknown key in your config",
        ("--config-dir", "{user}/typo", "model=typo"),
        ("model=typo", "typo.yaml", "no key model.nmae", "allowed keys of model", "target"),
    ),
    Case(
        "your option named like benchflow's",
        ("--config-dir", "{user}/shadow", "model=llama"),
        ("model/llama.yaml", "model=llama is already benchflow's", "allowed: another name"),
    ),
    Case(
        "missing config folder",
        ("--config-dir", "/nonexistent/bench", "model=llama"),
        ("/nonexistent/bench", "does not exist", "allowed: a folder"),
    ),
    Case(
        "bad model.target",
        ("model=custom", "model.target=nocolon"),
        ("model.target='nocolon'", "allowed: module:function"),
    ),
    Case(
        "model.target not found",
        ("model=custom", "model.target=nomod:build"),
        ("model.target='nomod:build'", "no module 'nomod'", "allowed: module:function"),
    ),
    Case(
        "unreachable tracking URI",
        ("-m", "mlflow.tracking_uri=http://127.0.0.1:9"),
        ("mlflow.tracking_uri=http://127.0.0.1:9", "no MLflow server answers", "mlflow.db"),
    ),
    Case(
        "tracking URI of no MLflow store",
        ("mlflow.tracking_uri=ftp://x",),
        ("mlflow.tracking_uri=ftp://x", "no tracking store for scheme 'ftp'", "sqlite"),
    ),
    Case(
        "tracking URI of no MLflow store in a sweep",
        ("-m", "mlflow.tracking_uri=ftp://x"),
        ("mlflow.tracking_uri=ftp://x", "scheme 'ftp'", "allowed: a path", "http"),
    ),
    Case(
        "empty experiment name",
        ("mlflow.experiment=",),
        ("mlflow.experiment=''", "is empty", "allowed: a name"),
    ),
    Case(
        "empty experiment name in a sweep",
        ("-m", "mlflow.experiment= "),
        ("nothing was run", "mlflow.experiment=''", "allowed: a name"),
    ),
    Case(
        "bad choice: dynamo.mode",
        ("dynamo=inductor", "dynamo.mode=fastest"),
        ("dynamo.mode='fastest'", "max-autotune", "reduce-overhead"),
    ),
    Case(
        "bad choice: dynamo.mode in a sweep",
        ("-m", "dynamo=inductor", "dynamo.mode=default,fastest"),
        ("nothing was run", "job 1", "dynamo.mode='fastest'", "max-autotune"),
    ),
    Case("out of range in a sweep's grid", ("-m", "warmup=1,-1"), ("job 1", "warmup=-1", ">= 0")),
    Case(
        "unknown command",
        ("reprot",),
        ("no command 'reprot'", "did you mean `report`", "rerun, history, bisect, or key=value"),
    ),
    Case(
        "models with bad arguments",
        ("models", "foo=bar", "--bogus"),
        ("foo=bar", "takes no key foo", "allowed: --config-dir DIR", "suite=..."),
    ),
    Case(
        "resume a run with nothing to resume",
        ("resume=true",),
        ("resume=true found no run under runs/", "hydra.run.dir=<its folder>"),
    ),
    Case(
        "resume with nothing to resume",
        ("-m", "resume=true"),
        ("resume=true", "no sweep under multirun/", "hydra.sweep.dir="),
    ),
    Case(
        "rerun of nothing recorded",
        ("rerun", "multirun/none"),
        ("'multirun/none' is not a folder", "allowed: a sweep folder", "row_id"),
    ),
    Case(
        "rerun with a sweep",
        ("rerun", "multirun/none", "repeat=3,4"),
        ("repeat=3,4", "runs each recorded job once", "allowed: one value per key"),
    ),
    Case(
        "rerun with an unknown key",
        ("rerun", "multirun/none", "repeats=3"),
        ("repeats=3", "no key repeats", "allowed keys", "repeat,"),
    ),
    Case(
        "rerun into a folder that is not empty",
        ("rerun", "multirun/none", "hydra.sweep.dir={user}"),
        ("hydra.sweep.dir=", "the folder is not empty", "allowed: a new or empty folder"),
    ),
    Case(
        "missing interpreter",
        ("toolchain.python=/nonexistent/bin/python",),
        ("toolchain.python=/nonexistent/bin/python", "no such file", "allowed: the path of an"),
    ),
    Case(
        "interpreter without torch",
        ("-m", "toolchain.python={user}/bare/bin/python"),
        ("toolchain.python=", "bare/bin/python has no torch", "allowed:", "torch>=2.8"),
    ),
    Case(
        "interpreter too old",
        ("toolchain.python={user}/old/bin/python",),
        ("toolchain.python=", "old/bin/python is Python 3.", "too old", "Python >=3.10,<3.14"),
    ),
    Case(
        "a timed setting with timing=false",
        ("timing=false", "repeat=3"),
        ("repeat=3 applies to the timed repeats", "timing=false runs none", "allowed: repeat=null"),
    ),
    Case(
        "expected: a missing file",
        ("expected", "{user}/expected/sweep", "{user}/expected/nope.csv"),
        ("nope.csv: no such file", "allowed: a file `benchflow expected SWEEP FILE --update`"),
    ),
    Case(
        "expected: a malformed file",
        ("expected", "{user}/expected/sweep", "{user}/expected/malformed.csv"),
        ("malformed.csv: not an expected-results file", "allowed:", "suite,model,test"),
    ),
    Case(
        "expected: a sweep with no rows",
        ("expected", "{user}/expected/empty", "{user}/expected/builtin.csv"),
        ("expected/empty: no result rows", "allowed: a sweep, run folder or results file"),
    ),
    Case(
        "expected: a file of another suite",
        ("expected", "{user}/expected/sweep", "{user}/expected/timm.csv"),
        ("timm.csv holds suite timm", "the sweep's rows suite torchbench", "allowed: the file"),
    ),
    Case(
        "same environment without a comparison",
        ("report", "--require-same-env", "multirun/none"),
        ("--require-same-env", "applies to a comparison", "allowed: --compare BASE"),
    ),
]


def _broken_conf(conf: Path) -> Path:
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "broken.yaml").write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      model: [llama\n  dynamo: x\n"
    )
    return conf


def _user_conf(user: Path) -> Path:
    """A user's config folders ({user} in a case's arguments): one sets a key the schema
    does not have, one has an option named like one of benchflow's."""
    (user / "typo" / "model").mkdir(parents=True)
    (user / "typo" / "model" / "typo.yaml").write_text("name: typo\nnmae: typo\n")
    (user / "shadow" / "model").mkdir(parents=True)
    (user / "shadow" / "model" / "llama.yaml").write_text("name: llama\n")
    # interpreters for toolchain.python: a venv with no packages (no torch), and one
    # older than the harness allows (this machine's, else a stand-in, said below)
    _expected_files(user / "expected")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(user / "bare")
    (user / "old" / "bin").mkdir(parents=True)
    (user / "old" / "bin" / "python").symlink_to(_old_python())
    return user


def _expected_files(folder: Path) -> None:
    """`benchflow expected`'s bad input: a sweep of one row (a row as results.jsonl holds
    it), one with none, a file that is none, one of another suite."""
    from benchflow.core.status import Status
    from benchflow.report.expected import COLUMNS
    from benchflow.results.row import Experiment, ModelId, ResultRow

    row = ResultRow(
        model=ModelId(suite_name="torchbench", model_name="llama"),
        experiment=Experiment(test="eval"),
        backend="eager",
        status=Status.OK,
    )
    (folder / "sweep").mkdir(parents=True)
    (folder / "sweep" / "results.jsonl").write_text(json.dumps(row.to_dict()) + "\n")
    (folder / "empty").mkdir()
    (folder / "empty" / "results.jsonl").write_text("")
    (folder / "malformed.csv").write_text("name,accuracy,graph_breaks\nllama,pass,0\n")
    header = ",".join(COLUMNS)
    (folder / "builtin.csv").write_text(f"{header}\ntorchbench,llama,eval,eager,PASS,,,,,,,\n")
    (folder / "timm.csv").write_text(f"{header}\ntimm,resnet18,eval,eager,PASS,,,,,,,\n")


def _old_python() -> Path:
    """A Python older than 3.10: one this machine has (pyenv's builds, or the system's);
    where it has none, a stand-in script that answers benchflow's probe as Python 3.8
    does (a mock, only because no such interpreter exists on that machine)."""
    found = sorted(
        p
        for pattern in ("/root/.pyenv/versions/3.*/bin/python", "/usr/bin/python3.*")
        for p in glob.glob(pattern)
        if re.fullmatch(r"3\.[6-9](\.\d+)?", Path(p).parent.parent.name)
        or re.search(r"python3\.[6-9]$", p)
    )
    if found:
        return Path(found[-1])
    stand_in = Path(tempfile.mkdtemp()) / "python3.8"
    stand_in.write_text('#!/bin/sh\necho \'{"python": "3.8.18"}\'\n')
    stand_in.chmod(0o755)
    return stand_in


@early("bad_input")
def _bad_inputs(root: Path) -> dict[str, tuple[CliResult, Path]]:
    """Every case through the real CLI entry, each in a scratch directory of its own and a
    process of its own, forked from one interpreter (run_cli_forked), niced, in the
    background from the session's start: the lane of tests that run in order never
    waits for them."""
    broken, user = _broken_conf(root / "conf"), _user_conf(root / "user")
    # With a GPU, accelerator=cuda is good input: that case would run a real job.
    cases = [c for c in CASES if not (c.gpu_less and cuda_present())]
    runs = []
    for n, case in enumerate(cases):
        (cwd := root / f"bad{n}").mkdir()
        args = [a.replace("{user}", str(user)) for a in case.args]
        # (a command of two arguments takes no override: `expected SWEEP FILE`)
        search = [] if args[0] == "expected" else [f"hydra.searchpath=[file://{broken}]"]
        runs.append(([*args, *search], cwd))
    with niced():  # the forks' imports yield the cores
        results = run_cli_forked(runs, root)
    return {c.kind: (res, res.cwd) for c, res in zip(cases, results, strict=True)}


@pytest.fixture(scope="module")
def outcomes(early_sweeps: EarlySweeps) -> dict[str, tuple[CliResult, Path]]:
    result: dict[str, tuple[CliResult, Path]] = early_sweeps.result("bad_input")
    return result


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_bad_input_stops_before_any_work(
    case: Case, outcomes: dict[str, tuple[CliResult, Path]]
) -> None:
    if case.gpu_less and cuda_present():
        pytest.skip("this machine has a GPU: accelerator=cuda is good input here")
    res, cwd = outcomes[case.kind]
    out = res.stdout + res.stderr
    assert res.returncode == case.code, out[-2000:]
    for part in case.says:
        assert part in out, f"{case.kind}: {part!r} not in:\n{out[-2000:]}"
    # nothing ran: no results, no job process output, no tracking store
    assert not list(cwd.glob("**/results.jsonl")) and not list(cwd.glob("**/result.json"))
    assert not list(cwd.glob("**/stdout.log")) and not (cwd / "mlflow.db").exists()
    # and no folder: neither a single run's runs/<date>/<time>/ nor a sweep's
    assert not list(cwd.glob("runs/*/*")) and not list(cwd.glob("multirun/*/*"))
    assert "Traceback" not in out, out[-2000:]  # one message, not a stack


def test_the_docs_table_lists_every_case() -> None:
    readme = (Path(__file__).resolve().parents[1] / "docs" / "bad-input.md").read_text()
    for case in CASES:
        (row,) = [line for line in readme.splitlines() if line.startswith(f"| {case.kind} |")]
        assert f" | {case.code} | " in row, (case.kind, row)  # the exit code it gives
    # the schema's keys, as the check lists them now (the page once listed 27 of 35)
    from benchflow.config.keys import unknown_key
    from benchflow.config.store import groups

    message = f"benchflow: error: repeats=3: {unknown_key('repeats', groups())}"
    assert f"| unknown key | `repeats=3` | 2 | {message} |" in readme


def test_a_wrong_type_is_what_omegaconf_cannot_convert() -> None:
    """The type check judges a value as Hydra's merge does (OmegaConf's conversion): what
    it converts passes, and keys that name no value of the schema are not its to judge."""
    from benchflow.config.keys import wrong_type

    for key, value in [
        ("warmup", 3),
        ("warmup", "3"),  # a quoted number: OmegaConf converts it
        ("repeat", None),  # an Optional field's null
        ("target_ci", 1),
        ("verify", "true"),
        ("slowdown", 0.05),
        ("ir.formats", ["hlo", "text"]),
        ("model.size", 3),  # a string field takes any scalar
        ("model", "llama"),  # a group's choice: _check_choices's
        ("inductor.freezing", 3),  # a key of a mapping: runner/knobs.py's
        ("experiment", "headline"),  # no field of the schema
    ]:
        assert wrong_type(key, value) is None, (key, value)
    assert wrong_type("warmup", 3.5) == "not an integer; allowed: an integer >= 0"
    assert wrong_type("warmup", None) == "not an integer; allowed: an integer >= 0"
    assert wrong_type("memory_limit_gb", "big") == "not a number; allowed: a number > 0 or null"
    assert wrong_type("profile.active", "x") == "not an integer; allowed: an integer >= 1"
    assert wrong_type("ir.formats", "hlo") == "not a list; allowed: a list, e.g. [a,b]"
    assert wrong_type("dynamo.dynamic", "maybe") == "not a boolean; allowed: true or false or null"


def test_a_launcher_that_is_not_installed_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every documented launcher is installed here (make setup), so the missing one is
    a name whose plugin module does not exist."""
    from benchflow.cli import sweep as cli

    monkeypatch.setitem(
        cli.LAUNCHERS, "ray", ("hydra_plugins.not_installed", "hydra-ray-launcher", cli._RAY)
    )
    with pytest.raises(SystemExit) as exc:
        cli._check_launcher(["-m", "hydra/launcher=ray"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "hydra/launcher=ray needs hydra-ray-launcher" in err
    assert "`make setup`" in err and "`pip install hydra-ray-launcher`" in err
    assert "allowed: basic" in err
    cli._check_launcher(["-m", "hydra/launcher=joblib"])  # installed: no complaint
