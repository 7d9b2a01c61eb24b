// archs/gpt2.cpp — GPT-2. GGUF arch "gpt2". HF: GPT2LMHeadModel.
//
//   x = token_embd[tokens] + position_embd[positions]                         [B, T, D]
//   for each layer:  h = x + attention(layer_norm(x))    fused attn_qkv (+ bias), no rope
//                    x = h + mlp(layer_norm(h))          ffn_down(gelu(ffn_up·h + b)) + b
//   logits = output · layer_norm(x)   (output = token_embd when tied)       [B, T, V]
//
// The converter transposes HF's Conv1D weights, so every GGUF projection is [out, in] as usual;
// attn_qkv's rows are Q | K | V. No head_count_kv key: it defaults to head_count.
#include "toy/archs/arch.h"

namespace toy {
namespace {

struct Gpt2 {
  static constexpr const char* name = "gpt2";
  static constexpr Variant variant = {
      .hf_class = "GPT2LMHeadModel", .norm = NormKind::Layer, .positions = Positions::Learned, .ffn = FfnKind::GeluMlp};

  struct Hparams : ModelConfig {  // n_ctx: also the number of learned positions, e.g. 1024
    float eps = 1e-5f;            // attention.layer_norm_epsilon
  };
  template <class V>
  static void keys(V& v, Hparams& h) {
    decoder_keys(v, h);
    v.key("attention.layer_norm_epsilon", h.eps, Required{1e-5f});
  }

  struct Weights {
    Tensor token_embd;     // [V, D]
    Tensor position_embd;  // [n_ctx, D]
    std::vector<Gpt2Layer> blk;
    Tensor output_norm, output_norm_bias;  // [D], [D]
    Tensor output;                         // [V, D]; absent when tied to token_embd
  };
  template <class V>
  static void tensors(V& v, Weights& w, const Hparams& h) {
    const Dims d(h);
    const Dim QKV{(h.n_head + 2 * h.n_kv_head) * h.d_head, "n_head·d_head + 2·n_kv_head·d_head"};
    v.tensor("token_embd.weight", w.token_embd, {d.V, d.D}, Init::Normal);
    v.tensor("position_embd.weight", w.position_embd, {{h.n_ctx, "n_ctx"}, d.D}, Init::Normal);
    v.layers(w.blk, h.n_layer, [&](Gpt2Layer& L) { gpt2_layer_tensors(v, L, d.D, d.Q, QKV, d.F); });
    v.tensor("output_norm.weight", w.output_norm, {d.D}, Init::Ones);
    v.tensor("output_norm.bias", w.output_norm_bias, {d.D}, Init::Zeros);
    v.tensor("output.weight", w.output, {d.V, d.D}, Init::Normal, /*required=*/!h.tied_output);
  }

  static Tensor forward(const Weights& w, const Hparams& h, const Tensor& tokens, const Ctx& ctx) {
    auto [B, T] = tokens.dims<2>("gpt2: tokens");
    for (int64_t b = 0; b < B; ++b)
      if (ctx.seq(b).pos0 < 0 || ctx.seq(b).pos0 + T > h.n_ctx)
        throw ShapeError("gpt2: positions up to " + std::to_string(ctx.seq(b).pos0 + T) + " exceed the " +
                         std::to_string(h.n_ctx) + " learned positions");
    AttentionConfig a;  // no rope: positions are in the embeddings
    a.n_head = h.n_head, a.n_kv_head = h.n_kv_head, a.d_head = h.d_head;
    a.options.scale = 1.0f / std::sqrt(float(h.d_head));
    Tensor x = embedding(w.token_embd, tokens) + embedding(w.position_embd, ctx.positions(tokens));  // [B, T, D]
    for (int64_t l = 0; l < h.n_layer; ++l) x = gpt2_block(w.blk[size_t(l)], a, h.eps, x, ctx, l);   // [B, T, D]
    x = layer_norm(logit_positions(x, ctx), w.output_norm, w.output_norm_bias, h.eps);               // [B, T, D]
    if (ctx.hidden_states) return x;                                                                 // [B, T, D]
    return linear(x, h.tied_output ? w.token_embd : w.output);                                       // [B, T, V]
  }
};

}  // namespace

namespace archs {
Architecture gpt2() { return architecture<Gpt2>(); }
}  // namespace archs

}  // namespace toy
