// kernels/matmul_vnni.cpp — the quantized column kernels of matmul_avx2.cpp with AVX-512 VNNI
// integer dot products.
//
// Same tiles (matmul_tiles.inc), same 256-bit vectors, same lanes: only the exact integer dot
// products are computed with fewer instructions, so every output has the bits of the AVX2
// kernel. Compiled for baseline x86-64 like matmul_avx2.cpp; the functions carry TOY_VNNI and
// are only reached when cpu_features says the CPU (and OS) has AVX512F/BW/VL/VNNI. The EVEX
// encodings also give the tiles 32 vector registers instead of 16.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "toy/kernels/internal.h"

#define TOY_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace toy::kernels::detail {
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
  struct Row {
    __m256i x;
    __m256i minus_offset_sums;  // −off·(x[4l] + … + x[4l+3]) in int32 lane l
  };
  template <class W> static constexpr int kOffset = W::kOffset != 0 ? W::kOffset : 128;

  template <class W> TOY_VNNI static __m256i weights(const typename W::Block& b) {
    const __m256i q = W::q(b);
    if constexpr (W::kOffset == 0) return _mm256_xor_si256(q, _mm256_set1_epi8(char(0x80)));
    else return q;
  }
  template <class W> TOY_VNNI static Row row(__m256i x) {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i offset_sums = _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(char(kOffset<W>)), x);
    return {x, _mm256_sub_epi32(zero, offset_sums)};
  }
  template <class W> TOY_VNNI static __m256i dot(__m256i u, const typename W::Block&, const Row& x) {
    return _mm256_dpbusd_epi32(x.minus_offset_sums, u, x.x);
  }
  TOY_VNNI static __m256i add_pairs(__m256i s, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(s, a, b); }
};

#include "toy/kernels/matmul_tiles.inc"

}  // namespace

ColumnKernel vnni_column_kernel(DType wt) { return quantized_column_kernel(wt); }

}  // namespace toy::kernels::detail
