// tensor/quant.cpp — reference (de)quantization of GGUF rows, bit-exact with ggml.
//
// One function per format. Dequantization follows ggml-quants.c's dequantize_row_* (same
// operations in the same order, so the floats are identical); quantization follows the
// quantize_row_*_ref functions that llama-quantize uses when no importance matrix is given,
// so quantizing an F32 tensor reproduces llama-quantize's bytes. The K-quant quantizers
// (Q4_K, Q5_K, Q6_K: iterative scale search) are not implemented; Q8_K is, because it is the
// activation format of the K-quant matmuls.
//
// Notation per block: d = scale (IEEE half unless noted), m = min, q = stored integer.
// Legacy quants (32 values): element j < 16 lives in the low nibble of qs[j], element j + 16
// in the high nibble of qs[j]; the 5th bit of element j (Q5_*) is bit j of the u32 `qh`.
// This file is scalar and portable: the fast paths are in kernels/.
#include "toy/tensor/quant.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace toy {
namespace {

// ggml's nearest_int: round to nearest, ties to even, for |f| < 2^22. Adding 1.5·2^23 puts
// the integer part in the low mantissa bits (the FPU does the rounding).
int nearest_int(float f) {
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// ---------------------------------------------------------------------------------------------
// Scalars

void dequantize_f16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_f32(x[i]);
}

void dequantize_bf16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(x[i]);
}

void quantize_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void quantize_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

// ---------------------------------------------------------------------------------------------
// Q4_0: x = (q - 8)·d, q in [0, 15].

void dequantize_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < QK / 2; ++j) {
      y[j] = float((b[i].qs[j] & 0x0f) - 8) * d;
      y[j + QK / 2] = float((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

// max = the value of largest magnitude, with its sign; d = max / -8, so max maps to q = 0 and
// the other end of the range to 16 (clamped to 15); q = min(15, trunc(x/d + 8.5)).
void quantize_q4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK) {
    float amax = 0, max = 0;
    for (int j = 0; j < QK; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
    const float d = max / -8, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < QK / 2; ++j) {
      const uint8_t q0 = uint8_t(std::min<int>(15, int8_t(x[j] * id + 8.5f)));
      const uint8_t q1 = uint8_t(std::min<int>(15, int8_t(x[j + QK / 2] * id + 8.5f)));
      b[i].qs[j] = uint8_t(q0 | q1 << 4);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Q4_1: x = q·d + m, q in [0, 15].

void dequantize_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK) {
    const float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    for (int j = 0; j < QK / 2; ++j) {
      y[j] = float(b[i].qs[j] & 0x0f) * d + m;
      y[j + QK / 2] = float(b[i].qs[j] >> 4) * d + m;
    }
  }
}

// d = (max - min) / 15, m = min, q = min(15, trunc((x - min)/d + 0.5)).
void quantize_q4_1(const float* x, BlockQ4_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK; ++j) min = std::min(min, x[j]), max = std::max(max, x[j]);
    const float d = (max - min) / 15, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(min);
    for (int j = 0; j < QK / 2; ++j) {
      const uint8_t q0 = uint8_t(std::min<int>(15, int8_t((x[j] - min) * id + 0.5f)));
      const uint8_t q1 = uint8_t(std::min<int>(15, int8_t((x[j + QK / 2] - min) * id + 0.5f)));
      b[i].qs[j] = uint8_t(q0 | q1 << 4);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Q5_0: x = (q - 16)·d, q in [0, 31]; low 4 bits in qs (nibble layout as Q4_0), bit 4 of
// element j is bit j of qh.

void dequantize_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK) {
    const float d = fp16_to_f32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < QK / 2; ++j) {
      const int h0 = (qh >> j) << 4 & 0x10, h1 = (qh >> (j + 12)) & 0x10;  // bits j and j+16
      y[j] = float(((b[i].qs[j] & 0x0f) | h0) - 16) * d;
      y[j + QK / 2] = float(((b[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

// As Q4_0 with 32 levels: d = max / -16, q = min(31, trunc(x/d + 16.5)).
void quantize_q5_0(const float* x, BlockQ5_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK) {
    float amax = 0, max = 0;
    for (int j = 0; j < QK; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
    const float d = max / -16, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; ++j) {
      const uint8_t q0 = uint8_t(std::min<int>(31, int8_t(x[j] * id + 16.5f)));
      const uint8_t q1 = uint8_t(std::min<int>(31, int8_t(x[j + QK / 2] * id + 16.5f)));
      b[i].qs[j] = uint8_t((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= uint32_t(q0 >> 4) << j | uint32_t(q1 >> 4) << (j + QK / 2);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

// ---------------------------------------------------------------------------------------------
// Q5_1: x = q·d + m, q in [0, 31]; bit layout as Q5_0.

void dequantize_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK) {
    const float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < QK / 2; ++j) {
      const int h0 = (qh >> j) << 4 & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      y[j] = float((b[i].qs[j] & 0x0f) | h0) * d + m;
      y[j + QK / 2] = float((b[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

// d = (max - min) / 31, m = min, q = trunc((x - min)/d + 0.5).
void quantize_q5_1(const float* x, BlockQ5_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK; ++j) min = std::min(min, x[j]), max = std::max(max, x[j]);
    const float d = (max - min) / 31, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; ++j) {
      const uint8_t q0 = uint8_t((x[j] - min) * id + 0.5f);
      const uint8_t q1 = uint8_t((x[j + QK / 2] - min) * id + 0.5f);
      b[i].qs[j] = uint8_t((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= uint32_t(q0 >> 4 & 1) << j | uint32_t(q1 >> 4 & 1) << (j + QK / 2);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

// ---------------------------------------------------------------------------------------------
// Q8_0: x = q·d, q in [-127, 127].

void dequantize_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < QK; ++j) y[j] = float(b[i].qs[j]) * d;
  }
}

// d = amax / 127 (stored as half), q = roundf(x · (1/d)) (ties away from zero). The f32 d,
// not its half, is used for the division, as in ggml.
void quantize_q8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK) {
    float amax = 0;
    for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < QK; ++j) b[i].qs[j] = int8_t(std::round(x[j] * id));
  }
}

// ---------------------------------------------------------------------------------------------
// K-quants: a super-block of 256 values in sub-blocks, each with its own integer scale
// (and min) that multiplies the super-block's half-float d (and dmin).

// Q4_K/Q5_K: 8 sub-blocks of 32, each with a 6-bit scale sc and 6-bit min m, packed in 12
// bytes: for j < 4, sc = scales[j] & 63 and m = scales[j+4] & 63; for j >= 4 the low 4 bits
// come from the nibbles of scales[j+4] and the top 2 bits from the spare bits 6-7 of
// scales[j-4] (sc) and scales[j] (m).
void scale_min_k4(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = uint8_t((s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4);
    *m = uint8_t((s[j + 4] >> 4) | (s[j] >> 6) << 4);
  }
}

// Q4_K: x = d·sc·q − dmin·m, q in [0, 15]. The 128 bytes of qs hold 4 groups of 32 bytes;
// group g gives sub-block 2g (low nibbles) and sub-block 2g+1 (high nibbles).
void dequantize_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int g = 0; g < 4; ++g, q += 32) {
      uint8_t sc, m;
      scale_min_k4(2 * g, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(2 * g + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

// Q5_K: as Q4_K with q in [0, 31]; the 5th bit of element l of sub-block s is bit s of qh[l].
void dequantize_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int g = 0; g < 4; ++g, q += 32) {
      uint8_t sc, m;
      scale_min_k4(2 * g, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(2 * g + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      const int lo = 1 << (2 * g), hi = 1 << (2 * g + 1);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float((q[l] & 0x0f) + (b[i].qh[l] & lo ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float((q[l] >> 4) + (b[i].qh[l] & hi ? 16 : 0)) - m2;
    }
  }
}

// Q6_K: x = d·sc·(q − 32), q in [0, 63], 16 sub-blocks of 16 with int8 scales sc.
// Each half (128 values) uses 64 bytes of ql and 32 of qh: for l < 32, the four values
// l, l+32, l+64, l+96 take their low 4 bits from ql[l] (lo), ql[l+32] (lo), ql[l] (hi),
// ql[l+32] (hi), and their top 2 bits from bits 0-1, 2-3, 4-5, 6-7 of qh[l].
void dequantize_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (qh[l] >> 0 & 3) << 4) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (qh[l] >> 2 & 3) << 4) - 32;
        const int q3 = ((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

// Q8_K: x = d·q with d an f32, q in [-127, 127]; bsums[g] = Σ q over values 16g..16g+15
// (used by the K-quant dot products to apply the mins).
void dequantize_q8_k(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK_K)
    for (int j = 0; j < QK_K; ++j) y[j] = b[i].d * float(b[i].qs[j]);
}

// max = the value of largest magnitude with its sign; iscale = −127/max, q = min(127,
// nearest_int(iscale·x)), d = 1/iscale. (The negative scale is ggml's choice, kept for
// bit-exactness.) An all-zero block gets d = 0, q = 0.
void quantize_q8_k(const float* x, BlockQ8_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    float amax = 0, max = 0;
    for (int j = 0; j < QK_K; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    if (amax == 0) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j) b[i].qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * g + l];
      b[i].bsums[g] = int16_t(sum);
    }
    b[i].d = 1 / iscale;
  }
}

void check_length(const char* what, DType t, int64_t n) {
  if (n < 0 || n % info(t).block_size != 0)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) + " values is not a multiple of the " +
                                std::string(name(t)) + " block size " + std::to_string(info(t).block_size));
}

}  // namespace

void dequantize(DType t, const void* src, float* dst, int64_t n) {
  check_length("dequantize", t, n);
  const int64_t nb = n / info(t).block_size;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::F16: return dequantize_f16(static_cast<const uint16_t*>(src), dst, n);
    case DType::BF16: return dequantize_bf16(static_cast<const uint16_t*>(src), dst, n);
    case DType::Q4_0: return dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::Q4_1: return dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case DType::Q5_0: return dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case DType::Q5_1: return dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case DType::Q8_0: return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::Q4_K: return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::Q5_K: return dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
    case DType::Q6_K: return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
    case DType::Q8_K: return dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, nb);
    default: throw std::invalid_argument("dequantize: dtype " + std::string(name(t)) + " is not supported");
  }
}

void quantize(DType t, const float* src, void* dst, int64_t n) {
  check_length("quantize", t, n);
  const int64_t nb = n / info(t).block_size;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::F16: return quantize_f16(src, static_cast<uint16_t*>(dst), n);
    case DType::BF16: return quantize_bf16(src, static_cast<uint16_t*>(dst), n);
    case DType::Q4_0: return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case DType::Q4_1: return quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), nb);
    case DType::Q5_0: return quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), nb);
    case DType::Q5_1: return quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), nb);
    case DType::Q8_0: return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case DType::Q8_K: return quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), nb);
    default: throw std::invalid_argument("quantize: dtype " + std::string(name(t)) + " is not supported");
  }
}

bool can_quantize(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::Q8_K:
      return true;
    default:
      return false;
  }
}

}  // namespace toy
