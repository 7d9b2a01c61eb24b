// blocks/gpt2.cpp — fused-QKV attention, GELU MLP and the GPT-2 block.
#include "toy/blocks/gpt2.h"

#include "toy/primitives/indexing.h"

namespace toy {

Tensor fused_qkv_attention(const FusedQkvWeights& w, const AttentionConfig& c, const Tensor& x, const Ctx& ctx,
                           int64_t layer) {
  auto [B, T, D] = x.dims<3>("fused_qkv_attention: x");
  const int64_t H = c.n_head, Hkv = c.n_kv_head, Dh = c.d_head;
  Tensor qkv = linear(x, w.attn_qkv, w.attn_qkv_bias);                          // [B, T, (H + 2·Hkv)·Dh]
  Tensor q = narrow(qkv, 0, H * Dh).reshape({B, T, H, Dh});                     // [B, T, H, Dh]
  Tensor k = narrow(qkv, H * Dh, Hkv * Dh).reshape({B, T, Hkv, Dh});            // [B, T, Hkv, Dh]
  Tensor v = narrow(qkv, (H + Hkv) * Dh, Hkv * Dh).reshape({B, T, Hkv, Dh});    // [B, T, Hkv, Dh]
  Tensor o = sequence_attention(q, k, v, c.options, ctx, layer);                // [B, T, H, Dh]
  return linear(o.reshape({B, T, H * Dh}), w.attn_output, w.attn_output_bias);  // [B, T, D]
}

Tensor gelu_mlp(const GeluMlpWeights& w, const Tensor& x) {
  Tensor u = gelu_tanh(linear(x, w.ffn_up, w.ffn_up_bias));  // [..., d_ff]
  return linear(u, w.ffn_down, w.ffn_down_bias);             // [..., D]
}

Tensor gpt2_block(const Gpt2Layer& L, const AttentionConfig& c, float eps, const Tensor& x, const Ctx& ctx,
                  int64_t layer) {
  Tensor h =
      x + fused_qkv_attention(L.attn, c, layer_norm(x, L.attn_norm, L.attn_norm_bias, eps), ctx, layer);  // [B, T, D]
  return h + gelu_mlp(L.ffn, layer_norm(h, L.ffn_norm, L.ffn_norm_bias, eps));                            // [B, T, D]
}

}  // namespace toy
