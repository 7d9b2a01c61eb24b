// archs/llama.h — the Llama family (llama, qwen2, qwen3): one decoder, three sets of facts.
//
// llama: NORM rope (the converter permuted Q/K rows), optional Llama-3 `rope_freqs`, tied or
// untied output. qwen2: + q/k/v biases, NEOX rope. qwen3: + per-head q/k RMSNorm, NEOX rope,
// explicit head size. Each variant's facts live in its own file (llama.cpp, qwen2.cpp,
// qwen3.cpp); they share this weight struct and forward pass.
#pragma once

#include "toy/archs/model.h"

namespace toy {

struct LlamaHparams {
  ModelConfig c;
  float rms_eps = 1e-5f;  // attention.layer_norm_rms_epsilon
  AttentionConfig attn;   // heads, rope, q/k norm, scale
  bool qkv_bias = false;  // qwen2
};

struct LlamaWeights {
  Tensor token_embd;  // [V, D]
  std::vector<PreNormLayer> layers;
  Tensor output_norm;  // [D]
  Tensor output;       // [V, D]; undefined when tied to token_embd
};

class LlamaModel : public Model {
 public:
  LlamaModel(LlamaHparams hp, LlamaWeights w);
  // Reads the weights named by GGUF for these hyper-parameters.
  static LlamaWeights load_weights(const WeightLoader& f, const LlamaHparams& hp);
  // Random weights (N(0, 0.02) matrices, unit norms) for training from scratch.
  static LlamaWeights random_weights(const LlamaHparams& hp, bool tied, uint64_t seed);

  Tensor forward(const Tensor& tokens, const Ctx& ctx) const override;
  void for_each_param(const std::function<void(Tensor&)>& fn) override;
  void write_metadata(gguf::GgufWriter& w) const override;
  const LlamaHparams& hparams() const { return hp_; }

 private:
  LlamaHparams hp_;
  LlamaWeights w_;
};

// The hyper-parameters every Llama-family file shares (heads, sizes, eps, rope base).
LlamaHparams llama_family_hparams(const WeightLoader& f, RopeMode mode);

std::unique_ptr<Model> load_llama(const WeightLoader& f);
std::unique_ptr<Model> load_qwen2(const WeightLoader& f);
std::unique_ptr<Model> load_qwen3(const WeightLoader& f);

}  // namespace toy
