// kernels/vec_math.h — elementwise math on 8 floats at a time (AVX2 + FMA), shared by the
// kernel files; not part of the kernels API.
//
// exp8: exp(x) = 2ⁿ·exp(r) with n = round(x·log₂e) and r = x − n·ln 2, ln 2 split in two
// (Cody–Waite: n·ln2_hi is exact) so that r is accurate; exp(r) for |r| ≤ ln2/2 is Cephes'
// expf polynomial 1 + r + r²·P(r), P of degree 5 (< 1 ulp measured over [−87, 0]).
// exp(0) = 1 exactly; x < −87.33 (below the smallest normal result, −inf included) gives 0,
// x > 88 gives +inf, NaN stays NaN.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cmath>

#define TOY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace toy::kernels::detail {

TOY_AVX2 inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.0f);
  const __m256 xc = _mm256_max_ps(lo, _mm256_min_ps(hi, x));  // NaN passes through (second operands)
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);  // ln2_hi: 9 significant bits
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);       // ln2_lo = ln 2 − ln2_hi
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 er = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i two_n =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);  // n ∈ [−126, 127]
  const __m256 y = _mm256_mul_ps(er, _mm256_castsi256_ps(two_n));
  const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ), above = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  return _mm256_blendv_ps(_mm256_andnot_ps(below, y), _mm256_set1_ps(INFINITY), above);
}

}  // namespace toy::kernels::detail
#endif
