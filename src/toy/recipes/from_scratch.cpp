// recipes/from_scratch.cpp — the from-scratch recipe: a new model of any registered architecture
// on top of the Trainer.
#include "toy/recipes/from_scratch.h"

#include "toy/archs/model.h"
#include "toy/recipes/jsonl_data.h"
#include "toy/recipes/observers.h"

namespace toy::recipes {

// The shape of a new model: the size flags become the architecture's decoder keys; the others
// become its own keys only when given (0 leaves the architecture's default, e.g. gemma2's eps
// 1e-6), and each lands on the key of what the architecture has (LayerNorm or RMSNorm epsilon).
ModelShape model_shape(const TrainRunConfig& c, int64_t n_vocab) {
  using gguf::Value;
  const Architecture* arch = find_architecture(c.arch);
  if (!arch)
    throw ConfigError("--arch '" + c.arch + "' is not an architecture toy knows (" + architecture_names() + ")");
  const Variant& v = arch->variant;
  // A GELU MLP has one up projection, so it is wider than a gated FFN of the same parameter count.
  const int64_t d_ff = c.d_ff ? c.d_ff : (v.ffn == FfnKind::GeluMlp ? 4 : 3) * c.d_model;
  ModelShape s{.arch = c.arch,
               .n_vocab = n_vocab,
               .d_model = c.d_model,
               .n_layer = c.n_layer,
               .n_head = c.n_head,
               .n_kv_head = c.n_kv_head,
               .d_ff = d_ff,
               .n_ctx = c.context,
               .tied_output = c.tied,
               .keys = {}};
  auto key = [&](const char* name, Value value) { s.keys.emplace_back(name, std::move(value)); };
  if (c.rope_base > 0) key("rope.freq_base", Value::of_f32(c.rope_base));
  if (c.rms_eps > 0)
    key(v.norm == NormKind::Layer ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon",
        Value::of_f32(c.rms_eps));
  if (c.n_expert > 0) key("expert_count", Value::of_u32(uint32_t(c.n_expert)));
  if (c.n_expert_used > 0) key("expert_used_count", Value::of_u32(uint32_t(c.n_expert_used)));
  if (c.full_attention_interval > 0) key("full_attention_interval", Value::of_u32(uint32_t(c.full_attention_interval)));
  if (!c.differential) key("attention.differential", Value::of_u32(0));
  if (!c.ssmax) key("attention.ssmax", Value::of_u32(0));
  return s;
}

std::unique_ptr<Model> build_model(const TrainRunConfig& c, int64_t n_vocab) {
  try {
    return random_model(model_shape(c, n_vocab), c.seed);
  } catch (const std::invalid_argument& e) {  // a key the architecture refuses, e.g. expert_used_count > expert_count
    throw ConfigError(e.what());
  }
}

RunResult train_run(const TrainRunConfig& c, const RunOutput& io, const std::string& resume_dir) {
  Trainer trainer(c, io, resume_dir, {.new_model = build_model, .data = load_any_training_data});
  add_standard_observers(trainer);
  return trainer.run();
}

}  // namespace toy::recipes
