// tests/vnni_emulated.cpp — the AVX-512 VNNI quantized tiles (src/toy/kernels/matmul_vnni.cpp and
// matmul_tiles.inc) compiled a second time against SIMDe's portable AVX-512 (tests/simde_avx512.h),
// in namespace toy::kernels::detail::emulated, so that a CPU without VNNI checks their bits against
// the AVX2 kernels (tests/test_kernels_avx512.cpp). Without the BF16 kernel (vdpbf16ps: its own
// bits, and masked loads SIMDe 0.7.4 lacks). Built only where CMake finds the headers.
#include "simde_avx512.h"

#define TOY_AVX512_EMULATED
#include "../src/toy/kernels/matmul_vnni.cpp"
