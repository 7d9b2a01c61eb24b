// recipes/from_scratch.cpp — the from-scratch recipe: a new Llama model on top of the Trainer.
#include "toy/recipes/from_scratch.h"

#include "toy/archs/model.h"
#include "toy/recipes/jsonl_data.h"
#include "toy/recipes/observers.h"

namespace toy::recipes {

// The initial model of a run without --init-weights: a Llama-architecture model of the configured
// shape (NORM rope, as GGUF llama files), from the architecture's own description.
std::unique_ptr<Model> build_model(const TrainRunConfig& c, int64_t n_vocab) {
  using gguf::Value;
  try {
    return random_model({.arch = "llama",
                         .n_vocab = n_vocab,
                         .d_model = c.d_model,
                         .n_layer = c.n_layer,
                         .n_head = c.n_head,
                         .n_kv_head = c.n_kv_head,
                         .d_ff = c.d_ff ? c.d_ff : 3 * c.d_model,
                         .n_ctx = c.context,
                         .tied_output = c.tied,
                         .keys = {{"rope.freq_base", Value::of_f32(c.rope_base)},
                                  {"attention.layer_norm_rms_epsilon", Value::of_f32(c.rms_eps)}}},
                        c.seed);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
}

RunResult train_run(const TrainRunConfig& c, const RunOutput& io, const std::string& resume_dir) {
  Trainer trainer(c, io, resume_dir, {.new_model = build_model, .data = load_any_training_data});
  add_standard_observers(trainer);
  return trainer.run();
}

}  // namespace toy::recipes
