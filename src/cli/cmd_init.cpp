// cli/cmd_init.cpp — `toy init --preset NAME`: a random-weight GGUF with a real model's shapes.
//
// Benchmarks and memory tests need real sizes without downloads. The file carries a
// placeholder SentencePiece vocabulary of the right size (<unk>, <s>, </s>, 256 byte tokens,
// then filler pieces), so llama.cpp loads it too.
#include <cstdio>
#include <iostream>

#include "cli/common.h"
#include "toy/archs/llama.h"
#include "toy/io/card.h"
#include "toy/io/file_type.h"
#include "toy/tensor/quant.h"

namespace toy::cli {
namespace {

struct Preset {
  const char* name;
  const char* arch;
  ModelConfig c;
  float rope_base, rms_eps;
  bool tied;
};

// Shapes from the models' published configurations.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = {
      {"smollm2-135m", "llama", {"llama", 49152, 576, 30, 9, 3, 64, 1536, 8192}, 100000.0f, 1e-5f, true},
      {"qwen2.5-0.5b", "qwen2", {"qwen2", 151936, 896, 24, 14, 2, 64, 4864, 32768}, 1000000.0f, 1e-6f, true},
      {"tinyllama-1.1b", "llama", {"llama", 32000, 2048, 22, 32, 4, 64, 5632, 2048}, 10000.0f, 1e-5f, false},
  };
  return p;
}

void add_placeholder_vocab(gguf::GgufWriter& w, int64_t n_vocab) {
  using gguf::Value;
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    scores.push_back(0);
    types.push_back(6);
  }
  for (int64_t i = int64_t(tokens.size()); i < n_vocab; ++i) {
    tokens.push_back("\xe2\x96\x81t" + std::to_string(i));  // "▁t<i>"
    scores.push_back(-float(i));
    types.push_back(1);
  }
  w.set("tokenizer.ggml.model", Value::of_string("llama"));
  w.set("tokenizer.ggml.pre", Value::of_string("default"));
  w.set("tokenizer.ggml.tokens", Value::of_strings(tokens));
  w.set("tokenizer.ggml.scores", Value::of_f32s(scores));
  w.set("tokenizer.ggml.token_type", Value::of_i32s(types));
  w.set("tokenizer.ggml.bos_token_id", Value::of_u32(1));
  w.set("tokenizer.ggml.eos_token_id", Value::of_u32(2));
  w.set("tokenizer.ggml.unknown_token_id", Value::of_u32(0));
  w.set("tokenizer.ggml.add_bos_token", Value::of_bool(true));
}

// `--card CARD.md`: the model an algorithm card describes (toy describe MODEL --card).
int run_card(const Args& a) {
  if (a.has("preset")) throw UsageError("give --preset or --card, not both");
  const std::string out = a.str("output");
  if (out.empty()) throw UsageError("give -o FILE");
  try {
    card::write_model(card::load(a.str("card")), out, uint64_t(a.integer("seed")));
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

  LlamaHparams hp;
  hp.c = preset->c;
  hp.rms_eps = preset->rms_eps;
  hp.attn = {.n_head = hp.c.n_head,
             .n_kv_head = hp.c.n_kv_head,
             .d_head = hp.c.d_head,
             .rope = {.mode = std::string(preset->arch) == "llama" ? RopeMode::Norm : RopeMode::Neox,
                      .n_rot = hp.c.d_head,
                      .base = preset->rope_base}};
  hp.qkv_bias = std::string(preset->arch) == "qwen2";
  std::fprintf(stderr, "init: %s (%s), random weights, %s ...\n", preset->name, preset->arch,
               std::string(ft->name).c_str());
  LlamaWeights w = LlamaModel::random_weights(hp, preset->tied, uint64_t(a.integer("seed")));
  if (hp.qkv_bias)
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const int64_t Q = hp.c.n_head * hp.c.d_head, KV = hp.c.n_kv_head * hp.c.d_head;
      w.layers[l].attn.attn_q_bias = Tensor::zeros({Q}).set_name(p + "attn_q.bias");
      w.layers[l].attn.attn_k_bias = Tensor::zeros({KV}).set_name(p + "attn_k.bias");
      w.layers[l].attn.attn_v_bias = Tensor::zeros({KV}).set_name(p + "attn_v.bias");
    }
  LlamaModel model(hp, std::move(w));

  gguf::GgufWriter writer;
  writer.set("general.name", gguf::Value::of_string(std::string(preset->name) + " (random weights, toy init)"));
  model.write_metadata(writer);
  writer.set("general.file_type", gguf::Value::of_u32(ft->general_file_type));
  add_placeholder_vocab(writer, hp.c.n_vocab);
  std::vector<Tensor> converted;  // keeps quantized copies alive until the write
  model.for_each_param([&](Tensor& t) {
    // As llama-quantize would write this file type (vectors stay F32).
    const DType target = gguf::tensor_dtype(*ft, t.name(), t.shape(), int(hp.c.n_layer), preset->tied);
    Tensor q = Tensor::empty(t.shape(), target);
    quantize(target, t.data(), q.raw_mut(), t.numel());
    converted.push_back(q);
    writer.add_tensor(t.name(), q);
  });
  writer.write(out);
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
