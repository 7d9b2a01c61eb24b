// kernels/cpu_features.h — which SIMD path the kernels take, detected at run time.
//
// The library is compiled for baseline x86-64 (or any other CPU); the AVX2 kernels carry
// `target("avx2,fma,f16c")` attributes and are only called when the CPU has all three
// features, the AVX-512 VNNI ones (matmul_vnni.cpp) only when it also has AVX512F/BW/VL/VNNI
// and the OS saves the AVX-512 registers. TOY_SIMD=scalar or TOY_SIMD=avx2 in the environment
// (read once, at first use) or set_simd() caps the path, so tests can compare them.
#pragma once

#include <string>

namespace toy::kernels {

// Ordered: each path may use the instructions of the ones before it.
enum class Simd { scalar, avx2, avx512vnni };

bool cpu_has_avx2();        // AVX2, FMA and F16C all present
bool cpu_has_avx512vnni();  // AVX2 as above, AVX512F/BW/VL/VNNI, and the OS saves their registers
// AVX-512 VNNI as above and AVX512_BF16 (vdpbf16ps): the BF16 matmul of the avx512vnni path
// uses it when present.
bool cpu_has_avx512bf16();
Simd simd();               // the path kernels take now
void set_simd(Simd s);     // throws std::invalid_argument for a path the CPU lacks
std::string simd_level();  // "avx512vnni+avx2+fma+f16c", "avx2+fma+f16c" or "scalar"
// What the CPU (and OS) offers of what the kernels look for, whatever path is in use:
// "avx2 fma f16c", then "avx512f avx512bw avx512vl avx512vnni" and "avx512bf16" where present.
std::string cpu_simd_features();

}  // namespace toy::kernels
