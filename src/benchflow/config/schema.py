"""The structured-config schema: every key a user can set, typed, with its meaning.

Hydra composes YAML under ``conf/`` onto these dataclasses, so a wrong type
(``repeat=abc``) or an unknown key fails at composition; the command line's are
refused before it, by :mod:`benchflow.config.keys`. Range and combination rules live
in :mod:`benchflow.config.validate`, applied once at the edge.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, NamedTuple, get_type_hints

from omegaconf import MISSING

# Each fixed set of choices, defined once for validation, --help and the bad-input
# messages (`dynamo=` is whatever benchflow.backends registers).
XLA_CHOICES = ("auto", "none", "PJRT")
ACCELERATOR_CHOICES = ("auto", "cpu", "cuda")
TEST_CHOICES = ("eval", "train")
RETRY_CHOICES = ("failed", "none", "all")
DTYPE_CHOICES = ("float32", "float64", "bfloat16", "float16", "amp", "amp_bf16", "amp_fp16")
MATMUL_PRECISION_CHOICES = ("highest", "high", "medium")
HOST_ALLOCATOR_CHOICES = ("steady", "glibc")
# Where a model comes from (auto: factory, torchbench or builtin); a suite's own models
# carry their suite's name.
SUITE_MODEL_SOURCES = ("huggingface", "timm")
MODEL_SOURCE_CHOICES = ("auto", "builtin", "torchbench", "factory", *SUITE_MODEL_SOURCES)
SIZE_CHOICES = ("tiny", "small", "base", "large")
# Processes that time a job with adaptive repeats: the fewest whose medians give a t
# interval two degrees of freedom, so that the variance between processes is inside it.
DEFAULT_PROCESSES = 3
# A paired sweep's budget of rounds where `processes` is not given (docs/reports.md).
PAIRED_ROUNDS = 8
# The smallest change of time that counts, for every comparison's default.
THRESHOLD = 0.05
FIRST_LOOK = 3  # the rounds before a paired sweep first judges a pair: Student's t, df 2
# The fewest repeats each of a job's several processes takes (pyperf's 3 values per
# worker): its median is one sample of the job's interval.
VALUES_PER_PROCESS = 3
# The timed step (`model.step`, benchflow.models.step): what each value times.
STEPS = {
    "module": "get_module()'s module on its example inputs, as the experiment runner "
    "and PyTorch's dynamo benchmarks time it",
    "torchbench": "the model's own eval()/train()",
}
STEP_CHOICES = tuple(STEPS)
COMPILE_CACHE_CHOICES = ("cold", "warm")
# torch.compile(mode=...): torch._inductor.list_mode_options()'s modes (tests/test_config.py
# checks this against torch's own list; it is typed here so that validation needs no torch).
DYNAMO_MODE_CHOICES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
PROFILE_CHOICES = ("off", "torch")
IR_FORMATS = ("text", "hlo", "stablehlo")
DEFAULT_BASELINE = "inductor"  # the backend label reports compute speedups over


class AtLeast(NamedTuple):
    """A number's least value; exclusive: it must lie above it."""

    low: float
    exclusive: bool = False

    def __str__(self) -> str:
        return f"{'>' if self.exclusive else '>='} {self.low:g}"


# The keys whose numbers have a least value (null always passes where allowed); the
# host-dependent ranges (cpus_per_job, num_threads) are validation's alone.
LOWER_BOUNDS = {
    "memory_limit_gb": AtLeast(0, exclusive=True),
    "repeat": AtLeast(1),
    "iterations_per_run": AtLeast(1),
    "warmup": AtLeast(0),
    "batch_size": AtLeast(1),
    "timeout_s": AtLeast(0, exclusive=True),
    "max_warmup": AtLeast(1),
    "max_repeat": AtLeast(1),
    "target_ci": AtLeast(0, exclusive=True),
    "min_run_time_s": AtLeast(0, exclusive=True),
    "timed_budget_s": AtLeast(0, exclusive=True),
    "slowdown": AtLeast(0),
    "processes": AtLeast(1),
    "pair_threshold": AtLeast(0),
    "profile.wait": AtLeast(0),
    "profile.warmup": AtLeast(0),
    "profile.repeat": AtLeast(0),
    "profile.active": AtLeast(1),
}


# Field metadata. UNMEASURED: changes how a job is run or reported, not what it
# measures, so it is in no fingerprint, identity or MLflow param. BULKY: measured, but
# in the fingerprint and config.yaml only (too large for params and the flat `config`).
UNMEASURED = {"measured": False}
BULKY = {"bulky": True}
# OPTIONAL: left out while unset, so adding such a field changes no older row's fingerprint.
OPTIONAL = {"optional": True}
# MAPPING: a section of keys that are not the schema's (`inductor.*`, `env.*`), one
# dotted key per setting.
MAPPING = {"optional": True, "mapping": True}
INDUCTOR = "inductor"  # the section of torch._inductor.config keys
ENV = "env"  # the section of a job's own environment variables
XLA_FLAGS_KEY = "xla.flags"  # XLA_FLAGS of an XLA job
MODE_KEY = "dynamo.mode"  # torch.compile's mode: Inductor's presets of its settings
# torch.compile's dynamic-shape settings, by the name a job's label gives each
DYNAMIC = {"dynamo.dynamic": "dynamic", "dynamo.dynamic_batch": "dynamic_batch"}


def is_knob(key: str) -> bool:
    """Is a dotted key a compiler's own setting (`inductor.*`, dynamic shapes), which a
    report's baseline takes at its defaults?"""
    return key.partition(".")[0] == INDUCTOR or key in DYNAMIC


# One measured setting's value, as the row's `config` and the MLflow params hold it.
Setting = str | int | float | bool | list[str] | None
Settings = dict[str, Setting]  # dotted key (`model.size`) -> value


@dataclass
class ModelConfig:
    name: str = MISSING  # model name, e.g. llama; TorchBench's name when loaded from there
    source: str = "auto"  # auto | builtin | torchbench | factory | huggingface | timm
    builtin: str | None = None  # "module:Class" of benchflow's own implementation, if any
    # Your own model: "module:function" returning (module, example_inputs) or
    # (module, example_inputs, loss_fn); the module is found from the launch folder too.
    target: str | None = field(default=None, metadata=OPTIONAL)
    size: str = "small"  # size preset of built-in models: tiny | small | base | large
    # The timed step. module: what get_module() returns, called on its example inputs
    # (train: + loss, backward, optimizer step), as the experiment runner and PyTorch's
    # dynamo benchmarks time it | torchbench: the model's own eval() / train()
    step: str = "module"


@dataclass
class DynamoConfig:
    name: str = "none"  # torch.compile backend; none = no dynamo (eager, or lazy XLA)
    mode: str | None = None  # torch.compile mode, e.g. max-autotune; null = backend default
    fullgraph: bool = False  # make graph breaks an error instead of a split graph
    # torch.compile(dynamic=...): true: every size symbolic from the first compile (the
    # dynamo benchmarks' --dynamic-shapes) | false: none, ever | null: torch's automatic
    # (static first, dynamic where a size changes)
    dynamic: bool | None = field(default=None, metadata=OPTIONAL)
    # Mark each input's batch dimension dynamic before the first call, the rest static
    # (the dynamo benchmarks' --dynamic-batch-only, the dashboard's `dynamic`)
    dynamic_batch: bool = field(default=False, metadata=OPTIONAL)


@dataclass
class XlaConfig:
    name: str = "auto"  # auto: PJRT when the backend needs it | none | PJRT (lazy XLA device)
    # XLA_FLAGS for the job's XLA compiler (the experiment runner's xla_flags), e.g.
    # "--xla_cpu_enable_fast_math=true"; XLA jobs only; null: none.
    flags: str | None = field(default=None, metadata=OPTIONAL)


@dataclass
class TestConfig:
    name: str = "eval"  # eval: inference step | train: forward, backward, optimizer step


@dataclass
class AcceleratorConfig:
    name: str = "auto"  # auto: cuda if a GPU is present, else cpu | cpu | cuda


@dataclass
class MlflowConfig:
    enabled: bool = True  # log runs to MLflow
    tracking_uri: str | None = None  # null: SQLite store + artifact folder in the project directory
    experiment: str = "benchflow"  # MLflow experiment name


@dataclass
class SuiteConfig:
    # builtin: no suite rules | torchbench | huggingface | timm: PyTorch's <suite> yaml + list
    name: str = "builtin"
    skip_lists: bool = True  # honour the suite's skip lists (false: run all)
    fast: bool = False  # also skip the suite's `slow` and `very_slow` models
    torchbench_root: str | None = None  # pytorch/benchmark checkout; null: $TORCHBENCH_ROOT
    # the suite's mirror (suite/mirrors/), given at planning; any given here merged over it
    rules: dict[str, Any] = field(default_factory=dict, metadata=BULKY)


@dataclass
class ProfileConfig:
    name: str = "off"  # off | torch: a torch.profiler pass after (never inside) the timed pass
    wait: int = 1  # schedule: steps skipped before each profiling cycle
    warmup: int = 1  # schedule: steps traced but discarded (profiler start-up)
    active: int = 3  # schedule: steps recorded per cycle
    repeat: int = 1  # schedule: cycles; each writes its own trace and op table
    record_shapes: bool = False  # record input shapes of each op
    profile_memory: bool = False  # record tensor allocations
    with_stack: bool = False  # record Python stacks (large traces)
    with_flops: bool = False  # estimate FLOPs of matmuls and convolutions
    gzip: bool = False  # write trace_N.json.gz instead of trace_N.json
    compile: bool = False  # also profile compilation: a fresh model's first call (seed 002)
    dump_xla_metrics: bool = False  # write torch_xla's metrics_report() after timing
    dump_dynamo_counters: bool = False  # write dynamo's counters after timing


@dataclass
class IrConfig:
    formats: list[str] = field(default_factory=list)  # XLA IR to dump: text, hlo, stablehlo
    xla_dump: bool = False  # also XLA's own compiler dump (--xla_dump_to): HLO per compilation
    inductor_code: bool = False  # keep the code Inductor generates (dynamo=inductor jobs)


PROJECT_TOOLCHAIN = "project"  # the toolchain that is benchflow's own environment


@dataclass
class ToolchainConfig:
    """The packages a job runs with (docs/toolchains.md, docs/your-torch.md):
    benchflow's own environment, one built for these pins, or an existing interpreter."""

    name: str = PROJECT_TOOLCHAIN  # the option's name (conf/toolchain/<name>.yaml)
    # package -> exact version, on top of what the harness needs at the project's
    # versions: torch, torch_xla where the release has one, the suites' libraries.
    # Empty: the project's environment itself.
    pins: dict[str, str] = field(default_factory=dict)
    # An existing Python (a venv's or conda env's bin/python, a source build's) whose own
    # packages the jobs run with, instead of pins; null: none.
    python: str | None = field(default=None, metadata=OPTIONAL)
    # What that interpreter holds, as the plan found it: torch's version and git
    # revision (`2.11.0+cu130 git 70d99e9...`). Written by the plan; a value given must
    # still be true of the interpreter, or the sweep is refused.
    build: str | None = field(default=None, metadata=OPTIONAL)

    @property
    def is_project(self) -> bool:
        return not self.pins and self.python is None


@dataclass
class BenchConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    dynamo: DynamoConfig = field(default_factory=DynamoConfig)
    xla: XlaConfig = field(default_factory=XlaConfig)
    test: TestConfig = field(default_factory=TestConfig)
    accelerator: AcceleratorConfig = field(default_factory=AcceleratorConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig, metadata=UNMEASURED)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    ir: IrConfig = field(default_factory=IrConfig)
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    # The packages the job runs with; at its default (the project's own environment) it
    # is in no fingerprint, so rows from before toolchains keep theirs.
    toolchain: ToolchainConfig = field(default_factory=ToolchainConfig, metadata=OPTIONAL)
    # torch._inductor.config keys set for the job (inductor.freezing=true,
    # inductor.cpp_wrapper=true, inductor.cpp.threads=1), sweepable, no `+` needed;
    # checked against the job's torch before any work, set in its child with torch's
    # config API; Inductor jobs only (docs/compiler-settings.md).
    inductor: dict[str, Any] = field(default_factory=dict, metadata=MAPPING)
    # Environment variables set for the job's child (env.NAME=value, sweepable, no `+`
    # needed), before its interpreter starts: such a job is spawned, not forked
    # (docs/compiler-settings.md). Names benchflow sets itself are refused.
    env: dict[str, str] = field(default_factory=dict, metadata=MAPPING)
    # Timed repeats: null: adaptive (at least 6, then until the median's 95% interval is
    # within target_ci, timed_budget_s or max_repeat) | N: exactly N (docs/timing.md).
    repeat: int | None = None
    # Steps per repeat, timed together and divided; null: calibrated so that a repeat
    # lasts at least min_run_time_s | N: exactly N.
    iterations_per_run: int | None = None
    warmup: int = 2  # untimed steps before the first repeat; the first is reported as cold start
    adaptive_warmup: bool = False  # after `warmup`, step until nothing compiles and times settle
    max_warmup: int = 50  # the cap on adaptive warm-up steps (warmup included)
    adaptive_repeat: bool = False  # with repeat=N: N at least, then adaptive as repeat=null
    max_repeat: int = 18  # the cap on adaptive repeats (3 processes: 6 each, at least 3)
    target_ci: float = 0.02  # adaptive repeats: the median's 95% interval, ± this fraction of it
    # Diagnostics: every timed repeat made this fraction slower by a busy-wait on the host
    # once the device finished (0.05: 5%), to check that a comparison catches a known
    # slowdown; null: none.
    slowdown: float | None = field(default=None, metadata=OPTIONAL)
    compile_cache: str = "cold"  # cold: a fresh Inductor/XLA cache per job | warm: shared
    batch_size: int | None = None  # null: the suite's or the model's default for the test
    # null: the suite's rule (the default suite, torchbench: eval in bfloat16, training
    # in float32 on a CPU; suite=builtin: float32); or float32, bfloat16, amp, ...
    dtype: str | None = None
    verify: bool = False  # also check accuracy against eager and float64 (same job, after timing)
    # false: no warm-up or timed repeats: each job builds, compiles, runs two steps (the
    # signals: graph breaks, recompiles, XLA compiles) and checks accuracy, in one process
    # (the dynamo benchmarks' --accuracy; docs/expected.md). Its rows say they were not timed.
    timing: bool = field(default=True, metadata=OPTIONAL)
    seed: int = 1337  # seeds torch, numpy and random before the model is built
    matmul_precision: str = "high"  # torch.set_float32_matmul_precision
    # The host's malloc in the child: steady: thresholds fixed so that a step reuses its
    # memory (docs/timing.md) | glibc: glibc's own, moved by what the process did before,
    # as in a plain PyTorch script (the experiment runner).
    host_allocator: str = field(default="steady", metadata=OPTIONAL)
    num_threads: int | None = None  # torch.set_num_threads in the child; null: its CPU count
    # Jobs running at once on a host never share cores: each waits for a free slot.
    cpus_per_job: int | None = None  # cores per job, pinned; null: all, one job at a time
    # --- not measured: how jobs run and are reported ---
    # Fork jobs from a process that imported torch (+torch_xla).
    prefork: bool = field(default=True, metadata=UNMEASURED)
    # With prefork: a sweep's jobs with the same model build fork from one process that
    # built it (sweep/steps.py), whatever their backends; and a compiled job's later
    # processes from one that compiled its step (docs/isolation.md, "One compile per job").
    share_build: bool = field(default=True, metadata=UNMEASURED)
    # Calibration: the shortest a repeat may last (timer ticks, scheduler noise; docs/timing.md).
    min_run_time_s: float = field(default=0.05, metadata=UNMEASURED)
    # Adaptive repeats stop once the timed repeats have taken this long (at least 6 first).
    timed_budget_s: float = field(default=5.0, metadata=UNMEASURED)
    # Time the job in this many fresh processes and pool their
    # samples (each takes `repeat`, or the adaptive rule with budget and cap shared);
    # null: 3 where the repeats are adaptive, 1 where `repeat` gives a count.
    processes: int | None = field(default=None, metadata=UNMEASURED)
    # A sweep runs its jobs' processes in rounds, one process of every job a round (as
    # asv's rounds), so that each job's processes lie across the sweep's whole time;
    # false: a job's processes one after another (sweep/steps.py).
    interleave: bool = field(default=True, metadata=UNMEASURED)
    # Paired A/B: the axis of the sweep's two values to compare (pair=slowdown with
    # slowdown=null,0.05). Each pair of jobs runs round by round until its B/A change
    # is decided (past ±pair_threshold, or within it), or no look could decide it, or
    # `processes` rounds (null: 8) are spent, the looks accounted for (docs/reports.md);
    # then `benchflow report SWEEP --pair AXIS` judges it by the same rule.
    pair: str | None = field(default=None, metadata=UNMEASURED)
    pair_threshold: float = field(default=THRESHOLD, metadata=UNMEASURED)  # smallest change counted
    # Hard limit for one job's child process, compile included.
    timeout_s: float = field(default=900.0, metadata=UNMEASURED)
    # The child caps its own data memory; over it: oom.
    memory_limit_gb: float | None = field(default=None, metadata=UNMEASURED)
    # Backend label the report computes speedups over (none = eager).
    baseline: str = field(default=DEFAULT_BASELINE, metadata=UNMEASURED)
    # Stop the sweep at the first job that is not ok or skipped.
    fail_fast: bool = field(default=False, metadata=UNMEASURED)
    progress: bool = field(default=True, metadata=UNMEASURED)  # live progress in the terminal
    # A sweep run again into its folder skips jobs whose fingerprint has a current ok row;
    # resume=true finds that folder: the newest with the same overrides under multirun/
    # (under runs/ for a single run).
    resume: bool = field(default=False, metadata=UNMEASURED)
    # Interrupted, skipped and invalid jobs always run again; ok ones only with retry=all.
    # failed: rerun failed/crashed/timeout/oom | none | all
    retry: str = field(default="failed", metadata=UNMEASURED)

    @property
    def process_count(self) -> int:
        """How many processes time the job (at most, in a paired sweep): `processes` as
        given, else PAIRED_ROUNDS in a paired sweep, DEFAULT_PROCESSES where the repeats
        are adaptive and 1 where `repeat` gives their count."""
        if not self.timing:
            return 1
        if self.processes is not None:
            return self.processes
        if self.pair is not None:
            return PAIRED_ROUNDS
        return DEFAULT_PROCESSES if self.repeat is None else 1

    @property
    def checks_accuracy(self) -> bool:
        """Does the job check its accuracy: verify=true, or timing=false (what it runs)."""
        return self.verify or not self.timing


# The settings only timed repeats apply (timing=false refuses them at any value but their
# default); `profile` too, whose pass comes after the timed repeats.
TIMING_ONLY = (
    "repeat",
    "iterations_per_run",
    "warmup",
    "adaptive_warmup",
    "max_warmup",
    "adaptive_repeat",
    "max_repeat",
    "target_ci",
    "slowdown",
    "min_run_time_s",
    "timed_budget_s",
    "processes",
    "pair",
    "pair_threshold",
)
UNTIMED_KEY = "timing"  # a row's config says timing=false: it was not timed


def _walk(obj: Any, prefix: str, flat: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(obj):
        if not f.metadata.get("measured", True) or (flat and f.metadata.get("bulky")):
            continue
        value = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if f.metadata.get("mapping"):  # by dotted key, however nested; left out while none
            if settings := settings_of(value):
                out |= (
                    {f"{key}.{k}": v for k, v in settings.items()} if flat else {f.name: settings}
                )
            continue
        if f.metadata.get("optional"):
            default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            if value is None or value == default:
                continue
        if is_dataclass(value):
            inner = _walk(value, f"{key}." if flat else "", flat)
            if flat:
                out.update(inner)
            else:
                out[f.name] = inner
        elif flat:
            out[key] = list(value) if isinstance(value, (list, tuple)) else value
        else:
            out[f.name] = value
    return out


def settings_of(section: dict[str, Any]) -> dict[str, Any]:
    """A MAPPING section's settings by dotted key (Hydra nests `cpp.threads`); a null
    is no setting, so `-m inductor.freezing=null,true` sweeps Inductor against freezing."""
    out: dict[str, Any] = {}
    for key, value in section.items():
        if isinstance(value, dict):
            out |= {f"{key}.{k}": v for k, v in settings_of(value).items()}
        elif value is not None:
            out[str(key)] = list(value) if isinstance(value, (list, tuple)) else value
    return out


def dynamic_settings(dynamo: DynamoConfig) -> dict[str, Any]:
    """A job's dynamic-shape settings that are set, by the names its label gives them
    (`dynamic`, `dynamic_batch`); dynamic=false is a setting, dynamic_batch=false none."""
    given = {"dynamo.dynamic": dynamo.dynamic, "dynamo.dynamic_batch": dynamo.dynamic_batch or None}
    return {DYNAMIC[key]: value for key, value in given.items() if value is not None}


def setting_text(value: Any) -> str:
    """A setting's value as the command line writes it (true, null, 1, max-autotune)."""
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)


def measured(cfg: BenchConfig) -> dict[str, Any]:
    """The measured part of a config, nested (what the fingerprint hashes)."""
    return _walk(cfg, "", flat=False)


def measured_flat(cfg: BenchConfig) -> Settings:
    """The measured settings as dotted keys, bulky fields left out: the MLflow params,
    and the row's ``config`` from which reports tell configurations apart."""
    return _walk(cfg, "", flat=True)


def unset_settings(obj: Any = None, prefix: str = "") -> Settings:
    """What each OPTIONAL key is where a row's `config` leaves it out (`timing`: true,
    `host_allocator`: steady), by dotted key; those unset as null left out."""
    obj = BenchConfig() if obj is None else obj
    out: Settings = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if is_dataclass(value):
            out |= unset_settings(value, f"{prefix}{f.name}.")
        elif f.metadata.get("optional") and not f.metadata.get("mapping") and value is not None:
            out[f"{prefix}{f.name}"] = value
    return out


def is_measured(key: str) -> bool:
    """Is a dotted key (``dtype``, ``mlflow.experiment``) measured? Outside the schema
    (``hydra.*``): False; inside a measured dict field (``suite.rules.x``): True."""
    node: Any = BenchConfig
    for part in key.split("."):
        if not is_dataclass(node):
            return True
        found = next((f for f in fields(node) if f.name == part), None)
        if found is None or not found.metadata.get("measured", True):
            return False
        node = get_type_hints(node).get(part)
    return True


def config_to_yaml(cfg: BenchConfig, path: Path) -> None:
    """A job's config.yaml: its resolved config as plain YAML (config_from_yaml reads it),
    not through OmegaConf.structured, which is slow for a sweep's parent."""
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's, where built with it
    path.write_text(yaml.dump(dataclasses.asdict(cfg), Dumper=dumper, sort_keys=False))


def read_yaml(text: str) -> Any:
    """YAML's safe subset, parsed by libyaml where PyYAML was built with it: the same data
    as yaml.safe_load, about seven times faster (the huggingface suite's mirror: 2.0 ms
    against 15.6)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def config_from_yaml(path: Path) -> BenchConfig:
    """A job's config.yaml (its folder's, or its MLflow run's artifact), typed again."""
    return config_from_dict(read_yaml(path.read_text()))


def config_from_dict(data: dict[str, Any]) -> BenchConfig:
    """A config written with dataclasses.asdict (job.json, plan.json, config.yaml), typed
    again: directly where every value has its field's type (OmegaConf's merge is slow);
    anything else takes that merge, which converts what it can and names what it cannot."""
    try:
        return _from_asdict(BenchConfig, data)  # type: ignore[no-any-return]
    except (TypeError, ValueError):
        pass
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(BenchConfig), data))
    assert isinstance(cfg, BenchConfig)
    return cfg


def _from_asdict(cls: Any, data: Any) -> Any:
    """`data` as a value of type `cls`, without conversion; TypeError where it is not."""
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        if not isinstance(data, dict):
            raise TypeError(cls)
        hints = _hints(cls)
        return cls(**{k: _from_asdict(hints[k], v) for k, v in data.items()})  # type: ignore[operator]
    options = (
        typing.get_args(cls)
        if typing.get_origin(cls) in (typing.Union, types.UnionType)
        else (cls,)
    )
    for option in options:
        if option is Any or (option is type(None) and data is None):
            return data
        origin = typing.get_origin(option) or option
        if origin is float and type(data) is int:
            return float(data)
        if isinstance(origin, type) and type(data) is origin:
            if isinstance(data, list) and not all(type(x) is str for x in data):
                break
            return data
    raise TypeError(f"{data!r} is not a {cls}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)
