// archs/olmoe.h — OLMoE: a Llama-style decoder whose FFN is a mixture of experts, with
// full-width q/k RMSNorm. Facts and forward pass in olmoe.cpp.
#pragma once

#include "toy/archs/model.h"
#include "toy/blocks/moe.h"

namespace toy {

struct OlmoeHparams {
  ModelConfig c;          // d_ff: the width of one expert, e.g. 1024
  float rms_eps = 1e-5f;  // attention.layer_norm_rms_epsilon
  AttentionConfig attn;   // NEOX rope, full-width q/k norm
  MoeConfig moe;          // e.g. 64 experts, 8 used
};

struct OlmoeWeights {
  Tensor token_embd;  // [V, D]
  std::vector<MoeLayer> layers;
  Tensor output_norm;  // [D]
  Tensor output;       // [V, D] (never tied)
};

class OlmoeModel : public Model {
 public:
  OlmoeModel(OlmoeHparams hp, OlmoeWeights w);
  static OlmoeWeights load_weights(const WeightLoader& f, const OlmoeHparams& hp);
  Tensor forward(const Tensor& tokens, const Ctx& ctx) const override;
  void for_each_param(const std::function<void(Tensor&)>& fn) override;
  void write_metadata(gguf::GgufWriter& w) const override;
  const OlmoeHparams& hparams() const { return hp_; }

 private:
  OlmoeHparams hp_;
  OlmoeWeights w_;
};

OlmoeHparams olmoe_hparams(const WeightLoader& f);
std::unique_ptr<Model> load_olmoe(const WeightLoader& f);

}  // namespace toy
