// archs/gemma2.h — Gemma 2: sandwich-norm layers, soft-capped logits, alternating local
// (sliding-window) and global attention. Facts and forward pass in gemma2.cpp.
#pragma once

#include "toy/archs/model.h"
#include "toy/blocks/sandwich_norm.h"

namespace toy {

struct Gemma2Hparams {
  ModelConfig c;
  float rms_eps = 1e-6f;        // attention.layer_norm_rms_epsilon
  AttentionConfig global;       // NEOX rope, head-size scale, attention-logit soft-cap (e.g. 50)
  AttentionConfig local;        // as global, plus the sliding window (e.g. 4096)
  int64_t swa_pattern = 2;      // layer l is local when l % swa_pattern < swa_pattern − 1
  float final_softcap = 30.0f;  // final_logit_softcapping
  bool is_local(int64_t layer) const { return layer % swa_pattern < swa_pattern - 1; }
};

struct Gemma2Weights {
  Tensor token_embd;  // [V, D], also the output projection (always tied)
  std::vector<SandwichNormLayer> layers;
  Tensor output_norm;  // [D]
};

class Gemma2Model : public Model {
 public:
  Gemma2Model(Gemma2Hparams hp, Gemma2Weights w);
  static Gemma2Weights load_weights(const WeightLoader& f, const Gemma2Hparams& hp);
  Tensor forward(const Tensor& tokens, const Ctx& ctx) const override;
  void for_each_param(const std::function<void(Tensor&)>& fn) override;
  void write_metadata(gguf::GgufWriter& w) const override;
  const Gemma2Hparams& hparams() const { return hp_; }

 private:
  Gemma2Hparams hp_;
  Gemma2Weights w_;
};

Gemma2Hparams gemma2_hparams(const WeightLoader& f);
std::unique_ptr<Model> load_gemma2(const WeightLoader& f);

}  // namespace toy
