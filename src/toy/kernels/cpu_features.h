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

// The tile of the F32/F16/BF16 prompt products (M ≥ 4) on the avx512vnni path, where the CPU has
// both: the AVX2 one (4 rows × 3 weight rows of 256-bit vectors) or the 512-bit one (8 × 6), with
// the same bits either way. `calibrate` (the default) times both at the first use of each dtype
// (matmul.cpp); `avx2` and `avx512` choose. TOY_FLOAT_TILE=avx2 or avx512 in the environment (read
// once, at first use) or set_float_tile sets it. BF16 on a CPU with AVX512_BF16 takes vdpbf16ps
// whatever this says.
enum class FloatTile { calibrate, avx2, avx512 };
FloatTile float_tile();
void set_float_tile(FloatTile t);

}  // namespace toy::kernels
