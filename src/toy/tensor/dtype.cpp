// tensor/dtype.cpp — the dtype table and scalar float conversions.
#include "toy/tensor/dtype.h"

#include <array>
#include <stdexcept>
#include <string>

namespace toy {
namespace {

// Sizes from the GGUF specification (ggml.c's type_traits).
constexpr std::array kTable = {
    DTypeInfo{DType::F32, "F32", 1, 4, false},      DTypeInfo{DType::F16, "F16", 1, 2, false},
    DTypeInfo{DType::Q4_0, "Q4_0", 32, 18, true},   DTypeInfo{DType::Q4_1, "Q4_1", 32, 20, true},
    DTypeInfo{DType::Q5_0, "Q5_0", 32, 22, true},   DTypeInfo{DType::Q5_1, "Q5_1", 32, 24, true},
    DTypeInfo{DType::Q8_0, "Q8_0", 32, 34, true},   DTypeInfo{DType::Q8_1, "Q8_1", 32, 36, true},
    DTypeInfo{DType::Q2_K, "Q2_K", 256, 84, true},  DTypeInfo{DType::Q3_K, "Q3_K", 256, 110, true},
    DTypeInfo{DType::Q4_K, "Q4_K", 256, 144, true}, DTypeInfo{DType::Q5_K, "Q5_K", 256, 176, true},
    DTypeInfo{DType::Q6_K, "Q6_K", 256, 210, true}, DTypeInfo{DType::Q8_K, "Q8_K", 256, 292, true},
    DTypeInfo{DType::I8, "I8", 1, 1, false},        DTypeInfo{DType::I16, "I16", 1, 2, false},
    DTypeInfo{DType::I32, "I32", 1, 4, false},      DTypeInfo{DType::I64, "I64", 1, 8, false},
    DTypeInfo{DType::F64, "F64", 1, 8, false},      DTypeInfo{DType::BF16, "BF16", 1, 2, false},
};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t id) {
  for (const DTypeInfo& i : kTable)
    if (uint32_t(i.type) == id) return i;
  return std::nullopt;
}

const DTypeInfo& info(DType t) {
  for (const DTypeInfo& i : kTable)
    if (i.type == t) return i;
  throw std::logic_error("unknown dtype id " + std::to_string(uint32_t(t)));
}

bool dtype_supported(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K:
      return true;
    default:
      return false;
  }
}

float fp16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while (!(mant & 0x400));
    bits = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;   // nan
  if (abs >= 0x477ff000) return sign | 0x7c00;  // overflow (>= 65520) -> inf
  if (abs < 0x38800000) {                       // subnormal half or zero
    if (abs < 0x33000000) return sign;          // < 2^-25 rounds to 0
    const uint32_t e = abs >> 23, m = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t half = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | uint16_t(half);
  }
  uint32_t r = abs + 0xfff + ((abs >> 13) & 1);  // round mantissa to 10 bits, RNE
  return sign | uint16_t((r - 0x38000000) >> 13);
}

}  // namespace toy
