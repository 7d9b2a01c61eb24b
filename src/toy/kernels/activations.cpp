// kernels/activations.cpp — activation functions over arrays.
//
// silu(x) = x·σ(x) = x / (1 + exp(−x)), as ggml computes it. AVX2: exp by exp8 (vec_math.h,
// < 1 ulp) and a true division, so the result is within ~2 ulp of the portable loop's.
//
// The GELU that training differentiates, gelu(x) = ½·x·(1 + tanh u), u = √(2/π)·(x + 0.044715·x³),
// is computed as x·σ(2u) = x / (1 + exp(−2u)) (the same function: ½(1 + tanh u) = σ(2u)): one
// exp instead of a tanh, and no cancellation where tanh u → −1. Its derivative
//   gelu'(x) = s + 2·x·s·(1 − s)·u'(x),   s = σ(2u),   u'(x) = √(2/π)·(1 + 3·0.044715·x²).
// Both run over threads in fixed chunks of 16K elements; on the AVX2 path every element,
// the tail's included (through a padded block), goes through the same 8-wide code, so a value
// does not depend on n, the chunking or the thread count.
#include <algorithm>
#include <cmath>

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/kernels/vec_math.h"

namespace toy::kernels {
namespace {

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCoef = 0.044715f;
constexpr int64_t kChunk = 1 << 14;

// The portable loops, and the reference the AVX2 ones are tested against.
void gelu_portable(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = kSqrt2OverPi * (x[i] + kGeluCoef * x[i] * x[i] * x[i]);
    y[i] = x[i] / (1.0f + std::exp(-2.0f * u));
  }
}

void gelu_backward_portable(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i], u = kSqrt2OverPi * (v + kGeluCoef * v * v * v);
    const float s = 1.0f / (1.0f + std::exp(-2.0f * u)), du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoef * v * v);
    dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
  }
}

#if defined(__x86_64__) || defined(__i386__)
// s = σ(2u) and u'(x) for 8 values of x.
struct Gelu8 {
  __m256 s, du;
};
TOY_AVX2 inline Gelu8 gelu8(__m256 v) {
  const __m256 k = _mm256_set1_ps(kSqrt2OverPi), c = _mm256_set1_ps(kGeluCoef), one = _mm256_set1_ps(1.0f);
  const __m256 v2 = _mm256_mul_ps(v, v);
  const __m256 u = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(c, v2), v, v));  // √(2/π)·(x + c·x³)
  const __m256 e = detail::exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));          // exp(−2u)
  const __m256 du = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_set1_ps(3.0f * kGeluCoef), v2, one));
  return {_mm256_div_ps(one, _mm256_add_ps(one, e)), du};
}

// [begin, end) in blocks of 8; a last block of m < 8 is read from, and written to, a zero-padded copy.
TOY_AVX2 void gelu_avx2(const float* x, float* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i += 8) {
    const int64_t m = std::min<int64_t>(8, end - i);
    alignas(32) float in[8] = {}, out[8];
    std::copy_n(x + i, m, in);
    const __m256 v = _mm256_load_ps(in);
    _mm256_store_ps(out, _mm256_mul_ps(v, gelu8(v).s));
    std::copy_n(out, m, y + i);
  }
}

TOY_AVX2 void gelu_backward_avx2(const float* dy, const float* x, float* dx, int64_t begin, int64_t end) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = begin; i < end; i += 8) {
    const int64_t m = std::min<int64_t>(8, end - i);
    alignas(32) float in[8] = {}, grad[8] = {}, out[8];
    std::copy_n(x + i, m, in);
    std::copy_n(dy + i, m, grad);
    const __m256 v = _mm256_load_ps(in);
    const Gelu8 g = gelu8(v);
    const __m256 slope =
        _mm256_mul_ps(_mm256_mul_ps(_mm256_add_ps(v, v), g.s), _mm256_sub_ps(one, g.s));  // 2x·s·(1 − s)
    _mm256_store_ps(out, _mm256_mul_ps(_mm256_load_ps(grad), _mm256_fmadd_ps(slope, g.du, g.s)));
    std::copy_n(out, m, dx + i);
  }
}

TOY_AVX2 void silu_avx2(const float* x, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, detail::exp8(_mm256_xor_ps(v, sign)))));
  }
  for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}
#endif

}  // namespace

void silu(const float* x, float* y, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (simd() >= Simd::avx2) return silu_avx2(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void gelu_tanh_exact(const float* x, float* y, int64_t n) {
  parallel_for(n, kChunk, [&](int64_t i0, int64_t i1) {
#if defined(__x86_64__) || defined(__i386__)
    if (simd() >= Simd::avx2) return gelu_avx2(x, y, i0, i1);
#endif
    gelu_portable(x + i0, y + i0, i1 - i0);
  });
}

void gelu_tanh_backward(const float* dy, const float* x, float* dx, int64_t n) {
  parallel_for(n, kChunk, [&](int64_t i0, int64_t i1) {
#if defined(__x86_64__) || defined(__i386__)
    if (simd() >= Simd::avx2) return gelu_backward_avx2(dy, x, dx, i0, i1);
#endif
    gelu_backward_portable(dy + i0, x + i0, dx + i0, i1 - i0);
  });
}

// As ggml's unary ops compute them (scalar expf, logf).
void sigmoid(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

void sigmoid_backward(const float* dy, const float* y, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

void softplus(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 20.0f ? x[i] : std::log(1.0f + std::exp(x[i]));
}

}  // namespace toy::kernels
