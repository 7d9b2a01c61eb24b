// archs/olmoe.cpp — OLMoE. GGUF arch "olmoe". HF: OlmoeForCausalLM.
//
//   x = token_embd[tokens]                                                    [B, T, D]
//   for each layer:  h = x + attention(rms_norm(x))   q, k RMS-normed over their full width
//                                                     (before splitting heads), NEOX rope
//                    x = h + moe(rms_norm(h))         p = softmax(ffn_gate_inp · h) over all
//                                                     experts; Σ over the top-k of p_e·swiglu_e
//                                                     (no renormalisation of the k weights)
//   logits = output · rms_norm(x)                                               [B, T, V]
#include "toy/archs/olmoe.h"

#include "toy/archs/llama.h"  // llama_family_hparams: the keys OLMoE shares with Llama

namespace toy {

OlmoeModel::OlmoeModel(OlmoeHparams hp, OlmoeWeights w) : hp_(std::move(hp)), w_(std::move(w)) { config_ = hp_.c; }

Tensor OlmoeModel::forward(const Tensor& tokens, const Ctx& ctx) const {
  Tensor x = embedding(w_.token_embd, tokens);  // [B, T, D]
  for (int64_t l = 0; l < hp_.c.n_layer; ++l)
    x = moe_block(w_.layers[size_t(l)], hp_.attn, hp_.moe, hp_.rms_eps, x, ctx, l);  // [B, T, D]
  x = rms_norm(logit_positions(x, ctx), w_.output_norm, hp_.rms_eps);                // [B, T, D]
  return linear(x, w_.output);                                                       // [B, T, V]
}

OlmoeHparams olmoe_hparams(const WeightLoader& f) {
  const LlamaHparams base = llama_family_hparams(f, RopeMode::Neox);
  OlmoeHparams hp;
  hp.c = base.c;
  hp.rms_eps = base.rms_eps;
  hp.attn = base.attn;
  hp.attn.qk_norm = QkNorm::FullWidth;
  hp.moe = {.n_expert = f.hp_int("expert_count"), .n_expert_used = f.hp_int("expert_used_count")};
  if (hp.moe.n_expert <= 0 || hp.moe.n_expert > 4096 || hp.moe.n_expert_used <= 0 ||
      hp.moe.n_expert_used > hp.moe.n_expert)
    throw gguf::GgufError(f.file().path() + ": olmoe: expert_used_count " + std::to_string(hp.moe.n_expert_used) +
                          " / expert_count " + std::to_string(hp.moe.n_expert) + " out of range");
  return hp;
}

OlmoeWeights OlmoeModel::load_weights(const WeightLoader& f, const OlmoeHparams& hp) {
  const ModelConfig& c = hp.c;
  const int64_t D = c.d_model, Q = c.n_head * c.d_head, KV = c.n_kv_head * c.d_head, F = c.d_ff, E = hp.moe.n_expert;
  OlmoeWeights w;
  w.token_embd = f.need("token_embd.weight", {c.n_vocab, D});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    MoeLayer L;
    L.attn_norm = f.need(p + "attn_norm.weight", {D});
    L.attn.attn_q = f.need(p + "attn_q.weight", {Q, D});
    L.attn.attn_k = f.need(p + "attn_k.weight", {KV, D});
    L.attn.attn_v = f.need(p + "attn_v.weight", {KV, D});
    L.attn.attn_q_norm = f.need(p + "attn_q_norm.weight", {Q});
    L.attn.attn_k_norm = f.need(p + "attn_k_norm.weight", {KV});
    L.attn.attn_output = f.need(p + "attn_output.weight", {D, Q});
    L.ffn_norm = f.need(p + "ffn_norm.weight", {D});
    L.ffn.ffn_gate_inp = f.need(p + "ffn_gate_inp.weight", {E, D});
    L.ffn.ffn_gate_exps = f.need(p + "ffn_gate_exps.weight", {E, F, D});
    L.ffn.ffn_up_exps = f.need(p + "ffn_up_exps.weight", {E, F, D});
    L.ffn.ffn_down_exps = f.need(p + "ffn_down_exps.weight", {E, D, F});
    w.layers.push_back(std::move(L));
  }
  w.output_norm = f.need("output_norm.weight", {D});
  w.output = f.need("output.weight", {c.n_vocab, D});
  return w;
}

void OlmoeModel::for_each_param(const std::function<void(Tensor&)>& fn) {
  fn(w_.token_embd);
  for (MoeLayer& L : w_.layers)
    for (Tensor* t : {&L.attn_norm, &L.attn.attn_q, &L.attn.attn_k, &L.attn.attn_v, &L.attn.attn_q_norm,
                      &L.attn.attn_k_norm, &L.attn.attn_output, &L.ffn_norm, &L.ffn.ffn_gate_inp, &L.ffn.ffn_gate_exps,
                      &L.ffn.ffn_up_exps, &L.ffn.ffn_down_exps})
      fn(*t);
  fn(w_.output_norm);
  fn(w_.output);
}

void OlmoeModel::write_metadata(gguf::GgufWriter& out) const {
  using gguf::Value;
  const std::string& a = hp_.c.arch;
  write_config(out, hp_.c);
  out.set(a + ".attention.layer_norm_rms_epsilon", Value::of_f32(hp_.rms_eps));
  out.set(a + ".rope.freq_base", Value::of_f32(hp_.attn.rope.base));
  out.set(a + ".rope.dimension_count", Value::of_u32(uint32_t(hp_.attn.rope.n_rot)));
  out.set(a + ".expert_count", Value::of_u32(uint32_t(hp_.moe.n_expert)));
  out.set(a + ".expert_used_count", Value::of_u32(uint32_t(hp_.moe.n_expert_used)));
}

std::unique_ptr<Model> load_olmoe(const WeightLoader& f) {
  OlmoeHparams hp = olmoe_hparams(f);
  return std::make_unique<OlmoeModel>(hp, OlmoeModel::load_weights(f, hp));
}

}  // namespace toy
