// tests/test_batch_decode.cpp — a batched decode step (DecodeEngine::feed_batch) gives every
// sequence exactly the logits it gets when fed alone, on every model fixture of every registered
// architecture and weight dtype: llama, qwen2, qwen3, gemma2 (sliding window, soft-caps), olmoe
// (MoE routing), gpt2 (learned positions).
//
// Three sequences of different lengths are prefilled, then decoded step by step, once one at a
// time and once in batches (all three, then a subset in another order, then one alone); the
// logits must be equal bit for bit, which holds because the kernels give row m of a product the
// same bits for any number of rows and everything else works row by row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "fixtures.h"
#include "toy/archs/model.h"
#include "toy/engines/decode.h"

using namespace toy;
namespace fs = std::filesystem;

namespace {

// Bits of logits row `row` of [R, V].
std::vector<uint32_t> bits(const Tensor& logits, int64_t row) {
  const int64_t V = logits.size(-1);
  std::vector<uint32_t> b(static_cast<size_t>(V));
  std::memcpy(b.data(), logits.data() + row * V, size_t(V) * sizeof(float));
  return b;
}

void check_batching(const fs::path& path) {
  SCOPED_TRACE(path.filename().string());
  auto file = gguf::GgufFile::open(path.string());
  const auto& archs = architectures();
  if (std::none_of(archs.begin(), archs.end(), [&](const Architecture& a) { return file->architecture() == a.name; }))
    return;
  auto model = load_model(file);
  const int64_t V = model->config().n_vocab;
  auto token = [&](int64_t i) { return int32_t((i * 7919 + 13) % V); };

  constexpr int kSeqs = 3;
  const int64_t prompt_len[kSeqs] = {5, 1, 12};
  std::vector<std::unique_ptr<DecodeEngine>> alone, together;
  for (int s = 0; s < kSeqs; ++s) {
    std::vector<int32_t> prompt;
    for (int64_t i = 0; i < prompt_len[s]; ++i) prompt.push_back(token(100 * s + i));
    for (auto* set : {&alone, &together}) {
      set->push_back(std::make_unique<DecodeEngine>(*model, 64));
      set->back()->feed(prompt);
    }
  }
  // Steps: which sequences decode together, in which row order.
  const std::vector<std::vector<int>> steps = {{0, 1, 2}, {0, 1, 2}, {2, 0}, {1}, {1, 2, 0}, {0, 1, 2}};
  int64_t n = 0;
  for (const auto& rows : steps) {
    std::vector<DecodeEngine*> engines;
    std::vector<int32_t> ids;
    for (int s : rows) {
      engines.push_back(together[size_t(s)].get());
      ids.push_back(token(++n));
    }
    const Tensor batched = DecodeEngine::feed_batch(engines, ids);  // [B, V]
    ASSERT_EQ(batched.shape(), (Shape{int64_t(rows.size()), V}));
    for (size_t b = 0; b < rows.size(); ++b) {
      const Tensor single = alone[size_t(rows[b])]->feed(std::span<const int32_t>(&ids[b], 1));  // [1, V]
      ASSERT_EQ(bits(batched, int64_t(b)), bits(single, 0))
          << "sequence " << rows[b] << ", row " << b << " of " << rows.size();
      EXPECT_EQ(together[size_t(rows[b])]->n_past(), alone[size_t(rows[b])]->n_past());
    }
  }
}

}  // namespace

TEST(BatchDecode, EqualsOneSequenceAtATimeOnEveryFixture) {
  const auto files = test::fixture_files("models", ".gguf");
  if (files.empty()) GTEST_SKIP() << "no model fixtures under " << test::fixtures_dir() << " (set TOY_FIXTURES)";
  std::set<std::string> archs;
  for (const fs::path& p : files) {
    check_batching(p);
    archs.insert(gguf::GgufFile::open(p.string())->architecture());
  }
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma2", "olmoe", "gpt2"})
    EXPECT_TRUE(archs.count(arch)) << arch;
}

TEST(BatchDecode, RefusesWhatCannotBeBatched) {
  TOY_REQUIRE_FIXTURE(path, "models/llama32/llama32-f32.gguf");
  auto model = load_model(gguf::GgufFile::open(path.string()));
  DecodeEngine a(*model, 4), b(*model, 4);
  a.feed(std::vector<int32_t>{1, 2, 3, 4});  // full
  std::vector<DecodeEngine*> engines = {&a, &b};
  const std::vector<int32_t> ids = {5, 6};
  EXPECT_THROW(DecodeEngine::feed_batch(engines, ids), std::length_error);
  EXPECT_THROW(DecodeEngine::feed_batch(engines, std::vector<int32_t>{5}), std::invalid_argument);
  EXPECT_EQ(b.n_past(), 0);  // nothing was fed
}
