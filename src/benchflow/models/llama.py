"""LLaMA-style decoder: RMSNorm, rotary position embeddings, causal attention, SwiGLU.

Rotary embeddings use real cos/sin arithmetic (no complex tensors), which every
backend here lowers: eager, Inductor, lazy XLA and openxla.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from benchflow.models.base import BenchModel


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * norm).type_as(x) * self.weight


def rotary_tables(head_dim: int, max_seq: int, base: float = 10000.0) -> torch.Tensor:
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(max_seq).float(), inv_freq)  # [seq, head_dim/2]
    return torch.stack([angles.cos(), angles.sin()])  # [2, seq, head_dim/2]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [batch, heads, seq, head_dim]; rotate each (even, odd) pair by its angle.
    x1, x2 = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return rotated.flatten(-2)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        cos, sin = rope[0, :s].to(x.dtype), rope[1, :s].to(x.dtype)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(dim), Attention(dim, heads)
        self.mlp_norm, self.mlp = RMSNorm(dim), SwiGLU(dim, hidden)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), rope)
        return x + self.mlp(self.mlp_norm(x))


class LlamaLM(nn.Module):
    rope: torch.Tensor

    def __init__(
        self, vocab: int, dim: int, layers: int, heads: int, hidden: int, seq: int
    ) -> None:
        super().__init__()
        self.seq_len = seq
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        # A buffer, so it moves with the module to any device and dtype.
        self.register_buffer("rope", rotary_tables(dim // heads, seq), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.rope)
        return self.head(self.norm(x))


class Llama(BenchModel):
    DEFAULT_TRAIN_BSIZE = 4
    DEFAULT_EVAL_BSIZE = 4
    SIZES = {
        "tiny": dict(vocab=256, dim=64, layers=2, heads=4, hidden=172, seq=32),
        "small": dict(vocab=2048, dim=256, layers=4, heads=8, hidden=688, seq=128),
        "base": dict(vocab=32000, dim=1024, layers=8, heads=16, hidden=2816, seq=512),
        # ~7B geometry (LLaMA-7B's), for machines that can hold it
        "large": dict(vocab=32000, dim=4096, layers=32, heads=32, hidden=11008, seq=2048),
    }

    def build_module(self, *args: Any, **hp: Any) -> nn.Module:
        return LlamaLM(**hp)

    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        assert isinstance(module, LlamaLM)
        vocab = module.embed.num_embeddings
        return (torch.randint(0, vocab, (batch_size, module.seq_len)),)

    def loss(self, outputs: Any) -> torch.Tensor:
        # Next-token prediction on the example batch itself.
        (tokens,) = self.example_inputs
        logits = outputs[:, :-1].float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
