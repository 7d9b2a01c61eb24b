// blocks/delta_net.h — L2: the two mixers of the Qwen3-Next / Qwen3.5 hybrids: the Gated DeltaNet
// layer (a linear-attention recurrence, its state the layer's cache) and gated attention.
//
// Glossary as in primitives/delta_rule.h: Hk query/key heads and Hv value heads, each of
// d_state (Dk = Dv) values; C = 2·Hk·Dk + Hv·Dv the convolved q|k|v channels.
#pragma once

#include "toy/blocks/blocks.h"
#include "toy/primitives/delta_rule.h"

namespace toy {

struct GatedDeltaNetWeights {
  Tensor attn_qkv;             // [C, D] → q | k | v
  Tensor attn_gate;            // [Hv·Dv, D] → z, the output gate
  Tensor ssm_conv1d;           // [C, d_conv]
  Tensor ssm_dt;               // [Hv] ssm_dt.bias, added to α
  Tensor ssm_a;                // [Hv] −exp(A_log)
  Tensor ssm_beta, ssm_alpha;  // [Hv, D] each (qwen35)
  Tensor ssm_ba;               // [2·Hv, D] (qwen3next): per key head, its Hv/Hk β rows then its Hv/Hk α rows
  Tensor ssm_norm;             // [Dv] RMSNorm gain of each head's output
  Tensor ssm_out;              // [D, Hv·Dv]
};

struct GatedDeltaNetConfig {
  int64_t n_k_head = 0, n_v_head = 0;  // ssm.group_count, ssm.time_step_rank, e.g. 16, 32
  int64_t d_state = 0;                 // ssm.state_size (Dk = Dv), e.g. 128
  int64_t d_conv = 0;                  // ssm.conv_kernel, e.g. 4
  HeadMap head_map = HeadMap::Tiled;
  float eps = 1e-6f;  // of the q/k L2 norms and the output RMSNorm
};

// qkv = silu(causal_conv1d(attn_qkv·x)); q, k L2-normalised per head; β = σ(ssm_beta·x);
// g = softplus(ssm_alpha·x + ssm_dt)·ssm_a; o = gated_delta_rule(q, k, v, g, β) with the state of
// each row's sequence (ctx); y = ssm_out·(rms_norm(o, ssm_norm) ⊙ silu(attn_gate·x)).
// x: [B, T, D] -> [B, T, D]
Tensor gated_delta_net(const GatedDeltaNetWeights& w, const GatedDeltaNetConfig& c, const Tensor& x, const Ctx& ctx,
                       int64_t layer);

// Attention whose query projection also gives a gate per head (attn_q rows, per head: Dh query
// then Dh gate): per-head RMSNorm of q and k, RoPE, attention, then ⊙ σ(gate) before attn_output.
// attn_q: [2·H·Dh, D]. x: [B, T, D] -> [B, T, D]
Tensor gated_attention(const AttentionWeights& w, const AttentionConfig& c, const Tensor& x, const RopeTable& angles,
                       const Ctx& ctx, int64_t layer);

}  // namespace toy
