"""The structured-config schema: every key a user can set, typed, with its meaning.

Hydra composes YAML under ``conf/`` onto these dataclasses, so a wrong type
(``repeat=abc``) or an unknown key fails at composition. Range and combination
rules live in :mod:`benchflow.config.validate`, applied once at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


@dataclass
class ModelConfig:
    name: str = MISSING  # model name, e.g. llama; TorchBench's name when loaded from there
    source: str = "auto"  # auto: TorchBench if installed, else built-in | builtin | torchbench
    builtin: str | None = None  # "module:Class" of benchflow's own implementation, if any
    size: str = "small"  # size preset of built-in models: tiny | small | base | large


@dataclass
class DynamoConfig:
    name: str = "none"  # torch.compile backend; none = no dynamo (eager, or lazy XLA)
    mode: str | None = None  # torch.compile mode, e.g. max-autotune; null = backend default
    fullgraph: bool = False  # make graph breaks an error instead of a split graph


@dataclass
class XlaConfig:
    name: str = "auto"  # auto: PJRT when the backend needs it | none | PJRT (lazy XLA device)


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
    name: str = "builtin"  # builtin: no suite rules | torchbench: PyTorch's torchbench.yaml
    skip_lists: bool = True  # honour the suite's skip lists (false: the runner's --no-skip)
    fast: bool = False  # also skip the suite's `slow` and `very_slow` models
    torchbench_root: str | None = None  # pytorch/benchmark checkout; null: $TORCHBENCH_ROOT
    rules: dict[str, Any] = field(default_factory=dict)  # the mirrored torchbench.yaml data


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


@dataclass
class BenchConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    dynamo: DynamoConfig = field(default_factory=DynamoConfig)
    xla: XlaConfig = field(default_factory=XlaConfig)
    test: TestConfig = field(default_factory=TestConfig)
    accelerator: AcceleratorConfig = field(default_factory=AcceleratorConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    ir: IrConfig = field(default_factory=IrConfig)
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    repeat: int = 5  # timed repeats; summaries are taken over these
    iterations_per_run: int = 5  # steps per repeat, timed together and divided
    warmup: int = 2  # untimed steps before the first repeat; the first is reported as cold start
    adaptive_warmup: bool = False  # after `warmup`, step until nothing compiles and times settle
    max_warmup: int = 50  # the cap on adaptive warm-up steps (warmup included)
    adaptive_repeat: bool = False  # after `repeat`, add repeats until the CI is within target_ci
    max_repeat: int = 50  # the cap on adaptive repeats
    target_ci: float = 0.02  # adaptive repeats: 95% CI half-width / median to reach
    prefork: bool = True  # fork jobs from a process that imported torch (+torch_xla)
    compile_cache: str = "cold"  # cold: a fresh Inductor/XLA cache per job | warm: shared
    batch_size: int | None = None  # null: the suite's or the model's default for the test
    dtype: str | None = None  # null: suite default (float32 for built-ins); bfloat16, amp, ...
    timeout_s: float = 900.0  # hard limit for one job's child process, compile included
    memory_limit_gb: float | None = None  # the child caps its own data memory; over it: oom
    verify: bool = False  # also check accuracy against eager and float64 (same job, after timing)
    seed: int = 1337  # seeds torch, numpy and random before the model is built
    matmul_precision: str = "high"  # torch.set_float32_matmul_precision
    num_threads: int | None = None  # torch.set_num_threads in the child; null: its CPU count
    # Jobs running at once on a host never share cores: each waits for a free slot.
    cpus_per_job: int | None = None  # cores per job, pinned; null: all, one job at a time
    baseline: str = "inductor"  # backend label the report computes speedups over (none = eager)
    fail_fast: bool = False  # stop the sweep at the first job that is not ok or skipped
    progress: bool = True  # live progress display in the terminal
    # A sweep run again into its folder skips jobs whose fingerprint has a current ok row.
    resume: bool = False  # find that folder: the newest under multirun/ with the same overrides
    # Interrupted and skipped jobs always run again; ok ones only with retry=all.
    retry: str = "failed"  # failed: rerun failed/crashed/timeout/oom | none | all


def to_plain(obj: Any) -> Any:
    """A dataclass tree as plain dicts (JSON-ready)."""
    from dataclasses import asdict, is_dataclass

    return asdict(obj) if is_dataclass(obj) and not isinstance(obj, type) else obj
