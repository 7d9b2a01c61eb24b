// blocks/gpt2.h — L2: the GPT-2 layer: pre-norm LayerNorm (with bias), attention from one
// fused QKV projection (no rope), and a GELU MLP, every projection with a bias.
//
//   h  = x + attn_output(attention(split(attn_qkv · layer_norm(x))))
//   x' = h + ffn_down(gelu(ffn_up · layer_norm(h)))
#pragma once

#include "toy/blocks/blocks.h"

namespace toy {

struct FusedQkvWeights {
  Tensor attn_qkv, attn_qkv_bias;        // [(H + 2·Hkv)·Dh, D], [(H + 2·Hkv)·Dh]: rows Q | K | V
  Tensor attn_output, attn_output_bias;  // [D, H·Dh], [D]
};
// Multi-head attention without position rotation (positions are in the embeddings); uses
// c.n_head, n_kv_head, d_head and c.options, not c.rope. x: [B, T, D] -> [B, T, D]
Tensor fused_qkv_attention(const FusedQkvWeights& w, const AttentionConfig& c, const Tensor& x, const Ctx& ctx,
                           int64_t layer);

struct GeluMlpWeights {
  Tensor ffn_up, ffn_up_bias;      // [d_ff, D], [d_ff]
  Tensor ffn_down, ffn_down_bias;  // [D, d_ff], [D]
};
// down(gelu_tanh(up·x + b_up)) + b_down.  x: [..., D] -> [..., D]
Tensor gelu_mlp(const GeluMlpWeights& w, const Tensor& x);

struct Gpt2Layer {
  Tensor attn_norm, attn_norm_bias;  // [D], [D]
  Tensor ffn_norm, ffn_norm_bias;    // [D], [D]
  FusedQkvWeights attn;
  GeluMlpWeights ffn;
};
// x: [B, T, D] -> [B, T, D]
Tensor gpt2_block(const Gpt2Layer& L, const AttentionConfig& c, float eps, const Tensor& x, const Ctx& ctx,
                  int64_t layer);

}  // namespace toy
