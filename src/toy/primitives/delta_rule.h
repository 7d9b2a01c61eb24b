// primitives/delta_rule.h — L1: the pieces of a Gated DeltaNet layer (Qwen3-Next, Qwen3.5), as
// llama.cpp computes them (ggml's ssm_conv, l2_norm and gated_delta_net).
//
// Glossary as in primitives.h; C conv channels, K conv width (d_conv), Hk query/key heads of Dk
// values, Hv value heads of Dv values. Each works on one sequence: its state (the layer's cache)
// is read and overwritten. Each has its gradient (gated_delta_rule's token by token through the
// states, kernels::gated_delta_rule_backward; the convolution's and the L2 norm's in
// kernels/delta_net_grad.h); none for the state a call starts from (a cache, zero in training).
#pragma once

#include "toy/primitives/primitives.h"

namespace toy {

// Which query/key head value head h reads when Hv > Hk.
enum class HeadMap {
  Tiled,    // h % Hk (qwen35: llama.cpp repeats the key heads)
  Grouped,  // h / (Hv / Hk) (qwen3next)
};

// Causal depthwise convolution over the last K − 1 inputs (state, oldest first) and x:
// y[t, c] = Σ_j w[c, j]·[state; x][t + j, c]; state ← the last K − 1 rows.
// x: [T, C], w: [C, K] (F32), state: [K − 1, C] -> [T, C]
Tensor causal_conv1d(const Tensor& x, const Tensor& w, Tensor& state);

// x / max(‖x‖₂, eps) over the last dimension.  x: [..., D] -> [..., D]
Tensor l2_norm(const Tensor& x, float eps);

// The log-decay of each value head, g = softplus(α + dt_bias)·a, with a = ssm_a = −exp(A_log) < 0
// (so g ≤ 0). Gradients for all three (a itself is the parameter, as GGUF stores it).
// alpha: [..., Hv], dt_bias, a: [Hv] -> [..., Hv]
Tensor delta_log_decay(const Tensor& alpha, const Tensor& dt_bias, const Tensor& a);

// The gated delta rule (kernels.h states it), per value head with state S [Dk, Dv]:
// S ← exp(g_t)·S;  d = β_t·(v_t − Sᵀk_t);  S ← S + k_t dᵀ;  o_t = Sᵀq_t / √Dk.
// q, k are expected L2-normalised; computed in chunks of 64 tokens (kernels::gated_delta_rule).
// Gradients for q, k, v, g and beta (not for the state it starts from).
// q, k: [T, Hk, Dk], v: [T, Hv, Dv], g, beta: [T, Hv], state: [Hv, Dk, Dv] -> [T, Hv, Dv]
Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        Tensor& state, HeadMap map);

}  // namespace toy
