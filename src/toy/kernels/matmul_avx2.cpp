// kernels/matmul_avx2.cpp — AVX2/FMA/F16C column kernels for matmul_wt.
//
// Compiled for baseline x86-64; every function that uses AVX2 carries TOY_AVX2 and is only
// reached when cpu_features says the CPU has it. No standard-library templates are
// instantiated in AVX2 code (they could be merged with baseline copies at link time).
//
// A kernel computes a tile of R rows of x × C weight rows; a weight row's blocks are loaded
// (and unpacked) once per tile and used for all R rows. The per-element arithmetic is the
// same in every tile shape, so an output element does not depend on M, n or the chunking:
//   F32/F16/BF16: 8 f32 lanes, lane l accumulates x[k]·w[k] for k ≡ l (mod 8) with FMA; the
//     lanes are summed as ggml's hsum_float_8 and the K mod 8 tail is added in order by FMA. This is
//     the order of llama.cpp's tinyBLAS (llamafile_sgemm) kernels for these types.
//   Q4_0/Q5_0/Q8_0 × Q8_0: per block, 8 int32 lanes of exact 4-product sums (maddubs, madd);
//     lane l accumulates (d_w·d_x)·sum with FMA; hsum at the end — ggml_vec_dot_q8_0_q8_0.
//     (Q4_0/Q5_0 get the same integers as ggml a cheaper way: Σ q·x − offset·Σ x.)
//   Q4_K/Q5_K/Q6_K × Q8_K: per super-block an exact int32 Σ sc·Σ q·q8 in 8 lanes, accumulated
//     as (d_x·d_w)·sum with FMA; Q4_K/Q5_K mins in 4 lanes as (−d_x·dmin)·Σ mn·bsum — the
//     structure of ggml's AVX2 ggml_vec_dot_q{4,5,6}_K_q8_K.
// The quantized tiles are in matmul_tiles.inc, which matmul_vnni.cpp compiles again with
// AVX-512 VNNI integer dot products (same integers, same lanes, same bits).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "toy/kernels/internal.h"

#define TOY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace toy::kernels::detail {
namespace {

#define TOY_TARGET TOY_AVX2

// The integer dot products of matmul_tiles.inc with AVX2: maddubs multiplies unsigned by
// signed bytes and adds adjacent products to int16 (saturating, so the operands must keep a
// pair's sum within ±32767); madd adds adjacent pairs of int16 products to int32.
struct Isa {
  // 4 rows × 2 columns: 8 accumulators, 2 + 2 weight registers, x and constants fill the 16.
  static constexpr int kQ8Columns = 2;
  static constexpr const char* kQ8Name = "avx2 maddubs 4x2";  // the Q4_0/Q5_0/Q8_0 tile
  static constexpr const char* kKName = "avx2 maddubs 4x1";   // the K-quant tile
  struct Row {
    __m256i x;
    __m256i offset_pairs;  // Q4_0/Q5_0: kOffset·(x[2i] + x[2i+1]) in int16 lane i
  };
  // Q8_0: |w|, the sign goes to x in dot. Q4_0/Q5_0: the stored q, value q − kOffset.
  template <class W>
  TOY_AVX2 static __m256i weights(const typename W::Block& b) {
    const __m256i q = W::q(b);
    if constexpr (W::kOffset == 0)
      return _mm256_sign_epi8(q, q);
    else
      return q;
  }
  template <class W>
  TOY_AVX2 static Row row(__m256i x) {
    if constexpr (W::kOffset == 0)
      return {x, _mm256_setzero_si256()};
    else
      return {x, _mm256_maddubs_epi16(_mm256_set1_epi8(W::kOffset), x)};
  }
  // Q8_0: |w|·(x·sign w); |pair| ≤ 2·128·127 as the activations lie in [−127, 127]. The signed
  // weights are loaded again rather than kept: AVX2 has 16 registers and the tile needs them.
  // Q4_0/Q5_0: Σ (q − off)·x = Σ q·x − Σ off·x, per pair in int16.
  template <class W>
  TOY_AVX2 static __m256i dot(__m256i u, const typename W::Block& b, const Row& x) {
    __m256i pairs;
    if constexpr (W::kOffset == 0)
      pairs = _mm256_maddubs_epi16(u, _mm256_sign_epi8(x.x, W::q(b)));
    else
      pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(u, x.x), x.offset_pairs);
    return _mm256_madd_epi16(_mm256_set1_epi16(1), pairs);
  }
  TOY_AVX2 static __m256i add_pairs(__m256i s, __m256i a, __m256i b) {
    return _mm256_add_epi32(s, _mm256_madd_epi16(a, b));
  }
};

#include "toy/kernels/matmul_tiles.inc"

// ---------------------------------------------------------------------------------------------
// F32 / F16 / BF16 weights; x is f32 (already rounded to the weight's precision).

struct F32W {
  using T = float;
  TOY_AVX2 static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  TOY_AVX2 static float load1(const float* p) { return *p; }
};
struct F16W {
  using T = uint16_t;
  TOY_AVX2 static __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(load128(p)); }
  TOY_AVX2 static float load1(const uint16_t* p) { return half(*p); }
};
struct BF16W {  // bfloat16 is the top half of an f32: widen and shift left by 16
  using T = uint16_t;
  TOY_AVX2 static __m256 load8(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
  }
  TOY_AVX2 static float load1(const uint16_t* p) {
    const uint32_t u = uint32_t(*p) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// X is the format of the rows of x: F32W (the f32 rows) or, for F16 prompts, F16W (Act::rows16).
template <class W, class X>
struct FloatTile {
  template <int R, int C>
  TOY_AVX2 static void run(const Act& a, int64_t m, const uint8_t* w, int64_t ws, float* y, int64_t ldy) {
    using T = typename W::T;
    using XT = typename X::T;
    const int64_t K = a.K;
    const XT* x[R];
    const T* wr[C];
    __m256 acc[R][C];
    TOY_UNROLL
    for (int r = 0; r < R; ++r) {
      if constexpr (std::is_same_v<X, F32W>)
        x[r] = reinterpret_cast<const float*>(a.row(m + r));
      else
        x[r] = a.rows16 + (m + r) * K;
    }
    TOY_UNROLL
    for (int c = 0; c < C; ++c) wr[c] = reinterpret_cast<const T*>(w + c * ws);
    TOY_UNROLL
    for (int r = 0; r < R; ++r) TOY_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    int64_t k = 0;
    if constexpr (R == 1 && C == 1) {
      // Decode: the weight row comes from DRAM, and the hardware prefetcher alone keeps too few
      // lines in flight for one stream (see kDecodePrefetchBytes). Steps of one cache line,
      // each asking for the line kDecodePrefetchBytes ahead; the FMAs are those of the loop
      // below, in the same order.
      constexpr int kSteps = 64 / (8 * sizeof(T));  // 8-value steps per 64-byte line
      for (; k + 8 * kSteps <= K; k += 8 * kSteps) {
        prefetch_ahead<64>(wr[0] + k);
        TOY_UNROLL
        for (int s = 0; s < kSteps; ++s)
          acc[0][0] = _mm256_fmadd_ps(W::load8(wr[0] + k + 8 * s), X::load8(x[0] + k + 8 * s), acc[0][0]);
      }
    }
    for (; k + 8 <= K; k += 8) {
      __m256 wv[C];
      TOY_UNROLL
      for (int c = 0; c < C; ++c) wv[c] = W::load8(wr[c] + k);
      TOY_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256 xv = X::load8(x[r] + k);
        TOY_UNROLL
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
      }
    }
    TOY_UNROLL
    for (int r = 0; r < R; ++r) TOY_UNROLL
    for (int c = 0; c < C; ++c) {
      float s = hsum(acc[r][c]);
      // The tail by explicit FMA: `s += w·x` is fused or not as the compiler contracts it
      // (GCC mixed both in one loop), and matmul_avx512.cpp must give these bits.
      for (int64_t t = k; t < K; ++t) s = __builtin_fmaf(W::load1(wr[c] + t), X::load1(x[r] + t), s);
      y[(m + r) * ldy + c] = s;
    }
  }
};

// As columns() in matmul_tiles.inc, except that F16 prompts read x as halves (Act::rows16)
// where the conversion wrote them (the f32 rows otherwise: the same values, the same bits).
template <class W>
TOY_AVX2 void float_columns(const Act& a, const uint8_t* w, int64_t ws, float* y, int64_t ldy, int64_t n) {
  if (a.M < kPromptRows) return tiled<FloatTile<W, F32W>, 1, 1>(a, w, ws, y, ldy, n);
  if constexpr (std::is_same_v<W, F16W>)
    if (a.rows16) return tiled<FloatTile<W, F16W>, 4, 3>(a, w, ws, y, ldy, n);
  tiled<FloatTile<W, F32W>, 4, 3>(a, w, ws, y, ldy, n);
}

}  // namespace

NamedKernel avx2_column_kernel(DType wt) {
  switch (wt) {
    case DType::F32:
      return {float_columns<F32W>, "avx2 fma 4x3"};
    case DType::F16:
      return {float_columns<F16W>, "avx2 f16c+fma 4x3"};
    case DType::BF16:
      return {float_columns<BF16W>, "avx2 fma 4x3"};
    default:
      return quantized_column_kernel(wt);
  }
}

TOY_AVX2 void avx2_round_to_f16(const float* x, float* out, uint16_t* out16, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    if (out16) _mm_storeu_si128(reinterpret_cast<__m128i*>(out16 + i), h);
  }
  for (; i < n; ++i) {
    const uint16_t h = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
    out[i] = _cvtsh_ss(h);
    if (out16) out16[i] = h;
  }
}

// As ggml's AVX2 quantize_row_q8_0: amax by vector max (exact in any order), then the same
// multiply by 127/amax and round-half-even (_mm256_round_ps) as the portable code.
TOY_AVX2 void avx2_quantize_q8_0(const float* x, int8_t* q, float* d, int64_t d_stride, int64_t K) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < K / QK; ++b, x += QK, q += QK) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    TOY_UNROLL
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 8 * i);
      amax = _mm256_max_ps(_mm256_andnot_ps(sign_bit, v[i]), amax);  // a NaN is skipped, as by std::max
    }
    __m128 m = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float max_abs = _mm_cvtss_f32(m);
    d[b * d_stride] = _cvtsh_ss(_cvtss_sh(max_abs / 127.f, _MM_FROUND_TO_NEAREST_INT));
    const __m256 id = _mm256_set1_ps(max_abs != 0 ? 127.f / max_abs : 0.0f);
    __m256i i32[4];
    TOY_UNROLL
    for (int i = 0; i < 4; ++i)
      i32[i] =
          _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // Pack to bytes; packs interleave the 128-bit lanes, the permute puts them back in order.
    const __m256i i16 = _mm256_packs_epi32(i32[0], i32[1]), j16 = _mm256_packs_epi32(i32[2], i32[3]);
    const __m256i i8 =
        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i16, j16), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), i8);
  }
}

}  // namespace toy::kernels::detail
