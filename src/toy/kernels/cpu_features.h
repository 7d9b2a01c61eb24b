// kernels/cpu_features.h — which SIMD path the kernels take, detected at run time.
//
// The library is compiled for baseline x86-64 (or any other CPU); the AVX2 kernels carry
// `target("avx2,fma,f16c")` attributes and are only called when the CPU has all three
// features. TOY_SIMD=scalar in the environment (read once, at first use) or set_simd()
// forces the portable path, so tests can compare the two.
#pragma once

#include <string>

namespace toy::kernels {

enum class Simd { scalar, avx2 };

bool cpu_has_avx2();      // AVX2, FMA and F16C all present
Simd simd();              // the path kernels take now
void set_simd(Simd s);    // throws std::invalid_argument for avx2 on a CPU without it
std::string simd_level(); // "avx2+fma+f16c" or "scalar"

}  // namespace toy::kernels
