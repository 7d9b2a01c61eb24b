// archs/hybrid.h — L3: what the Gated-DeltaNet hybrids (qwen35, qwen3next, dragon) share: their
// recurrent keys, the tensor tables of their two kinds of mixer, and which layer is which.
//
// llama.cpp's keys (CONVENTIONS §5.7): ssm.conv_kernel (d_conv), ssm.state_size (Dk = Dv),
// ssm.group_count (Hk), ssm.time_step_rank (Hv), ssm.inner_size (Hv·Dv), full_attention_interval
// (layer ℓ is full attention iff (ℓ + 1) % interval == 0).
#pragma once

#include <algorithm>
#include <string>

#include "toy/archs/arch.h"
#include "toy/blocks/delta_net.h"

namespace toy {

struct HybridHparams : ModelConfig {
  float eps = 1e-6f;                 // attention.layer_norm_rms_epsilon
  float rope_base = 10000.0f;        // rope.freq_base, e.g. 10000000
  int64_t n_rot = 0;                 // rope.dimension_count (partial rotary), e.g. 64 of 256
  int64_t d_conv = 0;                // ssm.conv_kernel, e.g. 4
  int64_t d_state = 0;               // ssm.state_size, e.g. 128
  int64_t n_k_head = 0;              // ssm.group_count, e.g. 16
  int64_t n_v_head = 0;              // ssm.time_step_rank, e.g. 32
  int64_t d_inner = 0;               // ssm.inner_size = n_v_head·d_state
  int64_t full_attention_every = 0;  // full_attention_interval, e.g. 4
  bool full_attention(int64_t l) const { return (l + 1) % full_attention_every == 0; }
};

// The recurrent layers' keys and the layer pattern (full_attention_interval).
template <class V>
void delta_net_keys(V& v, HybridHparams& h) {
  v.key("ssm.conv_kernel", h.d_conv, Required{int64_t(4)});
  v.key("ssm.state_size", h.d_state, Required{int64_t(64)});
  v.key("ssm.group_count", h.n_k_head, Required{int64_t(2)});
  v.key("ssm.time_step_rank", h.n_v_head, Required{int64_t(4)});
  v.key("ssm.inner_size", h.d_inner, Required{h.n_v_head * h.d_state});
  // A new model shallower than the default interval of 4 makes its last layer attention.
  v.key("full_attention_interval", h.full_attention_every, int64_t(4), Fresh{std::min<int64_t>(4, h.n_layer)});
  v.check(h.d_conv >= 2, "ssm.conv_kernel must be at least 2");
  v.check(h.n_v_head % h.n_k_head == 0, "ssm.group_count " + std::to_string(h.n_k_head) +
                                            " must divide ssm.time_step_rank " + std::to_string(h.n_v_head));
  v.check(h.d_inner == h.n_v_head * h.d_state,
          "ssm.inner_size " + std::to_string(h.d_inner) + " must be ssm.time_step_rank × ssm.state_size");
}

// qwen35 and qwen3next: llama.cpp keeps a KV cache for their attention layers and cannot load a
// model without one (its allocation asserts), so a model has at least one.
template <class V>
void hybrid_keys(V& v, HybridHparams& h) {
  decoder_keys(v, h);
  v.key("attention.layer_norm_rms_epsilon", h.eps, Required{1e-6f});
  rope_keys(v, h);
  delta_net_keys(v, h);
  v.check(h.full_attention_every <= h.n_layer, "full_attention_interval " + std::to_string(h.full_attention_every) +
                                                   " leaves the " + std::to_string(h.n_layer) +
                                                   " layers without an attention layer (llama.cpp needs one)");
}

inline GatedDeltaNetConfig delta_net_config(const HybridHparams& h, HeadMap map) {
  return {.n_k_head = h.n_k_head,
          .n_v_head = h.n_v_head,
          .d_state = h.d_state,
          .d_conv = h.d_conv,
          .head_map = map,
          .eps = h.eps};
}

// The Gated DeltaNet tensors, in llama.cpp's order; β and α from two projections (qwen35) or from
// one, ssm_ba (qwen3next).
enum class BetaAlpha { Separate, Fused };
template <class V>
void delta_net_tensors(V& v, GatedDeltaNetWeights& w, const HybridHparams& h, BetaAlpha ba) {
  const Dims d(h);
  const Dim C{2 * h.n_k_head * h.d_state + h.d_inner, "2·Hk·Dk + Hv·Dv"}, Vd{h.d_inner, "Hv·Dv"};
  const Dim Hv{h.n_v_head, "Hv"}, Hv2{2 * h.n_v_head, "2·Hv"}, Ds{h.d_state, "Dv"}, K{h.d_conv, "d_conv"};
  v.tensor("attn_qkv.weight", w.attn_qkv, {C, d.D}, Init::Normal);
  v.tensor("attn_gate.weight", w.attn_gate, {Vd, d.D}, Init::Normal);
  v.tensor("ssm_conv1d.weight", w.ssm_conv1d, {C, K}, Init::Normal);
  v.tensor("ssm_dt.bias", w.ssm_dt, {Hv}, Init::Ones);
  v.tensor("ssm_a", w.ssm_a, {Hv}, Init::MinusOnes);  // −exp(A_log) < 0: a decay
  if (ba == BetaAlpha::Fused) {
    v.tensor("ssm_ba.weight", w.ssm_ba, {Hv2, d.D}, Init::Normal);
  } else {
    v.tensor("ssm_beta.weight", w.ssm_beta, {Hv, d.D}, Init::Normal);
    v.tensor("ssm_alpha.weight", w.ssm_alpha, {Hv, d.D}, Init::Normal);
  }
  v.tensor("ssm_norm.weight", w.ssm_norm, {Ds}, Init::Ones);
  v.tensor("ssm_out.weight", w.ssm_out, {d.D, Vd}, Init::Normal);
}

// Gated attention: attn_q gives query and gate per head.
template <class V>
void gated_attention_tensors(V& v, AttentionWeights& w, const HybridHparams& h) {
  const Dims d(h);
  const Dim Q2{2 * h.n_head * h.d_head, "2·n_head·d_head"};
  v.tensor("attn_q.weight", w.attn_q, {Q2, d.D}, Init::Normal);
  v.tensor("attn_k.weight", w.attn_k, {d.KV, d.D}, Init::Normal);
  v.tensor("attn_v.weight", w.attn_v, {d.KV, d.D}, Init::Normal);
  v.tensor("attn_output.weight", w.attn_output, {d.D, d.Q}, Init::Normal);
  v.tensor("attn_q_norm.weight", w.attn_q_norm, {d.Dh}, Init::Ones);
  v.tensor("attn_k_norm.weight", w.attn_k_norm, {d.Dh}, Init::Ones);
}

}  // namespace toy
