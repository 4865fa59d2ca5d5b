"""A row's arithmetic (docs/flops.md): the FLOPs of one step as torch's counter counts
them on the eager module (harness/flops.py), checked against each built-in model's
layers worked out by hand; what the counter cannot count, named; the device's matmul
peak, measured once and then read from benchflow's cache (harness/peak.py); and the
FLOP/s and share of peak a row's time gives them (results/flops.py), as the report
shows them. Real sweeps' rows carry them: the grid's (tests/test_headline.py) and the
report's early sweep, with intervals, its CSV and MLflow (tests/test_report.py)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from benchflow.harness import peak
from benchflow.harness.flops import count
from benchflow.models.base import BenchModel
from benchflow.models.bert import Bert
from benchflow.models.dlrm import Dlrm
from benchflow.models.llama import Llama
from benchflow.models.resnet import ResNet
from benchflow.models.step import TimedStep
from benchflow.results.flops import Flops, Peak, judged
from benchflow.results.load import HostLoad


def mm(m: int, k: int, n: int) -> int:
    """An (m x k) @ (k x n) product: m*n dot products of k multiply-adds."""
    return 2 * m * k * n


def conv(batch: int, out_hw: int, cin: int, cout: int, kernel: int) -> int:
    """A convolution: each output element a dot product of cin * kernel^2 multiply-adds."""
    return 2 * batch * out_hw * out_hw * cout * cin * kernel * kernel


def attention(batch: int, heads: int, seq: int, head_dim: int) -> tuple[int, int]:
    """Forward and backward of softmax(q k^T) v, as torch's counter counts them: the
    forward's two batched matmuls (scores, then scores @ v); the backward's five
    (scores again, then the gradients of v, of the scores, of q and of k)."""
    one = batch * heads * mm(seq, head_dim, seq)
    return 2 * one, 5 * one


def linears(tokens: int, shapes: list[tuple[int, int]]) -> int:
    return sum(mm(tokens, fan_in, fan_out) for fan_in, fan_out in shapes)


def llama(test: str) -> int:
    h = Llama.SIZES["tiny"]
    b, s, d, hidden = Llama.DEFAULT_EVAL_BSIZE, h["seq"], h["dim"], h["hidden"]
    block = [(d, 3 * d), (d, d), (d, hidden), (d, hidden), (hidden, d)]  # qkv out gate up down
    forward = h["layers"] * linears(b * s, block) + linears(b * s, [(d, h["vocab"])])
    fwd, bwd = attention(b, h["heads"], s, d // h["heads"])
    if test == "eval":
        return forward + h["layers"] * fwd
    # every linear's input needs a gradient (the embedding's output does): its input's
    # and its weight's gradients, a forward's matmul each
    return 3 * forward + h["layers"] * (fwd + bwd)


def bert(test: str) -> int:
    h = Bert.SIZES["tiny"]
    b, s, d, hidden = Bert.DEFAULT_EVAL_BSIZE, h["seq"], h["dim"], h["hidden"]
    layer = [(d, 3 * d), (d, d), (d, hidden), (hidden, d)]  # qkv proj ffn
    forward = h["layers"] * linears(b * s, layer) + linears(b * s, [(d, d), (d, h["vocab"])])
    fwd, bwd = attention(b, h["heads"], s, d // h["heads"])
    if test == "eval":
        return forward + h["layers"] * fwd
    return 3 * forward + h["layers"] * (fwd + bwd)


def resnet(test: str) -> int:
    h = ResNet.SIZES["tiny"]
    assert h["blocks"] == [1, 1]  # one BasicBlock per stage, as written out below
    b, image, (w1, w2) = ResNet.DEFAULT_EVAL_BSIZE, h["image"], h["widths"]
    stem = conv(b, image, 3, w1, 3)
    rest = [
        conv(b, image, w1, w1, 3),  # stage 1: two 3x3 convolutions, same width
        conv(b, image, w1, w1, 3),
        conv(b, image // 2, w1, w2, 3),  # stage 2: stride 2, wider
        conv(b, image // 2, w2, w2, 3),
        conv(b, image // 2, w1, w2, 1),  # its 1x1 projection shortcut
    ]
    fc = mm(b, w2, h["classes"])
    if test == "eval":
        return stem + sum(rest) + fc
    # the stem's input (the images) needs no gradient: only its weight's
    return 2 * stem + 3 * (sum(rest) + fc)


def dlrm(test: str) -> int:
    h = Dlrm.SIZES["tiny"]
    b, d, features = Dlrm.DEFAULT_EVAL_BSIZE, h["dim"], h["tables"] + 1
    first = mm(b, h["num_dense"], h["bottom"][0])
    bottom = linears(b, [(h["bottom"][0], d)])
    top_in = d + features * (features - 1) // 2
    top = linears(b, [(top_in, h["top"][0]), (h["top"][0], 1)])
    gram = b * mm(features, d, features)  # the interaction's batched matmul
    if test == "eval":
        return first + bottom + top + gram
    # the first layer's input (the dense features) needs no gradient: only its weight's
    return 2 * first + 3 * (bottom + top + gram)


BY_HAND = {Llama: llama, Bert: bert, ResNet: resnet, Dlrm: dlrm}


@pytest.mark.parametrize("test", ["eval", "train"])
@pytest.mark.parametrize("cls", list(BY_HAND), ids=lambda c: c.__name__)
def test_a_builtin_models_count_is_its_layers_arithmetic(cls: type[BenchModel], test: str) -> None:
    """Each built-in model at model.size=tiny: the count of one step is the arithmetic
    of its matmuls, convolutions and attention, worked out from its layers' shapes."""
    assert cls.DEFAULT_EVAL_BSIZE == cls.DEFAULT_TRAIN_BSIZE
    step = TimedStep(cls(test, size="tiny"), name="m", kind="module", test=test, prepare=None)
    flops = count(step, contextlib.nullcontext())
    assert flops.error is None and flops.uncounted == [], flops
    assert flops.per_step == pytest.approx(BY_HAND[cls](test), rel=0.01)
    assert flops.counted.startswith("forward and backward" if test == "train" else "forward")
    assert sum(flops.top.values()) == pytest.approx(flops.per_step)  # each kind of operator


class _MatrixVector(nn.Module):
    """A matmul and an operator torch's counter has no formula for (aten.mv)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mv(self.w, (x @ self.w).sum(0))


class _Tiny(BenchModel):
    DEFAULT_TRAIN_BSIZE = DEFAULT_EVAL_BSIZE = 4
    SIZES = {"tiny": {}}

    def build_module(self, *args: Any, **hparams: Any) -> nn.Module:
        return _MatrixVector()

    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        return (torch.randn(batch_size, 8),)


def test_an_operator_the_counter_does_not_know_is_named_never_counted_as_zero() -> None:
    step = TimedStep(_Tiny("eval", size="tiny"), name="t", kind="module", test="eval", prepare=None)
    flops = count(step, contextlib.nullcontext())
    assert flops.uncounted == ["aten.mv"] and flops.per_step is None
    assert flops.top == {"aten.mm": mm(4, 8, 8)}  # what it did count, for the reader
    assert flops.why_none and "aten.mv" in flops.why_none
    timed = judged(flops, 0.001, (0.0009, 0.0011))
    assert timed is not None and timed.per_s is None and timed.share_of_peak is None


def test_flop_per_s_and_the_share_follow_the_time_and_its_interval() -> None:
    """A shorter time is more FLOP/s: the interval's bounds swap; the share is of the peak."""
    measured = Peak(
        flop_per_s=1e11, dtype="float32", device="cpu", threads=1, matmul_precision="highest",
        key="k", measured_at=0.0, method="m",
    )  # fmt: skip
    got = judged(Flops(per_step=2e9, peak=measured), 0.04, (0.025, 0.05))
    assert got is not None
    assert (got.per_s, got.per_s_ci_low, got.per_s_ci_high) == pytest.approx((5e10, 4e10, 8e10))
    assert (got.share_of_peak, got.share_ci_low, got.share_ci_high) == pytest.approx(
        (0.5, 0.4, 0.8)
    )
    assert Flops.from_dict(json.loads(json.dumps(got.to_dict()))) == got  # as a row holds it
    no_interval = judged(Flops(per_step=2e9), 0.04, None)  # and no peak
    assert no_interval is not None and no_interval.per_s == pytest.approx(5e10)
    assert no_interval.per_s_ci_low is None and no_interval.share_of_peak is None


def test_the_peak_is_measured_once_then_read_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first job on a machine measures the peak and keeps it, with how it was
    measured, under benchflow's cache; a later one reads it and measures nothing. The
    key is one definition (peak_key): another thread count is another peak. One
    measured while others used the job's cores is measured again by later jobs, the
    best kept, MEASURES times at most."""
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peak, "SIZES", {"cpu": (64, 128)})  # a cheap probe: its own figures
    monkeypatch.setattr(peak, "RUN_S", 0.002)
    busy = HostLoad(quiet=False, contended=[0], other_own_share=0.5)
    host = [HostLoad(quiet=True), busy, busy, busy]  # what the timed repeats' rule says
    monkeypatch.setattr(peak, "host_load", lambda *_: host.pop(0))
    best: list[float] = []
    runs = peak._runs

    def measured(*args: Any) -> list[float]:
        got = runs(*args)
        best.append(max(got))
        return got

    monkeypatch.setattr(peak, "_runs", measured)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        first = peak.device_peak("cpu", torch.float32, "highest")
        torch.set_num_threads(2)  # another key, measured on a busy host: three times
        on_busy = [peak.device_peak("cpu", torch.float32, "highest") for _ in range(3)]
        monkeypatch.setattr(peak, "_runs", _no_measuring)
        busiest = peak.device_peak("cpu", torch.float32, "highest")
        torch.set_num_threads(1)
        again = peak.device_peak("cpu", torch.float32, "highest")
    finally:
        torch.set_num_threads(threads)
    assert not first.from_cache and again.from_cache and busiest.from_cache
    assert first.quiet and first.measures == 1
    assert [p.measures for p in on_busy] == [1, 2, 3] and not busiest.quiet
    busy_best = max(best[len(peak.SIZES["cpu"]) :])  # each size's best run, the busy ones
    assert busiest.flop_per_s == busy_best and busiest.host == busy.to_dict()
    assert again.flop_per_s == first.flop_per_s > 0 and again.key == first.key
    facts = peak.peak_facts(first.device, "float32", 1, "highest")
    kept = peak.peak_file(facts)
    assert sorted((tmp_path / "machine").glob("matmul-peak-*.json")) == sorted(
        [kept, peak.peak_file({**facts, "threads": 2})]
    )
    assert first.key == peak.peak_key(facts) != busiest.key
    data = json.loads(kept.read_text())
    assert data["facts"] == facts and data["facts"]["threads"] == 1
    provenance = data["peak"]
    assert provenance["sizes"] == [64, 128] and len(provenance["runs"]) == 2
    assert all(len(runs) == peak.RUNS for runs in provenance["runs"])
    assert provenance["flop_per_s"] == max(max(r) for r in provenance["runs"])
    assert provenance["method"] == peak.METHOD and provenance["measured_at"] > 0
    assert first.vendor is None  # a CPU: no datasheet


@pytest.mark.parametrize("native", [1e9, 100e9])  # an AVX2-only CPU's bf16; a GPU's
def test_a_16_bit_peak_is_the_better_of_the_dtype_and_float32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: float
) -> None:
    """A bfloat16 matmul can run as a float32 one (XLA's CPU backend runs it so): on a
    CPU without native bfloat16 (1.4 GFLOP/s in bfloat16, 65 in float32 on an AVX2-only
    AMD EPYC) the rows' shares were of the slow one, over 100%. The peak is the better
    of the two, says which it computed in, and a dtype far behind at one size is not
    tried at the next. Planted rates: each run's FLOP/s by dtype."""
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peak, "SIZES", {"cpu": (64, 128, 256)})
    rates = {torch.bfloat16: native, torch.float32: 10e9}
    monkeypatch.setattr(peak, "_runs", lambda n, dtype, device: [rates[dtype]] * peak.RUNS)
    got = peak.device_peak("cpu", torch.bfloat16, "highest")
    assert got.flop_per_s == max(native, 10e9) and got.dtype == "bfloat16"
    fast, slow = ("float32", "bfloat16") if native < 10e9 else ("bfloat16", "float32")
    assert got.computed_in == fast
    measured = {"bfloat16": got.runs, "float32": got.float32_runs}
    assert measured[fast] == [[max(native, 10e9)] * peak.RUNS] * 3
    assert measured[slow] == [[min(native, 10e9)] * peak.RUNS, [], []]
    assert peak.device_peak("cpu", torch.float32, "highest").float32_runs == []  # (not 16-bit)


def _no_measuring(*args: Any) -> list[float]:
    raise AssertionError("measured again")


def test_a_gpus_datasheet_peak_is_by_its_name_dtype_and_precision() -> None:
    assert peak.vendor_peak("NVIDIA H200", "bfloat16", "high") == (
        "H200 SXM bf16 dense (NVIDIA's datasheet)",
        989.5e12,
    )
    assert peak.vendor_peak("NVIDIA H100 80GB HBM3", "float32", "highest") == (
        "H100 SXM fp32 dense (NVIDIA's datasheet)",
        67e12,
    )
    assert peak.vendor_peak("NVIDIA H100 PCIe", "float32", "high")[1] == 378e12  # type: ignore[index]
    assert peak.vendor_peak("NVIDIA H200 NVL", "float16", "highest")[1] == 835.5e12  # type: ignore[index]
    assert peak.vendor_peak("NVIDIA GeForce RTX 4090", "bfloat16", "high") is None


def test_the_models_own_step_is_counted_on_its_module_before_the_backend_prepared_it() -> None:
    """model.step=torchbench: get_module()'s module as it was before the backend wrapped
    it (a compiled module would count nothing), on its inputs."""
    prepared: list[nn.Module] = []

    def prepare(module: nn.Module) -> nn.Module:
        prepared.append(module)
        return nn.Identity()

    model = Dlrm("eval", size="tiny")
    step = TimedStep(model, name="d", kind="torchbench", test="eval", prepare=prepare)
    module, args, _ = step.eager()
    assert module is prepared[0] and model.get_module()[0] is not module
    assert args == model.example_inputs
    assert count(step, contextlib.nullcontext()).per_step == pytest.approx(dlrm("eval"))


def _row(model: str, flops: Flops) -> Any:
    from benchflow.core.status import Status
    from benchflow.results.row import Experiment, ModelId, ResultRow

    return ResultRow(
        model=ModelId(model_name=model),
        experiment=Experiment(test="eval"),
        backend="inductor",
        status=Status.OK,
        summary={"per_iter_time_s": {"median": 0.01, "ci_low": 0.008, "ci_high": 0.0125}},
        flops=judged(flops, 0.01, (0.008, 0.0125)),
    )


def test_the_report_shows_each_rows_share_the_geomean_and_what_each_is_of() -> None:
    """The report's cells, its summary's geomean share, and its notes: the peak each share
    is of (with a GPU's datasheet figure beside it), and why a row has none."""
    from benchflow.report.csv_tables import entries_csv, summary_csv
    from benchflow.report.model import build_report
    from benchflow.report.render import ENTRY_HEADER, entry_cells

    h200 = Peak(
        flop_per_s=7e14, dtype="bfloat16", device="NVIDIA H200", threads=None,
        matmul_precision="high", key="k", measured_at=0.0, method="m", from_cache=True,
        vendor="H200 SXM bf16 dense (NVIDIA's datasheet)", vendor_flop_per_s=989.5e12,
    )  # fmt: skip
    rows = [
        _row("a", Flops(per_step=7e11, peak=h200)),  # 70 TFLOP/s: 10% of the peak
        _row("b", Flops(per_step=2.8e12, peak=h200)),  # 40%
        _row("c", Flops(per_step=None, uncounted=["aten.mv"], peak=h200)),
    ]
    report = build_report(rows, "inductor")
    (summary,) = report.summaries
    assert summary.geomean_share == pytest.approx(0.2) and summary.share_models == 2
    cells = dict(zip(ENTRY_HEADER, entry_cells(report.entries[0], False), strict=True))
    assert cells["FLOP/s (95% CI)"] == "70.0 TFLOP/s (56.0-87.5)"
    assert cells["share of peak (95% CI)"] == "10.0% (8.0%-12.5%)"
    assert (
        dict(zip(ENTRY_HEADER, entry_cells(report.entries[2], False), strict=True))[
            "share of peak (95% CI)"
        ]
        == "-"
    )
    (peak_note,) = [n for n in report.notes if n.startswith("share of peak: of ")]
    assert (
        "NVIDIA H200, bfloat16: 700 TFLOP/s" in peak_note and "from benchflow's cache" in peak_note
    )
    assert "H200 SXM bf16 dense (NVIDIA's datasheet): 990 TFLOP/s" in peak_note
    assert "a eval inductor, b eval inductor, c eval inductor" in peak_note
    assert any("the counter does not know aten.mv: c eval inductor" in n for n in report.notes)
    line = next(r for r in entries_csv(report).splitlines() if r.startswith("a,"))
    assert ",7e+11,7e+13,5.6e+13,8.75e+13,0.1,0.08,0.125,7e+14,9.895e+14," in line
    assert summary_csv(report).splitlines()[1].split(",")[10:12] == ["0.2", "2"]
