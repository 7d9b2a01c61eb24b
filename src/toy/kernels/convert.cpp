// kernels/convert.cpp — bulk data movement: IEEE half -> f32 (reading an F16 KV cache) and f32
// matrix transposes (attention's keys).
//
// Exact either way: every half is an f32, and a transpose moves values. F16C converts 8 halves
// at a time and AVX2 transposes 8×8 blocks in registers when the CPU has them.
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

// One 8×8 block: dst[c·ds + r] = src[r·ss + c] for r, c < 8.
__attribute__((target("avx2"))) inline void transpose_8x8(const float* src, int64_t ss, float* dst, int64_t ds) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ss);
  for (int i = 0; i < 8; i += 2) {  // interleave row pairs
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // 4×4 blocks within each 128-bit half
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {  // swap the halves of rows 0-3 and 4-7
    _mm256_storeu_ps(dst + i * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

__attribute__((target("avx2"))) void transpose_avx2(const float* src, int64_t ss, float* dst, int64_t ds, int64_t rows,
                                                    int64_t cols) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) transpose_8x8(src + r * ss + c, ss, dst + c * ds + r, ds);
  for (int64_t r = 0; r < rows; ++r)  // the edges
    for (int64_t c = r < r8 ? c8 : 0; c < cols; ++c) dst[c * ds + r] = src[r * ss + c];
}
#endif

}  // namespace

void transpose(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows, int64_t cols) {
#if defined(__x86_64__) || defined(__i386__)
  if (simd() >= Simd::avx2) return transpose_avx2(src, src_stride, dst, dst_stride, rows, cols);
#endif
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * dst_stride + r] = src[r * src_stride + c];
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (simd() >= Simd::avx2) return f16_to_f32_f16c(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_f32(x[i]);
}

}  // namespace toy::kernels
