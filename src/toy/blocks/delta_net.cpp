// blocks/delta_net.cpp — the Gated DeltaNet layer and gated attention (Qwen3-Next, Qwen3.5).
#include "toy/blocks/delta_net.h"

#include <stdexcept>
#include <string>

#include "toy/primitives/device.h"
#include "toy/primitives/indexing.h"

namespace toy {

namespace {

// The state row b continues from: its sequence's (zeroed at position 0), or a zero scratch one
// when the context keeps none (a whole sequence at once).
RecurrentState::Layer& state_of(const Seq& s, int64_t layer, RecurrentState::Layer& scratch, const Shape& conv,
                                const Shape& delta, Device device) {
  const std::string where =
      "gated_delta_net: layer " + std::to_string(layer) + " at position " + std::to_string(s.pos0);
  RecurrentState::Layer& st = s.state ? s.state->layer(layer) : scratch;
  if (s.pos0 == 0)
    st = {.conv = zeros_on(device, conv), .delta = zeros_on(device, delta), .seen = 0};  // where x is
  else if (!s.state || !st.conv.defined() || st.seen != s.pos0)
    throw std::logic_error(where + ": no state of the " + std::to_string(s.pos0) + " tokens before");
  return st;
}

}  // namespace

Tensor gated_delta_net(const GatedDeltaNetWeights& w, const GatedDeltaNetConfig& c, const Tensor& x, const Ctx& ctx,
                       int64_t layer) {
  auto [B, T, D] = x.dims<3>("gated_delta_net: x");
  const int64_t Hk = c.n_k_head, Hv = c.n_v_head, Dk = c.d_state, Dv = c.d_state, r = Hv / Hk;
  const int64_t Ck = Hk * Dk, C = 2 * Ck + Hv * Dv;
  const bool fused_ba = w.ssm_ba.defined();
  auto p = fused_ba ? linears(x, {w.attn_qkv, w.attn_gate, w.ssm_ba})
                    : linears(x, {w.attn_qkv, w.attn_gate, w.ssm_beta, w.ssm_alpha});
  Tensor b = fused_ba ? narrow(p[2].reshape({B, T, Hk, 2 * r}), 0, r).reshape({B, T, Hv}) : p[2];  // [B, T, Hv]
  Tensor a = fused_ba ? narrow(p[2].reshape({B, T, Hk, 2 * r}), r, r).reshape({B, T, Hv}) : p[3];  // [B, T, Hv]
  Tensor beta = sigmoid(b);                                                                        // [B, T, Hv]
  Tensor g = delta_log_decay(a, w.ssm_dt, w.ssm_a);                                                // [B, T, Hv]
  std::vector<Tensor> rows;                                                                        // row b: [T·Hv, Dv]
  for (int64_t i = 0; i < B; ++i) {
    RecurrentState::Layer scratch;
    RecurrentState::Layer& st = state_of(ctx.seq(i), layer, scratch, {c.d_conv - 1, C}, {Hv, Dk, Dv}, x.device());
    Tensor qkv = silu(causal_conv1d(slab(p[0], i), w.ssm_conv1d, st.conv));  // [T, C]
    Tensor q = l2_norm(narrow(qkv, 0, Ck).reshape({T, Hk, Dk}), c.eps);      // [T, Hk, Dk]
    Tensor k = l2_norm(narrow(qkv, Ck, Ck).reshape({T, Hk, Dk}), c.eps);     // [T, Hk, Dk]
    Tensor v = narrow(qkv, 2 * Ck, Hv * Dv).reshape({T, Hv, Dv});            // [T, Hv, Dv]
    rows.push_back(gated_delta_rule(q, k, v, slab(g, i), slab(beta, i), st.delta, c.head_map).reshape({T * Hv, Dv}));
    st.seen += T;
  }
  Tensor o = concat_rows(rows).reshape({B, T, Hv, Dv});
  Tensor z = p[1].reshape({B, T, Hv, Dv});
  o = rms_norm(o, w.ssm_norm, c.eps) * silu(z);          // [B, T, Hv, Dv]
  return linear(o.reshape({B, T, Hv * Dv}), w.ssm_out);  // [B, T, D]
}

Tensor gated_attention(const AttentionWeights& w, const AttentionConfig& c, const Tensor& x, const RopeTable& angles,
                       const Ctx& ctx, int64_t layer) {
  auto [B, T, D] = x.dims<3>("gated_attention: x");
  const int64_t H = c.n_head, Hkv = c.n_kv_head, Dh = c.d_head;
  auto qkv = linears(x, {w.attn_q, w.attn_k, w.attn_v});
  Tensor qg = qkv[0].reshape({B, T, H, 2 * Dh});                                    // per head: query | gate
  Tensor q = rope(rms_norm(narrow(qg, 0, Dh), w.attn_q_norm, c.norm_eps), angles);  // [B, T, H, Dh]
  Tensor k = rope(rms_norm(qkv[1].reshape({B, T, Hkv, Dh}), w.attn_k_norm, c.norm_eps), angles);  // [B, T, Hkv, Dh]
  Tensor v = qkv[2].reshape({B, T, Hkv, Dh});                                                     // [B, T, Hkv, Dh]
  Tensor o = sequence_attention(q, k, v, c.options, ctx, layer) * sigmoid(narrow(qg, Dh, Dh));    // [B, T, H, Dh]
  return linear(o.reshape({B, T, H * Dh}), w.attn_output);                                        // [B, T, D]
}

}  // namespace toy
