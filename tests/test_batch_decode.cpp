// tests/test_batch_decode.cpp — a batched decode step (DecodeEngine::feed_batch) gives every
// sequence exactly the logits it gets when fed alone, on every model fixture of every registered
// architecture and weight dtype: llama, qwen2, qwen3, gemma2 (sliding window, soft-caps), olmoe
// (MoE routing), gpt2 (learned positions).
//
// Three sequences of different lengths are prefilled, then decoded step by step, once one at a
// time and once in batches (all three, then a subset in another order, then one alone); the
// logits must be equal bit for bit, which holds because the kernels give row m of a product (and
// of attention) the same bits for any number of rows and everything else works row by row. So
// does a prompt fed whole against the same prompt fed in pieces.
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

// The model in a fixture file, or null for an architecture toy does not register.
std::unique_ptr<Model> registered_model(const fs::path& path) {
  auto file = gguf::GgufFile::open(path.string());
  const auto& archs = architectures();
  if (std::none_of(archs.begin(), archs.end(), [&](const Architecture& a) { return file->architecture() == a.name; }))
    return nullptr;
  return load_model(file);
}

void check_batching(const fs::path& path) {
  SCOPED_TRACE(path.filename().string());
  auto model = registered_model(path);
  if (!model) return;
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

// A prompt fed at once gives every row the logits it gets when the prompt is fed a token at a
// time (decoding) or in pieces (a prompt cache reusing a prefix): issue #37 item 3 found prompts of
// 8 tokens or more taking another attention path with other bits. Models whose every layer
// attends: a hybrid's Gated DeltaNet layers run a prompt in the chunked form, whose sums are in
// another order than the token-by-token recurrence (docs/kernels.md).
void check_prompt_rows(const fs::path& path) {
  SCOPED_TRACE(path.filename().string());
  auto model = registered_model(path);
  if (!model) return;
  for (int64_t l = 0; l < model->config().n_layer; ++l)
    if (!model->attends(l)) return;
  const int64_t V = model->config().n_vocab;
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < 40; ++i) prompt.push_back(int32_t((i * 7919 + 13) % V));
  DecodeEngine whole(*model, 64), pieces(*model, 64);
  const Tensor all = whole.feed(prompt);  // [40, V]
  int64_t at = 0;
  for (int64_t n : {1, 1, 9, 3, 1, 17, 8}) {  // 40 tokens in pieces on both sides of 8 queries
    const Tensor part = pieces.feed(std::span<const int32_t>(prompt.data() + at, size_t(n)));
    for (int64_t r = 0; r < n; ++r)
      ASSERT_EQ(bits(part, r), bits(all, at + r)) << "row " << at + r << " of a piece of " << n;
    at += n;
  }
}

// Runs check on every model fixture and says whether every architecture the tests need was there.
void on_every_fixture(void (*check)(const fs::path&)) {
  const auto files = test::fixture_files("models", ".gguf");
  if (files.empty()) GTEST_SKIP() << "no model fixtures under " << test::fixtures_dir() << " (set TOY_FIXTURES)";
  std::set<std::string> archs;
  for (const fs::path& p : files) {
    check(p);
    archs.insert(gguf::GgufFile::open(p.string())->architecture());
  }
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma2", "olmoe", "gpt2"})
    EXPECT_TRUE(archs.count(arch)) << arch;
}

}  // namespace

TEST(BatchDecode, APromptsRowsEqualThePromptFedInPiecesOnEveryFixture) {
  on_every_fixture(check_prompt_rows);
  check_prompt_rows(fs::path(TOY_SOURCE_DIR) / "models" / "toy-stories.gguf");  // the embedded model
}

TEST(BatchDecode, EqualsOneSequenceAtATimeOnEveryFixture) { on_every_fixture(check_batching); }

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
