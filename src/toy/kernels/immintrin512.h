// kernels/immintrin512.h — <immintrin.h> for the files with AVX-512 kernels (matmul_vnni.cpp,
// matmul_avx512.cpp).
//
// GCC 12 warns, inside its own headers, that the undefined source operand of unmasked
// 512-bit intrinsics (_mm512_undefined_*, self-initialized) is uninitialized (GCC bug 105593).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
