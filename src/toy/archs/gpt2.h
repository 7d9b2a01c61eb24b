// archs/gpt2.h — GPT-2: learned absolute positions, LayerNorm with bias, fused QKV, GELU MLP.
// Facts and forward pass in gpt2.cpp.
#pragma once

#include "toy/archs/model.h"
#include "toy/blocks/gpt2.h"

namespace toy {

struct Gpt2Hparams {
  ModelConfig c;         // n_ctx: also the number of learned positions, e.g. 1024
  float ln_eps = 1e-5f;  // attention.layer_norm_epsilon
  AttentionConfig attn;  // heads and scale (no rope)
};

struct Gpt2Weights {
  Tensor token_embd;     // [V, D]
  Tensor position_embd;  // [n_ctx, D]
  std::vector<Gpt2Layer> layers;
  Tensor output_norm, output_norm_bias;  // [D], [D]
  Tensor output;                         // [V, D]; undefined when tied to token_embd
};

class Gpt2Model : public Model {
 public:
  Gpt2Model(Gpt2Hparams hp, Gpt2Weights w);
  static Gpt2Weights load_weights(const WeightLoader& f, const Gpt2Hparams& hp);
  Tensor forward(const Tensor& tokens, const Ctx& ctx) const override;
  void for_each_param(const std::function<void(Tensor&)>& fn) override;
  void write_metadata(gguf::GgufWriter& w) const override;
  const Gpt2Hparams& hparams() const { return hp_; }

 private:
  Gpt2Hparams hp_;
  Gpt2Weights w_;
};

Gpt2Hparams gpt2_hparams(const WeightLoader& f);
std::unique_ptr<Model> load_gpt2(const WeightLoader& f);

}  // namespace toy
