// tests/avx512_emulated.cpp — the 512-bit float tiles (src/toy/kernels/matmul_avx512.cpp) compiled
// a second time against SIMDe's portable AVX-512 (Debian's libsimde-dev, header-only), in namespace
// toy::kernels::detail::emulated, so that a CPU without AVX-512 checks their bits against the AVX2
// kernel (tests/test_kernels_avx512.cpp). Built only where CMake finds the headers (TOY_HAVE_SIMDE).
//
// SIMDe 0.7.4 lacks a few of the intrinsics the kernels use; the shim below provides them from
// SIMDe's own pieces. Its 512-bit FMA without native AVX-512 is a multiply then an add (two
// roundings): replaced by a fused one, as the instruction is (the test checks a case where the
// two differ). Everything here is compiled for the baseline instruction set (no target
// attributes), so 512-bit vectors pass between functions in one ABI (CMake turns -Wpsabi off).
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>

#include <cmath>

namespace toy_simde_shim {

// vcvtph2ps zmm: 16 halves to f32, as two 8-value conversions.
inline simde__m512 cvtph_ps_512(simde__m256i h) {
  return simde_mm512_insertf32x8(simde_mm512_castps256_ps512(simde_mm256_cvtph_ps(simde_mm256_castsi256_si128(h))),
                                 simde_mm256_cvtph_ps(simde_mm256_extracti128_si256(h, 1)), 1);
}

// vcvtph2ps on one half.
inline float cvtsh_ss(unsigned short h) { return simde_mm_cvtss_f32(simde_mm_cvtph_ps(simde_mm_cvtsi32_si128(h))); }

// vfmadd231ps zmm: one rounding per lane.
inline simde__m512 fmadd_ps_512(simde__m512 a, simde__m512 b, simde__m512 c) {
  simde__m512_private r = simde__m512_to_private(a);
  const simde__m512_private b_ = simde__m512_to_private(b), c_ = simde__m512_to_private(c);
  for (int i = 0; i < 16; ++i) r.f32[i] = std::fma(r.f32[i], b_.f32[i], c_.f32[i]);
  return simde__m512_from_private(r);
}

}  // namespace toy_simde_shim

#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps(h) toy_simde_shim::cvtph_ps_512(h)
#undef _cvtsh_ss
#define _cvtsh_ss(h) toy_simde_shim::cvtsh_ss(h)
#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps(a, b, c) toy_simde_shim::fmadd_ps_512(a, b, c)

#define TOY_AVX512_EMULATED
#include "../src/toy/kernels/matmul_avx512.cpp"
