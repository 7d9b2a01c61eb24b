// archs/gemma2.cpp — Gemma 2. GGUF arch "gemma2". HF: Gemma2ForCausalLM.
//
//   x = √D · token_embd[tokens]                                              [B, T, D]
//   for each layer:  h = x + rms_norm(attention(rms_norm(x)))     post_attention_norm
//                    x = h + rms_norm(geglu(rms_norm(h)))         post_ffw_norm
//   logits = softcap(token_embd · rms_norm(x))                                [B, T, V]
//
// Attention: NEOX rope; scores q·k/√d_head soft-capped (cap·tanh(s/cap)) before the mask;
// layers 0, 2, 4, … see only the last `sliding_window` positions, layers 1, 3, … everything.
// Norm weights: HF Gemma computes x̂·(1 + w) and the converter stores w + 1, so the GGUF
// value is used as it is. Output always tied: llama.cpp never reads an output.weight here.
#include "toy/archs/gemma2.h"

#include <cmath>

#include "toy/archs/llama.h"  // llama_family_hparams: the keys Gemma 2 shares with Llama

namespace toy {

Gemma2Model::Gemma2Model(Gemma2Hparams hp, Gemma2Weights w) : hp_(std::move(hp)), w_(std::move(w)) { config_ = hp_.c; }

Tensor Gemma2Model::forward(const Tensor& tokens, const Ctx& ctx) const {
  Tensor x = scale(embedding(w_.token_embd, tokens), std::sqrt(float(hp_.c.d_model)));  // [B, T, D]
  for (int64_t l = 0; l < hp_.c.n_layer; ++l) {
    const AttentionConfig& a = hp_.is_local(l) ? hp_.local : hp_.global;
    x = sandwich_norm_block(w_.layers[size_t(l)], a, hp_.rms_eps, x, ctx, l);  // [B, T, D]
  }
  x = rms_norm(logit_positions(x, ctx), w_.output_norm, hp_.rms_eps);          // [B, T, D]
  Tensor logits = linear(x, w_.token_embd);                                    // [B, T, V]
  return hp_.final_softcap > 0 ? softcap(logits, hp_.final_softcap) : logits;  // [B, T, V]
}

Gemma2Hparams gemma2_hparams(const WeightLoader& f) {
  const LlamaHparams base = llama_family_hparams(f, RopeMode::Neox);  // rope base 10000 when absent
  Gemma2Hparams hp;
  hp.c = base.c;
  hp.rms_eps = base.rms_eps;
  hp.global = base.attn;
  const ModelConfig& c = hp.c;
  // llama.cpp scales by 1/√(d_model/n_head) (integer division) for Gemma-2 27B, which it
  // recognises by its 46 layers; every other size uses 1/√d_head.
  hp.global.options.scale = 1.0f / std::sqrt(float(c.n_layer == 46 ? c.d_model / c.n_head : c.d_head));
  hp.global.options.softcap = f.hp_float("attn_logit_softcapping", 50.0f);
  hp.local = hp.global;
  hp.local.options.window = f.hp_int("attention.sliding_window", 4096);
  hp.swa_pattern = f.hp_int("attention.sliding_window_pattern", 2);
  hp.final_softcap = f.hp_float("final_logit_softcapping", 30.0f);
  auto bad = [&](const std::string& what) { throw gguf::GgufError(f.file().path() + ": gemma2: " + what); };
  if (hp.local.options.window <= 0) bad("attention.sliding_window must be positive");
  if (hp.swa_pattern <= 0) bad("attention.sliding_window_pattern must be positive");
  if (hp.global.options.softcap < 0 || hp.final_softcap < 0) bad("soft-capping values must not be negative");
  return hp;
}

Gemma2Weights Gemma2Model::load_weights(const WeightLoader& f, const Gemma2Hparams& hp) {
  const ModelConfig& c = hp.c;
  const int64_t D = c.d_model, Q = c.n_head * c.d_head, KV = c.n_kv_head * c.d_head, F = c.d_ff;
  Gemma2Weights w;
  w.token_embd = f.need("token_embd.weight", {c.n_vocab, D});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    SandwichNormLayer L;
    L.attn_norm = f.need(p + "attn_norm.weight", {D});
    L.attn.attn_q = f.need(p + "attn_q.weight", {Q, D});
    L.attn.attn_k = f.need(p + "attn_k.weight", {KV, D});
    L.attn.attn_v = f.need(p + "attn_v.weight", {KV, D});
    L.attn.attn_output = f.need(p + "attn_output.weight", {D, Q});
    L.post_attention_norm = f.need(p + "post_attention_norm.weight", {D});
    L.ffn_norm = f.need(p + "ffn_norm.weight", {D});
    L.ffn.ffn_gate = f.need(p + "ffn_gate.weight", {F, D});
    L.ffn.ffn_up = f.need(p + "ffn_up.weight", {F, D});
    L.ffn.ffn_down = f.need(p + "ffn_down.weight", {D, F});
    L.post_ffw_norm = f.need(p + "post_ffw_norm.weight", {D});
    w.layers.push_back(std::move(L));
  }
  w.output_norm = f.need("output_norm.weight", {D});
  return w;
}

void Gemma2Model::for_each_param(const std::function<void(Tensor&)>& fn) {
  fn(w_.token_embd);
  for (SandwichNormLayer& L : w_.layers)
    for (Tensor* t :
         {&L.attn_norm, &L.attn.attn_q, &L.attn.attn_k, &L.attn.attn_v, &L.attn.attn_output, &L.post_attention_norm,
          &L.ffn_norm, &L.ffn.ffn_gate, &L.ffn.ffn_up, &L.ffn.ffn_down, &L.post_ffw_norm})
      fn(*t);
  fn(w_.output_norm);
}

void Gemma2Model::write_metadata(gguf::GgufWriter& out) const {
  using gguf::Value;
  const std::string& a = hp_.c.arch;
  write_config(out, hp_.c, {.head_size = true});
  out.set(a + ".attention.layer_norm_rms_epsilon", Value::of_f32(hp_.rms_eps));
  out.set(a + ".rope.freq_base", Value::of_f32(hp_.global.rope.base));
  out.set(a + ".rope.dimension_count", Value::of_u32(uint32_t(hp_.global.rope.n_rot)));
  out.set(a + ".attn_logit_softcapping", Value::of_f32(hp_.global.options.softcap));
  out.set(a + ".final_logit_softcapping", Value::of_f32(hp_.final_softcap));
  out.set(a + ".attention.sliding_window", Value::of_u32(uint32_t(hp_.local.options.window)));
  if (hp_.swa_pattern != 2) out.set(a + ".attention.sliding_window_pattern", Value::of_u32(uint32_t(hp_.swa_pattern)));
}

std::unique_ptr<Model> load_gemma2(const WeightLoader& f) {
  Gemma2Hparams hp = gemma2_hparams(f);
  return std::make_unique<Gemma2Model>(hp, Gemma2Model::load_weights(f, hp));
}

}  // namespace toy
