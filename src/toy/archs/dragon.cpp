// archs/dragon.cpp — Dragon: toy's own trainable hybrid. GGUF arch "dragon" (toy's; no HF class).
//
//   x = token_embd[tokens]                                                         [B, T, D]
//   for each layer ℓ:  h = x + mixer(rms_norm(x))     attention when (ℓ + 1) % full_attention_interval
//                                                     == 0 (default 4: three Gated DeltaNet layers,
//                                                     then one attention layer), else Gated DeltaNet
//                      x = h + swiglu(rms_norm(h))
//   logits = output · rms_norm(x)                                                    [B, T, V]
//
// The Gated DeltaNet layers are Qwen3.5's (blocks/delta_net.h; value head h reads key head
// h / (Hv / Hk)). The attention layers (blocks/dragon.h) are RoPE attention, differential when
// attention.differential = 1 (each head's q and k as two halves of d_head/2, RoPE on each half,
// scale 1/√(d_head/2), λ_init by depth, the sub-norm) and with Scalable-Softmax when
// attention.ssmax = 1 (q scaled by s·log n, s per head). Both are on by default.
#include "toy/blocks/dragon.h"
#include "toy/archs/hybrid.h"

namespace toy {
namespace {

struct Dragon {
  static constexpr const char* name = "dragon";
  static constexpr Variant variant = {.hf_class = "", .positions = Positions::RopeNeox};

  struct Hparams : HybridHparams {
    int64_t differential = 1;                               // attention.differential: 1 differential attention, 0 plain
    int64_t ssmax = 1;                                      // attention.ssmax: 1 Scalable-Softmax, 0 plain softmax
    int64_t parts() const { return differential ? 2 : 1; }  // query/key halves per head
  };
  template <class V>
  static void keys(V& v, Hparams& h) {
    decoder_keys(v, h);
    v.key("attention.layer_norm_rms_epsilon", h.eps, Required{1e-6f});
    v.key("attention.differential", h.differential, int64_t(1), Bound::NonNegative);
    v.key("attention.ssmax", h.ssmax, int64_t(1), Bound::NonNegative);
    v.check(h.differential <= 1 && h.ssmax <= 1, "attention.differential and attention.ssmax must be 0 or 1");
    v.key("rope.freq_base", h.rope_base, 10000.0f);
    v.key("rope.dimension_count", h.n_rot, h.d_head / h.parts());  // over each half-head when differential
    v.check(h.d_head % (2 * h.parts()) == 0 && h.n_rot % 2 == 0 && h.n_rot <= h.d_head / h.parts(),
            "rope.dimension_count " + std::to_string(h.n_rot) + " must be even and at most the rotated head size " +
                std::to_string(h.d_head / h.parts()) + " (key_length " + std::to_string(h.d_head) + ")");
    delta_net_keys(v, h);
  }

  struct Layer {
    Tensor attn_norm, ffn_norm;   // [D]
    GatedDeltaNetWeights ssm;     // recurrent layers
    DragonAttentionWeights attn;  // attention layers
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
    const Dim half{h.d_head / 2, "d_head/2"}, H{h.n_head, "n_head"};
    v.tensor("token_embd.weight", w.token_embd, {d.V, d.D}, Init::Normal);
    v.layers(w.blk, h.n_layer, [&](Layer& L, int64_t l) {
      v.tensor("attn_norm.weight", L.attn_norm, {d.D}, Init::Ones);
      if (h.full_attention(l)) {
        v.tensor("attn_q.weight", L.attn.attn.attn_q, {d.Q, d.D}, Init::Normal);
        v.tensor("attn_k.weight", L.attn.attn.attn_k, {d.KV, d.D}, Init::Normal);
        v.tensor("attn_v.weight", L.attn.attn.attn_v, {d.KV, d.D}, Init::Normal);
        v.tensor("attn_output.weight", L.attn.attn.attn_output, {d.D, d.Q}, Init::Normal);
        if (h.differential) {
          v.tensor("attn_lambda_q1", L.attn.lambda.q1, {half}, Init::Normal);
          v.tensor("attn_lambda_k1", L.attn.lambda.k1, {half}, Init::Normal);
          v.tensor("attn_lambda_q2", L.attn.lambda.q2, {half}, Init::Normal);
          v.tensor("attn_lambda_k2", L.attn.lambda.k2, {half}, Init::Normal);
          v.tensor("attn_sub_norm.weight", L.attn.attn_sub_norm, {d.Dh}, Init::Ones);
        }
        if (h.ssmax) v.tensor("attn_ssmax", L.attn.attn_ssmax, {H}, Init::Ones);
      } else {
        delta_net_tensors(v, L.ssm, h, BetaAlpha::Separate);
      }
      v.tensor("ffn_norm.weight", L.ffn_norm, {d.D}, Init::Ones);
      v.tensor("ffn_gate.weight", L.ffn.ffn_gate, {d.F, d.D}, Init::Normal);
      v.tensor("ffn_up.weight", L.ffn.ffn_up, {d.F, d.D}, Init::Normal);
      v.tensor("ffn_down.weight", L.ffn.ffn_down, {d.D, d.F}, Init::Normal);
    });
    v.tensor("output_norm.weight", w.output_norm, {d.D}, Init::Ones);
    v.tensor("output.weight", w.output, {d.V, d.D}, Init::Normal, /*required=*/!h.tied_output);
  }

  static Tensor forward(const Weights& w, const Hparams& h, const Tensor& tokens, const Ctx& ctx) {
    DragonAttentionConfig a = {
        .attn = rope_attention(h, variant), .differential = h.differential != 0, .ssmax = h.ssmax != 0, .eps = h.eps};
    a.attn.options.scale = 1.0f / std::sqrt(float(h.d_head / h.parts()));
    const GatedDeltaNetConfig gdn = delta_net_config(h, variant.delta_heads);
    const RopeTable angles = rope_angles(ctx.positions(tokens), a.attn.rope);  // once per forward
    Tensor x = embedding(w.token_embd, tokens);                                // [B, T, D]
    for (int64_t l = 0; l < h.n_layer; ++l) {
      const Layer& L = w.blk[size_t(l)];
      a.lambda_init = diff_lambda_init(l);
      const Tensor n = rms_norm(x, L.attn_norm, h.eps);  // [B, T, D]
      x = x + (h.full_attention(l) ? dragon_attention(L.attn, a, n, angles, ctx, l)
                                   : gated_delta_net(L.ssm, gdn, n, ctx, l));
      x = x + swiglu_ffn(L.ffn, rms_norm(x, L.ffn_norm, h.eps));  // [B, T, D]
    }
    x = rms_norm(logit_positions(x, ctx), w.output_norm, h.eps);  // [B, T, D]
    if (ctx.hidden_states) return x;                              // [B, T, D]
    return linear(x, h.tied_output ? w.token_embd : w.output);    // [B, T, V]
  }
};

}  // namespace

namespace archs {
Architecture dragon() { return architecture<Dragon>(); }
}  // namespace archs

}  // namespace toy
