// kernels/matmul_vnni.cpp — the quantized column kernels of matmul_avx2.cpp with AVX-512 VNNI
// integer dot products.
//
// Same tiles (matmul_tiles.inc), same 256-bit vectors, same lanes: only the exact integer dot
// products are computed with fewer instructions, so every output has the bits of the AVX2
// kernel. Compiled for baseline x86-64 like matmul_avx2.cpp; the functions carry TOY_VNNI and
// are only reached when cpu_features says the CPU (and OS) has AVX512F/BW/VL/VNNI. The EVEX
// encodings also give the tiles 32 vector registers instead of 16.
//
// Also, where the CPU has AVX512_BF16, a 512-bit BF16 kernel with vdpbf16ps (at the end; its
// own bits, not the AVX2 kernel's).

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/internal.h"

#if defined(TOY_AVX512_EMULATED)
// Compiled again into the tests against SIMDe (tests/vnni_emulated.cpp), for the baseline, in
// namespace detail::emulated, without the BF16 kernel.
#define TOY_VNNI
#define TOY_VNNI_NAMESPACE toy::kernels::detail::emulated
#else
#include "toy/kernels/immintrin512.h"
#define TOY_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define TOY_VNNI_NAMESPACE toy::kernels::detail
#endif

namespace TOY_VNNI_NAMESPACE {
namespace {

#define TOY_TARGET TOY_VNNI

// The integer dot products of matmul_tiles.inc with VNNI: dpbusd adds to each int32 lane l the
// 4 products of unsigned bytes u[4l..4l+3] and signed bytes x[4l..4l+3] (exact, no int16 step);
// dpwssd adds the 2 products of int16 pairs, as madd + add.
//
// The unsigned operand is the stored q for Q4_0/Q5_0 and w + 128 (the sign bit flipped) for
// Q8_0, so Σ w·x = Σ u·x − off·Σ x with off = kOffset or 128. The second sum belongs to the row
// of x alone: computed once per block of a row, it is the accumulator dpbusd starts from for
// every weight row of the tile.
struct Isa {
  // 4 rows × 4 columns: 16 accumulators and 4 + 4 weight registers fit the 32 of AVX-512, and
  // each row of x serves 4 weight rows (prompts ~10% faster than 4 × 2 on a Zen 4).
  static constexpr int kQ8Columns = 4;
  static constexpr const char* kQ8Name = "avx512vnni vpdpbusd 4x4";  // the Q4_0/Q5_0/Q8_0 tile
  static constexpr const char* kKName = "avx512vnni vpdpwssd 4x1";   // the K-quant tile
  struct Row {
    __m256i x;
    __m256i minus_offset_sums;  // −off·(x[4l] + … + x[4l+3]) in int32 lane l
  };
  template <class W>
  static constexpr int kOffset = W::kOffset != 0 ? W::kOffset : 128;

  template <class W>
  TOY_VNNI static __m256i weights(const typename W::Block& b) {
    const __m256i q = W::q(b);
    if constexpr (W::kOffset == 0)
      return _mm256_xor_si256(q, _mm256_set1_epi8(char(0x80)));
    else
      return q;
  }
  template <class W>
  TOY_VNNI static Row row(__m256i x) {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i offset_sums = _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(char(kOffset<W>)), x);
    return {x, _mm256_sub_epi32(zero, offset_sums)};
  }
  template <class W>
  TOY_VNNI static __m256i dot(__m256i u, const typename W::Block&, const Row& x) {
    return _mm256_dpbusd_epi32(x.minus_offset_sums, u, x.x);
  }
  TOY_VNNI static __m256i add_pairs(__m256i s, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(s, a, b); }
};

#include "toy/kernels/matmul_tiles.inc"

#if !defined(TOY_AVX512_EMULATED)
// ---------------------------------------------------------------------------------------------
// BF16 weights with AVX512_BF16 (F32 and F16 take the AVX2 kernels: Zen 4 executes a 512-bit
// FMA as two 256-bit ones, and 16-lane versions of those tiles measured no faster there, F16
// ~20% slower). vdpbf16ps multiplies 32 pairs of bfloat16 and adds products 2l and 2l+1 to f32
// lane l: twice the multiply-adds of an FMA per instruction, and no widening of the weights.
// (Products of bfloat16 are exact in f32; the instruction treats subnormal inputs and results
// as zero and rounds to nearest-even whatever MXCSR says.) One step takes 32 values of k, so
// lane l accumulates k ≡ 2l, 2l+1 (mod 32); the row of x, bfloat16 values kept as f32, is
// packed to bfloat16 once per step and tile by keeping the high halves (exact; one vpermt2w,
// ~6% faster than vcvtne2ps2bf16); the last K mod 32 values come as one
// more step of masked loads (zeros elsewhere, which add nothing); then lane l + 8 is added to
// lane l and the 8 lanes summed as hsum_float_8. Other bits than the AVX2 kernel's (8 lanes,
// FMA, an in-order tail), the same bits for every tile shape, M and n. Decode's 1 × 1 tile asks
// for the line kDecodePrefetchBytes ahead, as the other decode tiles do (without it BF16 decode
// read 5 GB/s on a Zen 5 where F32 read 19).
#define TOY_BF16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16")))

TOY_VNNI inline float hsum(__m512 v) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), hi));
}

// The lanes of the 16 values from k on that lie below K.
TOY_VNNI inline __mmask16 step_mask(int64_t k, int64_t K) {
  return K - k >= 16 ? __mmask16(0xffff) : K <= k ? __mmask16(0) : __mmask16((1u << (K - k)) - 1);
}

struct BF16DotTile {
  template <int R, int C>
  TOY_BF16 static void run(const Act& a, int64_t m, const uint8_t* w, int64_t ws, float* y, int64_t ldy) {
    const int64_t K = a.K;
    const float* x[R];
    const uint16_t* wr[C];
    __m512 acc[R][C];
    TOY_UNROLL
    for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const float*>(a.row(m + r));
    TOY_UNROLL
    for (int c = 0; c < C; ++c) wr[c] = reinterpret_cast<const uint16_t*>(w + c * ws);
    TOY_UNROLL
    for (int r = 0; r < R; ++r) TOY_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    // Word i of two vectors of f32 (words 0-31, 32-63) → word 2i + 1: the high halves.
    alignas(64) static constexpr int16_t kHighHalves[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                                            23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                                            45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
    const __m512i high_halves = _mm512_load_si512(kHighHalves);
    for (int64_t k = 0; k < K; k += 32) {
      const __mmask16 lo = step_mask(k, K), hi = step_mask(k + 16, K);
      const __mmask32 mask = __mmask32(lo) | __mmask32(hi) << 16;
      if constexpr (R == 1 && C == 1) prefetch_ahead<64>(wr[0] + k);  // decode: a step reads one line
      __m512bh wv[C];
      TOY_UNROLL
      for (int c = 0; c < C; ++c) wv[c] = (__m512bh)_mm512_maskz_loadu_epi16(mask, wr[c] + k);
      TOY_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512i x_lo = _mm512_maskz_loadu_epi32(lo, x[r] + k), x_hi = _mm512_maskz_loadu_epi32(hi, x[r] + k + 16);
        const __m512bh xv = (__m512bh)_mm512_permutex2var_epi16(x_lo, high_halves, x_hi);
        TOY_UNROLL
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], wv[c], xv);
      }
    }
    TOY_UNROLL
    for (int r = 0; r < R; ++r) TOY_UNROLL
    for (int c = 0; c < C; ++c) y[(m + r) * ldy + c] = hsum(acc[r][c]);
  }
};

#endif  // !TOY_AVX512_EMULATED

}  // namespace

// 4 rows × 6 weight rows: 24 accumulators, 6 weight registers and a row of x fill the 32
// (column units come in multiples of 12).
NamedKernel vnni_column_kernel(DType wt) {
#if !defined(TOY_AVX512_EMULATED)
  if (wt == DType::BF16)
    return cpu_has_avx512bf16() ? NamedKernel{columns<BF16DotTile, 4, 6>, "avx512bf16 vdpbf16ps 4x6"} : NamedKernel{};
#endif
  return quantized_column_kernel(wt);
}

}  // namespace TOY_VNNI_NAMESPACE
