"""`verify=true`: check the backend's results in the same job that timed it, on fresh,
identically seeded copies of the model (the timed one is left alone): eager twice, eager in
float64, then the backend under test (docs/accuracy.md). Each copy is of the job's one build
where it can be (`Builder`), and each run starts from the job's seed. With `timing=false` the
backend's result is the job's own first step, at the check's batch size (`batch_size`). The
eager and float64 runs are the model's, not the backend's: the first job of a sweep to
check a model keeps them in the sweep's folder, and its other jobs read them (`shared`);
an untimed eager job's first step is its first eager run.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from benchflow import backends
from benchflow.backends.device import Device
from benchflow.config.schema import BenchConfig
from benchflow.harness.accuracy import compare, leaves, tolerance
from benchflow.harness.process import seed_everything
from benchflow.suite.rules import listed

log = logging.getLogger(__name__)


class Builder(Protocol):
    """A fresh, seeded model's timed step (`last`: no build follows, so the job's copy of
    its build may be taken rather than copied again)."""

    def __call__(
        self, target: Any, dtype: Any, compiled: bool, batch_size: int | None, last: bool = False
    ) -> Any: ...


# run(step, autocast_device_type) -> the step's output (None: no autocast)
Runner = Callable[[Any, "str | None"], Any]


def results(
    step: Any, test: str, run: Runner, autocast: str | None, seed: int
) -> list[torch.Tensor]:
    """One run of the timed step from the job's seed: `outputs`."""
    seed_everything(seed)
    return outputs(step, test, leaves(run(step, autocast)))


def outputs(step: Any, test: str, found: list[torch.Tensor]) -> list[torch.Tensor]:
    """What a step's call gave (`found`: its output's `leaves`), kept from later calls:
    eval, every output leaf; train, the loss and gradients."""
    found = list(found)
    if test == "train":
        found += leaves([p.grad for p in step.parameters() if p.grad is not None])
    return [t.clone() for t in found]


def batch_size(cfg: BenchConfig) -> int | None:
    """The batch the check runs at: the job's, at most the suite's accuracy.max_batch_size."""
    cap = ((cfg.suite.rules.get("accuracy") or {}).get("max_batch_size") or {}).get(cfg.model.name)
    if cap is not None and (cfg.batch_size is None or cfg.batch_size > int(cap)):
        return int(cap)
    return cfg.batch_size


def verify(
    cfg: BenchConfig,
    build: Builder,
    run: Runner,
    device: Device,
    model_dtype: torch.dtype | None,
    result: list[torch.Tensor] | None = None,
    shared: Path | None = None,
) -> tuple[str, dict[str, float], str | None]:
    """(verification code, accuracy metrics, detail) of the backend on `device`, eager on
    the host or the CUDA GPU; `result`: the backend's `outputs` where the job's first step
    gave them (timing=false), else a run of its own; `shared`: the file of the references
    this job shares with others of its sweep."""
    native = torch.device("cuda" if cfg.accelerator.name == "cuda" else "cpu")
    target = device.torch_device
    rules, name, test = cfg.suite.rules, cfg.model.name, cfg.test.name
    if listed(rules, "accuracy.skip.large_models", name):
        return "VERIFIER_SKIPPED", {}, "listed in accuracy.skip.large_models"
    if test == "eval" and listed(rules, "only_training", name):
        return "VERIFIER_SKIPPED", {}, "listed in only_training: no eval accuracy check"
    batch, seed = batch_size(cfg), cfg.seed
    tol, cosine = tolerance(
        rules, name, test, cfg.dtype or "float32", cfg.accelerator.name, cfg.suite.name
    )
    larger = listed(rules, "require_larger_multiplier_for_smaller_tensor", name)

    def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
        may_vary = listed(rules, "non_deterministic", name) or listed(
            rules, "accuracy.skip.eager_not_deterministic", name
        )
        return may_vary or compare(a, b, None, tol, cosine).passed

    # an eager job's first step (timing=false) is the check's first eager run
    eager_job = not backends.of_row(cfg.dynamo.name, cfg.xla.name).has_compile_step
    own = result if eager_job and target.type == native.type else None

    def compute() -> dict[str, Any]:
        return _references(build, run, native, model_dtype, batch, test, seed, same, own)

    try:
        refs = _shared(shared, compute)
    except Exception as exc:
        log.exception("eager run failed during verification")
        return "EAGER_FAILED", {}, f"{type(exc).__name__}: {exc}"
    if not refs["deterministic"]:
        return "NONDETERMINISTIC_EAGER_RUN", {}, "two eager runs with the same seed differ"
    eager, fp64 = refs["eager"], refs["fp64"]
    try:
        if result is None:
            built = build(target, model_dtype, True, batch)
            result = results(built, test, run, device.autocast_type, seed)
        verdict = compare(result, eager, fp64, tol, cosine, larger)
    except Exception as exc:
        log.exception("backend run failed during verification")
        return "EXCEPTION_RAISED", {}, f"{type(exc).__name__}: {exc}"
    detail = "; ".join(verdict.failures[:5]) or None
    code = "PASS" if verdict.passed else "FAIL"
    log.info("verification %s (tolerance %g, cosine %s)", code, tol, cosine)
    return code, verdict.metrics(), detail


def _references(
    build: Builder,
    run: Runner,
    native: torch.device,
    model_dtype: torch.dtype | None,
    batch: int | None,
    test: str,
    seed: int,
    same: Callable[[list[torch.Tensor], list[torch.Tensor]], bool],
    own: list[torch.Tensor] | None = None,
) -> dict[str, Any]:
    """The check's references: eager (`own`: the eager job's first step, untimed), whether
    a second eager run agrees with it (`same`), and float64 (None where the model cannot
    run in it, or eager does not repeat). With `own`, float64 is the job's last build."""
    last = own is not None  # (the job's result is its own: no backend run follows)
    eager = own
    if eager is None:
        eager = results(build(native, model_dtype, False, batch), test, run, native.type, seed)
    rerun = results(build(native, model_dtype, False, batch), test, run, native.type, seed)
    if not same(rerun, eager):
        return {"eager": eager, "deterministic": False, "fp64": None}
    try:
        fp64: list[torch.Tensor] | None = results(
            build(torch.device("cpu"), torch.float64, False, batch, last=last),
            test,
            run,
            None,
            seed,
        )
    except Exception as exc:  # some models cannot run in float64; compare without it
        log.warning(
            "float64 reference failed (%s: %s); comparing with eager only", type(exc).__name__, exc
        )
        fp64 = None
    return {"eager": eager, "deterministic": True, "fp64": fp64}


def _shared(path: Path | None, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`compute()`, or what another job of the sweep kept at `path` from its own; kept
    there for the next (written whole, then renamed: a reader never sees half of it)."""
    if path is not None and path.is_file():
        try:
            got: dict[str, Any] = torch.load(path, weights_only=True)
            log.info("the check's eager and float64 references from %s", path)
            return got
        except Exception as exc:  # then its own, as if there were none
            log.warning("references at %s not read: %s: %s", path, type(exc).__name__, exc)
    got = compute()
    if path is not None:
        part = path.with_name(f"{path.name}.{os.getpid()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(got, part)
            os.replace(part, path)
        except Exception as exc:  # (a full disk is torch's RuntimeError): the next job's own
            log.warning("references not kept at %s: %s: %s", path, type(exc).__name__, exc)
            with contextlib.suppress(OSError):
                part.unlink()
    return got
