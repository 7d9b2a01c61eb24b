// kernels/convert.cpp — bulk IEEE half -> f32 conversion (reading an F16 KV cache).
//
// Exact either way: every half is an f32. F16C converts 8 at a time when the CPU has it.
#include <immintrin.h>

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"

namespace toy::kernels {
namespace {

__attribute__((target("avx2,f16c"))) void f16_to_f32_f16c(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}

}  // namespace

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  if (simd() == Simd::avx2) return f16_to_f32_f16c(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_f32(x[i]);
}

}  // namespace toy::kernels
