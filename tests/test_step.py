"""The timed step (`model.step`): the module that get_module() returns, on its inputs, as
the experiment runner and PyTorch's dynamo benchmarks time it, or the model's own
eval()/train(). TorchBench's fixture models (tests/fixtures/torchbench) count which of
their methods ran; the session sweep's rows show what the row and the verifier saw."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.conftest import EarlySweeps, SessionSweep, early, python_c

from benchflow.models.step import SGD_MODELS, TimedStep
from benchflow.results.row import ResultRow

FIXTURE = Path(__file__).parent / "fixtures" / "torchbench"

# Run in a process of its own: loading TorchBench patches torch.manual_seed and sys.path.
PROBE = r"""
import json, sys, torch
from pathlib import Path
from benchflow.models.torchbench import TorchBenchModel
from benchflow.models.step import TimedStep

root, cpu = Path(sys.argv[1]), torch.device("cpu")
out = {}

def step(name, test, kind, dtype=None, prepare=None, as_name=None):
    model = TorchBenchModel(root, name, test, "cpu", None).place(cpu, dtype)
    return TimedStep(model, name=as_name or name, kind=kind, test=test, prepare=prepare)

step("tb_two_steps", "eval", "module")  # puts the checkout on sys.path
from torchbenchmark.models.tb_two_steps import CALLS
for kind in ("module", "torchbench"):
    for test in ("eval", "train"):
        s = step("tb_two_steps", test, kind)
        before = dict(CALLS)
        s(); s()
        out[f"{kind}/{test}"] = {k: CALLS[k] - before[k] for k in CALLS}

s = step("tb_two_steps", "eval", "module")
module, (x,) = s.model.get_module()
got = s()
with torch.no_grad():
    want = module(x)
out["eval"] = {"same": torch.equal(got, want), "grad": got.requires_grad,
               "training": module.training}

s = step("tb_two_steps", "train", "module")
w0 = [p.detach().clone() for p in s.parameters()]
loss = s()
out["train"] = {
    "optimizer": type(s.optimizer).__name__, "lr": s.optimizer.defaults["lr"],
    "loss": loss.item(),
    "changed": all(not torch.equal(a, b) for a, b in zip(w0, s.parameters())),
    "grads": sum(p.grad is not None for p in s.parameters()),
    "training": s.module.training,
}
listed = step("tb_two_steps", "train", "module", as_name="dlrm")
out["sgd_for_listed"] = type(listed.optimizer).__name__

seen = []
def prepare(fn):
    seen.append(type(fn).__name__)
    return fn
step("tb_two_steps", "eval", "module", prepare=prepare)
step("tb_two_steps", "eval", "torchbench", prepare=prepare)
out["prepared"] = list(seen)

# a step no longer referenced is freed at once with its model, the collector off: the
# accuracy check's copies are freed each before the next is made
import gc, weakref
gc.collect()
gc.disable()
freed = {}
for kind in ("module", "torchbench"):
    for test in ("eval", "train"):
        for prep in (None, prepare):
            s = step("tb_two_steps", test, kind, prepare=prep)
            s()
            refs = [weakref.ref(s), weakref.ref(s.model)]
            del s
            freed[f"{kind}/{test}/{'prepared' if prep else 'eager'}"] = [r() is None for r in refs]
gc.enable()
out["freed"] = freed

s = step("tb_dict_inputs", "eval", "module", dtype=torch.bfloat16)
module, inputs = s.model.get_module()
with torch.no_grad():
    want = module(**inputs)
got = s()
out["dict"] = {"same": torch.equal(got, want), "dtype": str(got.dtype),
               "hidden": str(inputs["hidden"].dtype), "mask": str(inputs["mask"].dtype),
               "kwargs": sorted(s.kwargs), "args": len(s.args)}
s = step("tb_dict_inputs", "train", "module")
s()
out["dict_train_grads"] = sum(p.grad is not None for p in s.parameters())

s = step("tb_holder", "eval", "module", dtype=torch.bfloat16)
module, (norms,) = s.model.get_module()
got = s()
with torch.no_grad():
    want = module(norms)
out["holder"] = {"same": torch.equal(got, want), "dtype": str(got.dtype),
                 "norms": str(s.model.tb.norms.dtype), "module": type(module).__name__}
held = {}
for kind in ("module", "torchbench"):
    s = step("tb_holder_inputs", "eval", kind, dtype=torch.bfloat16)
    try:
        got = s()
        held[kind] = [str(t.dtype) for t in (got if isinstance(got, tuple) else (got,))]
    except RuntimeError as exc:  # the module cast and not its inputs: a dtype mismatch
        held[kind] = str(exc)[:200]
held["inputs"] = str(s.model.tb.model.inputs.dtype)
out["holder_inputs"] = held
from torchbenchmark.models.tb_inputs_per_call import CALLS as ASKED
s = step("tb_inputs_per_call", "eval", "module", dtype=torch.bfloat16)
module, (state,) = s.model.get_module()
got = s()
out["asked_once"] = {"calls": ASKED["get_module"], "dtype": str(got.dtype),
                     "state": str(state.dtype), "same_module": module is s.module}
print(json.dumps(out))
"""


@early("step_probe")
def _probe(root: Path) -> subprocess.CompletedProcess[str]:
    return python_c(PROBE, str(FIXTURE), timeout=240)


@pytest.fixture(scope="module")
def probe(early_sweeps: EarlySweeps) -> dict[str, Any]:
    res = early_sweeps.result("step_probe")
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_module_step_calls_the_module_get_module_returns_not_the_models_own(
    probe: dict[str, Any],
) -> None:
    assert probe["module/eval"] == {"forward": 2, "eval": 0, "train": 0}
    assert probe["module/train"] == {"forward": 2, "eval": 0, "train": 0}
    assert probe["eval"] == {"same": True, "grad": False, "training": False}  # no_grad, eval()


def test_torchbench_step_calls_the_models_own_eval_and_train(probe: dict[str, Any]) -> None:
    assert probe["torchbench/eval"] == {"forward": 2, "eval": 2, "train": 0}
    assert probe["torchbench/train"] == {"forward": 2, "eval": 0, "train": 2}


def test_module_train_step_is_the_experiment_runners(probe: dict[str, Any]) -> None:
    train = probe["train"]
    # Adam, lr 0.01; SGD for the models the experiment runner lists
    assert train["optimizer"] == "Adam" and train["lr"] == 0.01
    assert probe["sgd_for_listed"] == "SGD" and "dlrm" in SGD_MODELS
    assert train["changed"] and train["grads"] == 4 and train["training"] is True


def test_a_compiling_backend_gets_the_step_function_or_the_module(probe: dict[str, Any]) -> None:
    # module: the whole step function, as the references compile their model_iter_fn;
    # torchbench: the module, swapped in with set_module
    assert probe["prepared"] == ["function", "Net"]


def test_a_step_no_longer_used_is_freed_at_once_with_its_model(probe: dict[str, Any]) -> None:
    # (a cycle through the step kept each of the accuracy check's model copies until the
    # collector ran: llama's check held 8.0 GB at its peak, 6.9 GB after)
    assert len(probe["freed"]) == 8
    assert all(freed == [True, True] for freed in probe["freed"].values()), probe["freed"]


def test_dict_inputs_are_keyword_arguments_cast_to_the_jobs_dtype(probe: dict[str, Any]) -> None:
    d = probe["dict"]
    assert d["same"] and d["kwargs"] == ["hidden", "mask", "scale"] and d["args"] == 0
    assert (d["hidden"], d["mask"], d["dtype"]) == (
        "torch.bfloat16",
        "torch.int64",  # integer inputs keep their type
        "torch.bfloat16",
    )
    assert probe["dict_train_grads"] == 2


def test_a_module_held_by_a_plain_object_with_inputs_in_attributes(
    probe: dict[str, Any],
) -> None:
    h = probe["holder"]
    assert h == {
        "same": True,
        "dtype": "torch.bfloat16",
        "norms": "torch.bfloat16",  # the model's own attribute was cast with the module
        "module": "Sequential",
    }


def test_a_model_keeping_its_module_and_inputs_in_a_plain_object_runs_in_the_jobs_dtype(
    probe: dict[str, Any],
) -> None:
    """nvidia_deeprecommender's shape: what get_module() returns, module and inputs, sits
    in a holder that is no module; both are cast, for the module step and the model's
    own eval() (before: "mat1 and mat2 must have the same dtype")."""
    assert probe["holder_inputs"] == {
        "module": ["torch.bfloat16"],
        "torchbench": ["torch.bfloat16"],
        "inputs": "torch.bfloat16",
    }


def test_get_module_is_asked_once_and_its_answer_cast_and_timed(probe: dict[str, Any]) -> None:
    """soft_actor_critic's shape: get_module() runs its module on new float32 data at
    each call, so a second call after the cast fails ("mat1 and mat2 must have the same
    dtype"). Asked once, as the experiment runner asks, its module and inputs are cast."""
    assert probe["asked_once"] == {
        "calls": 1,
        "dtype": "torch.bfloat16",
        "state": "torch.bfloat16",
        "same_module": True,
    }


def test_builtin_models_follow_the_same_interface() -> None:
    from benchflow.models.dlrm import Dlrm

    torch.manual_seed(0)
    model = Dlrm("train", size="tiny")
    own = TimedStep(model, name="dlrm", kind="torchbench", test="train", prepare=None)
    assert own.optimizer is None  # its own train() steps its own optimizer
    assert own().dim() == 0
    step = TimedStep(model, name="dlrm", kind="module", test="train", prepare=None)
    assert isinstance(step.optimizer, torch.optim.SGD)  # dlrm is on the runner's SGD list
    before = [p.detach().clone() for p in model.model.parameters()]
    loss = step()
    assert loss.dim() == 0 and not loss.requires_grad
    assert any(not torch.equal(a, b) for a, b in zip(before, model.model.parameters(), strict=True))
    ev = Dlrm("eval", size="tiny")
    with torch.no_grad():
        want = ev.eval()
    got = TimedStep(ev, name="dlrm", kind="module", test="eval", prepare=None)()
    assert torch.equal(got, want)  # a built-in's own eval() is its module's forward


def test_an_eval_that_differentiates_in_its_forward_runs_with_grad_as_the_references() -> None:
    """maml's eval calls torch.autograd.grad in its forward (its inner loop): both
    references run it with grad enabled, every other eval under no_grad (EVAL_WITH_GRAD)."""
    from benchflow.models.step import EVAL_WITH_GRAD

    class InnerLoop(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            (grad,) = torch.autograd.grad((self.w * x).sum(), self.w)
            return x - grad

    class Holder:
        batch_size = 1

        def get_module(self) -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
            return InnerLoop(), (torch.arange(3.0),)

    assert "maml" in EVAL_WITH_GRAD
    got = TimedStep(Holder(), name="maml", kind="module", test="eval", prepare=None)()
    assert torch.equal(got, torch.zeros(3))  # x - d(sum(w x))/dw = x - x
    other = TimedStep(Holder(), name="other", kind="module", test="eval", prepare=None)
    with pytest.raises(RuntimeError, match="does not require grad"):
        other()  # the same forward under no_grad: what benchflow ran for maml before


def test_a_bad_step_is_refused_naming_the_allowed_values() -> None:
    from benchflow.models.dlrm import Dlrm

    with pytest.raises(ValueError, match=r"model.step='jit'.*module, torchbench"):
        TimedStep(Dlrm("eval", size="tiny"), name="dlrm", kind="jit", test="eval", prepare=None)


def test_rows_record_the_step_and_verify_checks_the_step_that_was_timed(
    cases_sweep: SessionSweep,
) -> None:
    module, own = cases_sweep.case("tb_step_module"), cases_sweep.case("tb_step_torchbench")
    assert module["experiment"]["step"] == "module" and module["config"]["model.step"] == "module"
    assert own["experiment"]["step"] == "torchbench"
    assert own["config"]["model.step"] == "torchbench"
    # The model's own eval() adds noise from an OS-seeded generator; its module does not.
    assert module["verification_code"] == "PASS", module["verification_detail"]
    assert own["verification_code"] == "NONDETERMINISTIC_EAGER_RUN"
    assert ResultRow.from_dict(own).experiment.step == "torchbench"


def test_dict_inputs_train_and_a_held_module_on_lazy_xla_pass_verify(
    cases_sweep: SessionSweep,
) -> None:
    train, held = cases_sweep.case("tb_dict_train"), cases_sweep.case("tb_holder_lazy_xla")
    for row in (train, held):
        assert row["status"] == "ok", row["error"]
        assert row["verification_code"] == "PASS", row["verification_detail"]
    assert held["experiment"]["dtype"] == "bfloat16" and held["backend"] == "lazy_xla"
    assert held["metrics"]["xla_ExecuteTime_number"][0] >= 1  # it ran on the XLA device


def test_rows_written_before_the_step_existed_read_as_the_models_own() -> None:
    old = {
        "schema_version": 2,
        "model": {"model_name": "llama"},
        "experiment": {"test": "eval", "dynamo": "inductor"},
        "config": {"model.size": "tiny"},
        "status": "ok",
    }
    row = ResultRow.from_dict(old)
    assert row.experiment.step == "torchbench"
    assert row.config == {"model.size": "tiny", "model.step": "torchbench"}
    new = ResultRow.from_dict({**old, "schema_version": 3, "experiment": {"test": "eval"}})
    assert new.experiment.step == "module"
