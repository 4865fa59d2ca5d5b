"""Built-in models: shapes, the train step, determinism, dtype rules, the size knob."""

from __future__ import annotations

import pytest
import torch

from benchflow.models.base import BenchModel
from benchflow.models.bert import Bert
from benchflow.models.dlrm import Dlrm
from benchflow.models.llama import Llama
from benchflow.models.resnet import ResNet

MODELS = [Llama, Dlrm, ResNet, Bert]


def build(cls: type[BenchModel], test: str = "eval", **kw) -> BenchModel:
    torch.manual_seed(0)
    return cls(test=test, size="tiny", **kw)


@pytest.mark.parametrize("cls", MODELS)
def test_output_shapes(cls: type[BenchModel]) -> None:
    m = build(cls, batch_size=3)
    out = m.eval()
    assert out.shape[0] == 3
    expected = {
        Llama: (3, 32, 256),  # batch, seq, vocab
        Dlrm: (3, 1),
        ResNet: (3, 10),
        Bert: (3, 32, 512),
    }[cls]
    assert tuple(out.shape) == expected


@pytest.mark.parametrize("cls", MODELS)
def test_default_batch_sizes_per_test(cls: type[BenchModel]) -> None:
    assert build(cls, "train").batch_size == cls.DEFAULT_TRAIN_BSIZE
    assert build(cls, "eval").batch_size == cls.DEFAULT_EVAL_BSIZE
    assert set(cls.SIZES) == {"tiny", "small", "base", "large"}


@pytest.mark.parametrize("cls", MODELS)
def test_train_step_updates_parameters_and_returns_a_finite_loss(cls: type[BenchModel]) -> None:
    m = build(cls, "train")
    before = [p.detach().clone() for p in m.model.parameters()]
    losses = [m.train() for _ in range(3)]
    assert all(loss.ndim == 0 and torch.isfinite(loss) for loss in losses)
    changed = sum(not torch.equal(a, b) for a, b in zip(before, m.model.parameters(), strict=True))
    assert changed >= len(before) // 2
    assert m.model.training


@pytest.mark.parametrize("cls", MODELS)
def test_same_seed_same_model(cls: type[BenchModel]) -> None:
    a, b = build(cls), build(cls)
    assert torch.equal(a.eval(), b.eval())
    torch.manual_seed(1)
    c = cls(test="eval", size="tiny")
    assert not torch.equal(a.eval(), c.eval())


@pytest.mark.parametrize("cls", MODELS)
def test_dtype_casts_floating_params_and_keeps_integer_inputs(cls: type[BenchModel]) -> None:
    m = build(cls, dtype=torch.bfloat16)
    assert {p.dtype for p in m.model.parameters()} == {torch.bfloat16}
    for x in m.example_inputs:
        assert x.dtype in (torch.bfloat16, torch.int64)
    assert m.eval().dtype == torch.bfloat16


def test_unknown_size_names_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="allowed: \\['base', 'large', 'small', 'tiny'\\]"):
        Llama(test="eval", size="huge")


def test_set_module_swaps_the_forward_but_keeps_parameters() -> None:
    m = build(Llama, "train")
    calls = []

    class Wrapper(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            calls.append(1)
            return self.inner(*args)

    m.set_module(Wrapper(m.model))
    m.train()
    assert calls == [1]


def test_llama_is_causal() -> None:
    m = build(Llama)
    (tokens,) = m.example_inputs
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 256
    with torch.no_grad():
        a, b = m.model(tokens), m.model(changed)
    assert torch.allclose(a[:, :-1], b[:, :-1], atol=1e-6)
    assert not torch.allclose(a[:, -1], b[:, -1])


def test_bert_is_bidirectional() -> None:
    m = build(Bert)
    tokens, segments = m.example_inputs
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 512
    with torch.no_grad():
        a, b = m.model(tokens, segments), m.model(changed, segments)
    assert not torch.allclose(a[:, 0], b[:, 0])  # the first position sees the last


def test_dlrm_interaction_covers_every_feature_pair() -> None:
    m = build(Dlrm)
    net = m.model
    features = len(net.embeddings) + 1
    pairs = set(zip(net.pair_i.tolist(), net.pair_j.tolist(), strict=True))
    assert pairs == {(i, j) for i in range(features) for j in range(i + 1, features)}
