// tests/test_attention_variants.cpp — differential attention and Scalable-Softmax
// (primitives/attention_variants.h): forwards against values computed in double by
// scripts/reference/attention_variants.py (plain Python written from the papers; the inputs are
// formulas of the element index, built the same way here), gradients against central
// differences, and the Dragon attention layer decoding through its KV cache.
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

namespace {

constexpr int64_t T = 3, H = 2, Hkv = 1, Dh = 4, d = Dh / 2;

// The script's inputs: value i of each tensor from its formula.
Tensor formula(Shape s, double (*f)(int64_t)) {
  Tensor t = Tensor::empty(std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_mut()[i] = float(f(i));
  return t;
}
Tensor q_in() {
  return formula({1, T, H, Dh}, [](int64_t i) { return std::sin(0.37 * double(i) + 0.1); });
}
Tensor k_in() {
  return formula({1, T, Hkv, Dh}, [](int64_t i) { return std::cos(0.23 * double(i) + 0.2); });
}
Tensor v_in() {
  return formula({1, T, Hkv, Dh}, [](int64_t i) { return 2.0 * std::sin(0.11 * double(i) - 0.3); });
}
DiffLambda lambda_in() {
  auto vec = [](int j) {
    Tensor t = Tensor::empty({d});
    for (int64_t i = 0; i < d; ++i) t.data_mut()[i] = float(0.3 * std::sin(1.7 * double(i) + j));
    return t;
  };
  return {.q1 = vec(0), .k1 = vec(1), .q2 = vec(2), .k2 = vec(3)};
}

void expect_near(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

}  // namespace

// λ_init by depth, λ and the differential output of 3 tokens, 2 heads sharing one KV head, against
// the script; the half-query attentions equal attentions over the halves alone.
TEST(AttentionVariants, DifferentialAttentionMatchesTheReference) {
  EXPECT_FLOAT_EQ(diff_lambda_init(0), 0.2f);
  EXPECT_NEAR(diff_lambda_init(2), 0.8 - 0.6 * std::exp(-0.6), 1e-7);
  const DiffLambda lam = lambda_in();
  const float lambda_init = diff_lambda_init(2);
  EXPECT_NEAR(diff_lambda(lam, lambda_init), 0.448573737, 1e-6);
  const Tensor q = q_in(), k = k_in(), v = v_in();
  const AttentionOptions opt{.scale = 1.0f / std::sqrt(float(d))};
  const Tensor o = differential_attention(
      q, [&](const Tensor& qq) { return attention(qq, k, v, opt); }, lam, lambda_init);
  expect_near(o.to_vector(), {-0.325915217, -0.208283511, -0.088134125, 0.0330806141,   -0.325915217, -0.208283511,
                              -0.088134125, 0.0330806141, -0.142623103, -0.0244860355,  0.0939470067, 0.211244435,
                              0.0125157988, 0.131080605,  0.248060929,  0.362042736,    0.345372829,  0.452833922,
                              0.55482123,   0.650101985,  -0.121498306, -0.00479618965, 0.111963893,  0.227370581},
              2e-6);
}

// Logits s·log n·q·k/√Dh with n = t + 1 keys, s = (0.7, 1.3), against the script.
TEST(AttentionVariants, ScalableSoftmaxMatchesTheReference) {
  const Tensor pos = Tensor::from_ids({1, T}, std::vector<int32_t>{0, 1, 2});
  EXPECT_EQ(keys_attended(pos, 0).to_vector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(keys_attended(pos, 2).to_vector(), (std::vector<float>{1, 2, 2}));
  const Tensor s = Tensor::from({H}, std::vector<float>{0.7f, 1.3f});
  const Tensor o = attention(scalable_softmax(q_in(), s, keys_attended(pos, 0)), k_in(), v_in(),
                             {.scale = 1.0f / std::sqrt(float(Dh))});
  expect_near(o.to_vector(), {-0.591040432, -0.377717793, -0.159829393,  0.0599910021, -0.591040432,  -0.377717793,
                              -0.159829393, 0.0599910021, -0.0836750706, 0.131046444,  0.344183884,   0.55316089,
                              0.0586709706, 0.273784952,  0.485589466,   0.69152426,   0.0797892166,  0.28529184,
                              0.487345888,  0.683509011,  -0.445110663,  -0.232072108, -0.0162283286, 0.199811622},
              2e-6);
}

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
