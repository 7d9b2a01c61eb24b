// kernels/activations.cpp — activation functions over arrays.
//
// silu(x) = x·σ(x) = x / (1 + exp(−x)), as ggml computes it. AVX2: exp by exp8 (vec_math.h,
// < 1 ulp) and a true division, so the result is within ~2 ulp of the portable loop's.
#include <cmath>

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/kernels/vec_math.h"

namespace toy::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
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
