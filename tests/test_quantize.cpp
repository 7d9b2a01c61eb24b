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
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixtures.h"
#include "toy/archs/model.h"
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
