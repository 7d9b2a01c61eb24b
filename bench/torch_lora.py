#!/usr/bin/env python3
"""bench/torch_lora.py — a LoRA training step in plain PyTorch, for comparison with `toy train lora`.

The model is bench/torch_train.py's Llama (toy's LlamaModel conventions) with random, frozen
weights; PEFT-style adapters on the attention projections (toy's default --targets attn_q, attn_k,
attn_v, attn_output): y = x·Wᵀ + (alpha/r)·(x·Aᵀ)·Bᵀ, A [r, n_in] ~ U(-1/sqrt(n_in), 1/sqrt(n_in)),
B [n_out, r] = 0, rank 8 and alpha 16 (toy's defaults), no dropout (toy's default). One step =
forward, mean cross-entropy over B*T targets, backward (no gradient for the base), clip_grad_norm_
(1.0) over A and B, torch.optim.AdamW on A and B only (betas 0.9/0.95, eps 1e-8, weight decay 0.1,
as `toy train lora`'s defaults). Prints `ms_per_step X` and `cpu_ms_per_step X` (process CPU time,
all threads), after --warmup steps. Needs only torch (Debian: python3-torch).
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F

from torch_train import Llama

TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output")


class LoraLlama(Llama):
    def __init__(self, rank, alpha, *shape):
        super().__init__(*shape)
        for p in self.parameters():
            p.requires_grad_(False)
        self.scale = alpha / rank
        for m in self.layers:
            for name in TARGETS:
                n_out, n_in = getattr(m, name).shape
                bound = 1.0 / math.sqrt(n_in)  # PEFT: kaiming_uniform_(a=sqrt(5)) on A
                setattr(m, name + "_lora_a", torch.nn.Parameter(torch.empty(rank, n_in).uniform_(-bound, bound)))
                setattr(m, name + "_lora_b", torch.nn.Parameter(torch.zeros(n_out, rank)))

    def proj(self, m, name, x):
        y = x @ getattr(m, name).t()
        if name not in TARGETS:
            return y
        return y + self.scale * ((x @ getattr(m, name + "_lora_a").t()) @ getattr(m, name + "_lora_b").t())


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("d-model", 576), ("layers", 30), ("heads", 9), ("kv-heads", 3), ("ff", 1536),
                          ("vocab", 49152), ("context", 256), ("batch", 4), ("rank", 8), ("alpha", 16), ("steps", 2),
                          ("warmup", 1), ("threads", 0)]:
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = LoraLlama(a.rank, a.alpha, a.vocab, a.d_model, a.layers, a.heads, a.kv_heads, a.ff, a.context)
    adapters = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(adapters, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    ids = torch.randint(0, a.vocab, (a.batch, a.context + 1))
    x, y = ids[:, :-1], ids[:, 1:].reshape(-1)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, a.vocab), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(adapters, 1.0)
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(a.steps):
        step()
    ms = (time.perf_counter() - t0) * 1e3 / a.steps
    cpu = (time.process_time() - c0) * 1e3 / a.steps
    print(f"threads {torch.get_num_threads()}")
    print(f"adapter_params {sum(p.numel() for p in adapters)}")
    print(f"ms_per_step {ms:.3f}")
    print(f"cpu_ms_per_step {cpu:.3f}")


if __name__ == "__main__":
    main()
