// tensor/quant.h — GGUF block layouts (bit-exact) and row-wise (de)quantization.
//
// Each struct below is one block as it lies in a GGUF file; `d` scales are IEEE half floats
// stored as uint16_t. Dequantization is the reference definition of each format; the fast
// matmul kernels in kernels/ must agree with it.
#pragma once

#include <cstdint>

#include "toy/tensor/dtype.h"

namespace toy {

inline constexpr int QK = 32;     // values per block, legacy quants
inline constexpr int QK_K = 256;  // values per super-block, K-quants

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[QK / 2];
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[QK / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[QK / 2];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[QK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[QK];
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[QK_K / 2];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// dst[0..n) = the values of `n` consecutive elements of type `t` starting at src.
// n must be a multiple of the block size. Throws for dtypes toy cannot decode.
void dequantize(DType t, const void* src, float* dst, int64_t n);

// Quantize n floats into blocks of type `t` (F32, F16, BF16, Q8_0, Q4_0, Q8_K and the others
// where implemented). n must be a multiple of the block size.
void quantize(DType t, const float* src, void* dst, int64_t n);

// Whether quantize() supports `t`.
bool can_quantize(DType t);

}  // namespace toy
