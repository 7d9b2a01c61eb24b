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
//     lanes are summed as ggml's hsum_float_8 and the K mod 8 tail is added in order. This is
//     the order of llama.cpp's tinyBLAS (llamafile_sgemm) kernels for these types.
//   Q4_0/Q5_0/Q8_0 × Q8_0: per block, 8 int32 lanes of exact 4-product sums (maddubs, madd);
//     lane l accumulates (d_w·d_x)·sum with FMA; hsum at the end — ggml_vec_dot_q8_0_q8_0.
//     (Q4_0/Q5_0 get the same integers as ggml a cheaper way: Σ q·x − offset·Σ x.)
//   Q4_K/Q5_K/Q6_K × Q8_K: per super-block an exact int32 Σ sc·Σ q·q8 in 8 lanes, accumulated
//     as (d_x·d_w)·sum with FMA; Q4_K/Q5_K mins in 4 lanes as (−d_x·dmin)·Σ mn·bsum — the
//     structure of ggml's AVX2 ggml_vec_dot_q{4,5,6}_K_q8_K.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "toy/kernels/internal.h"

#define TOY_AVX2 __attribute__((target("avx2,fma,f16c")))
// Loops over the rows and columns of a tile must be unrolled for the accumulators to live in registers.
#define TOY_UNROLL _Pragma("GCC unroll 16")
#define TOY_NO_UNROLL _Pragma("GCC unroll 1")

namespace toy::kernels::detail {
namespace {

// ((a0+a4) + (a2+a6)) + ((a1+a5) + (a3+a7)), as ggml's hsum_float_8.
TOY_AVX2 inline float hsum(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// The K-quant reduction: the 4 min lanes plus both halves of the 8 scale lanes, then as above.
TOY_AVX2 inline float hsum(__m256 v, __m128 mins) {
  __m128 r = _mm_add_ps(mins, _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

TOY_AVX2 inline float half(uint16_t h) { return _cvtsh_ss(h); }

TOY_AVX2 inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
TOY_AVX2 inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

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

template <class W> struct FloatTile {
  template <int R, int C>
  TOY_AVX2 static void run(const Act& a, int64_t m, const uint8_t* w, int64_t ws, float* y, int64_t ldy) {
    using T = typename W::T;
    const int64_t K = a.K;
    const float* x[R];
    const T* wr[C];
    __m256 acc[R][C];
    TOY_UNROLL
    for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const float*>(a.row(m + r));
    TOY_UNROLL
    for (int c = 0; c < C; ++c) wr[c] = reinterpret_cast<const T*>(w + c * ws);
    TOY_UNROLL
    for (int r = 0; r < R; ++r)
      TOY_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
      __m256 wv[C];
      TOY_UNROLL
      for (int c = 0; c < C; ++c) wv[c] = W::load8(wr[c] + k);
      TOY_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(x[r] + k);
        TOY_UNROLL
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
      }
    }
    TOY_UNROLL
    for (int r = 0; r < R; ++r)
      TOY_UNROLL
      for (int c = 0; c < C; ++c) {
        float s = hsum(acc[r][c]);
        for (int64_t t = k; t < K; ++t) s += W::load1(wr[c] + t) * x[r][t];
        y[(m + r) * ldy + c] = s;
      }
  }
};

// ---------------------------------------------------------------------------------------------
// Q4_0 / Q5_0 / Q8_0 weights × Q8_0 activations. W::q gives a block's 32 stored values in
// element order: signed bytes (Q8_0, kOffset = 0) or unsigned ones whose value is q − kOffset.

struct Q8_0W {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 0;
  TOY_AVX2 static __m256i q(const Block& b) { return load256(b.qs); }
};
// The 32 nibbles of 16 bytes in element order: low nibbles are elements 0-15, high ones 16-31.
TOY_AVX2 inline __m256i nibbles(const uint8_t* qs) {
  const __m128i t = load128(qs);
  return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1),
                          _mm256_set1_epi8(0x0f));
}

struct Q4_0W {  // value = q − 8
  using Block = BlockQ4_0;
  static constexpr int kOffset = 8;
  TOY_AVX2 static __m256i q(const Block& b) { return nibbles(b.qs); }
};
struct Q5_0W {  // as Q4_0 plus bit j of qh as bit 4 of element j; value = q − 16
  using Block = BlockQ5_0;
  static constexpr int kOffset = 16;
  TOY_AVX2 static __m256i q(const Block& b) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    // Byte j = 0xff when bit j of qh is set: spread byte j/8 of qh to byte j, set every bit
    // except bit j%8, and compare with all-ones.
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(qh)),
                                               _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                                 0x0101010101010101, 0x0000000000000000));
    const __m256i bit = _mm256_cmpeq_epi8(_mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),
                                          _mm256_set1_epi64x(-1));
    return _mm256_or_si256(nibbles(b.qs), _mm256_and_si256(bit, _mm256_set1_epi8(0x10)));
  }
};

template <class W> struct Q8Tile {
  template <int R, int C>
  TOY_AVX2 static void run(const Act& a, int64_t m, const uint8_t* w, int64_t ws, float* y, int64_t ldy) {
    static_assert(R == 1 || R == 4);
    using Block = typename W::Block;
    const int64_t nb = a.K / QK;
    const int8_t* x[R];
    const Block* wr[C];
    __m256 acc[R][C];
    TOY_UNROLL
    for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const int8_t*>(a.row(m + r));
    TOY_UNROLL
    for (int c = 0; c < C; ++c) wr[c] = reinterpret_cast<const Block*>(w + c * ws);
    TOY_UNROLL
    for (int r = 0; r < R; ++r)
      TOY_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    const float* xs = a.scales + m;  // scales of block b of rows m.. at xs[b·M + r]
    const int64_t M = a.M;
    for (int64_t b = 0; b < nb; ++b, xs += M) {
      // The block's scale products d_w·d_x: for 4 rows one multiply per column gives both
      // halves of d[c] the 4 products, and a lane broadcast within the halves picks row r.
      __m256 d[C];
      __m256i wq[C];
      TOY_UNROLL
      for (int c = 0; c < C; ++c) {
        wq[c] = W::q(wr[c][b]);
        if constexpr (W::kOffset == 0) wq[c] = _mm256_sign_epi8(wq[c], wq[c]);  // |w|; the sign goes to x below
        const __m256 wd = _mm256_set1_ps(half(wr[c][b].d));
        if constexpr (R == 4) d[c] = _mm256_mul_ps(wd, _mm256_broadcast_ps(reinterpret_cast<const __m128*>(xs)));
        else d[c] = _mm256_mul_ps(wd, _mm256_set1_ps(xs[0]));
      }
      TOY_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256i xq = load256(x[r] + b * QK);
        // maddubs multiplies unsigned by signed bytes and sums pairs to int16 (no saturation:
        // |pair| ≤ 2·128·127); madd then sums pairs of those to int32 lanes of 4 products.
        // Unsigned weights: Σ (q − off)·x = Σ q·x − Σ off·x, per pair in int16.
        __m256i x_off;
        if constexpr (W::kOffset != 0) x_off = _mm256_maddubs_epi16(_mm256_set1_epi8(W::kOffset), xq);
        TOY_UNROLL
        for (int c = 0; c < C; ++c) {
          __m256i pairs;
          if constexpr (W::kOffset == 0)
            pairs = _mm256_maddubs_epi16(wq[c], _mm256_sign_epi8(xq, W::q(wr[c][b])));  // |w|·(x·sign w)
          else
            pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(wq[c], xq), x_off);
          const __m256i dot = _mm256_madd_epi16(ones, pairs);
          acc[r][c] = _mm256_fmadd_ps(R == 1 ? d[c] : _mm256_permute_ps(d[c], r * 0x55), _mm256_cvtepi32_ps(dot), acc[r][c]);
        }
      }
    }
    TOY_UNROLL
    for (int r = 0; r < R; ++r)
      TOY_UNROLL
      for (int c = 0; c < C; ++c) y[(m + r) * ldy + c] = hsum(acc[r][c]);
  }
};

// ---------------------------------------------------------------------------------------------
// K-quant weights × Q8_K activations, one weight row per tile (C = 1).

// Q4_K/Q5_K: unpacks the 12 scale bytes into 8 scales (bytes 0-7) and 8 mins (bytes 8-15);
// the packing is described in tensor/quant.cpp.
inline void unpack_scales_k4(const uint8_t* packed, uint32_t u[4]) {
  constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
  std::memcpy(u, packed, 12);
  u[3] = ((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4);  // mins 4-7
  const uint32_t mins_lo = u[1] & k6;                      // mins 0-3
  u[1] = (u[2] & k4) | (((u[0] >> 6) & k2) << 4);          // scales 4-7
  u[2] = mins_lo;
  u[0] &= k6;                                              // scales 0-3
}

// Σ_sub-blocks mn·(bsum of its two 16-groups) as 4 int32 lanes, for Q4_K/Q5_K mins.
TOY_AVX2 inline __m128i mins_dot(__m128i mins16, const BlockQ8_K& x) {
  const __m256i bs = load256(x.bsums);
  return _mm_madd_epi16(mins16, _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
}

// A super-block is first unpacked to 8 vectors of 32 small unsigned values (vector v = values
// 32v..32v+31) with their int16 scales; then each row of x takes 8 maddubs/madd steps.
template <bool kQ5> struct Q45KTile {
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  template <int R, int C>
  TOY_AVX2 static void run(const Act& a, int64_t m, const uint8_t* w, int64_t ws, float* y, int64_t ldy) {
    static_assert(C == 1);
    const int64_t nsb = a.K / QK_K;
    const Block* wb = reinterpret_cast<const Block*>(w);
    const BlockQ8_K* x[R];
    __m256 acc[R];
    __m128 acc_min[R];
    TOY_UNROLL
    for (int r = 0; r < R; ++r) {
      x[r] = reinterpret_cast<const BlockQ8_K*>(a.row(m + r));
      acc[r] = _mm256_setzero_ps();
      acc_min[r] = _mm_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < nsb; ++i) {
      const Block& b = wb[i];
      uint32_t u[4];
      unpack_scales_k4(b.scales, u);
      const auto* sc = reinterpret_cast<const uint8_t*>(u);
      const __m128i mins16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int32_t(u[3]), int32_t(u[2])));
      __m256i q[8];  // sub-block 2j: low nibbles of qs[32j..], sub-block 2j+1: high nibbles
      TOY_UNROLL
      for (int j = 0; j < 4; ++j) {
        const __m256i bits = load256(b.qs + 32 * j);
        q[2 * j] = _mm256_and_si256(bits, m4);
        q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
      }
      if constexpr (kQ5) {  // 5th bit of sub-block v is bit v of qh[l]
        const __m256i hbits = load256(b.qh);
        TOY_UNROLL
        for (int v = 0; v < 8; ++v)
          q[v] = _mm256_or_si256(q[v], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, v), one), 4));
      }
      const float wd = half(b.d), wdmin = half(b.dmin);
      TOY_NO_UNROLL  // the 8 vectors of q stay in registers for all rows
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& xb = x[r][i];
        __m256i sumi = _mm256_setzero_si256();
        TOY_UNROLL
        for (int v = 0; v < 8; ++v) {  // q ≤ 31, |q8| ≤ 127: the pair sums fit int16
          const __m256i p = _mm256_maddubs_epi16(q[v], load256(xb.qs + 32 * v));
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_set1_epi16(sc[v]), p));
        }
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(xb.d * wd), _mm256_cvtepi32_ps(sumi), acc[r]);
        acc_min[r] = _mm_fmadd_ps(_mm_set1_ps(-xb.d * wdmin), _mm_cvtepi32_ps(mins_dot(mins16, xb)), acc_min[r]);
      }
    }
    TOY_UNROLL
    for (int r = 0; r < R; ++r) y[(m + r) * ldy] = hsum(acc[r], acc_min[r]);
  }
};

struct Q6KTile {
  template <int R, int C>
  TOY_AVX2 static void run(const Act& a, int64_t m, const uint8_t* w, int64_t ws, float* y, int64_t ldy) {
    static_assert(C == 1);
    const int64_t nsb = a.K / QK_K;
    const BlockQ6_K* wb = reinterpret_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* x[R];
    __m256 acc[R];
    TOY_UNROLL
    for (int r = 0; r < R; ++r) {
      x[r] = reinterpret_cast<const BlockQ8_K*>(a.row(m + r));
      acc[r] = _mm256_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), m32 = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < nsb; ++i) {
      const BlockQ6_K& b = wb[i];
      const __m128i scales = load128(b.scales);
      __m256i q[8], sc[8];  // vector v = values 32v..32v+31 (0..63), and its two 16-value scales
      TOY_UNROLL
      for (int h = 0; h < 2; ++h) {  // 128 values from ql[64h..], qh[32h..] (layout in tensor/quant.cpp)
        const __m256i l0 = load256(b.ql + 64 * h), l1 = load256(b.ql + 64 * h + 32), hb = load256(b.qh + 32 * h);
        TOY_UNROLL
        for (int k = 0; k < 4; ++k) {  // values 128h + 32k + l, l < 32
          const int v = 4 * h + k;
          const __m256i lo = k < 2 ? (k == 0 ? l0 : l1) : _mm256_srli_epi16(k == 2 ? l0 : l1, 4);
          const __m256i top = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * k), m2);
          q[v] = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_slli_epi16(top, 4));
          // Scales of sub-blocks 2v and 2v+1 (16 values each) as 8 + 8 int16.
          sc[v] = _mm256_cvtepi8_epi16(
              _mm_shuffle_epi8(scales, _mm_set_epi64x(0x0101010101010101 * (2 * v + 1), 0x0101010101010101 * (2 * v))));
        }
      }
      const float wd = half(b.d);
      TOY_NO_UNROLL
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& xb = x[r][i];
        __m256i sumi = _mm256_setzero_si256();
        TOY_UNROLL
        for (int v = 0; v < 8; ++v) {
          // Σ (q − 32)·q8 per pair = Σ q·q8 − Σ 32·q8 (both fit int16).
          const __m256i q8 = load256(xb.qs + 32 * v);
          const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[v], q8), _mm256_maddubs_epi16(m32, q8));
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc[v], p));
        }
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(xb.d * wd), _mm256_cvtepi32_ps(sumi), acc[r]);
      }
    }
    TOY_UNROLL
    for (int r = 0; r < R; ++r) y[(m + r) * ldy] = hsum(acc[r]);
  }
};

// ---------------------------------------------------------------------------------------------
// Tiling

// Covers all M rows × n columns with RB×CB tiles, then 1-row / 1-column tiles for the rest.
template <class Tile, int RB, int CB>
TOY_AVX2 inline void tiled(const Act& a, const uint8_t* w, int64_t ws, float* y, int64_t ldy, int64_t n) {
  int64_t j = 0;
  for (; j + CB <= n; j += CB) {
    int64_t m = 0;
    for (; m + RB <= a.M; m += RB) Tile::template run<RB, CB>(a, m, w + j * ws, ws, y + j, ldy);
    for (; m < a.M; ++m) Tile::template run<1, CB>(a, m, w + j * ws, ws, y + j, ldy);
  }
  for (; j < n; ++j) {
    int64_t m = 0;
    for (; m + RB <= a.M; m += RB) Tile::template run<RB, 1>(a, m, w + j * ws, ws, y + j, ldy);
    for (; m < a.M; ++m) Tile::template run<1, 1>(a, m, w + j * ws, ws, y + j, ldy);
  }
}

// Decode (M < RB) is bound by memory bandwidth: one weight row at a time, so the weights are
// read as one sequential stream. (Interleaving 2-4 neighbouring rows for more independent FMA
// chains measured 40-50% slower from DRAM on a Zen 4: the hardware prefetcher follows one
// stream well, several streams a few hundred bytes apart badly.) Prompts: RB rows of x × CB
// weight rows, the weight rows staying in L1 while the rows of x stream past.
template <class Tile, int RB, int CB>
TOY_AVX2 void columns(const Act& a, const uint8_t* w, int64_t ws, float* y, int64_t ldy, int64_t n) {
  if (a.M < RB)
    tiled<Tile, 1, 1>(a, w, ws, y, ldy, n);
  else
    tiled<Tile, RB, CB>(a, w, ws, y, ldy, n);
}

}  // namespace

ColumnKernel avx2_column_kernel(DType wt) {
  switch (wt) {
    case DType::F32: return columns<FloatTile<F32W>, 4, 3>;
    case DType::F16: return columns<FloatTile<F16W>, 4, 3>;
    case DType::BF16: return columns<FloatTile<BF16W>, 4, 3>;
    case DType::Q8_0: return columns<Q8Tile<Q8_0W>, 4, 2>;
    case DType::Q4_0: return columns<Q8Tile<Q4_0W>, 4, 2>;
    case DType::Q5_0: return columns<Q8Tile<Q5_0W>, 4, 2>;
    case DType::Q4_K: return columns<Q45KTile<false>, 4, 1>;
    case DType::Q5_K: return columns<Q45KTile<true>, 4, 1>;
    case DType::Q6_K: return columns<Q6KTile, 4, 1>;
    default: return nullptr;
  }
}

TOY_AVX2 void avx2_round_to_f16(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) out[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
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
      i32[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // Pack to bytes; packs interleave the 128-bit lanes, the permute puts them back in order.
    const __m256i i16 = _mm256_packs_epi32(i32[0], i32[1]), j16 = _mm256_packs_epi32(i32[2], i32[3]);
    const __m256i i8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i16, j16), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), i8);
  }
}

}  // namespace toy::kernels::detail
