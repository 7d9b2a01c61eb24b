// kernels/gemm.cpp — f32 GEMM with transposes: C[M, N] = op(A)·op(B) (+ C).
//
// Cache blocking in the manner of BLIS/GotoBLAS. For each block of NC columns and KC values of k:
//   1. op(B)[k-block, column block] is packed into panels of NR = 16 columns, k-major and zero padded,
//      so the micro-kernel reads one panel (KC×16 floats = 16 KiB, in L1) contiguously;
//   2. work items of (8 row panels of MR = 6 rows) × (16 column panels) are spread over the
//      threads; an item packs its rows of op(A) the same way (k-major, 6 values per k) and
//   3. runs the micro-kernel, which keeps a 6×16 tile of C in 12 AVX registers and adds one
//      rank-1 update a[k]·b[k]ᵀ per k.
// Each k-block starts its tile from C (from 0 in the first block unless accumulating), so every
// element of C is the single chain c = fma(a_k, b_k, c) for k = 0..K-1 in order, whatever the
// blocking, the thread count or the shape of the tile it falls in. The scalar path runs the
// same chain with separate multiply and add.
#include <algorithm>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"

#define TOY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace toy::kernels {
namespace {

constexpr int MR = 6, NR = 16;      // micro-tile of C
constexpr int64_t KC = 256;         // k values per packed block
constexpr int64_t NC = 4096;        // columns per packed block of op(B) (4 MiB)
constexpr int64_t kRowPanels = 8;   // row panels (48 rows) per work item
constexpr int64_t kColPanels = 16;  // column panels (256 columns) per work item

// The MR×NR tile of C at c (rows ldc apart) += Σ_k a[k]·b[k]ᵀ over kc packed k values, one
// rank-1 update per k; starts from 0 instead of C when `from_zero`.
using MicroKernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool from_zero);

void micro_scalar(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool from_zero) {
  float acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = from_zero ? 0.0f : c[r * ldc + j];
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR)
    for (int r = 0; r < MR; ++r)
      for (int j = 0; j < NR; ++j) acc[r][j] += a[r] * b[j];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) c[r * ldc + j] = acc[r][j];
}

#if defined(__x86_64__) || defined(__i386__)
// The 12 accumulators are named variables: GCC keeps an array of them in registers but also
// stores it to the stack on every iteration.
TOY_AVX2 void micro_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool from_zero) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (from_zero) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
  } else {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
    c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
  }
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 ar = _mm256_broadcast_ss(a);
    c00 = _mm256_fmadd_ps(ar, b0, c00), c01 = _mm256_fmadd_ps(ar, b1, c01);
    ar = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(ar, b0, c10), c11 = _mm256_fmadd_ps(ar, b1, c11);
    ar = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(ar, b0, c20), c21 = _mm256_fmadd_ps(ar, b1, c21);
    ar = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(ar, b0, c30), c31 = _mm256_fmadd_ps(ar, b1, c31);
    ar = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(ar, b0, c40), c41 = _mm256_fmadd_ps(ar, b1, c41);
    ar = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(ar, b0, c50), c51 = _mm256_fmadd_ps(ar, b1, c51);
  }
  _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
  _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
  _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}
#endif

// Packs op(A)[m0 .. m0+rows, k0 .. k0+kc) into row panels: panel p holds, for each k, the
// MR values of rows m0 + p + r (zero past the last row). Loops run along A's contiguous axis.
void pack_a(bool ta, const float* A, int64_t M, int64_t K, int64_t m0, int64_t rows, int64_t k0, int64_t kc,
            float* out) {
  for (int64_t p = 0; p < rows; p += MR, out += kc * MR) {
    const int64_t valid = std::min<int64_t>(MR, rows - p);
    if (ta) {  // op(A)[m, k] = A[k, m]: the MR values for one k are contiguous
      for (int64_t k = 0; k < kc; ++k) {
        const float* a = A + (k0 + k) * M + m0 + p;
        for (int64_t r = 0; r < MR; ++r) out[k * MR + r] = r < valid ? a[r] : 0.0f;
      }
    } else {
      for (int64_t r = 0; r < MR; ++r) {
        if (r >= valid) {
          for (int64_t k = 0; k < kc; ++k) out[k * MR + r] = 0.0f;
          continue;
        }
        const float* a = A + (m0 + p + r) * K + k0;
        for (int64_t k = 0; k < kc; ++k) out[k * MR + r] = a[k];
      }
    }
  }
}

// Packs op(B)[k0 .. k0+kc, n0 .. n0+NR) into one column panel: for each k, NR values (zero
// past column N). Loops run along B's contiguous axis.
void pack_b_panel(bool tb, const float* B, int64_t N, int64_t K, int64_t n0, int64_t k0, int64_t kc, float* out) {
  const int64_t cols = std::min<int64_t>(NR, N - n0);
  if (tb) {  // op(B)[k, n] = B[n, k]: one column of the panel is contiguous
    for (int64_t j = 0; j < NR; ++j) {
      if (j >= cols) {
        for (int64_t k = 0; k < kc; ++k) out[k * NR + j] = 0.0f;
        continue;
      }
      const float* b = B + (n0 + j) * K + k0;
      for (int64_t k = 0; k < kc; ++k) out[k * NR + j] = b[k];
    }
  } else {
    for (int64_t k = 0; k < kc; ++k) {
      const float* b = B + (k0 + k) * N + n0;
      for (int64_t j = 0; j < NR; ++j) out[k * NR + j] = j < cols ? b[j] : 0.0f;
    }
  }
}

}  // namespace

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C,
          bool accumulate) {
  if (M < 0 || N < 0 || K < 0) throw std::invalid_argument("gemm: negative dimension");
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) std::fill(C, C + M * N, 0.0f);
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  const MicroKernel micro = simd() >= Simd::avx2 ? micro_avx2 : micro_scalar;
#else
  const MicroKernel micro = micro_scalar;
#endif
  const int64_t row_groups = (M + kRowPanels * MR - 1) / (kRowPanels * MR);
  // Work items of at least ~1M multiply-adds each; smaller products run on this thread.
  const int64_t item_work = std::min(kRowPanels * MR, M) * std::min(kColPanels * NR, N) * K;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(1, item_work));
  thread_local std::vector<float> packed_b;
  packed_b.resize(size_t(std::min(NC, N + NR - 1) / NR * NR * KC));

  for (int64_t n_begin = 0; n_begin < N; n_begin += NC) {
    const int64_t nc = std::min(NC, N - n_begin), col_panels = (nc + NR - 1) / NR;
    const int64_t col_groups = (col_panels + kColPanels - 1) / kColPanels;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
      const int64_t kc = std::min(KC, K - k0);
      const bool from_zero = k0 == 0 && !accumulate;
      float* bp = packed_b.data();
      parallel_for(col_panels, std::max<int64_t>(4, grain * kColPanels), [&](int64_t q0, int64_t q1) {
        for (int64_t q = q0; q < q1; ++q) pack_b_panel(tb, B, N, K, n_begin + q * NR, k0, kc, bp + q * NR * kc);
      });
      parallel_for(row_groups * col_groups, grain, [&](int64_t i0, int64_t i1) {
        thread_local std::vector<float> packed_a;
        packed_a.resize(size_t(kRowPanels * MR * KC));
        float tile[MR * NR] = {};
        for (int64_t item = i0; item < i1; ++item) {
          const int64_t m0 = item / col_groups * kRowPanels * MR, rows = std::min(kRowPanels * MR, M - m0);
          const int64_t q_begin = item % col_groups * kColPanels, q_end = std::min(col_panels, q_begin + kColPanels);
          pack_a(ta, A, M, K, m0, rows, k0, kc, packed_a.data());
          for (int64_t q = q_begin; q < q_end; ++q) {
            const int64_t n0 = n_begin + q * NR, cols = std::min<int64_t>(NR, N - n0);
            const float* b = bp + q * NR * kc;
            for (int64_t p = 0; p < rows; p += MR) {
              const float* a = packed_a.data() + p * kc;
              float* c = C + (m0 + p) * N + n0;
              const int64_t tile_rows = std::min<int64_t>(MR, rows - p);
              if (tile_rows == MR && cols == NR) {
                micro(kc, a, b, c, N, from_zero);
                continue;
              }
              // Edge tile: run on a full-size copy, then write back the part inside C.
              for (int64_t r = 0; r < tile_rows; ++r) std::copy(c + r * N, c + r * N + cols, tile + r * NR);
              micro(kc, a, b, tile, NR, from_zero);
              for (int64_t r = 0; r < tile_rows; ++r) std::copy(tile + r * NR, tile + r * NR + cols, c + r * N);
            }
          }
        }
      });
    }
  }
}

}  // namespace toy::kernels
