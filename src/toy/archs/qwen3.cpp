// archs/qwen3.cpp — Qwen3 dense. GGUF arch "qwen3". HF: Qwen3ForCausalLM.
// The Llama decoder with an RMSNorm on each head of q and k (before rope), NEOX rope, and an
// explicit head size (attention.key_length; n_head·d_head may differ from d_model).
#include "toy/archs/llama.h"

namespace toy {

std::unique_ptr<Model> load_qwen3(const WeightLoader& f) {
  LlamaHparams hp = llama_family_hparams(f, RopeMode::Neox);
  hp.attn.qk_norm = QkNorm::PerHead;
  return std::make_unique<LlamaModel>(hp, LlamaModel::load_weights(f, hp));
}

}  // namespace toy
