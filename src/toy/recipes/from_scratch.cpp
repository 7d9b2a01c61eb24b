// recipes/from_scratch.cpp — the from-scratch recipe: a new Llama model on top of the Trainer.
#include "toy/recipes/from_scratch.h"

#include <cmath>

#include "toy/archs/llama.h"
#include "toy/recipes/observers.h"

namespace toy::recipes {

namespace {

LlamaHparams hparams_of(const TrainRunConfig& c, int64_t n_vocab) {
  LlamaHparams hp;
  const int64_t d_head = c.d_model / c.n_head;
  hp.c = {.arch = "llama",
          .n_vocab = n_vocab,
          .d_model = c.d_model,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .n_kv_head = c.n_kv_head ? c.n_kv_head : c.n_head,
          .d_head = d_head,
          .d_ff = c.d_ff ? c.d_ff : 3 * c.d_model,
          .n_ctx = c.context};
  hp.rms_eps = c.rms_eps;
  hp.attn.n_head = hp.c.n_head;
  hp.attn.n_kv_head = hp.c.n_kv_head;
  hp.attn.d_head = d_head;
  hp.attn.norm_eps = c.rms_eps;
  hp.attn.rope = {.mode = RopeMode::Norm, .n_rot = d_head, .base = c.rope_base, .freq_factors = {}};  // llama: NORM
  hp.attn.options.scale = 1.0f / std::sqrt(float(d_head));
  return hp;
}

}  // namespace

// The initial model of a run without --init-weights: the only place that knows its architecture.
std::unique_ptr<Model> build_model(const TrainRunConfig& c, int64_t n_vocab) {
  const LlamaHparams hp = hparams_of(c, n_vocab);
  return std::make_unique<LlamaModel>(hp, LlamaModel::random_weights(hp, c.tied, c.seed));
}

RunResult train_run(const TrainRunConfig& c, const RunOutput& io, const std::string& resume_dir) {
  Trainer trainer(c, io, resume_dir, {.new_model = build_model});
  add_standard_observers(trainer);
  return trainer.run();
}

}  // namespace toy::recipes
