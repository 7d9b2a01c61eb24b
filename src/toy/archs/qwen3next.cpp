// archs/qwen3next.cpp — Qwen3-Next (MoE). GGUF arch "qwen3next". HF: Qwen3NextForCausalLM.
//
//   x = token_embd[tokens]                                                         [B, T, D]
//   for each layer ℓ:  h = x + mixer(rms_norm(x))     gated attention when (ℓ + 1) % interval == 0,
//                                                     else Gated DeltaNet (blocks/delta_net.h)
//                      n = rms_norm(h)                (post_attention_norm)
//                      x = h + moe(n) + σ(ffn_gate_inp_shexp · n)·swiglu_shexp(n)
//   logits = output · rms_norm(x)                                                    [B, T, V]
//
// The MoE: p = softmax(ffn_gate_inp · n) over all experts, the top k renormalised to sum to 1.
// Value head h of a Gated DeltaNet layer reads key head h / (Hv / Hk); β and α come from one
// projection ssm_ba, per key head its Hv/Hk β rows then its Hv/Hk α rows. NEOX rope on the first
// rope.dimension_count dimensions.
#include "toy/archs/hybrid.h"
#include "toy/blocks/moe.h"

namespace toy {
namespace {

struct Qwen3Next {
  static constexpr const char* name = "qwen3next";
  static constexpr Variant variant = {.hf_class = "Qwen3NextForCausalLM",
                                      .positions = Positions::RopeNeox,
                                      .qk_norm = QkNorm::PerHead,
                                      .ffn = FfnKind::Moe,
                                      .moe_renormalize = true};

  struct Hparams : HybridHparams {
    int64_t n_expert = 0;       // expert_count, e.g. 512
    int64_t n_expert_used = 0;  // expert_used_count (k), e.g. 10
    int64_t d_expert = 0;       // expert_feed_forward_length, e.g. 512
    int64_t d_shexp = 0;        // expert_shared_feed_forward_length, e.g. 512
  };
  template <class V>
  static void keys(V& v, Hparams& h) {
    hybrid_keys(v, h);
    v.key("expert_count", h.n_expert, Required{int64_t(8)});
    v.key("expert_used_count", h.n_expert_used, Required{int64_t(2)});
    v.key("expert_feed_forward_length", h.d_expert, Required{h.d_ff});
    v.key("expert_shared_feed_forward_length", h.d_shexp, Required{h.d_ff});
    v.check(h.n_expert_used <= h.n_expert, "expert_used_count " + std::to_string(h.n_expert_used) +
                                               " exceeds expert_count " + std::to_string(h.n_expert));
  }

  struct Layer {
    Tensor attn_norm, post_attention_norm;  // [D]
    GatedDeltaNetWeights ssm;               // recurrent layers
    AttentionWeights attn;                  // full-attention layers
    MoeFfnWeights ffn;
    SharedExpertWeights shexp;
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
    const Dim E{h.n_expert, "n_expert"}, Fe{h.d_expert, "d_expert"}, Fs{h.d_shexp, "d_shexp"};
    v.tensor("token_embd.weight", w.token_embd, {d.V, d.D}, Init::Normal);
    v.layers(w.blk, h.n_layer, [&](Layer& L, int64_t l) {
      v.tensor("attn_norm.weight", L.attn_norm, {d.D}, Init::Ones);
      if (h.full_attention(l)) {
        gated_attention_tensors(v, L.attn, h);
      } else {
        delta_net_tensors(v, L.ssm, h, BetaAlpha::Fused);
      }
      v.tensor("post_attention_norm.weight", L.post_attention_norm, {d.D}, Init::Ones);
      v.tensor("ffn_gate_inp.weight", L.ffn.ffn_gate_inp, {E, d.D}, Init::Normal);
      v.tensor("ffn_gate_exps.weight", L.ffn.ffn_gate_exps, {E, Fe, d.D}, Init::Normal);
      v.tensor("ffn_up_exps.weight", L.ffn.ffn_up_exps, {E, Fe, d.D}, Init::Normal);
      v.tensor("ffn_down_exps.weight", L.ffn.ffn_down_exps, {E, d.D, Fe}, Init::Normal);
      v.tensor("ffn_gate_inp_shexp.weight", L.shexp.ffn_gate_inp_shexp, {d.D}, Init::Normal);
      v.tensor("ffn_gate_shexp.weight", L.shexp.ffn_gate_shexp, {Fs, d.D}, Init::Normal);
      v.tensor("ffn_up_shexp.weight", L.shexp.ffn_up_shexp, {Fs, d.D}, Init::Normal);
      v.tensor("ffn_down_shexp.weight", L.shexp.ffn_down_shexp, {d.D, Fs}, Init::Normal);
    });
    v.tensor("output_norm.weight", w.output_norm, {d.D}, Init::Ones);
    v.tensor("output.weight", w.output, {d.V, d.D}, Init::Normal, /*required=*/!h.tied_output);
  }

  static Tensor forward(const Weights& w, const Hparams& h, const Tensor& tokens, const Ctx& ctx) {
    const AttentionConfig a = rope_attention(h, variant);
    const GatedDeltaNetConfig gdn = delta_net_config(h, variant.delta_heads);
    const MoeConfig moe = {
        .n_expert = h.n_expert, .n_expert_used = h.n_expert_used, .renormalize = variant.moe_renormalize};
    const RopeTable angles = rope_angles(ctx.positions(tokens), a.rope);  // once per forward
    Tensor x = embedding(w.token_embd, tokens);                           // [B, T, D]
    for (int64_t l = 0; l < h.n_layer; ++l) {
      const Layer& L = w.blk[size_t(l)];
      const Tensor n = rms_norm(x, L.attn_norm, h.eps);  // [B, T, D]
      x = x + (h.full_attention(l) ? gated_attention(L.attn, a, n, angles, ctx, l)
                                   : gated_delta_net(L.ssm, gdn, n, ctx, l));
      const Tensor m = rms_norm(x, L.post_attention_norm, h.eps);        // [B, T, D]
      x = x + (moe_ffn(L.ffn, moe, m) + shared_expert_ffn(L.shexp, m));  // [B, T, D]
    }
    x = rms_norm(logit_positions(x, ctx), w.output_norm, h.eps);  // [B, T, D]
    if (ctx.hidden_states) return x;                              // [B, T, D]
    return linear(x, h.tied_output ? w.token_embd : w.output);    // [B, T, V]
  }
};

}  // namespace

namespace archs {
Architecture qwen3next() { return architecture<Qwen3Next>(); }
}  // namespace archs

}  // namespace toy
