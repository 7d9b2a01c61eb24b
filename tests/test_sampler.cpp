// tests/test_sampler.cpp — the Sampler against a straightforward reference.
//
// The Sampler sorts the vocabulary only as far as its cuts look (top-k, min-p, top-p, the draw);
// the reference sorts everything, then applies the same rules. Same seed and logits must give the
// same ids, over many draws, configurations and logit shapes (peaked, flat, many ties).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "toy/engines/decode.h"

using namespace toy;

namespace {

// The rules of Sampler::sample (without the repeat penalty), on a fully sorted vocabulary.
int32_t reference_sample(const std::vector<float>& z, const SamplerConfig& c, std::mt19937_64& rng) {
  if (c.temperature <= 0) return argmax(z);
  std::vector<int32_t> idx(z.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b);
  });
  idx.resize(c.top_k > 0 ? std::min(size_t(c.top_k), idx.size()) : idx.size());
  const double mx = z[size_t(idx[0])];
  std::vector<double> e(z.size(), 0.0);
  for (int32_t id : idx) e[size_t(id)] = std::exp((z[size_t(id)] - mx) / c.temperature);
  double total = 0;
  for (double x : e) total += x;  // id order
  std::vector<double> p;
  for (int32_t id : idx) p.push_back(e[size_t(id)] / total);
  size_t keep = idx.size();
  if (c.min_p > 0)
    for (size_t i = 1; i < keep; ++i)
      if (p[i] < c.min_p * p[0]) {
        keep = i;
        break;
      }
  if (c.top_p < 1.0f) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += p[i];
      if (mass >= c.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::vector<int32_t> kept_ids(idx.begin(), idx.begin() + long(keep));
  std::sort(kept_ids.begin(), kept_ids.end());
  double kept = 0;
  for (int32_t id : kept_ids) kept += e[size_t(id)] / total;  // id order
  std::uniform_real_distribution<double> u(0.0, kept);
  double r = u(rng);
  for (size_t i = 0; i < keep; ++i) {
    r -= p[i];
    if (r <= 0) return idx[i];
  }
  return idx[keep - 1];
}

std::vector<float> logits(int64_t V, float spread, bool ties, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n(0.0f, spread);
  std::vector<float> z(static_cast<size_t>(V));
  for (float& x : z) x = ties ? std::round(n(g)) : n(g);  // ties: a few dozen distinct values
  return z;
}

}  // namespace

TEST(Sampler, EqualsTheFullySortedReference) {
  const std::vector<SamplerConfig> configs = {
      {.temperature = 0.8f,
       .top_k = 0,
       .top_p = 1.0f,
       .min_p = 0.0f},  // plain temperature: the draw alone decides how far to sort
      {.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f},     // nucleus
      {.temperature = 0.7f, .top_k = 0, .top_p = 1.0f, .min_p = 0.05f},    // min-p
      {.temperature = 1.3f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f},  // toy infer's defaults, hotter
      {.temperature = 2.0f, .top_k = 0, .top_p = 0.999f, .min_p = 0.0f},   // flat: most of the vocabulary kept
      {.temperature = 0.5f, .top_k = 5000, .top_p = 1.0f, .min_p = 0.0f},
      {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f},  // greedy
  };
  int checked = 0;
  for (size_t ci = 0; ci < configs.size(); ++ci)
    for (float spread : {0.5f, 3.0f, 8.0f})
      for (bool ties : {false, true}) {
        SamplerConfig c = configs[ci];
        c.repeat_penalty = 1.0f;
        c.seed = 1000 * ci + uint64_t(spread * 10) + ties;
        Sampler sampler(c);
        std::mt19937_64 rng(c.seed);
        for (int draw = 0; draw < 12; ++draw) {
          const std::vector<float> z = logits(10000, spread, ties, c.seed * 31 + uint64_t(draw));
          ASSERT_EQ(sampler.sample(z, {}), reference_sample(z, c, rng))
              << "config " << ci << ", spread " << spread << ", ties " << ties << ", draw " << draw;
          ++checked;
        }
      }
  EXPECT_EQ(checked, 7 * 3 * 2 * 12);
}

TEST(Sampler, TinyVocabulariesAndTopKBeyondIt) {
  for (int64_t V : {1, 2, 3, 70}) {
    const SamplerConfig c{
        .temperature = 1.0f, .top_k = 100, .top_p = 0.8f, .min_p = 0.0f, .repeat_penalty = 1.0f, .seed = 7};
    Sampler sampler(c);
    std::mt19937_64 rng(c.seed);
    for (int draw = 0; draw < 50; ++draw) {
      const std::vector<float> z = logits(V, 1.0f, false, uint64_t(draw));
      ASSERT_EQ(sampler.sample(z, {}), reference_sample(z, c, rng)) << "V " << V << ", draw " << draw;
    }
  }
}
