"""Small PyTorch modules the import tests build (MODULE:CALLABLE targets): a plain GPT block, and the failures."""
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf")).softmax(dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, d))


class GptBlock(nn.Module):
    """nanoGPT's Block: pre-norm attention and a 4x GELU MLP, biases on, no dropout."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, seq)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def raises():
    raise ValueError("no such checkpoint")


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) if x.sum() > 0 else x


class UnknownOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.cumprod(self.fc(x), dim=1)
