// archs/olmoe.cpp — OLMoE. GGUF arch "olmoe". HF: OlmoeForCausalLM.
//
//   x = token_embd[tokens]                                                    [B, T, D]
//   for each layer:  h = x + attention(rms_norm(x))   q, k RMS-normed over their full width
//                                                     (before splitting heads), NEOX rope
//                    x = h + moe(rms_norm(h))         p = softmax(ffn_gate_inp · h) over all
//                                                     experts; Σ over the top-k of p_e·swiglu_e
//                                                     (no renormalisation of the k weights)
//   logits = output · rms_norm(x)                                               [B, T, V]
#include "toy/archs/arch.h"
#include "toy/blocks/moe.h"

namespace toy {
namespace {

struct Olmoe {
  static constexpr const char* name = "olmoe";
  static constexpr Variant variant = {.hf_class = "OlmoeForCausalLM",
                                      .positions = Positions::RopeNeox,
                                      .qk_norm = QkNorm::FullWidth,
                                      .ffn = FfnKind::Moe};

  struct Hparams : ModelConfig {  // d_ff: the width of one expert, e.g. 1024
    float eps = 1e-5f;            // attention.layer_norm_rms_epsilon
    float rope_base = 10000.0f;   // rope.freq_base
    int64_t n_rot = 0;            // rope.dimension_count
    int64_t n_expert = 0;         // expert_count, e.g. 64
    int64_t n_expert_used = 0;    // expert_used_count (k), e.g. 8
  };
  template <class V>
  static void keys(V& v, Hparams& h) {
    decoder_keys(v, h);
    v.key("attention.layer_norm_rms_epsilon", h.eps, Required{1e-5f});
    rope_keys(v, h);
    v.key("expert_count", h.n_expert, Required{int64_t(8)});
    v.key("expert_used_count", h.n_expert_used, Required{int64_t(2)});
    v.check(h.n_expert_used <= h.n_expert, "expert_used_count " + std::to_string(h.n_expert_used) +
                                               " exceeds expert_count " + std::to_string(h.n_expert));
    // llama.cpp reads attn_q_norm and attn_k_norm as [n_embd] (src/llama-model.cpp): its OLMoE has
    // neither grouped-query attention nor a head size other than n_embd/n_head.
    v.check(h.n_kv_head == h.n_head && h.d_head * h.n_head == h.d_model,
            "attention.head_count_kv (" + std::to_string(h.n_kv_head) + ") must equal head_count (" +
                std::to_string(h.n_head) +
                ") and key_length must be embedding_length/head_count: llama.cpp's "
                "OLMoE normalises q and k over the full embedding width");
  }

  struct Weights {
    Tensor token_embd;  // [V, D]
    std::vector<MoeLayer> blk;
    Tensor output_norm;  // [D]
    Tensor output;       // [V, D] (never tied)
  };
  template <class V>
  static void tensors(V& v, Weights& w, const Hparams& h) {
    const Dims d(h);
    const Dim E{h.n_expert, "n_expert"};
    v.tensor("token_embd.weight", w.token_embd, {d.V, d.D}, Init::Normal);
    v.layers(w.blk, h.n_layer, [&](MoeLayer& L) {
      v.tensor("attn_norm.weight", L.attn_norm, {d.D}, Init::Ones);
      v.tensor("attn_q.weight", L.attn.attn_q, {d.Q, d.D}, Init::Normal);
      v.tensor("attn_k.weight", L.attn.attn_k, {d.KV, d.D}, Init::Normal);
      v.tensor("attn_v.weight", L.attn.attn_v, {d.KV, d.D}, Init::Normal);
      v.tensor("attn_output.weight", L.attn.attn_output, {d.D, d.Q}, Init::Normal);
      v.tensor("attn_q_norm.weight", L.attn.attn_q_norm, {d.Q}, Init::Ones);
      v.tensor("attn_k_norm.weight", L.attn.attn_k_norm, {d.KV}, Init::Ones);
      v.tensor("ffn_norm.weight", L.ffn_norm, {d.D}, Init::Ones);
      v.tensor("ffn_gate_inp.weight", L.ffn.ffn_gate_inp, {E, d.D}, Init::Normal);
      v.tensor("ffn_down_exps.weight", L.ffn.ffn_down_exps, {E, d.D, d.F}, Init::Normal);
      v.tensor("ffn_gate_exps.weight", L.ffn.ffn_gate_exps, {E, d.F, d.D}, Init::Normal);
      v.tensor("ffn_up_exps.weight", L.ffn.ffn_up_exps, {E, d.F, d.D}, Init::Normal);
    });
    v.tensor("output_norm.weight", w.output_norm, {d.D}, Init::Ones);
    v.tensor("output.weight", w.output, {d.V, d.D}, Init::Normal);
  }

  static Tensor forward(const Weights& w, const Hparams& h, const Tensor& tokens, const Ctx& ctx) {
    const AttentionConfig a = rope_attention(h, variant);
    const MoeConfig moe = {.n_expert = h.n_expert, .n_expert_used = h.n_expert_used};
    const RopeTable angles = rope_angles(ctx.positions(tokens), a.rope);  // once per forward
    Tensor x = embedding(w.token_embd, tokens);                           // [B, T, D]
    for (int64_t l = 0; l < h.n_layer; ++l)
      x = moe_block(w.blk[size_t(l)], a, moe, h.eps, x, angles, ctx, l);  // [B, T, D]
    x = rms_norm(logit_positions(x, ctx), w.output_norm, h.eps);          // [B, T, D]
    if (ctx.hidden_states) return x;                                      // [B, T, D]
    return linear(x, w.output);                                           // [B, T, V]
  }
};

}  // namespace

namespace archs {
Architecture olmoe() { return architecture<Olmoe>(); }
}  // namespace archs

}  // namespace toy
