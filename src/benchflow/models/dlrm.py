"""DLRM: dense features through a bottom MLP, sparse features through embedding bags,
pairwise dot-product interaction, then a top MLP to one click logit.

Each sparse feature is a fixed-length bag given as a 2-D index tensor, so no
offsets tensor is needed and every backend lowers the gather-and-sum.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import nn

from benchflow.models.base import BenchModel


def mlp(sizes: list[int], final_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or final_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DlrmNet(nn.Module):
    pair_i: torch.Tensor
    pair_j: torch.Tensor

    def __init__(
        self,
        num_dense: int,
        tables: int,
        rows: int,
        dim: int,
        bag: int,
        bottom: list[int],
        top: list[int],
    ) -> None:
        super().__init__()
        self.num_dense, self.tables, self.rows, self.bag = num_dense, tables, rows, bag
        self.bottom = mlp([num_dense, *bottom, dim], final_activation=True)
        self.embeddings = nn.ModuleList(
            nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables)
        )
        features = tables + 1
        pairs = features * (features - 1) // 2
        self.top = mlp([dim + pairs, *top, 1], final_activation=False)
        # Strict upper triangle of the feature Gram matrix, as fixed index lists.
        iu = torch.triu_indices(features, features, offset=1)
        self.register_buffer("pair_i", iu[0], persistent=False)
        self.register_buffer("pair_j", iu[1], persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        # dense: [batch, num_dense]; sparse: [tables, batch, bag] int64
        x = self.bottom(dense)
        embedded = [emb(sparse[t]) for t, emb in enumerate(self.embeddings)]
        feats = torch.stack([x, *embedded], dim=1)  # [batch, features, dim]
        gram = torch.bmm(feats, feats.transpose(1, 2))  # [batch, features, features]
        interactions = gram[:, self.pair_i, self.pair_j]
        return self.top(torch.cat([x, interactions], dim=1))


BASE = dict(  # the base size; the large one has larger tables and bags
    num_dense=13,
    tables=26,
    rows=100000,
    dim=128,
    bag=16,
    bottom=[512, 256],
    top=[1024, 1024, 512, 256],
)


class Dlrm(BenchModel):
    DEFAULT_TRAIN_BSIZE = 256
    DEFAULT_EVAL_BSIZE = 256
    SIZES = {
        "tiny": dict(num_dense=13, tables=4, rows=1000, dim=16, bag=4, bottom=[32], top=[32]),
        "small": dict(
            num_dense=13, tables=8, rows=20000, dim=64, bag=8, bottom=[256, 128], top=[256, 128]
        ),
        "base": BASE,
        # Criteo-Kaggle-like geometry with 1M-row tables.
        "large": BASE | dict(rows=1000000, bag=32),
    }

    def build_module(self, *args: Any, **hp: Any) -> nn.Module:
        return DlrmNet(**hp)

    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        assert isinstance(module, DlrmNet)
        dense = torch.rand(batch_size, module.num_dense)
        sparse = torch.randint(0, module.rows, (module.tables, batch_size, module.bag))
        return (dense, sparse)

    def loss(self, outputs: Any) -> torch.Tensor:
        # Click-through logloss against fixed pseudo-labels derived from the batch.
        dense, _ = self.example_inputs
        labels = (dense[:, :1] > 0.5).to(outputs.dtype)
        return nn.functional.binary_cross_entropy_with_logits(outputs, labels)
