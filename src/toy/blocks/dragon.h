// blocks/dragon.h — L2: the attention layer of the Dragon hybrid (archs/dragon.cpp): RoPE
// attention, optionally differential and/or with Scalable-Softmax (primitives/attention_variants.h
// states both).
#pragma once

#include "toy/blocks/blocks.h"
#include "toy/primitives/attention_variants.h"

namespace toy {

struct DragonAttentionWeights {
  AttentionWeights attn;  // attn_q [H·Dh, D], attn_k, attn_v [Hkv·Dh, D], attn_output [D, H·Dh]
  DiffLambda lambda;      // differential: attn_lambda_q1, … [Dh/2]
  Tensor attn_sub_norm;   // differential: [Dh] the per-head RMSNorm gain
  Tensor attn_ssmax;      // Scalable-Softmax: [H] s of each head
};

struct DragonAttentionConfig {
  AttentionConfig attn;  // heads, RoPE (over each half-head when differential), scale, window
  bool differential = false;
  bool ssmax = false;
  float lambda_init = 0.8f;  // differential: of this layer (diff_lambda_init)
  float eps = 1e-6f;         // of the sub-norm
};

// q, k, v = projections of x; RoPE on each head (on each half-head [q₁ | q₂] when differential, as
// the paper's heads of Dh/2); Scalable-Softmax scales q by s·log n; attention, or differential
// attention then (1 − λ_init)·rms_norm(o, attn_sub_norm) per head; attn_output.
// x: [B, T, D] -> [B, T, D]
Tensor dragon_attention(const DragonAttentionWeights& w, const DragonAttentionConfig& c, const Tensor& x,
                        const RopeTable& angles, const Ctx& ctx, int64_t layer);

}  // namespace toy
