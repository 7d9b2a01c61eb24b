// archs/gemma2.cpp — Gemma 2. GGUF arch "gemma2". HF: Gemma2ForCausalLM.
//
//   x = √D · token_embd[tokens]                                              [B, T, D]
//   for each layer:  h = x + rms_norm(attention(rms_norm(x)))     post_attention_norm
//                    x = h + rms_norm(geglu(rms_norm(h)))         post_ffw_norm
//   logits = softcap(token_embd · rms_norm(x))                                [B, T, V]
//
// Attention: NEOX rope; scores q·k/√d_head soft-capped (cap·tanh(s/cap)) before the mask;
// local layers (0, 2, 4, … for pattern 2) see only the last `sliding_window` positions.
// Norm weights: HF Gemma computes x̂·(1 + w) and the converter stores w + 1, so the GGUF
// value is used as it is. Output always tied: llama.cpp never reads an output.weight here.
#include "toy/archs/gemma2.h"

#include "toy/archs/arch.h"
#include "toy/blocks/sandwich_norm.h"

namespace toy {
namespace {

struct Gemma2 {
  static constexpr const char* name = "gemma2";
  static constexpr Variant variant = {.hf_class = "Gemma2ForCausalLM",
                                      .positions = Positions::RopeNeox,
                                      .ffn = FfnKind::GeGlu,
                                      .sandwich_norms = true,
                                      .embed_scale = true,
                                      .softcap = true,
                                      .sliding_window = true,
                                      .norm_note =
                                          "Gemma's norms compute x̂ · (1 + w); the GGUF file stores 1 + w, "
                                          "so w here is the stored tensor as is."};

  struct Hparams : ModelConfig {
    float eps = 1e-6f;            // attention.layer_norm_rms_epsilon
    float rope_base = 10000.0f;   // rope.freq_base
    int64_t n_rot = 0;            // rope.dimension_count
    float attn_softcap = 50.0f;   // attn_logit_softcapping (> 0: cap·tanh(x/cap))
    float final_softcap = 30.0f;  // final_logit_softcapping (> 0)
    int64_t window = 4096;        // attention.sliding_window
    int64_t swa_pattern = 2;      // layer l is local when l % swa_pattern < swa_pattern − 1
    bool is_local(int64_t layer) const { return layer % swa_pattern < swa_pattern - 1; }
  };
  template <class V>
  static void keys(V& v, Hparams& h) {
    decoder_keys(v, h);
    v.key("attention.layer_norm_rms_epsilon", h.eps, Required{1e-6f});
    rope_keys(v, h);
    // Absent: llama.cpp's defaults. A cap of 0 divides by zero in llama.cpp (x/cap): refused.
    v.key("attn_logit_softcapping", h.attn_softcap, 50.0f);
    v.key("final_logit_softcapping", h.final_softcap, 30.0f);
    v.key("attention.sliding_window", h.window, int64_t(4096));
    v.key("attention.sliding_window_pattern", h.swa_pattern, int64_t(2));
  }

  struct Weights {
    Tensor token_embd;  // [V, D], also the output projection
    std::vector<SandwichNormLayer> blk;
    Tensor output_norm;  // [D]
  };
  template <class V>
  static void tensors(V& v, Weights& w, const Hparams& h) {
    const Dims d(h);
    v.tensor("token_embd.weight", w.token_embd, {d.V, d.D}, Init::Normal);
    v.layers(w.blk, h.n_layer, [&](SandwichNormLayer& L) {
      v.tensor("attn_norm.weight", L.attn_norm, {d.D}, Init::Ones);
      v.tensor("attn_q.weight", L.attn.attn_q, {d.Q, d.D}, Init::Normal);
      v.tensor("attn_k.weight", L.attn.attn_k, {d.KV, d.D}, Init::Normal);
      v.tensor("attn_v.weight", L.attn.attn_v, {d.KV, d.D}, Init::Normal);
      v.tensor("attn_output.weight", L.attn.attn_output, {d.D, d.Q}, Init::Normal);
      v.tensor("post_attention_norm.weight", L.post_attention_norm, {d.D}, Init::Ones);
      v.tensor("ffn_norm.weight", L.ffn_norm, {d.D}, Init::Ones);
      v.tensor("post_ffw_norm.weight", L.post_ffw_norm, {d.D}, Init::Ones);
      v.tensor("ffn_gate.weight", L.ffn.ffn_gate, {d.F, d.D}, Init::Normal);
      v.tensor("ffn_up.weight", L.ffn.ffn_up, {d.F, d.D}, Init::Normal);
      v.tensor("ffn_down.weight", L.ffn.ffn_down, {d.D, d.F}, Init::Normal);
    });
    v.tensor("output_norm.weight", w.output_norm, {d.D}, Init::Ones);
  }

  static AttentionConfig attention(const Hparams& h, bool local) {
    AttentionConfig a = rope_attention(h, variant);
    a.options = {.scale = gemma2_attention_scale(h), .softcap = h.attn_softcap, .window = local ? h.window : 0};
    return a;
  }

  static Tensor forward(const Weights& w, const Hparams& h, const Tensor& tokens, const Ctx& ctx) {
    const AttentionConfig local = attention(h, true), global = attention(h, false);
    const RopeTable angles = rope_angles(ctx.positions(tokens), global.rope);        // once per forward
    Tensor x = scale(embedding(w.token_embd, tokens), std::sqrt(float(h.d_model)));  // [B, T, D]
    for (int64_t l = 0; l < h.n_layer; ++l)
      x = sandwich_norm_block(w.blk[size_t(l)], h.is_local(l) ? local : global, h.eps, x, angles, ctx, l);
    x = rms_norm(logit_positions(x, ctx), w.output_norm, h.eps);  // [B, T, D]
    if (ctx.hidden_states) return x;                              // [B, T, D]
    Tensor logits = linear(x, w.token_embd);                      // [B, T, V]
    return softcap(logits, h.final_softcap);                      // [B, T, V]
  }
};

}  // namespace

float gemma2_attention_scale(const ModelConfig& c) {
  return 1.0f / std::sqrt(float(c.n_layer == 46 ? c.d_model / c.n_head : c.d_head));
}

namespace archs {
Architecture gemma2() { return architecture<Gemma2>(); }
}  // namespace archs

}  // namespace toy
