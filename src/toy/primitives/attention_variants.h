// primitives/attention_variants.h — L1: the two changes to attention the Dragon architecture can
// make (archs/dragon.cpp), each with its gradient:
//
//   Differential attention (Ye et al., "Differential Transformer", 2024): each head's query and
//   key split into halves [q₁ | q₂], [k₁ | k₂] of d = Dh/2 values; two softmax maps
//   A_i = softmax(q_i·k_iᵀ/√d) over the same values v (Dh wide), and
//     o = (A₁ − λ·A₂)·v,   λ = exp(λq₁·λk₁) − exp(λq₂·λk₂) + λ_init,
//     λ_init = 0.8 − 0.6·exp(−0.3·layer)   (layer from 0: the paper's l − 1),
//   then a per-head RMSNorm of o (the "sub-norm", over Dh) scaled by (1 − λ_init). λ is one scalar
//   per layer, from four learned vectors of d values. Since A·v is linear in A, o = A₁v − λ·A₂v:
//   two ordinary attentions whose queries keep one half each (zeros in the other, so q·k = q_i·k_i)
//   and differential_mix.
//
//   Scalable-Softmax (Nakanishi, "Scalable-Softmax Is Superior for Attention", arXiv 2501.19399):
//   the logits of a query that attends n keys are multiplied by s·log n (s a learned scalar per
//   head), so the softmax does not flatten as n grows. Scaling the query by s·log n scales its
//   logits (softcap, where used, comes after).
//
// Glossary as in primitives.h; M = B·T·H query rows.
#pragma once

#include <functional>

#include "toy/primitives/primitives.h"

namespace toy {

// The four learned vectors of λ, d = Dh/2 values each (attn_lambda_q1, …).
struct DiffLambda {
  Tensor q1, k1, q2, k2;  // [d]
};
float diff_lambda_init(int64_t layer);  // 0.8 − 0.6·exp(−0.3·layer)
// λ's value (for cards and tests).
float diff_lambda(const DiffLambda& l, float lambda_init);

// x with the columns outside [begin, begin + n) of its last dimension set to 0. Gradient: dy with
// the same columns set to 0.  x: [..., C] -> [..., C]
Tensor keep_columns(const Tensor& x, int64_t begin, int64_t n);

// o₁ − λ·o₂ with λ from l (above). Gradients: do₁ = dy, do₂ = −λ·dy, and through
// dλ = −Σ dy·o₂ to the four vectors (dλq₁ = dλ·e₁·λk₁ with e₁ = exp(λq₁·λk₁), …).
// o1, o2: [..., Dh] -> [..., Dh]
Tensor differential_mix(const Tensor& o1, const Tensor& o2, const DiffLambda& l, float lambda_init);

// Differential attention of q (before the sub-norm, which the block applies): differential_mix of
// the two half-query attentions, each through `attend` (attention() against fixed k, v, or a
// block's sequence_attention with its cache). The attention's scale should be 1/√(Dh/2).
// q: [B, T, H, Dh] -> [B, T, H, Dh]
using Attend = std::function<Tensor(const Tensor& q)>;
Tensor differential_attention(const Tensor& q, const Attend& attend, const DiffLambda& l, float lambda_init);

// The number of keys each query attends: its position + 1, at most `window` when that is > 0.
// pos: I32 [B, T] -> F32 [B, T]
Tensor keys_attended(const Tensor& pos, int64_t window);

// Scalable-Softmax's query scaling: q[b, t, h] · s[h]·log n[b, t]. Gradients for q and s:
// dq = dy·s·log n, ds[h] = Σ_{b,t} log n·(dy·q)[b, t, h].  q: [B, T, H, Dh], s: [H], n_keys: [B, T]
Tensor scalable_softmax(const Tensor& q, const Tensor& s, const Tensor& n_keys);

}  // namespace toy
