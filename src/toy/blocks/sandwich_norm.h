// blocks/sandwich_norm.h — L2: the Gemma-2 layer, normalised on both sides of each sublayer.
//
//   h  = x + rms_norm(attention(rms_norm(x) · attn_norm)) · post_attention_norm
//   x' = h + rms_norm(geglu(rms_norm(h) · ffn_norm)) · post_ffw_norm
#pragma once

#include "toy/blocks/blocks.h"

namespace toy {

// down(gelu_tanh(gate·x) ⊙ up·x): GELU on the gate projection.  x: [..., D] -> [..., D]
Tensor geglu_ffn(const SwigluWeights& w, const Tensor& x);

struct SandwichNormLayer {
  Tensor attn_norm, post_attention_norm;  // [D]
  Tensor ffn_norm, post_ffw_norm;         // [D]
  AttentionWeights attn;
  SwigluWeights ffn;  // gate, up, down of the GeGLU FFN
};
// x: [B, T, D] -> [B, T, D]
Tensor sandwich_norm_block(const SandwichNormLayer& L, const AttentionConfig& c, float eps, const Tensor& x,
                           const RopeTable& angles, const Ctx& ctx, int64_t layer);

}  // namespace toy
