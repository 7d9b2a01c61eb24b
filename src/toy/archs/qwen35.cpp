// archs/qwen35.cpp — Qwen3.5 dense. GGUF arch "qwen35". HF: Qwen3_5ForCausalLM.
//
//   x = token_embd[tokens]                                                         [B, T, D]
//   for each layer ℓ:  h = x + mixer(rms_norm(x))     gated attention when (ℓ + 1) % interval == 0,
//                                                     else Gated DeltaNet (blocks/delta_net.h)
//                      x = h + swiglu(rms_norm(h))    (post_attention_norm)
//   logits = output · rms_norm(x)                                                    [B, T, V]
//
// Value head h of a Gated DeltaNet layer reads key head h % Hk (llama.cpp repeats the key heads).
// Positions: llama.cpp's interleaved M-RoPE (rope.dimension_sections) gives every section the
// same position for text, which is NEOX rope on the first rope.dimension_count dimensions when
// the sections cover them (the fourth, unused by text, 0).
#include "toy/archs/hybrid.h"

namespace toy {
namespace {

struct Qwen35 {
  static constexpr const char* name = "qwen35";
  static constexpr Variant variant = {.hf_class = "Qwen3_5ForCausalLM",
                                      .positions = Positions::RopeNeox,
                                      .qk_norm = QkNorm::PerHead,
                                      .delta_heads = HeadMap::Tiled};

  struct Hparams : HybridHparams {
    std::vector<int64_t> rope_sections;  // rope.dimension_sections, e.g. {11, 11, 10, 0}
  };
  template <class V>
  static void keys(V& v, Hparams& h) {
    hybrid_keys(v, h);
    // llama.cpp requires the key. A new model, or a file without it (toy wrote none before), splits
    // the n_rot/2 rotated pairs over the three text sections as Qwen3.5 does (HF mrope_section
    // [11, 11, 10] for 64 rotated dimensions).
    const int64_t pairs = h.n_rot / 2;
    const auto third = [&](int64_t k) { return pairs / 3 + (k < pairs % 3 ? 1 : 0); };
    v.key("rope.dimension_sections", h.rope_sections, std::vector<int64_t>{third(0), third(1), third(2), 0});
    v.check(h.rope_sections.size() == 4 && h.rope_sections[3] == 0 &&
                h.rope_sections[0] + h.rope_sections[1] + h.rope_sections[2] == pairs,
            "rope.dimension_sections must be 4 sizes whose first three add up to rope.dimension_count/2 = " +
                std::to_string(pairs) + " and whose fourth is 0 (text positions)");
  }

  struct Layer {
    Tensor attn_norm, post_attention_norm;  // [D]
    GatedDeltaNetWeights ssm;               // recurrent layers
    AttentionWeights attn;                  // full-attention layers
    SwigluWeights ffn;
  };
  struct Weights {
    Tensor token_embd;  // [V, D]
    std::vector<Layer> blk;
    Tensor output_norm;  // [D]
    Tensor output;       // [V, D]; absent when tied to token_embd
  };
  template <class V>
  static void tensors(V& v, Weights& w, const Hparams& h) {
    const Dims d(h);
    v.tensor("token_embd.weight", w.token_embd, {d.V, d.D}, Init::Normal);
    v.layers(w.blk, h.n_layer, [&](Layer& L, int64_t l) {
      v.tensor("attn_norm.weight", L.attn_norm, {d.D}, Init::Ones);
      if (h.full_attention(l)) {
        gated_attention_tensors(v, L.attn, h);
      } else {
        delta_net_tensors(v, L.ssm, h, BetaAlpha::Separate);
      }
      v.tensor("post_attention_norm.weight", L.post_attention_norm, {d.D}, Init::Ones);
      v.tensor("ffn_gate.weight", L.ffn.ffn_gate, {d.F, d.D}, Init::Normal);
      v.tensor("ffn_up.weight", L.ffn.ffn_up, {d.F, d.D}, Init::Normal);
      v.tensor("ffn_down.weight", L.ffn.ffn_down, {d.D, d.F}, Init::Normal);
    });
    v.tensor("output_norm.weight", w.output_norm, {d.D}, Init::Ones);
    v.tensor("output.weight", w.output, {d.V, d.D}, Init::Normal, /*required=*/!h.tied_output);
  }

  static Tensor forward(const Weights& w, const Hparams& h, const Tensor& tokens, const Ctx& ctx) {
    const AttentionConfig a = rope_attention(h, variant);
    const GatedDeltaNetConfig gdn = delta_net_config(h, variant.delta_heads);
    const RopeTable angles = rope_angles(ctx.positions(tokens), a.rope);  // once per forward
    Tensor x = embedding(w.token_embd, tokens);                           // [B, T, D]
    for (int64_t l = 0; l < h.n_layer; ++l) {
      const Layer& L = w.blk[size_t(l)];
      const Tensor n = rms_norm(x, L.attn_norm, h.eps);  // [B, T, D]
      x = x + (h.full_attention(l) ? gated_attention(L.attn, a, n, angles, ctx, l)
                                   : gated_delta_net(L.ssm, gdn, n, ctx, l));
      x = x + swiglu_ffn(L.ffn, rms_norm(x, L.post_attention_norm, h.eps));  // [B, T, D]
    }
    x = rms_norm(logit_positions(x, ctx), w.output_norm, h.eps);  // [B, T, D]
    if (ctx.hidden_states) return x;                              // [B, T, D]
    return linear(x, h.tied_output ? w.token_embd : w.output);    // [B, T, V]
  }
};

}  // namespace

namespace archs {
Architecture qwen35() { return architecture<Qwen35>(); }
}  // namespace archs

}  // namespace toy
