// tests/avx512_emulated.cpp — the 512-bit float tiles (src/toy/kernels/matmul_avx512.cpp) compiled
// a second time against SIMDe's portable AVX-512 (tests/simde_avx512.h), in namespace
// toy::kernels::detail::emulated, so that a CPU without AVX-512 checks their bits against the AVX2
// kernel (tests/test_kernels_avx512.cpp). Built only where CMake finds the headers (TOY_HAVE_SIMDE).
#include "simde_avx512.h"

#define TOY_AVX512_EMULATED
#include "../src/toy/kernels/matmul_avx512.cpp"
