"""A small decoder-only transformer (torch.nn, random weights): a prefill and a decode step, to profile.

    python run_bench.py profile bench/examples/profile_transformer.py --roofs results/<a run>
    python bench/examples/profile_transformer.py [--dim 256] [--layers 2] [--prompt 128] [--dtype float32]

Run as a script it builds the model, then runs one prefill of `prompt` tokens and one decode step of one
token against the prefill's KV cache (--phase: either alone), under torch.no_grad. It defines
`profile_step`, the step `run_bench.py profile` captures (the phases, without the model's construction).
Its FLOPs, hand-worked (tests/test_profile.py checks them, with D the model width, F = 4 D the MLP's,
V the vocabulary, L layers, S the prompt):
    prefill: L x (2 S D 3D + 2 S S D + 2 S S D + 2 S D D + 2 x 2 S D F) + 2 S D V
    decode:  L x (2 D 3D + 2 (S + 1) D + 2 (S + 1) D + 2 D D + 2 x 2 D F) + 2 D V
(the attention's two batched products over all H heads add up to S x S x D each; causal masking is applied
to the scores, so nothing is skipped).
"""
from __future__ import annotations

import argparse
import math

import torch
from torch import nn


class Block(nn.Module):
    """Pre-norm attention and MLP; attention written as two batched products (torch.matmul) and a softmax."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim, bias=False), nn.GELU(), nn.Linear(4 * dim, dim, bias=False))

    def forward(self, x, cache=None):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // h)
        if s > 1:
            scores = scores.masked_fill(torch.ones(s, k.shape[2], dtype=torch.bool).triu(1), float("-inf"))
        att = torch.matmul(scores.softmax(-1), v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(att)
        return x + self.mlp(self.norm2(x)), (k, v)


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 1024, dim: int = 256, layers: int = 2, heads: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, caches=None):
        x, out = self.embed(tokens), []
        for i, layer in enumerate(self.layers):
            x, c = layer(x, caches[i] if caches else None)
            out.append(c)
        return self.head(self.norm(x)), out


def hand_flops(dim: int, layers: int, prompt: int, vocab: int, decode: bool) -> int:
    """Return the module docstring's hand-worked FLOPs of one prefill (decode=False) or one decode step."""
    d, f, s = dim, 4 * dim, prompt
    if decode:
        return layers * (2 * d * 3 * d + 4 * (s + 1) * d + 2 * d * d + 4 * d * f) + 2 * d * vocab
    return layers * (2 * s * d * 3 * d + 4 * s * s * d + 2 * s * d * d + 4 * s * d * f) + 2 * s * d * vocab


def build(dim: int = 256, layers: int = 2, prompt: int = 128, vocab: int = 1024, dtype=torch.float32, seed: int = 0):
    """Return (model, prefill(), decode()): the two steps as zero-argument callables under torch.no_grad."""
    torch.manual_seed(seed)
    model = TinyLM(vocab, dim, layers).to(dtype).eval()
    tokens = torch.randint(0, vocab, (1, prompt))
    with torch.no_grad():
        _, caches = model(tokens)
    nxt = torch.randint(0, vocab, (1, 1))

    def prefill():
        with torch.no_grad():
            return model(tokens)[0]

    def decode():
        with torch.no_grad():
            return model(nxt, caches)[0]
    return model, prefill, decode


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--phase", choices=("prefill", "decode", "both"), default="both")
    a = p.parse_args(argv)
    _, prefill, decode = build(a.dim, a.layers, a.prompt, dtype=getattr(torch, a.dtype))

    def step():
        if a.phase != "decode":
            prefill()
        if a.phase != "prefill":
            decode()
    step()
    return step


if __name__ == "__main__":
    profile_step = main()  # run_bench.py profile captures this, not the whole script (bench/run/profile.py)
