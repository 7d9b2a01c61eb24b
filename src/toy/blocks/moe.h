// blocks/moe.h — L2: the mixture-of-experts FFN and the pre-norm block that uses it (OLMoE).
//
// Experts are stored stacked, as GGUF stores them: expert e's weights are slab e of a 3-D
// tensor, taken as a zero-copy view with `slab`. Only the chosen experts run: tokens are
// grouped by expert, and each expert multiplies its gathered rows in one `linear` call.
#pragma once

#include "toy/blocks/blocks.h"

namespace toy {

struct MoeConfig {
  int64_t n_expert = 0;       // expert_count, e.g. 64
  int64_t n_expert_used = 0;  // expert_used_count (k), e.g. 8
  bool renormalize = false;   // the k weights divided by their sum (qwen3next), or as the softmax gave them (olmoe)
};

struct MoeFfnWeights {
  Tensor ffn_gate_inp;   // [n_expert, D] router (kept F32 by llama-quantize)
  Tensor ffn_gate_exps;  // [n_expert, d_ff, D]
  Tensor ffn_up_exps;    // [n_expert, d_ff, D]
  Tensor ffn_down_exps;  // [n_expert, D, d_ff]
};

// Expert e's SwiGLU weights: views of slab e of the stacked tensors.
SwigluWeights expert(const MoeFfnWeights& w, int64_t e);

// y = Σ_{e ∈ top-k(p)} p_e · swiglu_e(x), p = softmax(ffn_gate_inp · x), the k p_e renormalised
// to sum to 1 when c.renormalize.
// x: [..., D] -> [..., D]
Tensor moe_ffn(const MoeFfnWeights& w, const MoeConfig& c, const Tensor& x);

// The shared expert of Qwen3-Next: a SwiGLU every token goes through, scaled per token by
// σ(ffn_gate_inp_shexp · x).
struct SharedExpertWeights {
  Tensor ffn_gate_inp_shexp;                            // [D]
  Tensor ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;  // [d_shexp, D], [d_shexp, D], [D, d_shexp]
};
// x: [..., D] -> [..., D]
Tensor shared_expert_ffn(const SharedExpertWeights& w, const Tensor& x);

// A pre-norm layer whose FFN is a mixture of experts.
struct MoeLayer {
  Tensor attn_norm, ffn_norm;  // [D]
  AttentionWeights attn;
  MoeFfnWeights ffn;
};
// x: [B, T, D] -> [B, T, D]
Tensor moe_block(const MoeLayer& L, const AttentionConfig& c, const MoeConfig& m, float eps, const Tensor& x,
                 const RopeTable& angles, const Ctx& ctx, int64_t layer);

}  // namespace toy
