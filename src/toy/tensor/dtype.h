// tensor/dtype.h — element types of toy tensors, numbered exactly as GGUF/ggml numbers them.
//
// A dtype is either a plain scalar (F32, F16, BF16, I32, ...) or a *block* type: `block_size`
// consecutive values of a row are stored together in `type_size` bytes (Q8_0: 32 values in
// 34 bytes). Block layouts are bit-exact with GGUF; the structs are in tensor/quant.h.
// Rows of a block-quantized tensor must be a multiple of the block size.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace toy {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct DTypeInfo {
  DType type;
  std::string_view name;  // "Q8_0", as llama.cpp prints it
  int64_t block_size;     // values per block (1 for scalars)
  int64_t type_size;      // bytes per block
  bool quantized;
};

// Metadata of a dtype known to GGUF; nullopt for an id toy does not know.
std::optional<DTypeInfo> dtype_info(uint32_t id);
const DTypeInfo& info(DType t);
inline std::string_view name(DType t) { return info(t).name; }

// Bytes needed for `n` values (n must be a multiple of the block size; checked by callers).
inline int64_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = info(t);
  return n / i.block_size * i.type_size;
}

// Whether toy can dequantize / multiply with this dtype (the foundation set).
bool dtype_supported(DType t);

// IEEE half and bfloat16 conversions (round to nearest even; NaN preserved).
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 64);  // quiet NaN
  return uint16_t((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

}  // namespace toy
