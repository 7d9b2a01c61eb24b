// archs/gpt2.cpp — GPT-2. GGUF arch "gpt2". HF: GPT2LMHeadModel.
//
//   x = token_embd[tokens] + position_embd[positions]                         [B, T, D]
//   for each layer:  h = x + attention(layer_norm(x))    fused attn_qkv (+ bias), no rope
//                    x = h + mlp(layer_norm(h))          ffn_down(gelu(ffn_up·h + b)) + b
//   logits = output · layer_norm(x)   (output = token_embd when tied)       [B, T, V]
//
// The converter transposes HF's Conv1D weights, so every GGUF projection is [out, in] as usual;
// attn_qkv's rows are Q | K | V. No head_count_kv key: it defaults to head_count.
#include "toy/archs/gpt2.h"

#include <cmath>

namespace toy {

Gpt2Model::Gpt2Model(Gpt2Hparams hp, Gpt2Weights w) : hp_(std::move(hp)), w_(std::move(w)) { config_ = hp_.c; }

Tensor Gpt2Model::forward(const Tensor& tokens, const Ctx& ctx) const {
  auto [B, T] = tokens.dims<2>("gpt2: tokens");
  const int64_t n_pos = w_.position_embd.size(0);
  const Tensor pos = ctx.positions(B, T);  // I32 [B, T]
  for (int64_t b = 0; b < B; ++b)
    if (ctx.seq(b).pos0 < 0 || ctx.seq(b).pos0 + T > n_pos)
      throw ShapeError("gpt2: positions up to " + std::to_string(ctx.seq(b).pos0 + T) + " exceed the " +
                       std::to_string(n_pos) + " learned positions");
  Tensor x = embedding(w_.token_embd, tokens) + embedding(w_.position_embd, pos);  // [B, T, D]
  for (int64_t l = 0; l < hp_.c.n_layer; ++l)
    x = gpt2_block(w_.layers[size_t(l)], hp_.attn, hp_.ln_eps, x, ctx, l);                   // [B, T, D]
  x = layer_norm(logit_positions(x, ctx), w_.output_norm, w_.output_norm_bias, hp_.ln_eps);  // [B, T, D]
  return linear(x, w_.output.defined() ? w_.output : w_.token_embd);                         // [B, T, V]
}

Gpt2Hparams gpt2_hparams(const WeightLoader& f) {
  Gpt2Hparams hp;
  hp.c = read_config(f);
  const ModelConfig& c = hp.c;
  hp.ln_eps = f.hp_float("attention.layer_norm_epsilon");
  hp.attn.n_head = c.n_head;
  hp.attn.n_kv_head = c.n_kv_head;
  hp.attn.d_head = c.d_head;
  hp.attn.options.scale = 1.0f / std::sqrt(float(c.d_head));
  return hp;
}

Gpt2Weights Gpt2Model::load_weights(const WeightLoader& f, const Gpt2Hparams& hp) {
  const ModelConfig& c = hp.c;
  const int64_t D = c.d_model, Q = c.n_head * c.d_head, QKV = (c.n_head + 2 * c.n_kv_head) * c.d_head, F = c.d_ff;
  Gpt2Weights w;
  w.token_embd = f.need("token_embd.weight", {c.n_vocab, D});
  w.position_embd = f.need("position_embd.weight", {c.n_ctx, D});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Gpt2Layer L;
    L.attn_norm = f.need(p + "attn_norm.weight", {D});
    L.attn_norm_bias = f.need(p + "attn_norm.bias", {D});
    L.attn.attn_qkv = f.need(p + "attn_qkv.weight", {QKV, D});
    L.attn.attn_qkv_bias = f.need(p + "attn_qkv.bias", {QKV});
    L.attn.attn_output = f.need(p + "attn_output.weight", {D, Q});
    L.attn.attn_output_bias = f.need(p + "attn_output.bias", {D});
    L.ffn_norm = f.need(p + "ffn_norm.weight", {D});
    L.ffn_norm_bias = f.need(p + "ffn_norm.bias", {D});
    L.ffn.ffn_up = f.need(p + "ffn_up.weight", {F, D});
    L.ffn.ffn_up_bias = f.need(p + "ffn_up.bias", {F});
    L.ffn.ffn_down = f.need(p + "ffn_down.weight", {D, F});
    L.ffn.ffn_down_bias = f.need(p + "ffn_down.bias", {D});
    w.layers.push_back(std::move(L));
  }
  w.output_norm = f.need("output_norm.weight", {D});
  w.output_norm_bias = f.need("output_norm.bias", {D});
  w.output = f.maybe("output.weight", {c.n_vocab, D});
  return w;
}

void Gpt2Model::for_each_param(const std::function<void(Tensor&)>& fn) {
  fn(w_.token_embd);
  fn(w_.position_embd);
  for (Gpt2Layer& L : w_.layers)
    for (Tensor* t : {&L.attn_norm, &L.attn_norm_bias, &L.attn.attn_qkv, &L.attn.attn_qkv_bias, &L.attn.attn_output,
                      &L.attn.attn_output_bias, &L.ffn_norm, &L.ffn_norm_bias, &L.ffn.ffn_up, &L.ffn.ffn_up_bias,
                      &L.ffn.ffn_down, &L.ffn.ffn_down_bias})
      fn(*t);
  fn(w_.output_norm);
  fn(w_.output_norm_bias);
  if (w_.output.defined()) fn(w_.output);
}

void Gpt2Model::write_metadata(gguf::GgufWriter& out) const {
  write_config(out, hp_.c, {.kv_heads = false});  // GPT-2 files have no head_count_kv
  out.set(hp_.c.arch + ".attention.layer_norm_epsilon", gguf::Value::of_f32(hp_.ln_eps));
}

std::unique_ptr<Model> load_gpt2(const WeightLoader& f) {
  Gpt2Hparams hp = gpt2_hparams(f);
  return std::make_unique<Gpt2Model>(hp, Gpt2Model::load_weights(f, hp));
}

}  // namespace toy
