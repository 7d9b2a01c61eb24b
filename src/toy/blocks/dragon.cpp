// blocks/dragon.cpp — the Dragon hybrid's attention layer (plain, differential, Scalable-Softmax).
#include "toy/blocks/dragon.h"

namespace toy {

Tensor dragon_attention(const DragonAttentionWeights& w, const DragonAttentionConfig& c, const Tensor& x,
                        const RopeTable& angles, const Ctx& ctx, int64_t layer) {
  auto [B, T, D] = x.dims<3>("dragon_attention: x");
  const int64_t H = c.attn.n_head, Hkv = c.attn.n_kv_head, Dh = c.attn.d_head, parts = c.differential ? 2 : 1;
  const AttentionOptions& opt = c.attn.options;
  auto qkv = linears(x, {w.attn.attn_q, w.attn.attn_k, w.attn.attn_v});
  Tensor q = rope(qkv[0].reshape({B, T, H * parts, Dh / parts}), angles).reshape({B, T, H, Dh});  // [B, T, H, Dh]
  Tensor k = rope(qkv[1].reshape({B, T, Hkv * parts, Dh / parts}), angles).reshape({B, T, Hkv, Dh});
  Tensor v = qkv[2].reshape({B, T, Hkv, Dh});  // [B, T, Hkv, Dh]
  if (c.ssmax) q = scalable_softmax(q, w.attn_ssmax, keys_attended(ctx.positions(B, T), opt.window));
  auto attend = [&](const Tensor& qq) { return sequence_attention(qq, k, v, opt, ctx, layer); };
  Tensor o;              // [B, T, H, Dh]
  if (c.differential) {  // both maps store the same k, v in the cache: the second write is a no-op
    o = differential_attention(q, attend, w.lambda, c.lambda_init);
    o = scale(rms_norm(o, w.attn_sub_norm, c.eps), 1.0f - c.lambda_init);
  } else {
    o = attend(q);
  }
  return linear(o.reshape({B, T, H * Dh}), w.attn.attn_output);  // [B, T, D]
}

}  // namespace toy
