// kernels/convert.cpp — IEEE half -> f32, for attention's gemm path over an F16 KV cache.
//
// Exact: every half is an f32. F16C converts 8 halves at a time when the CPU has it.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"

namespace toy::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2,f16c"))) void f16_to_f32_f16c(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}
#endif

}  // namespace

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (simd() >= Simd::avx2) return f16_to_f32_f16c(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_f32(x[i]);
}

}  // namespace toy::kernels
