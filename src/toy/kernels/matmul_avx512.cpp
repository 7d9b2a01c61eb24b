// kernels/matmul_avx512.cpp — 512-bit prompt tiles for F32/F16/BF16 weights with the bits of the
// AVX2 tile.
//
// The AVX2 FloatTile (matmul_avx2.cpp) keeps one 8-lane accumulator per output: lane l sums
// x[k]·w[k] for k ≡ l (mod 8) by FMA in order of k, then the lanes are summed as hsum_float_8 and
// the K mod 8 tail is added in order by FMA. A zmm holds two such accumulators: rows 2p and 2p+1 of x in
// its two halves, against a weight row's 8 values broadcast to both halves. Every lane then does
// exactly the AVX2 arithmetic, so an output has the AVX2 kernel's bits whichever tile computes it
// (the choice of tile never changes a result). So that one load gives both rows, x is packed once
// per call (matmul.cpp, pack_row_pairs): pair p holds, per block of 8 values, those of row 2p
// then those of row 2p+1 (an odd M pads the last pair with a row of zeros, whose outputs are not
// written); the K mod 8 tail is read from the rows themselves.
//
// Tile: 8 rows of x (4 pairs) × 6 weight rows: 24 zmm accumulators, 4 registers of x and one
// weight row (and a temporary for F16's conversion) fit the 32; per 8 values of k, 6 broadcast loads (F16: and 6
// conversions, BF16: 6 byte shuffles), 4 loads of x and 24 FMAs. Decode (M < 4, no packed pairs)
// takes the AVX2 1×1 tile. On a core with two full-width 512-bit FMA units this does twice the
// multiply-adds of the AVX2 tile per instruction; a Zen 4 executes a 512-bit FMA as two 256-bit
// halves, where it gains nothing. matmul.cpp chooses by timing both (float_tile_speedup below).
// The speed of this tile was not measured by its author: no AVX-512 CPU was at hand.
//
// Compiled twice: into the library for AVX512F/BW/VL (VL: the 256- and 128-bit operations of the
// sums may use all 32 registers; the functions carry TOY_AVX512 and are only
// reached on the avx512vnni path), and into the tests against SIMDe's portable AVX-512
// (tests/avx512_emulated.cpp defines TOY_AVX512_EMULATED): there the same text runs in namespace
// detail::emulated, so that a CPU without AVX-512 checks its bits against the AVX2 kernel.
#if defined(TOY_AVX512_EMULATED)
// SIMDe and its shim are included by tests/avx512_emulated.cpp; the functions are compiled for
// the baseline like the rest of that file (the explicit FMAs stay fused: __builtin_fmaf).
#define TOY_AVX512
#define TOY_AVX512_NAMESPACE toy::kernels::detail::emulated
#else
#include "toy/kernels/immintrin512.h"
#define TOY_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define TOY_AVX512_NAMESPACE toy::kernels::detail
#endif

#include <algorithm>
#include <cstring>

#include "toy/kernels/internal.h"

#if !defined(TOY_AVX512_EMULATED)
#include <chrono>
#include <vector>
#endif

namespace TOY_AVX512_NAMESPACE {
namespace {

#define TOY_UNROLL _Pragma("GCC unroll 16")

// ((a0+a4) + (a2+a6)) + ((a1+a5) + (a3+a7)), as ggml's hsum_float_8 (and matmul_tiles.inc).
TOY_AVX512 inline float hsum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

TOY_AVX512 inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// A weight type: load8x2(p) gives w[0..8) as f32 in both halves of a zmm, load1 one value.
struct F32W {
  using T = float;
  TOY_AVX512 static __m512 load8x2(const float* p) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(p))));  // vbroadcastf64x4
  }
  static float load1(const float* p) { return *p; }
};
struct F16W {
  using T = uint16_t;
  TOY_AVX512 static __m512 load8x2(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(load128(p)));
  }
  // F16C in registers: a call (fp16_to_f32) in the tail would make GCC keep accumulators in memory.
  TOY_AVX512 static float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
};
struct BF16W {  // bfloat16 is the top half of an f32
  using T = uint16_t;
  // The 8 values in each 128-bit lane; one byte shuffle moves value 4·(lane mod 2) + j to the
  // high half of f32 j of the lane and zeroes the low half (control bytes 0x80).
  TOY_AVX512 static __m512 load8x2(const uint16_t* p) {
    alignas(64) static constexpr uint32_t kToHighHalves[16] = {
        0x01008080, 0x03028080, 0x05048080, 0x07068080, 0x09088080, 0x0b0a8080, 0x0d0c8080, 0x0f0e8080,
        0x01008080, 0x03028080, 0x05048080, 0x07068080, 0x09088080, 0x0b0a8080, 0x0d0c8080, 0x0f0e8080};
    const __m512i v = _mm512_broadcast_i32x4(load128(p));
    return _mm512_castsi512_ps(_mm512_shuffle_epi8(v, _mm512_load_si512(kToHighHalves)));
  }
  static float load1(const uint16_t* p) { return bf16_to_f32(*p); }
};

// P pairs of rows of x from pair p0 × C weight rows.
template <class W>
struct PairTile {
  template <int P, int C>
  TOY_AVX512 static void run(const Act& a, int64_t p0, const uint8_t* w, int64_t ws, float* y, int64_t ldy) {
    using T = typename W::T;
    const int64_t K = a.K, K8 = K / 8 * 8;
    const float* xp[P];  // pair p0 + p: block b (values 8b..8b+7 of both rows) at xp[p] + 16b
    const T* wr[C];
    __m512 acc[P][C];
    TOY_UNROLL
    for (int p = 0; p < P; ++p) xp[p] = a.pairs + (p0 + p) * 2 * K8;
    TOY_UNROLL
    for (int c = 0; c < C; ++c) wr[c] = reinterpret_cast<const T*>(w + c * ws);
    TOY_UNROLL
    for (int p = 0; p < P; ++p) TOY_UNROLL
    for (int c = 0; c < C; ++c) acc[p][c] = _mm512_setzero_ps();
    // The P pairs of x in registers and one weight row at a time (F16 needs a register more for
    // its conversion: 6 weight rows at a time left GCC spilling accumulators).
    for (int64_t k = 0; k < K8; k += 8) {
      __m512 xv[P];
      TOY_UNROLL
      for (int p = 0; p < P; ++p) xv[p] = _mm512_loadu_ps(xp[p] + 2 * k);
      TOY_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m512 wv = W::load8x2(wr[c] + k);
        TOY_UNROLL
        for (int p = 0; p < P; ++p) acc[p][c] = _mm512_fmadd_ps(wv, xv[p], acc[p][c]);
      }
    }
    // Each half as the AVX2 tile ends: hsum_float_8, then the tail in order.
    TOY_UNROLL
    for (int p = 0; p < P; ++p) TOY_UNROLL
    for (int c = 0; c < C; ++c) TOY_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int64_t m = 2 * (p0 + p) + h;
      if (m >= a.M) continue;  // the zero row that pads an odd M
      const __m512d v = _mm512_castps_pd(acc[p][c]);
      float s = hsum8(_mm256_castpd_ps(h == 0 ? _mm512_castpd512_pd256(v) : _mm512_extractf64x4_pd(v, 1)));
      const float* x = reinterpret_cast<const float*>(a.row(m));
      for (int64_t t = K8; t < K; ++t) s = __builtin_fmaf(W::load1(wr[c] + t), x[t], s);  // as the AVX2 tile
      y[m * ldy + c] = s;
    }
  }
};

// As matmul_tiles.inc's tiling: blocks of rows of x that stay in the L2 cache while every
// column group of the unit passes over them, full tiles, then 1-pair and 1-column ones.
constexpr int64_t kXBlockBytes = 192 << 10;

template <class W>
TOY_AVX512 void pair_columns(const Act& a, const uint8_t* w, int64_t ws, float* y, int64_t ldy, int64_t n) {
  constexpr int PB = 4, CB = 6;
  const int64_t pairs = (a.M + 1) / 2, pair_bytes = 2 * a.K * 4;
  const int64_t block = std::max<int64_t>(PB, kXBlockBytes / std::max<int64_t>(1, pair_bytes) / PB * PB);
  using Tile = PairTile<W>;
  for (int64_t p0 = 0; p0 < pairs; p0 += block) {
    const int64_t p1 = std::min(pairs, p0 + block);
    int64_t j = 0;
    for (; j + CB <= n; j += CB) {
      int64_t p = p0;
      for (; p + PB <= p1; p += PB) Tile::template run<PB, CB>(a, p, w + j * ws, ws, y + j, ldy);
      for (; p < p1; ++p) Tile::template run<1, CB>(a, p, w + j * ws, ws, y + j, ldy);
    }
    for (; j < n; ++j) {
      int64_t p = p0;
      for (; p + PB <= p1; p += PB) Tile::template run<PB, 1>(a, p, w + j * ws, ws, y + j, ldy);
      for (; p < p1; ++p) Tile::template run<1, 1>(a, p, w + j * ws, ws, y + j, ldy);
    }
  }
}

// Decode, without packed pairs: the AVX2 kernel (its 1×1 tile).
template <class W, DType kType>
void float_columns(const Act& a, const uint8_t* w, int64_t ws, float* y, int64_t ldy, int64_t n) {
  if (a.pairs)
    pair_columns<W>(a, w, ws, y, ldy, n);
  else
    ::toy::kernels::detail::avx2_column_kernel(kType).run(a, w, ws, y, ldy, n);
}

}  // namespace

NamedKernel avx512_float_column_kernel(DType wt) {
  switch (wt) {
    case DType::F32:
      return {float_columns<F32W, DType::F32>, "avx512 fma 8x6", true};
    case DType::F16:
      return {float_columns<F16W, DType::F16>, "avx512 f16c+fma 8x6", true};
    case DType::BF16:
      return {float_columns<BF16W, DType::BF16>, "avx512 fma 8x6", true};
    default:
      return {};
  }
}

void pack_row_pairs(const Act& a, float* out, int64_t p0, int64_t p1) {
  const int64_t K8 = a.K / 8 * 8;
  if (K8 == 0) return;  // K < 8: the tail alone, read from the rows (and out may be empty)
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t m = 2 * p + h;
      float* o = out + p * 2 * K8 + 8 * h;
      const float* x = reinterpret_cast<const float*>(a.row(m < a.M ? m : 0));
      for (int64_t k = 0; k < K8; k += 8) {
        if (m < a.M)
          std::memcpy(o + 2 * k, x + k, 8 * sizeof(float));
        else
          std::memset(o + 2 * k, 0, 8 * sizeof(float));
      }
    }
}

#if !defined(TOY_AVX512_EMULATED)
// Both tiles on a product whose x (64 KiB) and weights (≤ 48 KiB) stay in the L2 cache, each
// timed by the best of several runs, alternated: the AVX2 tile's time over the 512-bit tile's.
// About 2 ms.
double float_tile_speedup(DType wt) {
  constexpr int64_t M = 64, N = 48, K = 256;
  std::vector<float> x(size_t(M * K)), wf(size_t(N * K)), pairs(size_t(M * K));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 13) - 6) * 0.125f;  // exact in every format
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = float(int(i % 11) - 5) * 0.25f;
  std::vector<uint8_t> w(size_t(N * row_bytes(wt, K)));
  quantize(wt, wf.data(), w.data(), N * K);
  std::vector<float> y(size_t(M * N));
  const Act rows{x.data(), K * 4, M, K};
  Act paired = rows;
  paired.pairs = pairs.data();
  pack_row_pairs(rows, pairs.data(), 0, M / 2);
  const ColumnKernel avx2 = avx2_column_kernel(wt).run, avx512 = avx512_float_column_kernel(wt).run;
  auto seconds = [&](ColumnKernel kernel, const Act& a) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i) kernel(a, w.data(), row_bytes(wt, K), y.data(), N, N);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double t_avx2 = 1e30, t_avx512 = 1e30;
  for (int round = 0; round < 6; ++round) {
    t_avx2 = std::min(t_avx2, seconds(avx2, rows));
    t_avx512 = std::min(t_avx512, seconds(avx512, paired));
  }
  return t_avx2 / t_avx512;
}
#endif

}  // namespace TOY_AVX512_NAMESPACE
