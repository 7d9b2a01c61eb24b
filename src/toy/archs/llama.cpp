// archs/llama.cpp — Llama (SmolLM2, TinyLlama, Llama 2/3.x, Mistral). GGUF arch "llama".
// HF: LlamaForCausalLM / MistralForCausalLM.
//
//   x = token_embd[tokens]                                   [B, T, D]
//   for each layer:  h = x + attention(rms_norm(x))           (RoPE NORM, GQA)
//                    x = h + swiglu(rms_norm(h))
//   logits = output · rms_norm(x)   (output = token_embd when tied)      [B, T, V]
#include "toy/archs/llama.h"

#include <cmath>
#include <random>

namespace toy {

LlamaModel::LlamaModel(LlamaHparams hp, LlamaWeights w) : hp_(std::move(hp)), w_(std::move(w)) { config_ = hp_.c; }

Tensor LlamaModel::forward(const Tensor& tokens, const Ctx& ctx) const {
  Tensor x = embedding(w_.token_embd, tokens);  // [B, T, D]
  for (int64_t l = 0; l < hp_.c.n_layer; ++l)
    x = pre_norm_block(w_.layers[size_t(l)], hp_.attn, hp_.rms_eps, x, ctx, l);  // [B, T, D]
  x = rms_norm(logit_positions(x, ctx), w_.output_norm, hp_.rms_eps);            // [B, T, D]
  return linear(x, w_.output.defined() ? w_.output : w_.token_embd);             // [B, T, V]
}

void LlamaModel::for_each_param(const std::function<void(Tensor&)>& fn) {
  fn(w_.token_embd);
  for (PreNormLayer& L : w_.layers) {
    fn(L.attn_norm);
    for (Tensor* t : {&L.attn.attn_q, &L.attn.attn_k, &L.attn.attn_v, &L.attn.attn_q_bias, &L.attn.attn_k_bias,
                      &L.attn.attn_v_bias, &L.attn.attn_q_norm, &L.attn.attn_k_norm, &L.attn.attn_output})
      if (t->defined()) fn(*t);
    fn(L.ffn_norm);
    fn(L.ffn.ffn_gate);
    fn(L.ffn.ffn_up);
    fn(L.ffn.ffn_down);
  }
  fn(w_.output_norm);
  if (w_.output.defined()) fn(w_.output);
}

LlamaHparams llama_family_hparams(const WeightLoader& f, RopeMode mode) {
  LlamaHparams hp;
  hp.c = read_config(f);
  const ModelConfig& c = hp.c;
  hp.rms_eps = f.hp_float("attention.layer_norm_rms_epsilon");
  hp.attn.n_head = c.n_head;
  hp.attn.n_kv_head = c.n_kv_head;
  hp.attn.d_head = c.d_head;
  hp.attn.norm_eps = hp.rms_eps;
  hp.attn.rope = {.mode = mode,
                  .n_rot = f.hp_int("rope.dimension_count", c.d_head),
                  .base = f.hp_float("rope.freq_base", 10000.0f)};
  if (hp.attn.rope.n_rot <= 0 || hp.attn.rope.n_rot > c.d_head || hp.attn.rope.n_rot % 2)
    throw gguf::GgufError(f.file().path() + ": rope.dimension_count " + std::to_string(hp.attn.rope.n_rot) +
                          " does not fit head size " + std::to_string(c.d_head));
  hp.attn.options.scale = 1.0f / std::sqrt(float(c.d_head));
  return hp;
}

LlamaWeights LlamaModel::load_weights(const WeightLoader& f, const LlamaHparams& hp) {
  const ModelConfig& c = hp.c;
  const int64_t D = c.d_model, Q = c.n_head * c.d_head, KV = c.n_kv_head * c.d_head, F = c.d_ff, V = c.n_vocab;
  LlamaWeights w;
  w.token_embd = f.need("token_embd.weight", {V, D});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    PreNormLayer L;
    L.attn_norm = f.need(p + "attn_norm.weight", {D});
    L.attn.attn_q = f.need(p + "attn_q.weight", {Q, D});
    L.attn.attn_k = f.need(p + "attn_k.weight", {KV, D});
    L.attn.attn_v = f.need(p + "attn_v.weight", {KV, D});
    L.attn.attn_output = f.need(p + "attn_output.weight", {D, Q});
    if (hp.qkv_bias) {
      L.attn.attn_q_bias = f.need(p + "attn_q.bias", {Q});
      L.attn.attn_k_bias = f.need(p + "attn_k.bias", {KV});
      L.attn.attn_v_bias = f.need(p + "attn_v.bias", {KV});
    }
    if (hp.attn.qk_norm == QkNorm::PerHead) {
      L.attn.attn_q_norm = f.need(p + "attn_q_norm.weight", {c.d_head});
      L.attn.attn_k_norm = f.need(p + "attn_k_norm.weight", {c.d_head});
    }
    L.ffn_norm = f.need(p + "ffn_norm.weight", {D});
    L.ffn.ffn_gate = f.need(p + "ffn_gate.weight", {F, D});
    L.ffn.ffn_up = f.need(p + "ffn_up.weight", {F, D});
    L.ffn.ffn_down = f.need(p + "ffn_down.weight", {D, F});
    w.layers.push_back(std::move(L));
  }
  w.output_norm = f.need("output_norm.weight", {D});
  w.output = f.maybe("output.weight", {V, D});
  return w;
}

LlamaWeights LlamaModel::random_weights(const LlamaHparams& hp, bool tied, uint64_t seed) {
  const ModelConfig& c = hp.c;
  const int64_t D = c.d_model, Q = c.n_head * c.d_head, KV = c.n_kv_head * c.d_head, F = c.d_ff, V = c.n_vocab;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  auto randn = [&](const std::string& name, Shape s) {
    Tensor t = Tensor::empty(std::move(s));
    for (int64_t i = 0; i < t.numel(); ++i) t.data_mut()[i] = normal(rng);
    return t.set_name(name);
  };
  auto ones = [](const std::string& name, int64_t n) { return Tensor::full({n}, 1.0f).set_name(name); };
  LlamaWeights w;
  w.token_embd = randn("token_embd.weight", {V, D});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    PreNormLayer L;
    L.attn_norm = ones(p + "attn_norm.weight", D);
    L.attn.attn_q = randn(p + "attn_q.weight", {Q, D});
    L.attn.attn_k = randn(p + "attn_k.weight", {KV, D});
    L.attn.attn_v = randn(p + "attn_v.weight", {KV, D});
    L.attn.attn_output = randn(p + "attn_output.weight", {D, Q});
    L.ffn_norm = ones(p + "ffn_norm.weight", D);
    L.ffn.ffn_gate = randn(p + "ffn_gate.weight", {F, D});
    L.ffn.ffn_up = randn(p + "ffn_up.weight", {F, D});
    L.ffn.ffn_down = randn(p + "ffn_down.weight", {D, F});
    w.layers.push_back(std::move(L));
  }
  w.output_norm = ones("output_norm.weight", D);
  if (!tied) w.output = randn("output.weight", {V, D});
  return w;
}

void LlamaModel::write_metadata(gguf::GgufWriter& out) const {
  using gguf::Value;
  const std::string& a = hp_.c.arch;
  write_config(out, hp_.c);
  out.set(a + ".attention.layer_norm_rms_epsilon", Value::of_f32(hp_.rms_eps));
  out.set(a + ".rope.freq_base", Value::of_f32(hp_.attn.rope.base));
  out.set(a + ".rope.dimension_count", Value::of_u32(uint32_t(hp_.attn.rope.n_rot)));
  out.set(a + ".vocab_size", Value::of_u32(uint32_t(hp_.c.n_vocab)));
}

std::unique_ptr<Model> load_llama(const WeightLoader& f) {
  LlamaHparams hp = llama_family_hparams(f, RopeMode::Norm);
  // Llama 3 rope scaling: the converter stores per-pair divisors as `rope_freqs.weight`.
  hp.attn.rope.freq_factors = f.maybe("rope_freqs.weight", {hp.attn.rope.n_rot / 2});
  return std::make_unique<LlamaModel>(hp, LlamaModel::load_weights(f, hp));
}

}  // namespace toy
