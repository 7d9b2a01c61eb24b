// blocks/sandwich_norm.cpp — GeGLU FFN and the sandwich-norm block (Gemma 2).
#include "toy/blocks/sandwich_norm.h"

namespace toy {

Tensor geglu_ffn(const SwigluWeights& w, const Tensor& x) {
  auto gu = linears(x, {w.ffn_gate, w.ffn_up});         // [..., d_ff] each
  return linear(gelu_tanh(gu[0]) * gu[1], w.ffn_down);  // [..., D]
}

Tensor sandwich_norm_block(const SandwichNormLayer& L, const AttentionConfig& c, float eps, const Tensor& x,
                           const RopeTable& angles, const Ctx& ctx, int64_t layer) {
  Tensor a = self_attention(L.attn, c, rms_norm(x, L.attn_norm, eps), angles, ctx, layer);  // [B, T, D]
  Tensor h = x + rms_norm(a, L.post_attention_norm, eps);                                   // [B, T, D]
  Tensor f = geglu_ffn(L.ffn, rms_norm(h, L.ffn_norm, eps));                                // [B, T, D]
  return h + rms_norm(f, L.post_ffw_norm, eps);                                             // [B, T, D]
}

}  // namespace toy
