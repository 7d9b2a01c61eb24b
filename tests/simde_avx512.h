// tests/simde_avx512.h — SIMDe's portable AVX-512 (Debian's libsimde-dev, header-only) with
// native names, for the kernel files the tests compile a second time (avx512_emulated.cpp,
// vnni_emulated.cpp; see there).
//
// SIMDe 0.7.4 lacks a few of the intrinsics the kernels use; the shim below provides them from
// SIMDe's own pieces. Its 512-bit FMA without native AVX-512 is a multiply then an add (two
// roundings), and so are its 256- and 128-bit ones without FMA: replaced by fused ones, as the
// instructions are (KernelMatmul.Avx512FloatTile…
// Emulated checks a case where the two differ). Everything that includes this is compiled for the
// baseline instruction set (no target attributes), so 512-bit vectors pass between functions in
// one ABI (CMake turns -Wpsabi off for those files).
#pragma once

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

// vfmadd231ps ymm and xmm (the VNNI tiles' scale FMAs), fused likewise.
inline simde__m256 fmadd_ps_256(simde__m256 a, simde__m256 b, simde__m256 c) {
  simde__m256_private r = simde__m256_to_private(a);
  const simde__m256_private b_ = simde__m256_to_private(b), c_ = simde__m256_to_private(c);
  for (int i = 0; i < 8; ++i) r.f32[i] = std::fma(r.f32[i], b_.f32[i], c_.f32[i]);
  return simde__m256_from_private(r);
}
inline simde__m128 fmadd_ps_128(simde__m128 a, simde__m128 b, simde__m128 c) {
  simde__m128_private r = simde__m128_to_private(a);
  const simde__m128_private b_ = simde__m128_to_private(b), c_ = simde__m128_to_private(c);
  for (int i = 0; i < 4; ++i) r.f32[i] = std::fma(r.f32[i], b_.f32[i], c_.f32[i]);
  return simde__m128_from_private(r);
}

}  // namespace toy_simde_shim

#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps(h) toy_simde_shim::cvtph_ps_512(h)
#undef _cvtsh_ss
#define _cvtsh_ss(h) toy_simde_shim::cvtsh_ss(h)
#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps(a, b, c) toy_simde_shim::fmadd_ps_512(a, b, c)
#undef _mm256_fmadd_ps
#define _mm256_fmadd_ps(a, b, c) toy_simde_shim::fmadd_ps_256(a, b, c)
#undef _mm_fmadd_ps
#define _mm_fmadd_ps(a, b, c) toy_simde_shim::fmadd_ps_128(a, b, c)
