#!/usr/bin/env python3
"""bench/torch_train.py — the training step of bench_train.cpp, in PyTorch, for comparison.

The same model as toy's LlamaModel (GGUF llama conventions): tied token embedding, pre-norm
RMSNorm blocks, NORM RoPE on adjacent pairs, grouped-query causal attention, SwiGLU FFN; one
step = forward, mean cross-entropy over B*T targets, backward, clip_grad_norm_(1.0),
torch.optim.AdamW(betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights only).
Prints `ms_per_step X` and `cpu_ms_per_step X` (process CPU time, all threads), after one
warm-up step. Needs only torch (Debian: python3-torch).
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F


class Llama(torch.nn.Module):
    def __init__(self, V, D, L, H, Hkv, Fd, T):
        super().__init__()
        self.H, self.Hkv, self.Dh = H, Hkv, D // H
        std = 0.02
        p = lambda *s: torch.nn.Parameter(torch.randn(*s) * std)
        self.token_embd = p(V, D)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.attn_norm = torch.nn.Parameter(torch.ones(D))
            m.attn_q, m.attn_k, m.attn_v = p(H * self.Dh, D), p(Hkv * self.Dh, D), p(Hkv * self.Dh, D)
            m.attn_output = p(D, H * self.Dh)
            m.ffn_norm = torch.nn.Parameter(torch.ones(D))
            m.ffn_gate, m.ffn_up, m.ffn_down = p(Fd, D), p(Fd, D), p(D, Fd)
            self.layers.append(m)
        self.output_norm = torch.nn.Parameter(torch.ones(D))
        half = self.Dh // 2
        inv = 10000.0 ** (-2.0 * torch.arange(half) / self.Dh)
        ang = torch.arange(T)[:, None] * inv[None, :]          # [T, Dh/2]
        self.register_buffer("cos", ang.cos()[None, :, None, :])
        self.register_buffer("sin", ang.sin()[None, :, None, :])
        self.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1))

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def rope(self, x):  # adjacent pairs (2i, 2i+1), as llama.cpp's NORM mode
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * self.cos - b * self.sin, a * self.sin + b * self.cos), dim=-1).flatten(-2)

    def proj(self, m, name, x):  # x·Wᵀ for layer m's weight `name`; bench/torch_lora.py adds the adapter here
        return x @ getattr(m, name).t()

    def forward(self, tokens):
        B, T = tokens.shape
        x = self.token_embd[tokens]
        g = self.H // self.Hkv
        for m in self.layers:
            h = self.rms(x, m.attn_norm)
            q = self.rope(self.proj(m, "attn_q", h).view(B, T, self.H, self.Dh))
            k = self.rope(self.proj(m, "attn_k", h).view(B, T, self.Hkv, self.Dh))
            v = self.proj(m, "attn_v", h).view(B, T, self.Hkv, self.Dh)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.Dh) + self.mask[:T, :T]
            o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1)
            x = x + self.proj(m, "attn_output", o)
            h = self.rms(x, m.ffn_norm)
            x = x + (F.silu(h @ m.ffn_gate.t()) * (h @ m.ffn_up.t())) @ m.ffn_down.t()
        return self.rms(x, self.output_norm) @ self.token_embd.t()


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("d-model", 128), ("layers", 4), ("heads", 4), ("kv-heads", 2), ("ff", 384), ("vocab", 512),
                          ("context", 128), ("batch", 16), ("steps", 10), ("threads", 0)]:
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Llama(a.vocab, a.d_model, a.layers, a.heads, a.kv_heads, a.ff, a.context)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    ids = torch.randint(0, a.vocab, (a.batch, a.context + 1))
    x, y = ids[:, :-1], ids[:, 1:].reshape(-1)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, a.vocab), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(a.steps):
        step()
    ms = (time.perf_counter() - t0) * 1e3 / a.steps
    cpu = (time.process_time() - c0) * 1e3 / a.steps
    print(f"threads {torch.get_num_threads()}")
    print(f"ms_per_step {ms:.3f}")
    print(f"cpu_ms_per_step {cpu:.3f}")


if __name__ == "__main__":
    main()
