// kernels/internal.h — what the kernel files share; not part of the kernels API.
//
// matmul_wt runs in two steps: the activations x are converted once to
// activation_dtype(wt) (matmul.cpp), then a column kernel computes y[:, n0:n1) from the
// weight rows n0..n1 (scalar kernels in matmul.cpp, AVX2 ones in matmul_avx2.cpp, AVX-512 VNNI
// ones in matmul_vnni.cpp, the 512-bit F32/F16/BF16 prompt tiles in matmul_avx512.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "toy/tensor/quant.h"

namespace toy::kernels::detail {

// The converted activations: M rows, `stride` bytes apart, each K values in the activation
// format: f32 (already rounded to F16/BF16 when the weights are), Q8_0 or BlockQ8_K.
// Q8_0 activations are split for the kernels: a row holds its K int8 values (stride K), and
// the block scales, as f32, lie block-major in `scales` — block b of row m at scales[b·M + m],
// so one load gives the scales of neighbouring rows.
// F16 prompts on the AVX2 path (M ≥ kPromptRows) also get the rounded rows as halves, K apart,
// in `rows16`: the prompt tiles stream x from L2 for every weight row triple, and halves halve
// that stream (widening a half to f32 is exact, so the values and the bits are those of the f32
// rows, which every other kernel reads). BF16 keeps f32 rows: widening a bfloat16 takes two
// instructions, which cost more than the bytes save (pp512 products measured 15–20% slower).
struct Act {
  const void* data;
  int64_t stride;
  int64_t M, K;
  const float* scales = nullptr;     // Q8_0 only
  const uint16_t* rows16 = nullptr;  // F16 prompts on the AVX2 path (above)
  // f32 rows packed for matmul_avx512.cpp's tiles (set only for them, and only for M ≥ 4): pair p
  // of rows 2p, 2p+1 at pairs[p·2·K8 …], K8 = K rounded down to a multiple of 8; block b of the
  // pair is row 2p's values 8b..8b+7, then row 2p+1's (zeros past an odd M).
  const float* pairs = nullptr;
  const uint8_t* row(int64_t m) const { return static_cast<const uint8_t*>(data) + m * stride; }
  float scale(int64_t m, int64_t b) const { return scales[b * M + m]; }
};

// Computes y[m, j] for all m < M and j < n, from the n weight rows at w (w_stride bytes apart);
// y has row stride ldy. Each output element is computed the same way whatever n and M are.
using ColumnKernel = void (*)(const Act& x, const uint8_t* w, int64_t w_stride, float* y, int64_t ldy, int64_t n);

// A column kernel and its name for reports (matmul_kernel_name, `toy bench --json`): the
// instruction set, the dot product and the prompt tile, rows of x × weight rows (decode, M < 4,
// always takes 1 × 1), e.g. "avx2 maddubs 4x2". Given where the kernel is chosen, so the two agree.
// Products with at least this many rows of x take the prompt tiles (R = 4 rows of x per tile);
// fewer, the 1 × 1 decode tile.
constexpr int64_t kPromptRows = 4;

struct NamedKernel {
  ColumnKernel run = nullptr;
  const char* name = nullptr;
  bool row_pairs = false;  // reads Act::pairs for M ≥ 4 (pack_row_pairs)
};

// A buffer of at least `bytes` for the calling thread's kernels, reused by its next call (the
// Q4_0/Q5_0 prompt kernels unpack weight rows into it).
uint8_t* thread_scratch(size_t bytes);

// AVX2 column kernel for weights of type wt (null for types without one). The F32 kernel also
// serves the types that are dequantized to f32 row by row.
NamedKernel avx2_column_kernel(DType wt);
// AVX-512 VNNI column kernel for the quantized types, bit-identical to the AVX2 kernel's, and
// for BF16 where the CPU has AVX512_BF16 (vdpbf16ps: other bits than the AVX2 kernel's); null
// for the others, which take the AVX2 kernel.
NamedKernel vnni_column_kernel(DType wt);
// The 512-bit prompt tile (8 rows of x × 6 weight rows) for F32/F16/BF16 weights, with the AVX2
// kernel's bits (null for other types); it reads Act::pairs, and without them (decode) runs the
// AVX2 kernel.
NamedKernel avx512_float_column_kernel(DType wt);
// Packs pairs [p0, p1) of the rows of a (f32) into out as Act::pairs lays them out.
void pack_row_pairs(const Act& a, float* out, int64_t p0, int64_t p1);
// The AVX2 kernel's time over the 512-bit tile's on a small product in the L2 cache (a few ms).
double float_tile_speedup(DType wt);
// out[i] = x[i] rounded to the nearest half (F16C; same result as f32_to_fp16), and that half
// to out16[i] where out16 is not null.
void avx2_round_to_f16(const float* x, float* out, uint16_t* out16, int64_t n);
// x[0, K) as Q8_0 activations: the values to q, block b's scale to d[b·d_stride]; the same
// bits as the portable quantize_row_q8_0_act in matmul.cpp.
void avx2_quantize_q8_0(const float* x, int8_t* q, float* d, int64_t d_stride, int64_t K);

}  // namespace toy::kernels::detail
