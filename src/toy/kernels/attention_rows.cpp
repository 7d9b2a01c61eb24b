// kernels/attention_rows.cpp — the vector work of attention's decode loop: one query's scores
// against rows of keys, the softmax's exp and the probability-weighted sum of value rows.
//
// Keys and values are read in place (rows `stride` elements apart, f32 or IEEE halves widened
// with F16C on the fly), so nothing is copied or transposed. Every output has a fixed order of
// additions that depends on neither the thread count nor where a row falls in a block:
//   scores         AVX2: 8 keys at a time, one accumulator per key with lane l summing the terms
//                  d ≡ l (mod 8) by FMA, then the lanes of the 8 accumulators reduced together
//                  ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), 8 scores in one vector. A last block of
//                  fewer than 8 keys repeats its last key in the empty slots: the same code.
//   softmax_terms  AVX2: the max over 8 lanes, exp as below, 8 lanes of partial sums (the tail
//                  padded with −inf, whose exp is 0), reduced in a fixed tree.
//   weighted_sum   o[e] = Σ_j p_j v_j[e] in order of j, one FMA chain per element, 8 vectors of
//                  o (64 columns) in registers while the rows stream past.
// The AVX2 path needs d a multiple of 8 (every model's head size); other d take the portable
// loops, which sum in plain order without FMA and call std::exp — the same math, other roundings.
// prefetch_rows asks for rows ahead of these kernels (attention's KV cache comes from DRAM).
//
// The softmax's exp is exp8 (kernels/vec_math.h).
#include <algorithm>
#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/kernels/vec_math.h"

namespace toy::kernels {
namespace {

inline float widen(float x) { return x; }
inline float widen(uint16_t h) { return fp16_to_f32(h); }

template <typename T>
void scores_portable(const float* q, const T* k, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
  for (int64_t j = 0; j < n; ++j) {
    const T* kj = k + j * stride;
    float acc = 0.0f;
    for (int64_t e = 0; e < d; ++e) acc += q[e] * widen(kj[e]);
    s[j] = scale * acc;
  }
}

SoftmaxTerms softmax_terms_portable(float* x, int64_t n) {
  SoftmaxTerms r{-INFINITY, 0.0f};
  for (int64_t i = 0; i < n; ++i) r.max = std::max(r.max, x[i]);
  for (int64_t i = 0; i < n; ++i) r.sum += x[i] = std::exp(x[i] - r.max);
  return r;
}

template <typename T>
void weighted_sum_portable(const float* p, const T* v, int64_t stride, int64_t n, int64_t d, float* o) {
  std::fill_n(o, d, 0.0f);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t e = 0; e < d; ++e) o[e] += p[j] * widen(v[j * stride + e]);
}

#if defined(__x86_64__) || defined(__i386__)
TOY_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
TOY_AVX2 inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Lane i of the result: the sum of the 8 lanes of a[i], ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
TOY_AVX2 inline __m256 reduce8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);  // pairs; 128-bit halves apart
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);  // quads: a0..a3 (lanes 0-3 | 4-7), a4..a7
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// The sum of the 8 lanes of a, in a fixed order.
TOY_AVX2 inline float reduce1(__m256 a) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

template <typename T>
TOY_AVX2 void scores_avx2(const float* q, const T* k, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
  for (int64_t j = 0; j < n; j += 8) {
    const T* key[8];  // past n: the last key again (scored, not stored)
    for (int i = 0; i < 8; ++i) key[i] = k + std::min(j + i, n - 1) * stride;
    __m256 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t e = 0; e < d; e += 8) {
      const __m256 qe = _mm256_loadu_ps(q + e);
      for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(qe, load8(key[i] + e), acc[i]);
    }
    const __m256 sj = _mm256_mul_ps(_mm256_set1_ps(scale), reduce8(acc));
    if (j + 8 <= n) {
      _mm256_storeu_ps(s + j, sj);
    } else {
      alignas(32) float last[8];
      _mm256_store_ps(last, sj);
      std::copy_n(last, n - j, s + j);
    }
  }
}

TOY_AVX2 SoftmaxTerms softmax_terms_avx2(float* x, int64_t n) {
  // The tail, padded with −inf: it changes no max and adds exp(−inf) = 0 to the sums.
  const int64_t n8 = n / 8 * 8;
  alignas(32) float tail[8];
  std::fill_n(tail, 8, -INFINITY);
  std::copy_n(x + n8, n - n8, tail);
  __m256 mx = _mm256_load_ps(tail);
  for (int64_t i = 0; i < n8; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const float m = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
  const __m256 shift = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 e = detail::exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (n8 < n) {
    const __m256 e = detail::exp8(_mm256_sub_ps(_mm256_load_ps(tail), shift));
    _mm256_store_ps(tail, e);
    std::copy_n(tail, n - n8, x + n8);
    sum = _mm256_add_ps(sum, e);
  }
  return {m, reduce1(sum)};
}

// o[0, 8·V) = Σ_j p_j v_j[0, 8·V), the V vectors of o in registers.
template <int V, typename T>
TOY_AVX2 inline void weighted_tile(const float* p, const T* v, int64_t stride, int64_t n, float* o) {
  __m256 acc[V];
  for (int i = 0; i < V; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __m256 pj = _mm256_broadcast_ss(p + j);
    const T* vj = v + j * stride;
    for (int i = 0; i < V; ++i) acc[i] = _mm256_fmadd_ps(pj, load8(vj + 8 * i), acc[i]);
  }
  for (int i = 0; i < V; ++i) _mm256_storeu_ps(o + 8 * i, acc[i]);
}

template <typename T>
TOY_AVX2 void weighted_sum_avx2(const float* p, const T* v, int64_t stride, int64_t n, int64_t d, float* o) {
  int64_t e = 0;
  for (; e + 64 <= d; e += 64) weighted_tile<8>(p, v + e, stride, n, o + e);
  if (e + 32 <= d) weighted_tile<4>(p, v + e, stride, n, o + e), e += 32;
  for (; e < d; e += 8) weighted_tile<1>(p, v + e, stride, n, o + e);
}
#endif

bool avx2_for(int64_t d) { return simd() >= Simd::avx2 && d % 8 == 0; }

}  // namespace

void prefetch_rows(const void* x, DType kv, int64_t stride, int64_t n, int64_t d) {
  const int64_t size = kv == DType::F16 ? 2 : 4;
  const auto* p = static_cast<const char*>(x);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t b = 0; b < d * size; b += 64) __builtin_prefetch(p + j * stride * size + b, 0, 2);
}

void scores(const float* q, const void* k, DType kv, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
  const bool half = kv == DType::F16;
  const auto* kf = static_cast<const float*>(k);
  const auto* kh = static_cast<const uint16_t*>(k);
#if defined(__x86_64__) || defined(__i386__)
  if (avx2_for(d))
    return half ? scores_avx2(q, kh, stride, n, d, scale, s) : scores_avx2(q, kf, stride, n, d, scale, s);
#endif
  half ? scores_portable(q, kh, stride, n, d, scale, s) : scores_portable(q, kf, stride, n, d, scale, s);
}

SoftmaxTerms softmax_terms(float* x, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (simd() >= Simd::avx2) return softmax_terms_avx2(x, n);
#endif
  return softmax_terms_portable(x, n);
}

void weighted_sum(const float* p, const void* v, DType kv, int64_t stride, int64_t n, int64_t d, float* o) {
  const bool half = kv == DType::F16;
  const auto* vf = static_cast<const float*>(v);
  const auto* vh = static_cast<const uint16_t*>(v);
#if defined(__x86_64__) || defined(__i386__)
  if (avx2_for(d)) return half ? weighted_sum_avx2(p, vh, stride, n, d, o) : weighted_sum_avx2(p, vf, stride, n, d, o);
#endif
  half ? weighted_sum_portable(p, vh, stride, n, d, o) : weighted_sum_portable(p, vf, stride, n, d, o);
}

}  // namespace toy::kernels
