// tests/test_attention_variants.cpp — differential attention and Scalable-Softmax
// (primitives/attention_variants.h): gradients against central differences, and the Dragon attention
// layer decoding through its KV cache. Forwards and gradients against PyTorch's float64 reference
// are in test_dragon_reference.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include <unistd.h>

#include "helpers.h"
#include "toy/archs/model.h"
#include "toy/blocks/dragon.h"
#include "toy/engines/decode.h"
#include "toy/primitives/attention_variants.h"

using namespace toy;
using test::randn;

// Gradients against central differences: differential attention in q, k, v and the four λ
// vectors (5 tokens, GQA 4/2); Scalable-Softmax in q and s; keep_columns.
TEST(AttentionVariants, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(31);
  auto diff = [](std::span<const Tensor> x) {
    const AttentionOptions opt{.scale = 1.0f / std::sqrt(2.0f)};
    return differential_attention(
        x[0], [&](const Tensor& qq) { return attention(qq, x[1], x[2], opt); },
        {.q1 = x[3], .k1 = x[4], .q2 = x[5], .k2 = x[6]}, diff_lambda_init(1));
  };
  std::vector<Tensor> dx = {randn({2, 5, 4, 4}, rng), randn({2, 5, 2, 4}, rng), randn({2, 5, 2, 4}, rng),
                            randn({2}, rng, 0.3f),    randn({2}, rng, 0.3f),    randn({2}, rng, 0.3f),
                            randn({2}, rng, 0.3f)};
  test::check_gradients({.f = diff, .name = "differential_attention"}, dx, randn({2, 5, 4, 4}, rng));

  const Tensor n_keys = keys_attended(Tensor::from_ids({2, 3}, std::vector<int32_t>{0, 1, 2, 4, 5, 6}), 0);
  auto ssmax = [&](std::span<const Tensor> x) { return scalable_softmax(x[0], x[1], n_keys); };
  std::vector<Tensor> sx = {randn({2, 3, 2, 4}, rng), randn({2}, rng, 0.5f, 1.0f)};
  test::check_gradients({.f = ssmax, .name = "scalable_softmax"}, sx, randn({2, 3, 2, 4}, rng));

  auto keep = [](std::span<const Tensor> x) { return keep_columns(x[0], 1, 2); };
  std::vector<Tensor> kx = {randn({3, 4}, rng)};
  test::check_gradients({.f = keep, .name = "keep_columns"}, kx, randn({3, 4}, rng));
}

namespace {

std::unique_ptr<Model> dragon(int64_t differential, int64_t ssmax) {
  auto u32 = [](int64_t v) { return gguf::Value::of_u32(uint32_t(v)); };
  return random_model({.arch = "dragon",
                       .n_vocab = 64,
                       .d_model = 32,
                       .n_layer = 4,
                       .n_head = 4,
                       .n_kv_head = 2,
                       .d_ff = 64,
                       .n_ctx = 64,
                       .tied_output = true,
                       .keys = {{"ssm.state_size", u32(8)},
                                {"full_attention_interval", u32(2)},
                                {"attention.differential", u32(differential)},
                                {"attention.ssmax", u32(ssmax)}}},
                      5);
}

}  // namespace

// A 4-layer Dragon (Gated DeltaNet, attention, Gated DeltaNet, attention), each attention
// variant: a prompt fed in pieces through the engine's caches (recurrent state and KV cache)
// gives the logits of the whole sequence without caches; the variants differ; the model written
// to GGUF and loaded back gives the same bits.
TEST(Dragon, DecodesThroughItsCachesAndRoundTripsThroughGguf) {
  const std::vector<int32_t> ids = {1, 7, 9, 3, 60, 2, 2, 41, 17};
  std::vector<std::vector<float>> variants;
  for (auto [differential, ssmax] : {std::pair{1, 1}, {1, 0}, {0, 1}, {0, 0}}) {
    SCOPED_TRACE(testing::Message() << "differential " << differential << ", ssmax " << ssmax);
    auto model = dragon(differential, ssmax);
    NoGrad no_grad;
    const std::vector<float> whole = model->forward(Tensor::from_ids({1, int64_t(ids.size())}, ids), Ctx{}).to_vector();
    DecodeEngine engine(*model);
    std::vector<float> pieces = engine.feed(std::span(ids).first(5)).to_vector();
    for (int32_t id : std::span(ids).subspan(5))
      for (float v : engine.feed(std::span(&id, 1)).to_vector()) pieces.push_back(v);
    EXPECT_LE(test::nmse(whole, pieces), 1e-10);
    for (const auto& other : variants) EXPECT_GT(test::nmse(whole, other), 1e-6);
    variants.push_back(whole);

    gguf::GgufWriter w;
    model->write_metadata(w);
    model->for_each_param([&](Tensor& t) { w.add_tensor(t.name(), t); });
    const std::string path = testing::TempDir() + "/toy_dragon_" + std::to_string(::getpid()) + ".gguf";
    w.write(path);
    auto back = load_model(gguf::GgufFile::open(path));
    EXPECT_EQ(back->forward(Tensor::from_ids({1, int64_t(ids.size())}, ids), Ctx{}).to_vector(), whole);
    std::remove(path.c_str());
  }
}
