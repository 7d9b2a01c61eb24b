// archs/qwen2.cpp — Qwen2 / Qwen2.5. GGUF arch "qwen2". HF: Qwen2ForCausalLM.
// The Llama decoder with q/k/v biases and NEOX rope (Q/K rows are not permuted by the converter).
#include "toy/archs/llama.h"

namespace toy {

std::unique_ptr<Model> load_qwen2(const WeightLoader& f) {
  LlamaHparams hp = llama_family_hparams(f, RopeMode::Neox);
  hp.qkv_bias = true;
  return std::make_unique<LlamaModel>(hp, LlamaModel::load_weights(f, hp));
}

}  // namespace toy
