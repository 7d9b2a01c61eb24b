// tests/test_infer.cpp — `toy infer` and `toy eval` end to end, and their bad-input handling.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "toy/archs/model.h"
#include "toy/io/gguf.h"

using toy::test::run_toy;
namespace fs = std::filesystem;

namespace {

std::string quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// Writes a copy of `src` with one metadata key or tensor changed, for bad-input tests.
std::string mutated_copy(const fs::path& src, const std::string& name,
                         const std::function<void(toy::gguf::GgufWriter&, const toy::gguf::GgufFile&)>& edit) {
  auto f = toy::gguf::GgufFile::open(src.string());
  toy::gguf::GgufWriter w;
  edit(w, *f);
  const std::string out = testing::TempDir() + "/" + name;
  w.write(out);
  return out;
}

}  // namespace

TEST(Infer, RealFileGivesTheReferenceContinuationFromText) {
  TOY_REQUIRE_FIXTURE(model, "real/llama-2-tiny-random.gguf");
  auto ref = nlohmann::json::parse(toy::test::read_text(model.string() + ".ref.json"))["text_reference"];
  const std::string prompt = ref["prompt_text"];
  const int n = int(ref["generated_tokens"].size());
  auto r = run_toy("infer " + model.string() + " --prompt " + quote(prompt) + " -n " + std::to_string(n) +
                   " --temp 0 --threads 1 --no-display-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, ref["generated_text"].get<std::string>() + "\n");
  EXPECT_NE(r.err.find("tok/s"), std::string::npos);
  // The same through ids.
  std::string ids;
  for (int id : ref["prompt_tokens"]) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  auto r2 = run_toy("infer " + model.string() + " --ids " + ids + " -n " + std::to_string(n) +
                    " --temp 0 --no-display-prompt");
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_EQ(r2.out, r.out);
  // With an F16 KV cache (llama.cpp's default) the greedy continuation is the same here.
  auto r3 = run_toy("infer " + model.string() + " --ids " + ids + " -n " + std::to_string(n) +
                    " --temp 0 --kv-type f16 --no-display-prompt");
  ASSERT_EQ(r3.code, 0) << r3.err;
  EXPECT_EQ(r3.out, r.out);
}

TEST(Infer, SampledGenerationIsReproducibleWithASeed) {
  TOY_REQUIRE_FIXTURE(model, "real/llama-2-tiny-random.gguf");
  const std::string cmd =
      "infer " + model.string() + " --prompt 'Hello' -n 16 --temp 0.9 --top-k 40 --top-p 0.95 --seed 7";
  auto a = run_toy(cmd), b = run_toy(cmd), c = run_toy(cmd + "1");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);  // seed 71: a different continuation (random weights, flat distribution)
}

// The prompt logits `toy eval --dump-logits` writes equal llama.cpp's: a Llama, and the two
// Gated-DeltaNet hybrids (whose recurrent layers run the chunked delta rule over the prompt).
TEST(Infer, EvalDumpsTheLogitsOfEveryPosition) {
  TOY_REQUIRE_FIXTURE(smollm2, "models/smollm2/smollm2-f32.gguf");
  for (const std::filesystem::path& model : {smollm2, smollm2.parent_path().parent_path() / "qwen35/qwen35-f32.gguf",
                                             smollm2.parent_path().parent_path() / "qwen3next/qwen3next-f32.gguf"}) {
    SCOPED_TRACE(model.string());
    auto ref = nlohmann::json::parse(toy::test::read_text(model.string() + ".ref.json"));
    std::string ids;
    for (int id : ref["prompt_tokens"]) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    const std::string out = testing::TempDir() + "/logits.f32";
    auto r = run_toy("eval " + model.string() + " --ids " + ids + " --dump-logits " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    auto got = toy::test::read_bytes(out);
    auto want = toy::test::read_bytes(model.parent_path() / ref["logits_file"].get<std::string>());
    const size_t n = ref["prompt_tokens"].size() * 512;
    ASSERT_EQ(got.size(), n * 4);
    const float* g = reinterpret_cast<const float*>(got.data());
    const float* w = reinterpret_cast<const float*>(want.data());
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
      num += double(g[i] - w[i]) * (g[i] - w[i]);
      den += double(w[i]) * w[i];
    }
    EXPECT_LT(num / den, 1e-8);
  }
}

TEST(Infer, BadInputGetsClearErrors) {
  TOY_REQUIRE_FIXTURE(model, "models/smollm2/smollm2-f32.gguf");
  const std::string m = model.string();
  // -n 0: processes the prompt, prints nothing but the newline.
  auto zero = run_toy("infer " + m + " --ids 1,2,3 -n 0 --no-display-prompt");
  EXPECT_EQ(zero.code, 0) << zero.err;
  EXPECT_EQ(zero.out, "\n");
  // Out-of-range ids, malformed ids.
  auto oor = run_toy("infer " + m + " --ids 1,99999");
  EXPECT_EQ(oor.code, 2);
  EXPECT_NE(oor.err.find("99999"), std::string::npos) << oor.err;
  EXPECT_EQ(run_toy("infer " + m + " --ids 1,abc").code, 2);
  EXPECT_EQ(run_toy("eval " + m + " --ids 5,600").code, 2);
  // A prompt longer than the context (the fixture's context is 256): BOS and its last 127 tokens
  // are kept, with a warning (it was refused before; llama-server truncates likewise).
  std::string many = "1";
  for (int i = 0; i < 300; ++i) many += ",5";
  auto longp = run_toy("infer " + m + " --ids " + many + " -n 1");
  EXPECT_EQ(longp.code, 0) << longp.err;
  EXPECT_NE(
      longp.err.find("301 tokens, more than the context of 256: only 128 are used, its BOS token and its last 127"),
      std::string::npos)
      << longp.err;
  EXPECT_NE(longp.err.find("prompt: 128 tokens"), std::string::npos) << longp.err;
  // Without BOS (--ids that do not start with it) only the last tokens are kept.
  auto nobos = run_toy("infer " + m + " --ids " + many.substr(2) + " -n 1");
  EXPECT_EQ(nobos.code, 0) << nobos.err;
  EXPECT_NE(nobos.err.find("300 tokens, more than the context of 256: only its last 128 are used"), std::string::npos)
      << nobos.err;
  EXPECT_NE(nobos.err.find("prompt: 128 tokens"), std::string::npos) << nobos.err;
  // Empty prompt text still has BOS (SPM adds it): generation works.
  EXPECT_EQ(run_toy("infer " + m + " --prompt '' -n 2 --temp 0").code, 0);
  // Bad sampling values.
  EXPECT_EQ(run_toy("infer " + m + " --ids 1 --top-p 0").code, 2);
  EXPECT_EQ(run_toy("infer " + m + " --ids 1 --temp -1").code, 2);
  EXPECT_EQ(run_toy("infer " + m + " --ids 1 -n x").code, 2);
  EXPECT_EQ(run_toy("infer " + m + " --ids 1 --kv-type q8_0").code, 2);
}

TEST(Infer, BadModelFilesNameTheProblem) {
  TOY_REQUIRE_FIXTURE(model, "models/smollm2/smollm2-f32.gguf");
  // Unsupported architecture: the error names the supported ones.
  auto arch = mutated_copy(model, "arch.gguf", [](toy::gguf::GgufWriter& w, const toy::gguf::GgufFile& f) {
    w = toy::gguf::copy_of(f);
    w.set("general.architecture", toy::gguf::Value::of_string("mamba9"));
  });
  auto r = run_toy("infer " + arch + " --ids 1");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("mamba9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("llama"), std::string::npos) << r.err;
  // A missing tensor is named.
  auto missing = mutated_copy(model, "missing.gguf", [](toy::gguf::GgufWriter& w, const toy::gguf::GgufFile& f) {
    for (const auto& [k, v] : f.metadata()) w.set(k, v);
    for (const auto& t : f.tensors())
      if (t.name != "blk.1.ffn_up.weight") w.add_tensor(t.name, t.shape, t.dtype, f.tensor_data(t));
  });
  r = run_toy("infer " + missing + " --ids 1");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("blk.1.ffn_up.weight"), std::string::npos) << r.err;
  // A mis-shaped tensor is named with both shapes.
  auto shaped = mutated_copy(model, "shape.gguf", [](toy::gguf::GgufWriter& w, const toy::gguf::GgufFile& f) {
    for (const auto& [k, v] : f.metadata()) w.set(k, v);
    for (const auto& t : f.tensors()) {
      toy::Shape s = t.shape;
      if (t.name == "blk.0.attn_k.weight") s = {128, 64};
      w.add_tensor(t.name, s, t.dtype, f.tensor_data(t));
    }
  });
  r = run_toy("infer " + shaped + " --ids 1");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("blk.0.attn_k.weight"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[64, 128]"), std::string::npos) << r.err;
  // A missing file.
  EXPECT_EQ(run_toy("infer /nonexistent/model.gguf --ids 1").code, 3);
}
