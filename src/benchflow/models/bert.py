"""BERT-style encoder: token + position + segment embeddings, post-LN encoder layers
(bidirectional attention, GELU FFN), and a masked-LM head over the vocabulary."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from benchflow.models.base import BenchModel


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v)  # bidirectional: no mask
        x = self.norm1(x + self.proj(attn.transpose(1, 2).reshape(b, s, d)))
        return self.norm2(x + self.ffn(x))


class BertNet(nn.Module):
    position_ids: torch.Tensor

    def __init__(
        self, vocab: int, dim: int, layers: int, heads: int, hidden: int, seq: int
    ) -> None:
        super().__init__()
        self.seq_len = seq
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(seq, dim)
        self.segments = nn.Embedding(2, dim)
        self.norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, hidden) for _ in range(layers))
        self.mlm = nn.Sequential(
            nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim), nn.Linear(dim, vocab)
        )
        self.register_buffer("position_ids", torch.arange(seq), persistent=False)

    def forward(self, tokens: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        s = tokens.shape[1]
        x = self.tokens(tokens) + self.positions(self.position_ids[:s]) + self.segments(segments)
        x = self.norm(x)
        for layer in self.layers:
            x = layer(x)
        return self.mlm(x)


class Bert(BenchModel):
    DEFAULT_TRAIN_BSIZE = 8
    DEFAULT_EVAL_BSIZE = 8
    SIZES = {
        "tiny": dict(vocab=512, dim=64, layers=2, heads=4, hidden=256, seq=32),
        "small": dict(vocab=4096, dim=256, layers=4, heads=4, hidden=1024, seq=128),
        "base": dict(vocab=30522, dim=768, layers=12, heads=12, hidden=3072, seq=128),
        # BERT-large geometry.
        "large": dict(vocab=30522, dim=1024, layers=24, heads=16, hidden=4096, seq=512),
    }

    def build_module(self, *args: Any, **hp: Any) -> nn.Module:
        return BertNet(**hp)

    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        assert isinstance(module, BertNet)
        vocab = module.tokens.num_embeddings
        tokens = torch.randint(0, vocab, (batch_size, module.seq_len))
        segments = (
            (torch.arange(module.seq_len) >= module.seq_len // 2).long().expand(batch_size, -1)
        )
        return (tokens, segments.contiguous())

    def loss(self, outputs: Any) -> torch.Tensor:
        # Reconstruct the input tokens (an MLM objective with every position scored).
        tokens, _ = self.example_inputs
        return F.cross_entropy(outputs.float().reshape(-1, outputs.shape[-1]), tokens.reshape(-1))
