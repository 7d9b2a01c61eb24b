// tensor/quant.cpp — reference (de)quantization of GGUF rows, bit-exact with ggml.
//
// One function per format. Dequantization follows ggml-quants.c's dequantize_row_* (same
// operations in the same order, so the floats are identical); quantization follows the
// quantize_row_*_ref functions that llama-quantize uses when no importance matrix is given,
// so quantizing an F32 tensor reproduces llama-quantize's bytes. Q8_K (the activation format
// of the K-quant matmuls) has no weight quantizer in llama-quantize; ggml's reference is used.
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

// ---------------------------------------------------------------------------------------------
// K-quant quantizers: ggml's quantize_row_q{4,5,6}_K_ref (what llama-quantize writes without an
// importance matrix). Each sub-block first gets its own best f32 scale (and min) by a small
// search; then those are rounded to 6-bit (Q4_K/Q5_K) or 8-bit (Q6_K) multiples of the
// super-block's half d (and dmin), and the values are re-quantized with the rounded scales.
// The arithmetic is ggml's, operation by operation (no fused multiply-adds: this file is built
// for baseline x86-64), so the bytes are llama-quantize's.

// Fits x ≈ scale·L − m over 32 values, L in [0, nmax], m ≥ 0 (returned in *m), minimizing
// Σ w·(scale·L − m − x)²: starting from the min/max grid, tries nstep + 1 grids with
// (nmax + rmin + 0.1·is) steps over [min, max], and for each grid the least-squares scale and
// min of its levels (min clamped to ≤ 0 in x, i.e. m ≥ 0). ggml's make_qkx2_quants.
float fit_scale_min(int nmax, const float* x, const float* w, uint8_t* L, float* m, float rmin, int nstep) {
  constexpr int n = 32;
  float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t(0));
    *m = -min;
    return 0;
  }
  float iscale = float(nmax) / (max - min), scale = 1 / iscale, best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = uint8_t(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * float(L[i]) + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  uint8_t Laux[n];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + 0.1f * float(is) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = uint8_t(l);
      sum_l += w[i] * float(l);
      sum_l2 += w[i] * float(l) * float(l);
      sum_xl += w[i] * float(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * float(Laux[i]) + this_min - x[i];
      error += w[i] * (diff * diff);
    }
    if (error < best_error) {
      std::copy(Laux, Laux + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *m = -min;
  return scale;
}

// Q4_K/Q5_K, one super-block: fits each sub-block (weights w = rms(sub-block) + |x|), packs the
// 6-bit scales and mins (layout of scale_min_k4) with d = max scale/63, dmin = max min/63, and
// leaves in L the levels 0..nmax of the 256 values under the rounded scales.
template <class Block>
void quantize_scales_k4(const float* x, Block& b, uint8_t* L, int nmax, float rmin, int nstep) {
  float scales[8], mins[8], w[32], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xj[l] * xj[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xj[l]);
    scales[j] = fit_scale_min(nmax, xj, w, L + 32 * j, &mins[j], rmin, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(b.scales, 0, sizeof b.scales);
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      b.scales[j] |= ls;
      b.scales[j + 4] |= lm;
    } else {
      b.scales[j + 4] = uint8_t((ls & 0x0f) | (lm & 0x0f) << 4);
      b.scales[j - 4] |= uint8_t((ls >> 4) << 6);
      b.scales[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  b.d = f32_to_fp16(max_scale / 63.f);
  b.dmin = f32_to_fp16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {  // a sub-block whose scale rounds to 0 keeps its fitted levels
    uint8_t sc, m;
    scale_min_k4(j, b.scales, &sc, &m);
    const float d = fp16_to_f32(b.d) * float(sc);
    if (d == 0) continue;
    const float dm = fp16_to_f32(b.dmin) * float(m);
    for (int l = 0; l < 32; ++l) L[32 * j + l] = uint8_t(std::clamp(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    uint8_t L[QK_K];
    quantize_scales_k4(x, b[i], L, 15, -1.0f, 20);
    for (int g = 0; g < 4; ++g)  // sub-blocks 2g (low nibbles) and 2g+1 (high nibbles)
      for (int l = 0; l < 32; ++l) b[i].qs[32 * g + l] = uint8_t(L[64 * g + l] | L[64 * g + 32 + l] << 4);
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    uint8_t L[QK_K];
    quantize_scales_k4(x, b[i], L, 31, -0.5f, 15);
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int s = 0; s < 8; ++s)  // low 4 bits as Q4_K, bit 4 of value l of sub-block s in bit s of qh[l]
      for (int l = 0; l < 32; ++l) {
        const uint8_t q = L[32 * s + l];
        uint8_t& byte = b[i].qs[32 * (s / 2) + l];
        byte = s % 2 ? uint8_t(byte | (q & 0x0f) << 4) : uint8_t(q & 0x0f);
        b[i].qh[l] |= uint8_t((q >> 4) << s);
      }
  }
}

// Fits x ≈ scale·(L − 32) over 16 values, L − 32 in [−32, 31], minimizing Σ x²·(scale·l − x)²:
// the grid through the value of largest magnitude and the 18 grids with 32 ± 0.1·is steps
// there, each with its least-squares scale. ggml's make_qx_quants (rmse_type 1, no weights).
float fit_scale_q6(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 32;
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  if (amax < 1e-15f) {  // ggml's GROUP_MAX_EPS
    std::fill(L, L + n, int8_t(0));
    return 0;
  }
  // Σ w·x·l and Σ w·l² for the grid of step 1/iscale (w = x²); fills L when asked.
  auto sums = [&](float iscale, float* sumlx, float* suml2, bool fill) {
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      if (fill) L[i] = int8_t(l + nmax);
      const float w = x[i] * x[i];
      *sumlx += w * x[i] * float(l);
      *suml2 += w * float(l) * float(l);
    }
  };
  float sumlx, suml2;
  sums(float(-nmax) / max, &sumlx, &suml2, true);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(float(nmax) + 0.1f * float(is)) / max;
    sums(iscale, &sumlx, &suml2, false);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      sums(iscale, &sumlx, &suml2, true);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q6_K: 16 sub-block scales rounded to int8 multiples of d = −max/128 (max: the scale of
// largest magnitude, with its sign), then q = clamp(round(x / (d·sc)), −32, 31) + 32.
void quantize_q6_k(const float* x, BlockQ6_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    int8_t L[QK_K];
    float scales[16], max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < 16; ++g) {
      scales[g] = fit_scale_q6(x + 16 * g, L + 16 * g);
      if (std::fabs(scales[g]) > max_abs_scale) max_abs_scale = std::fabs(scales[g]), max_scale = scales[g];
    }
    if (max_abs_scale < 1e-15f) {
      std::memset(&b[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    b[i].d = f32_to_fp16(1 / iscale);
    for (int g = 0; g < 16; ++g) b[i].scales[g] = int8_t(std::min(127, nearest_int(iscale * scales[g])));
    for (int g = 0; g < 16; ++g) {  // a sub-block whose scale rounds to 0 keeps its fitted levels
      const float d = fp16_to_f32(b[i].d) * float(b[i].scales[g]);
      if (d == 0) continue;
      for (int l = 0; l < 16; ++l) L[16 * g + l] = int8_t(std::clamp(nearest_int(x[16 * g + l] / d), -32, 31) + 32);
    }
    for (int h = 0; h < 2; ++h) {  // layout in dequantize_q6_k
      const int8_t* q = L + 128 * h;
      uint8_t* ql = b[i].ql + 64 * h;
      uint8_t* qh = b[i].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = uint8_t((q[l] & 0x0f) | (q[l + 64] & 0x0f) << 4);
        ql[l + 32] = uint8_t((q[l + 32] & 0x0f) | (q[l + 96] & 0x0f) << 4);
        qh[l] = uint8_t((q[l] >> 4) | (q[l + 32] >> 4) << 2 | (q[l + 64] >> 4) << 4 | (q[l + 96] >> 4) << 6);
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
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::F16:
      return dequantize_f16(static_cast<const uint16_t*>(src), dst, n);
    case DType::BF16:
      return dequantize_bf16(static_cast<const uint16_t*>(src), dst, n);
    case DType::Q4_0:
      return dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::Q4_1:
      return dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case DType::Q5_0:
      return dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case DType::Q5_1:
      return dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case DType::Q8_0:
      return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::Q4_K:
      return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::Q5_K:
      return dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
    case DType::Q6_K:
      return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
    case DType::Q8_K:
      return dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, nb);
    default:
      throw std::invalid_argument("dequantize: dtype " + std::string(name(t)) + " is not supported");
  }
}

void quantize(DType t, const float* src, void* dst, int64_t n) {
  check_length("quantize", t, n);
  const int64_t nb = n / info(t).block_size;
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::F16:
      return quantize_f16(src, static_cast<uint16_t*>(dst), n);
    case DType::BF16:
      return quantize_bf16(src, static_cast<uint16_t*>(dst), n);
    case DType::Q4_0:
      return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case DType::Q4_1:
      return quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), nb);
    case DType::Q5_0:
      return quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), nb);
    case DType::Q5_1:
      return quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), nb);
    case DType::Q8_0:
      return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case DType::Q4_K:
      return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), nb);
    case DType::Q5_K:
      return quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), nb);
    case DType::Q6_K:
      return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), nb);
    case DType::Q8_K:
      return quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), nb);
    default:
      throw std::invalid_argument("quantize: dtype " + std::string(name(t)) + " is not supported");
  }
}

// Every type toy reads it can also write (the K-quants included).
bool can_quantize(DType t) { return dtype_supported(t); }

}  // namespace toy
