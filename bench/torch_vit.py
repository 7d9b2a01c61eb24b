#!/usr/bin/env python3
"""bench/torch_vit.py — `toy train vit` in PyTorch, for the side-by-side in docs/vit.md.

The same model as toy's archs/vit.cpp: patch embedding (a linear map of flattened P×P patches,
= a stride-P conv), a class token, learned positions, pre-norm encoder layers (LayerNorm with
bias, fused QKV with bias, bidirectional multi-head attention, GELU-tanh MLP), a final LayerNorm
on the class token and a linear head. Weights N(0, 0.02), norms 1, biases 0. The same training:
batch B, AdamW(betas, eps, weight decay on 2-D weights only), clip_grad_norm_, linear warm-up then
cosine to min_lr_ratio·lr, one shuffle per epoch, pixels / 255, no augmentation.

  python3 bench/torch_vit.py --threads 2                 the whole run: time and test accuracy
  python3 bench/torch_vit.py --threads 2 --steps 50      ms per step only (after 5 warm-up steps)

Needs torch and numpy (Debian: python3-torch; bench/setup_torch.sh installs it with OpenBLAS).
"""
import argparse
import gzip
import math
import time

import numpy as np
import torch
import torch.nn.functional as F


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    n = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(n)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * n).reshape(dims)


class Vit(torch.nn.Module):
    def __init__(self, S, P, D, L, H, Fd, K):
        super().__init__()
        self.P, self.H = P, H
        N = (S // P) ** 2
        p = lambda *s: torch.nn.Parameter(torch.randn(*s) * 0.02)
        z = lambda *s: torch.nn.Parameter(torch.zeros(*s))
        o = lambda *s: torch.nn.Parameter(torch.ones(*s))
        self.patch_embd, self.patch_embd_bias = p(D, P * P), z(D)
        self.class_embd, self.position_embd = p(D), p(N + 1, D)
        self.blk = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.attn_norm, m.attn_norm_bias = o(D), z(D)
            m.attn_qkv, m.attn_qkv_bias = p(3 * D, D), z(3 * D)
            m.attn_output, m.attn_output_bias = p(D, D), z(D)
            m.ffn_norm, m.ffn_norm_bias = o(D), z(D)
            m.ffn_up, m.ffn_up_bias = p(Fd, D), z(Fd)
            m.ffn_down, m.ffn_down_bias = p(D, Fd), z(D)
            self.blk.append(m)
        self.output_norm, self.output_norm_bias = o(D), z(D)
        self.output, self.output_bias = p(K, D), z(K)

    def forward(self, images):  # [B, 1, S, S]
        B, P = images.shape[0], self.P
        x = images.unfold(2, P, P).unfold(3, P, P)                   # [B, 1, G, G, P, P]
        x = x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, P * P)        # [B, N, P·P]
        x = F.linear(x, self.patch_embd, self.patch_embd_bias)       # [B, N, D]
        x = torch.cat([self.class_embd.expand(B, 1, -1), x], 1) + self.position_embd
        B, T, D = x.shape
        for m in self.blk:
            h = F.layer_norm(x, (D,), m.attn_norm, m.attn_norm_bias, 1e-5)
            q, k, v = F.linear(h, m.attn_qkv, m.attn_qkv_bias).view(B, T, 3, self.H, D // self.H).unbind(2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)) \
                if hasattr(F, "scaled_dot_product_attention") else \
                torch.softmax(q.transpose(1, 2) @ k.permute(0, 2, 3, 1) / math.sqrt(D // self.H), -1) @ v.transpose(1, 2)
            x = x + F.linear(a.transpose(1, 2).reshape(B, T, D), m.attn_output, m.attn_output_bias)
            h = F.layer_norm(x, (D,), m.ffn_norm, m.ffn_norm_bias, 1e-5)
            x = x + F.linear(F.gelu(F.linear(h, m.ffn_up, m.ffn_up_bias), approximate="tanh"), m.ffn_down, m.ffn_down_bias)
        x = F.layer_norm(x[:, 0], (D,), self.output_norm, self.output_norm_bias, 1e-5)
        return F.linear(x, self.output, self.output_bias)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    # toy train vit's defaults (src/toy/recipes/vit.h)
    ap.add_argument("--patch", type=int, default=7)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=0, help="> 0: time this many steps only")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--min-lr-ratio", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xs = torch.from_numpy(idx(f"{a.data}/train-images-idx3-ubyte.gz").astype(np.float32) / 255).unsqueeze(1)
    ys = torch.from_numpy(idx(f"{a.data}/train-labels-idx1-ubyte.gz").astype(np.int64))
    xt = torch.from_numpy(idx(f"{a.data}/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255).unsqueeze(1)
    yt = torch.from_numpy(idx(f"{a.data}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    m = Vit(28, a.patch, a.d_model, a.layers, a.heads, a.ff, 10)
    decay = [p for p in m.parameters() if p.dim() == 2]
    other = [p for p in m.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": other, "weight_decay": 0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    per_epoch = len(xs) // a.batch
    total = a.steps if a.steps > 0 else a.epochs * per_epoch

    def lr_at(s):  # engines/optimizer.h lr_at
        if s < a.warmup:
            return a.lr * (s + 1) / a.warmup
        t = min(1.0, (s - a.warmup) / max(1, total - a.warmup))
        return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))

    warm = 5 if a.steps > 0 else 0
    t0, order = time.time(), None
    for s in range(total + warm):
        if s == warm:
            t0, c0 = time.time(), time.process_time()
        e, i = divmod(s % (total + 1), per_epoch)
        if i == 0 or order is None:
            order = torch.randperm(len(xs))
        idx_b = order[i * a.batch:(i + 1) * a.batch]
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        loss = F.cross_entropy(m(xs[idx_b]), ys[idx_b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if a.steps == 0 and s % 200 == 0:
            print(f"step {s}: loss={loss.item():.4f}", flush=True)
    secs = time.time() - t0
    if a.steps > 0:
        print(f"ms_per_step {1000 * secs / total:.2f}")
        print(f"cpu_ms_per_step {1000 * (time.process_time() - c0) / total:.2f}")
        return
    with torch.no_grad():
        right = sum((m(xt[i:i + 500]).argmax(1) == yt[i:i + 500]).sum().item() for i in range(0, len(xt), 500))
    print(f"torch: {total} steps in {secs:.1f}s ({1000 * secs / total:.1f} ms/step), test accuracy {right / len(xt):.4f}")


if __name__ == "__main__":
    main()
