// archs/qwen3.cpp — Qwen3 dense. GGUF arch "qwen3". HF: Qwen3ForCausalLM.
//
//   x = token_embd[tokens]                                   [B, T, D]
//   for each layer:  h = x + attention(rms_norm(x))           q, k RMS-normed per head, RoPE NEOX
//                    x = h + swiglu(rms_norm(h))
//   logits = output · rms_norm(x)   (output = token_embd when tied)      [B, T, V]
//
// The Llama decoder with an RMSNorm on each head of q and k (before RoPE), NEOX rope, and an
// explicit head size (attention.key_length: n_head·d_head may differ from d_model).
#include "toy/archs/arch.h"

namespace toy {
namespace {

struct Qwen3 {
  static constexpr const char* name = "qwen3";
  static constexpr Variant variant = {
      .hf_class = "Qwen3ForCausalLM", .positions = Positions::RopeNeox, .qk_norm = QkNorm::PerHead};

  struct Hparams : ModelConfig {
    float eps = 1e-6f;           // attention.layer_norm_rms_epsilon
    float rope_base = 10000.0f;  // rope.freq_base, e.g. 1000000
    int64_t n_rot = 0;           // rope.dimension_count, e.g. 64
  };
  template <class V>
  static void keys(V& v, Hparams& h) {
    decoder_keys(v, h);
    v.key("attention.layer_norm_rms_epsilon", h.eps, Required{1e-6f});
    rope_keys(v, h);
  }

  struct Weights {
    Tensor token_embd;  // [V, D]
    std::vector<PreNormLayer> blk;
    Tensor output_norm;  // [D]
    Tensor output;       // [V, D]; absent when tied to token_embd
  };
  template <class V>
  static void tensors(V& v, Weights& w, const Hparams& h) {
    const Dims d(h);
    v.tensor("token_embd.weight", w.token_embd, {d.V, d.D}, Init::Normal);
    v.layers(w.blk, h.n_layer, [&](PreNormLayer& L) {
      v.tensor("attn_norm.weight", L.attn_norm, {d.D}, Init::Ones);
      v.tensor("attn_q.weight", L.attn.attn_q, {d.Q, d.D}, Init::Normal);
      v.tensor("attn_k.weight", L.attn.attn_k, {d.KV, d.D}, Init::Normal);
      v.tensor("attn_v.weight", L.attn.attn_v, {d.KV, d.D}, Init::Normal);
      v.tensor("attn_output.weight", L.attn.attn_output, {d.D, d.Q}, Init::Normal);
      v.tensor("attn_q_norm.weight", L.attn.attn_q_norm, {d.Dh}, Init::Ones);
      v.tensor("attn_k_norm.weight", L.attn.attn_k_norm, {d.Dh}, Init::Ones);
      v.tensor("ffn_norm.weight", L.ffn_norm, {d.D}, Init::Ones);
      v.tensor("ffn_gate.weight", L.ffn.ffn_gate, {d.F, d.D}, Init::Normal);
      v.tensor("ffn_up.weight", L.ffn.ffn_up, {d.F, d.D}, Init::Normal);
      v.tensor("ffn_down.weight", L.ffn.ffn_down, {d.D, d.F}, Init::Normal);
    });
    v.tensor("output_norm.weight", w.output_norm, {d.D}, Init::Ones);
    v.tensor("output.weight", w.output, {d.V, d.D}, Init::Normal, /*required=*/!h.tied_output);
  }

  static Tensor forward(const Weights& w, const Hparams& h, const Tensor& tokens, const Ctx& ctx) {
    const AttentionConfig a = rope_attention(h, variant);
    const RopeTable angles = rope_angles(ctx.positions(tokens), a.rope);  // once per forward
    Tensor x = embedding(w.token_embd, tokens);                           // [B, T, D]
    for (int64_t l = 0; l < h.n_layer; ++l)
      x = pre_norm_block(w.blk[size_t(l)], a, h.eps, x, angles, ctx, l);  // [B, T, D]
    x = rms_norm(logit_positions(x, ctx), w.output_norm, h.eps);          // [B, T, D]
    if (ctx.hidden_states) return x;                                      // [B, T, D]
    return linear(x, h.tied_output ? w.token_embd : w.output);            // [B, T, V]
  }
};

}  // namespace

namespace archs {
Architecture qwen3() { return architecture<Qwen3>(); }
}  // namespace archs

}  // namespace toy
