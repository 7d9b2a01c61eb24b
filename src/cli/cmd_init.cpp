// cli/cmd_init.cpp — `toy init --preset NAME`: a random-weight GGUF with a real model's shapes.
//
// Benchmarks and memory tests need real sizes without downloads. The model comes from its
// architecture's description (archs/), the file carries a placeholder vocabulary of the right
// size (tokenizer/), so llama.cpp loads it too.
#include <cstdio>
#include <iostream>

#include "cli/common.h"
#include "toy/archs/model.h"
#include "toy/cards/card.h"
#include "toy/io/file_type.h"
#include "toy/io/progress.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::cli {
namespace {

struct Preset {
  const char* name;
  ModelShape shape;
};

// Shapes from the models' published configurations.
const std::vector<Preset>& presets() {
  using gguf::Value;
  static const std::vector<Preset> p = {
      {"smollm2-135m",
       {.arch = "llama",
        .n_vocab = 49152,
        .d_model = 576,
        .n_layer = 30,
        .n_head = 9,
        .n_kv_head = 3,
        .d_ff = 1536,
        .n_ctx = 8192,
        .tied_output = true,
        .keys = {{"rope.freq_base", Value::of_f32(100000.0f)},
                 {"attention.layer_norm_rms_epsilon", Value::of_f32(1e-5f)}}}},
      {"qwen2.5-0.5b",
       {.arch = "qwen2",
        .n_vocab = 151936,
        .d_model = 896,
        .n_layer = 24,
        .n_head = 14,
        .n_kv_head = 2,
        .d_ff = 4864,
        .n_ctx = 32768,
        .tied_output = true,
        .keys = {{"rope.freq_base", Value::of_f32(1000000.0f)},
                 {"attention.layer_norm_rms_epsilon", Value::of_f32(1e-6f)}}}},
      {"tinyllama-1.1b",
       {.arch = "llama",
        .n_vocab = 32000,
        .d_model = 2048,
        .n_layer = 22,
        .n_head = 32,
        .n_kv_head = 4,
        .d_ff = 5632,
        .n_ctx = 2048,
        .tied_output = false,
        .keys = {{"rope.freq_base", Value::of_f32(10000.0f)},
                 {"attention.layer_norm_rms_epsilon", Value::of_f32(1e-5f)}}}},
  };
  return p;
}

// `--card CARD.md`: the model an algorithm card describes (toy describe MODEL --card).
int run_card(const Args& a) {
  if (a.has("preset")) throw UsageError("give --preset or --card, not both");
  const std::string out = a.str("output");
  if (out.empty()) throw UsageError("give -o FILE");
  try {
    Progress written("init: " + out, 0, Progress::Unit::Bytes);
    card::write_model(card::load(a.str("card")), out, uint64_t(a.integer("seed")), &written);
  } catch (const card::CardError& e) {
    throw InputError(e.what());
  }
  std::fprintf(stderr, "init: wrote %s\n", out.c_str());
  return kOk;
}

int run(const Args& a) {
  if (a.has("card")) return run_card(a);
  const std::string preset_name = a.str("preset");
  const Preset* preset = nullptr;
  std::string names;
  for (const Preset& p : presets()) {
    if (preset_name == p.name) preset = &p;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  if (preset_name.empty()) throw UsageError("give --preset (" + names + ") or --card CARD.md");
  if (!preset) throw UsageError("unknown preset '" + preset_name + "' (known: " + names + ")");
  const auto ft = gguf::file_type(a.str("dtype"));
  if (!ft)
    throw UsageError("--dtype " + a.str("dtype") + " cannot be written (try " + std::string(gguf::file_type_names()) +
                     ")");
  const std::string out = a.str("output");
  if (out.empty()) throw UsageError("give -o FILE");

  const ModelShape& shape = preset->shape;
  std::fprintf(stderr, "init: %s (%s), random weights, %s ...\n", preset->name, shape.arch.c_str(),
               std::string(ft->name).c_str());
  std::unique_ptr<Model> model = random_model(shape, uint64_t(a.integer("seed")));

  gguf::GgufWriter writer;
  model->write_metadata(writer);
  writer.set("general.name", gguf::Value::of_string(std::string(preset->name) + " (random weights, toy init)"));
  writer.set("general.file_type", gguf::Value::of_u32(ft->general_file_type));
  write_placeholder_vocab(writer, shape.n_vocab);
  std::vector<Tensor> converted;  // keeps quantized copies alive until the write
  int64_t n_weights = 0, done = 0;
  model->for_each_param([&](Tensor& t) { n_weights += t.numel(); });
  {
    // F32 converts nothing: no bar for it.
    Progress bar("init: to " + std::string(ft->name), n_weights, Progress::Unit::Count, "weights",
                 ft->general_file_type != 0);
    model->for_each_param([&](Tensor& t) {
      // As llama-quantize would write this file type (vectors stay F32).
      converted.push_back(gguf::to_file_dtype(*ft, t, int(shape.n_layer), shape.tied_output));
      writer.add_tensor(t.name(), converted.back());
      bar.update(done += t.numel());
    });
  }
  Progress written("init: " + out, 0, Progress::Unit::Bytes);
  writer.write(out, &written);
  written.finish();
  std::fprintf(stderr, "init: wrote %s\n", out.c_str());
  return kOk;
}

Registrar reg({
    .name = "init",
    .summary = "write a random-weight GGUF with the exact shapes of a real model (a preset or an algorithm card)",
    .positionals = {},
    .flags = {{"preset", FlagType::String, "", "smollm2-135m, qwen2.5-0.5b or tinyllama-1.1b"},
              {"dtype", FlagType::String, "F32",
               "weight dtype of the matrices (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) or "
               "llama.cpp's "
               "mix Q4_K_M / Q5_K_M; rows that K-quants cannot split fall back as in llama-quantize"},
              {"card", FlagType::Path, "",
               "build the model an algorithm card describes (toy describe MODEL --card); F32, random weights"},
              {"output", FlagType::Path, "", "output GGUF file", 'o'},
              {"seed", FlagType::Int, "0", "random seed for the weights"}},
    .run = run,
    .details = "example: toy init --preset smollm2-135m --dtype Q8_0 -o smollm2-q8_0.gguf",
});

}  // namespace
}  // namespace toy::cli
