// tests/test_quantize.cpp — `toy quantize` against llama-quantize: the fixtures' files written by
// llama-quantize from llama2w256-f32.gguf (each file type's dtype per tensor, and the blocks' bytes),
// logits as far from the F32 model's as llama.cpp's, and the refusals (its own input, unknown
// types, bad files).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.h"
#include "toy/archs/model.h"
#include "toy/io/file_type.h"
#include "toy/io/gguf.h"
#include "toy/tensor/quant.h"

using namespace toy;
namespace fs = std::filesystem;

namespace {

// Logits of the fixture's prompt, one forward pass under NoGrad: [T, n_vocab] row-major.
std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& ids) {
  auto model = load_model(gguf::GgufFile::open(path));
  NoGrad no_grad;
  return model->forward(Tensor::from_ids({1, int64_t(ids.size())}, ids), Ctx{}).to_vector();
}

// The first n floats of a little-endian float32 file (llama.cpp's logits of a fixture).
std::vector<float> read_floats(const fs::path& p, size_t n) {
  const auto bytes = test::read_bytes(p);
  std::vector<float> v(n);
  if (bytes.size() >= n * 4) std::memcpy(v.data(), bytes.data(), n * 4);
  return v;
}

double rel_rms(const std::vector<float>& got, const std::vector<float>& want) {
  double se = 0, s = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    se += double(got[i] - want[i]) * (got[i] - want[i]);
    s += double(want[i]) * want[i];
  }
  return std::sqrt(se / s);
}

struct TempDir {
  fs::path dir = fs::path(testing::TempDir()) / ("toy_quantize_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(dir); }
  ~TempDir() { fs::remove_all(dir); }
};

}  // namespace

TEST(QuantizeCli, WritesWhatLlamaQuantizeWrites) {
  TOY_REQUIRE_FIXTURE(f32_path, "models/llama2w256/llama2w256-f32.gguf");
  TempDir d;
  const auto ref_json = nlohmann::json::parse(test::read_text(f32_path.string() + ".ref.json"));
  const auto prompt = ref_json["prompt_tokens"].get<std::vector<int32_t>>();  // 33 tokens, one llama_decode
  const size_t n = prompt.size() * 512;                                       // rows 0..32 of the logits files
  const std::vector<float> f32_toy = logits_of(f32_path.string(), prompt);
  const std::vector<float> f32_llama = read_floats(f32_path.string() + ".logits.f32", n);
  for (const std::string type : {"f16", "bf16", "q8_0", "q4_0", "q6_k", "q4_k_m", "q5_k_m"}) {
    SCOPED_TRACE(type);
    const fs::path ref_path = f32_path.parent_path() / ("llama2w256-" + type + ".gguf");
    const fs::path out = d.dir / (type + ".gguf");
    auto r = test::run_toy("quantize " + f32_path.string() + " " + out.string() + " --dtype " + type);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("100% (21 / 21 tensors)"), std::string::npos) << r.err;  // the progress reporter's last line
    EXPECT_NE(r.err.find("quantize: " + out.string() + ": 100% ("), std::string::npos) << r.err;  // then the write's

    auto got = gguf::GgufFile::open(out.string());
    auto ref = gguf::GgufFile::open(ref_path.string());
    EXPECT_EQ(got->get_int("general.file_type"), ref->get_int("general.file_type"));
    EXPECT_EQ(got->get_string("general.name"), ref->get_string("general.name"));  // every key kept
    EXPECT_EQ(got->get_strings("tokenizer.ggml.tokens").size(), 512u);
    ASSERT_EQ(got->tensors().size(), ref->tensors().size());
    for (const gguf::TensorInfo& t : ref->tensors()) {
      const gguf::TensorInfo* g = got->find_tensor(t.name);
      ASSERT_NE(g, nullptr) << t.name;
      ASSERT_EQ(name(g->dtype), name(t.dtype)) << t.name;  // llama-quantize's mix: norms F32, output Q6_K, …
      ASSERT_EQ(g->nbytes, t.nbytes) << t.name;
      EXPECT_EQ(std::memcmp(got->tensor_data(*g), ref->tensor_data(t), t.nbytes), 0) << t.name << " bytes differ";
    }
    // The file loads, and its logits are as far from the F32 model's as llama.cpp's logits of
    // llama-quantize's file are from llama.cpp's F32 logits (the same weights: within 5 %).
    const double err = rel_rms(logits_of(out.string(), prompt), f32_toy);
    const double llama_err = rel_rms(read_floats(ref_path.string() + ".logits.f32", n), f32_llama);
    EXPECT_GT(err, 0);
    EXPECT_NEAR(err, llama_err, 0.05 * llama_err + 1e-6);
    std::printf("  %-7s logits relative RMS error vs F32: toy %.3e, llama.cpp %.3e\n", type.c_str(), err, llama_err);
  }
}

// Every fixture family's files derived from its F32 file (llama-quantize, or gguf-py with
// llama-quantize's keep-F32 rules for the hybrids): toy writes each tensor in the same dtype with
// the same bytes — among them the F32 tensors of any file type (routers, convolution taps, learned
// positions), which toy's loader also reads as F32 whatever a file stores.
TEST(Quantize, EveryFamilysFilesAsLlamaQuantizeWritesThem) {
  TOY_REQUIRE_FIXTURE(models, "models");
  int compared = 0;
  for (const auto& dir : fs::directory_iterator(models)) {
    const std::string family = dir.path().filename().string();
    const fs::path f32_path = dir.path() / (family + "-f32.gguf");
    if (!fs::exists(f32_path)) continue;
    auto f32 = gguf::GgufFile::open(f32_path.string());
    for (const auto& file : fs::directory_iterator(dir.path())) {
      const std::string name = file.path().filename().string(), prefix = family + "-";
      if (!name.ends_with(".gguf") || !name.starts_with(prefix) || file.path() == f32_path) continue;
      const auto ft = gguf::file_type(name.substr(prefix.size(), name.size() - prefix.size() - 5));
      if (!ft) continue;
      SCOPED_TRACE(name);
      auto ref = gguf::GgufFile::open(file.path().string());
      const int n_layer = int(f32->get_int(f32->architecture() + ".block_count"));
      const bool tied = f32->find_tensor("output.weight") == nullptr;
      const int n_expert = int(f32->opt_int(f32->architecture() + ".expert_count").value_or(0));
      for (const gguf::TensorInfo& t : ref->tensors()) {
        const gguf::TensorInfo* in = f32->find_tensor(t.name);
        ASSERT_NE(in, nullptr) << t.name;
        const Tensor got = gguf::to_file_dtype(*ft, f32->tensor(*in).set_name(t.name), n_layer, tied, n_expert);
        ASSERT_EQ(toy::name(got.dtype()), toy::name(t.dtype)) << t.name;
        EXPECT_EQ(std::memcmp(got.raw(), ref->tensor_data(t), t.nbytes), 0) << t.name << " bytes differ";
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 40) << "fixture files compared";
}

// The rules that depend on the layer, the expert count or a fused attn_qkv, against llama-quantize
// itself on the hybrid and mixture-of-experts fixtures (scripts/reference/llama_quantize_types.sh
// made the table with llama-quantize built from node-llama-cpp 3.21.1's llama.cpp).
TEST(Quantize, HybridAndExpertModelsGetLlamaQuantizesTypes) {
  std::ifstream table(std::string(TOY_SOURCE_DIR) + "/scripts/reference/llama_quantize_types.txt");
  ASSERT_TRUE(table.good());
  int files = 0;
  for (std::string line; std::getline(table, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string family, type, entry;
    in >> family >> type;
    SCOPED_TRACE(family + " " + type);
    TOY_REQUIRE_FIXTURE(f32_path, "models/" + family + "/" + family + "-f32.gguf");
    auto f32 = gguf::GgufFile::open(f32_path.string());
    const auto ft = gguf::file_type(type == "Q4_K_S" ? "Q4_K" : type);
    ASSERT_TRUE(ft.has_value());
    const std::string arch = f32->architecture();
    const int n_layer = int(f32->get_int(arch + ".block_count"));
    const int n_expert = int(f32->opt_int(arch + ".expert_count").value_or(0));
    const bool tied = f32->find_tensor("output.weight") == nullptr;
    int tensors = 0;
    while (in >> entry) {
      const size_t eq = entry.find('=');
      const std::string name = entry.substr(0, eq);
      const gguf::TensorInfo* t = f32->find_tensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(toy::name(gguf::tensor_dtype(*ft, name, t->shape, n_layer, tied, n_expert)), entry.substr(eq + 1))
          << name;
      ++tensors;
    }
    EXPECT_GT(tensors, 10);
    ++files;
  }
  EXPECT_EQ(files, 12);
}

// A file that stores those tensors in F16 all the same (written by hand, not by llama-quantize)
// loads, and computes what the F32 file computes with the taps and router rounded to F16.
TEST(Quantize, KeptF32TensorsStoredAsF16AreReadAsF32) {
  TOY_REQUIRE_FIXTURE(f32_path, "models/qwen3next/qwen3next-f32.gguf");
  auto f32 = gguf::GgufFile::open(f32_path.string());
  gguf::GgufWriter w;
  for (const auto& [k, v] : f32->metadata()) w.set(k, v);
  std::vector<Tensor> halves;  // alive until the write
  halves.reserve(f32->tensors().size());
  int converted = 0;
  for (const gguf::TensorInfo& t : f32->tensors()) {
    Tensor x = f32->tensor(t);
    if (t.shape.size() == 2 && gguf::stays_f32(t.name, 2)) {
      halves.push_back(Tensor::empty(t.shape, DType::F16));
      quantize(DType::F16, x.data(), halves.back().raw_mut(), x.numel());
      x = halves.back(), ++converted;
    }
    w.add_tensor(t.name, x);
  }
  EXPECT_GE(converted, 4);  // ssm_conv1d of the Gated DeltaNet layers, ffn_gate_inp of every layer
  const fs::path out = fs::path(testing::TempDir()) / ("toy_f16_taps_" + std::to_string(::getpid()) + ".gguf");
  w.write(out.string());
  const std::vector<int32_t> ids = {1, 17, 42, 99, 3};
  const std::vector<float> want = logits_of(f32_path.string(), ids), got = logits_of(out.string(), ids);
  fs::remove(out);
  EXPECT_LT(rel_rms(got, want), 1e-2);
}

TEST(QuantizeCli, RefusesItsInputUnknownTypesAndBadFiles) {
  TOY_REQUIRE_FIXTURE(f32_path, "models/llama2w256/llama2w256-f32.gguf");
  TempDir d;
  const fs::path in = d.dir / "in.gguf";
  fs::copy_file(f32_path, in);
  const auto before = test::read_bytes(in);
  auto expect = [&](const std::string& args, int code, const std::string& says) {
    SCOPED_TRACE(args);
    auto r = test::run_toy("quantize " + args);
    EXPECT_EQ(r.code, code) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  };
  expect(in.string() + " " + in.string() + " --dtype q8_0", 2, "is the input file");
  fs::create_symlink(in, d.dir / "link.gguf");
  expect(in.string() + " " + (d.dir / "link.gguf").string() + " --dtype q8_0", 2, "is the input file");
  EXPECT_EQ(test::read_bytes(in), before);
  expect(in.string() + " " + (d.dir / "o.gguf").string() + " --dtype q2_k", 2, "Q4_K_M");
  expect(in.string() + " " + (d.dir / "o.gguf").string(), 2, "--dtype");
  expect((d.dir / "none.gguf").string() + " " + (d.dir / "o.gguf").string() + " --dtype q8_0", 3, "none.gguf");
  std::ofstream(d.dir / "text.gguf") << "not a gguf file";
  expect((d.dir / "text.gguf").string() + " " + (d.dir / "o.gguf").string() + " --dtype q8_0", 3, "text.gguf");
  EXPECT_FALSE(fs::exists(d.dir / "o.gguf"));
}

// A model with a NaN or an infinity in a weight is refused as a bad file (exit 3, naming the
// tensor) before anything is written, as every command that loads it refuses it (#37 item 4: it
// was converted without a word).
TEST(QuantizeCli, RefusesNonFiniteWeights) {
  TOY_REQUIRE_FIXTURE(f32_path, "models/llama2w256/llama2w256-f32.gguf");
  TempDir d;
  const auto f32 = gguf::GgufFile::open(f32_path.string());
  for (const float bad_value : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(bad_value);
    gguf::GgufWriter w;
    for (const auto& [key, value] : f32->metadata()) w.set(key, value);
    for (const gguf::TensorInfo& t : f32->tensors()) {
      Tensor x = f32->tensor(t);
      if (t.name == "blk.1.ffn_down.weight") {
        x = x.clone();
        x.data_mut()[7] = bad_value;
      }
      w.add_tensor(t.name, x);
    }
    const fs::path in = d.dir / "nonfinite.gguf", out = d.dir / "out.gguf";
    w.write(in.string());
    const auto r = test::run_toy("quantize " + in.string() + " " + out.string() + " --dtype q8_0 --quiet");
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find("tensor 'blk.1.ffn_down.weight' holds NaN or infinite values"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}
