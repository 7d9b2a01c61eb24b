// tests/test_attention.cpp — the attention primitive against a double-precision reference, on
// both of its paths (loops for inference and for training's T < 8 queries, gemm products for
// training from 8 on) and both SIMD paths; bit-identical results for any thread count, and for
// inference a query row with the bits it gets alone.
//
// The loop path cuts the keys into chunks of 64 and combines the chunks' partial softmaxes; the
// context lengths below put keys on both sides of chunk boundaries (63, 64, 65, 200), windows
// that start inside a chunk, and queries that see none of the last chunk's keys (T > 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "helpers.h"
#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"
#include "toy/tensor/quant.h"

using namespace toy;
using test::randn;

namespace {

struct Case {
  int64_t B, T, S, H, Hkv, Dh;
  AttentionOptions o;
  std::string name() const {
    return "B" + std::to_string(B) + " T" + std::to_string(T) + " S" + std::to_string(S) + " H" + std::to_string(H) +
           "/" + std::to_string(Hkv) + " Dh" + std::to_string(Dh) + " cap " + std::to_string(o.softcap) + " window " +
           std::to_string(o.window) + (o.causal ? "" : " bidirectional");
  }
};

// o [B, T, H, Dh] in double: causal (or not), grouped, with the window and the cap, as primitives.h says.
std::vector<double> reference(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v) {
  const float *pq = q.data(), *pk = k.data(), *pv = v.data();
  std::vector<double> out(size_t(c.B * c.T * c.H * c.Dh));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t h = 0; h < c.H; ++h) {
        const int64_t kh = h / (c.H / c.Hkv), p = c.S - c.T + t;
        const int64_t j0 = c.o.causal && c.o.window > 0 ? std::max<int64_t>(0, p - c.o.window + 1) : 0;
        const int64_t j1 = c.o.causal ? p + 1 : c.S;  // one past the last visible key
        std::vector<double> s;
        for (int64_t j = j0; j < j1; ++j) {
          double x = 0;
          const float *qt = pq + ((b * c.T + t) * c.H + h) * c.Dh, *kj = pk + ((b * c.S + j) * c.Hkv + kh) * c.Dh;
          for (int64_t d = 0; d < c.Dh; ++d) x += double(qt[d]) * kj[d];
          x *= c.o.scale;
          if (c.o.softcap > 0) x = c.o.softcap * std::tanh(x / c.o.softcap);
          s.push_back(x);
        }
        const double m = *std::max_element(s.begin(), s.end());
        double z = 0;
        for (double& x : s) z += x = std::exp(x - m);
        double* o = out.data() + ((b * c.T + t) * c.H + h) * c.Dh;
        for (int64_t j = j0; j < j1; ++j)
          for (int64_t d = 0; d < c.Dh; ++d)
            o[d] += s[size_t(j - j0)] / z * pv[((b * c.S + j) * c.Hkv + kh) * c.Dh + d];
      }
  return out;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t S : {1, 63, 64, 65, 200}) all.push_back({2, 1, S, 6, 2, 64, {.scale = 0.125f}});
  for (int64_t T : {3, 7, 9}) {
    all.push_back({1, T, 130, 6, 2, 64, {.scale = 0.125f}});
    all.push_back({1, T, 130, 4, 4, 16, {.scale = 0.25f, .softcap = 2.0f, .window = 70}});
  }
  all.push_back({1, 2, 70, 3, 1, 4, {.scale = 0.5f, .window = 10}});  // Dh not a multiple of 8: the portable kernels
  all.push_back({1, 1, 300, 9, 3, 80, {.scale = 0.11f}});
  // Bidirectional (an encoder, ViT): both paths, a query block and key chunks past the diagonal.
  for (int64_t T : {3, 17, 50}) all.push_back({2, T, T, 4, 4, 16, {.scale = 0.25f, .causal = false}});
  return all;
}

}  // namespace

TEST(Attention, BothPathsMatchDoublePrecision) {
  const kernels::Simd keep = kernels::simd();
  std::mt19937_64 rng(3);
  for (const Case& c : cases()) {
    const Tensor q = randn({c.B, c.T, c.H, c.Dh}, rng), k = randn({c.B, c.S, c.Hkv, c.Dh}, rng);
    const Tensor v = randn({c.B, c.S, c.Hkv, c.Dh}, rng);
    const std::vector<double> want = reference(c, q, k, v);
    for (kernels::Simd s : {kernels::Simd::scalar, kernels::Simd::avx2}) {
      if (s == kernels::Simd::avx2 && !kernels::cpu_has_avx2()) continue;
      kernels::set_simd(s);
      for (bool training : {false, true}) {  // training saves probabilities: the gemm path from T = 8
        const auto input = [training](const Tensor& x) {
          return training ? Tensor::from(x.shape(), x.to_vector()).requires_grad_() : x;
        };
        const std::vector<float> got = attention(input(q), input(k), input(v), c.o).to_vector();
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
        EXPECT_LE(worst, 2e-6) << c.name() << (s == kernels::Simd::avx2 ? " avx2" : " scalar")
                               << (training ? " training" : "");
      }
    }
  }
  kernels::set_simd(keep);
}

// Work items are fixed by the shapes alone: 1, 2 or 3 threads give the same bits, forward and
// (through the saved probabilities) backward.
TEST(Attention, SameBitsForAnyThreadCount) {
  const int keep = kernels::num_threads();
  std::mt19937_64 rng(4);
  for (const Case& c :
       {Case{2, 1, 300, 6, 2, 64, {.scale = 0.125f}},
        Case{1, 4, 200, 4, 2, 32, {.scale = 0.2f, .softcap = 3.0f, .window = 90}},
        Case{1, 12, 200, 4, 2, 32, {.scale = 0.2f}}, Case{2, 50, 50, 4, 4, 16, {.scale = 0.25f, .causal = false}}}) {
    Tensor q = randn({c.B, c.T, c.H, c.Dh}, rng), k = randn({c.B, c.S, c.Hkv, c.Dh}, rng);
    Tensor v = randn({c.B, c.S, c.Hkv, c.Dh}, rng);
    std::vector<std::vector<float>> first;
    for (int threads : {1, 2, 3}) {
      kernels::set_num_threads(threads);
      for (Tensor* x : {&q, &k, &v}) *x = Tensor::from(x->shape(), x->to_vector()).requires_grad_();
      Tensor o = attention(q, k, v, c.o);
      sum(o).backward();
      const std::vector<std::vector<float>> got = {o.to_vector(), q.grad().to_vector(), k.grad().to_vector(),
                                                   v.grad().to_vector()};
      if (first.empty()) first = got;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], first[i]) << c.name() << ", output " << i << ", " << threads << " threads";
    }
  }
  kernels::set_num_threads(keep);
}

// Inference (nothing saved): row t of a batch of T queries has the bits of the same query alone
// against the keys it sees (a decode step at its position), for any T, on both SIMD paths and
// both KV dtypes, on every SIMD path the CPU has — what the prompt cache and batched decoding rely on (issue #37 item 3: from
// T = 8 on, prompts took the gemm path, other bits).
TEST(Attention, AQueryRowHasTheBitsOfTheQueryAlone) {
  const kernels::Simd keep = kernels::simd();
  // Rows [0, rows) of each batch of x [B, L, heads, Dh] (values) as a tensor of dtype t.
  auto tensor = [](const std::vector<float>& x, int64_t B, int64_t L, int64_t r0, int64_t r1, int64_t heads, int64_t Dh,
                   DType t) {
    std::vector<float> part;
    for (int64_t b = 0; b < B; ++b)
      part.insert(part.end(), x.begin() + (b * L + r0) * heads * Dh, x.begin() + (b * L + r1) * heads * Dh);
    const Shape shape{B, r1 - r0, heads, Dh};
    if (t == DType::F32) return Tensor::from(shape, part);
    Tensor h = Tensor::empty(shape, t);
    quantize(t, part.data(), h.raw_mut(), int64_t(part.size()));
    return h;
  };
  std::mt19937_64 rng(5);
  for (kernels::Simd path : {kernels::Simd::scalar, kernels::Simd::avx2, kernels::Simd::avx512vnni}) {
    if ((path == kernels::Simd::avx2 && !kernels::cpu_has_avx2()) ||
        (path == kernels::Simd::avx512vnni && !kernels::cpu_has_avx512vnni()))
      continue;  // every path this CPU has, natively
    kernels::set_simd(path);
    for (const Case& c : {Case{1, 20, 150, 6, 2, 64, {.scale = 0.125f}},
                          Case{1, 33, 33, 4, 4, 16, {.scale = 0.25f, .softcap = 2.0f, .window = 20}},
                          Case{2, 9, 70, 3, 1, 4, {.scale = 0.5f}},  // Dh not a multiple of 8
                          Case{1, 12, 12, 4, 2, 32, {.scale = 0.2f, .causal = false}}})
      for (DType kv : {DType::F32, DType::F16}) {
        const std::vector<float> q = randn({c.B, c.T, c.H, c.Dh}, rng).to_vector();
        const std::vector<float> k = randn({c.B, c.S, c.Hkv, c.Dh}, rng).to_vector();
        const std::vector<float> v = randn({c.B, c.S, c.Hkv, c.Dh}, rng).to_vector();
        const std::vector<float> batch =
            attention(tensor(q, c.B, c.T, 0, c.T, c.H, c.Dh, DType::F32), tensor(k, c.B, c.S, 0, c.S, c.Hkv, c.Dh, kv),
                      tensor(v, c.B, c.S, 0, c.S, c.Hkv, c.Dh, kv), c.o)
                .to_vector();  // [B, T, H, Dh]
        for (int64_t t = 0; t < c.T; ++t) {
          const int64_t keys = c.o.causal ? c.S - c.T + t + 1 : c.S;  // the cache at its position
          const std::vector<float> alone = attention(tensor(q, c.B, c.T, t, t + 1, c.H, c.Dh, DType::F32),
                                                     tensor(k, c.B, c.S, 0, keys, c.Hkv, c.Dh, kv),
                                                     tensor(v, c.B, c.S, 0, keys, c.Hkv, c.Dh, kv), c.o)
                                               .to_vector();  // [B, 1, H, Dh]
          for (int64_t b = 0; b < c.B; ++b) {
            const auto row = batch.begin() + (b * c.T + t) * c.H * c.Dh;
            ASSERT_TRUE(std::equal(row, row + c.H * c.Dh, alone.begin() + b * c.H * c.Dh))
                << c.name() << " " << name(kv) << ", query " << t << " of batch " << b << " on path " << int(path);
          }
        }
      }
  }
  kernels::set_simd(keep);
}
