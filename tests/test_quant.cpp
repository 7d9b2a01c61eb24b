// tests/test_quant.cpp — dtype conversions and GGUF block (de)quantization.
//
// Three kinds of checks: hand-built blocks whose values are worked out from the format
// definition; quantize→dequantize error bounds; and the model fixtures, where every tensor of
// a derived file (written by llama-quantize from the F32 file) is compared with the F32 tensor,
// and where the re-quantized F32 tensor must reproduce llama-quantize's bytes exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "fixtures.h"
#include "helpers.h"
#include "toy/io/file_type.h"
#include "toy/io/gguf.h"
#include "toy/tensor/quant.h"

using namespace toy;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ggml's fp32 -> fp16 (ggml_compute_fp32_to_fp16, after Maratyszcza's FP16 library): an
// independent formulation that lets the FPU do the rounding, used as the outside reference.
uint16_t ggml_fp32_to_fp16(float f) {
  float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = bits_of(f), shl1_w = w + w, sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = from_bits((bias >> 1) + 0x07800000u) + base;
  const uint32_t b = bits_of(base);
  const uint32_t nonsign = ((b >> 13) & 0x7c00u) + (b & 0x0fffu);
  return uint16_t((sign >> 16) | (shl1_w > 0xff000000u ? 0x7e00u : nonsign));
}

template <class Block>
std::vector<float> decode(DType t, const Block& b) {
  std::vector<float> y(size_t(info(t).block_size));
  dequantize(t, &b, y.data(), int64_t(y.size()));
  return y;
}

// Packs eight 6-bit (scale, min) pairs as Q4_K/Q5_K store them: pairs 0-3 in the low 6 bits of
// bytes 0-3 (scale) and 4-7 (min); pairs 4-7 as nibbles of bytes 8-11 (scale low, min high) with
// their top two bits in bits 6-7 of bytes 0-3 (scale) and 4-7 (min).
void pack_scales_k4(const int sc[8], const int m[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = uint8_t(sc[j] | (sc[j + 4] >> 4) << 6);
    out[j + 4] = uint8_t(m[j] | (m[j + 4] >> 4) << 6);
    out[j + 8] = uint8_t((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// fp16 / bf16

TEST(QuantFp16, EdgeCases) {
  EXPECT_EQ(f32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);   // largest half
  EXPECT_EQ(f32_to_fp16(65519.99f), 0x7bff);  // below the rounding midpoint
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);   // the midpoint rounds to inf
  EXPECT_EQ(f32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(f32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);         // tie between 0 and 2^-24 -> even (0)
  EXPECT_EQ(f32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);         // tie between 1 and 2 ulps -> even (2)
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even mantissa
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie -> even mantissa (up)
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // above the tie
  const uint16_t nan = f32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);

  EXPECT_EQ(fp16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_f32(0x7e00)));
  EXPECT_TRUE(std::signbit(fp16_to_f32(0x8000)));
}

TEST(QuantFp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_fp16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(QuantFp16, MatchesGgmlConversion) {
  // Every float whose bits are a multiple of 1009 (4.3e6 values, all exponents, all rounding cases).
  for (uint64_t u = 0; u < (1ull << 32); u += 1009) {
    const float f = from_bits(uint32_t(u));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_fp16(f), ggml_fp32_to_fp16(f)) << "float bits 0x" << std::hex << u;
  }
}

TEST(QuantBf16, EdgeCases) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000)), 0x3f80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001)), 0x3f81);  // above the tie
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000)), 0x0000);  // subnormal tie -> even (0)
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000)), 0x0002);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7fffff)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f800001)), 0x7fc0);  // signalling NaN -> quiet, stays NaN
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x0001), from_bits(0x00010000));
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7fc0)));
}

// ---------------------------------------------------------------------------------------------
// Hand-built blocks

TEST(QuantBlocks, Q4_0) {
  BlockQ4_0 b{};
  b.d = f32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | (15 - j) << 4);  // low: 0..15, high: 15..0
  auto y = decode(DType::Q4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f);
  }
}

TEST(QuantBlocks, Q4_1) {
  BlockQ4_1 b{};
  b.d = f32_to_fp16(0.25f);
  b.m = f32_to_fp16(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | 3 << 4);
  auto y = decode(DType::Q4_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.0f);
    EXPECT_EQ(y[j + 16], 3 * 0.25f - 1.0f);
  }
}

TEST(QuantBlocks, Q5_0AndQ5_1) {
  // q_j = j for all 32 elements: low nibble j & 15, 5th bit (j >> 4) at bit j of qh.
  BlockQ5_0 b{};
  b.d = f32_to_fp16(2.0f);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((j + 16) & 15) << 4);
  for (int j = 0; j < 32; ++j) qh |= uint32_t(j >> 4) << j;
  std::memcpy(b.qh, &qh, 4);
  auto y = decode(DType::Q5_0, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j - 16) * 2.0f) << j;

  BlockQ5_1 c{};
  c.d = f32_to_fp16(0.5f);
  c.m = f32_to_fp16(3.0f);
  std::memcpy(c.qs, b.qs, 16);
  std::memcpy(c.qh, b.qh, 4);
  auto z = decode(DType::Q5_1, c);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(z[j], j * 0.5f + 3.0f) << j;
}

TEST(QuantBlocks, Q8_0AndQ8_K) {
  BlockQ8_0 b{};
  b.d = f32_to_fp16(0.125f);
  for (int j = 0; j < 32; ++j) b.qs[j] = int8_t(j * 8 - 127);
  auto y = decode(DType::Q8_0, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 127) * 0.125f);

  BlockQ8_K k{};
  k.d = 0.1f;  // an f32 scale
  for (int j = 0; j < 256; ++j) k.qs[j] = int8_t(j - 128 == -128 ? -127 : j - 128);
  auto z = decode(DType::Q8_K, k);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(z[j], 0.1f * float(k.qs[j]));
}

TEST(QuantBlocks, Q4_K) {
  // Sub-block s (32 values) has scale sc[s] and min m[s]; value l of it is
  // d·sc[s]·q − dmin·m[s]. Values 64g..64g+31 are low nibbles of qs[32g..32g+31], the next 32
  // the high nibbles.
  const int sc[8] = {1, 63, 7, 32, 17, 48, 5, 60}, m[8] = {0, 5, 63, 9, 33, 2, 47, 16};
  BlockQ4_K b{};
  b.d = f32_to_fp16(0.5f);
  b.dmin = f32_to_fp16(0.25f);
  pack_scales_k4(sc, m, b.scales);
  auto q = [](int i) { return (i * 7 + 3) % 16; };  // the 4-bit value of element i
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l) b.qs[32 * g + l] = uint8_t(q(64 * g + l) | q(64 * g + 32 + l) << 4);
  auto y = decode(DType::Q4_K, b);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    EXPECT_EQ(y[i], 0.5f * sc[s] * q(i) - 0.25f * m[s]) << i;
  }
}

TEST(QuantBlocks, Q5_K) {
  // As Q4_K plus a 5th bit: element l of sub-block s has it at bit s of qh[l].
  const int sc[8] = {2, 3, 61, 40, 16, 31, 63, 1}, m[8] = {63, 0, 12, 20, 18, 50, 1, 44};
  BlockQ5_K b{};
  b.d = f32_to_fp16(0.125f);
  b.dmin = f32_to_fp16(1.5f);
  pack_scales_k4(sc, m, b.scales);
  auto q = [](int i) { return (i * 13 + 5) % 32; };
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l) b.qs[32 * g + l] = uint8_t((q(64 * g + l) & 15) | (q(64 * g + 32 + l) & 15) << 4);
  for (int i = 0; i < 256; ++i) b.qh[i % 32] |= uint8_t((q(i) >> 4) << (i / 32));
  auto y = decode(DType::Q5_K, b);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    EXPECT_EQ(y[i], 0.125f * sc[s] * q(i) - 1.5f * m[s]) << i;
  }
}

TEST(QuantBlocks, Q6_K) {
  // 16 sub-blocks of 16 with int8 scales; value i = d·sc[i/16]·(q − 32), q 6 bits. In each half
  // h (128 values), element 32k + l (k = 0..3, l < 32) takes its low nibble from
  // ql[64h + l + 32·(k&1)] (low nibble for k < 2, high for k >= 2) and its top 2 bits from
  // bits 2k, 2k+1 of qh[32h + l].
  BlockQ6_K b{};
  b.d = f32_to_fp16(0.0625f);
  for (int s = 0; s < 16; ++s) b.scales[s] = int8_t(s * 17 - 128 == -128 ? -127 : s * 17 - 128);
  auto q = [](int i) { return (i * 29 + 11) % 64; };
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, k = i % 128 / 32, l = i % 32;
    uint8_t& lo = b.ql[64 * h + l + 32 * (k & 1)];
    lo |= uint8_t((q(i) & 15) << (k >= 2 ? 4 : 0));
    b.qh[32 * h + l] |= uint8_t((q(i) >> 4) << (2 * k));
  }
  auto y = decode(DType::Q6_K, b);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.0625f * float(b.scales[i / 16]) * float(q(i) - 32)) << i;
}

TEST(QuantBlocks, RejectsPartialBlocksAndUnknownTypes) {
  std::vector<float> x(40), y(40);
  std::vector<uint8_t> buf(1024);
  EXPECT_THROW(dequantize(DType::Q8_0, buf.data(), y.data(), 40), std::invalid_argument);
  EXPECT_THROW(quantize(DType::Q4_0, x.data(), buf.data(), 40), std::invalid_argument);
  EXPECT_THROW(dequantize(DType::Q2_K, buf.data(), y.data(), 256), std::invalid_argument);
  EXPECT_FALSE(can_quantize(DType::Q2_K));
  EXPECT_TRUE(can_quantize(DType::Q8_K));
  EXPECT_THROW(quantize(DType::Q2_K, x.data(), buf.data(), 0), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Quantize -> dequantize

TEST(QuantRoundTrip, Q8_0WithinHalfAStep) {
  const int64_t n = 32 * 64;
  auto x = test::randn(size_t(n), 1);
  x[5] = 0;  // a zero, and an all-zero block below
  for (int j = 64; j < 96; ++j) x[size_t(j)] = 0;
  std::vector<BlockQ8_0> b(static_cast<size_t>(n / 32));
  std::vector<float> y(static_cast<size_t>(n));
  quantize(DType::Q8_0, x.data(), b.data(), n);
  dequantize(DType::Q8_0, b.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[size_t(i / 32 * 32 + j)]));
    const float d = amax / 127, d16 = fp16_to_f32(b[size_t(i / 32)].d);
    // q = round(x/d) is within d/2 of x/d; dequantizing with the half d adds |q|·|d − d16|.
    EXPECT_LE(std::fabs(y[size_t(i)] - x[size_t(i)]), 0.5f * d * 1.0001f + 127 * std::fabs(d - d16)) << i;
  }
  EXPECT_EQ(y[5], 0.0f);
  for (int j = 64; j < 96; ++j) EXPECT_EQ(y[size_t(j)], 0.0f);
}

TEST(QuantRoundTrip, Q4_0WithinOneStep) {
  const int64_t n = 32 * 64;
  auto x = test::randn(size_t(n), 2);
  std::vector<BlockQ4_0> b(size_t(n / 32));
  std::vector<float> y(static_cast<size_t>(n));
  quantize(DType::Q4_0, x.data(), b.data(), n);
  dequantize(DType::Q4_0, b.data(), y.data(), n);
  double se = 0, sx = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = std::fabs(fp16_to_f32(b[size_t(i / 32)].d));
    // Half a step, except at the end opposite to max, where q = 16 is clamped to 15 (one step).
    EXPECT_LE(std::fabs(y[size_t(i)] - x[size_t(i)]), 1.01f * d) << i;
    se += double(y[size_t(i)] - x[size_t(i)]) * (y[size_t(i)] - x[size_t(i)]);
    sx += double(x[size_t(i)]) * x[size_t(i)];
  }
  EXPECT_LT(std::sqrt(se / sx), 0.15);
  // The value of largest magnitude of each block is reproduced up to the half-float d.
  for (int64_t blk = 0; blk < n / 32; ++blk) {
    int jmax = 0;
    for (int j = 1; j < 32; ++j)
      if (std::fabs(x[size_t(blk * 32 + j)]) > std::fabs(x[size_t(blk * 32 + jmax)])) jmax = j;
    EXPECT_NEAR(y[size_t(blk * 32 + jmax)], x[size_t(blk * 32 + jmax)], std::fabs(x[size_t(blk * 32 + jmax)]) * 1e-3);
  }
}

TEST(QuantRoundTrip, Q8_KWithinHalfAStepAndBsums) {
  const int64_t n = 256 * 8;
  auto x = test::randn(size_t(n), 3, 3.0f);
  std::vector<BlockQ8_K> b(size_t(n / 256));
  std::vector<float> y(static_cast<size_t>(n));
  quantize(DType::Q8_K, x.data(), b.data(), n);
  dequantize(DType::Q8_K, b.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const float d = std::fabs(b[size_t(i / 256)].d);
    EXPECT_LE(std::fabs(y[size_t(i)] - x[size_t(i)]), 0.5f * d * 1.0001f) << i;
  }
  for (size_t i = 0; i < b.size(); ++i) {
    const BlockQ8_K& blk = b[i];
    // The value of largest magnitude, max, gets q = −127 and d = −max/127.
    const float* xb = x.data() + 256 * i;
    const auto jmax = std::max_element(xb, xb + 256, [](float a, float c) { return std::fabs(a) < std::fabs(c); }) - xb;
    EXPECT_EQ(blk.qs[jmax], -127);
    EXPECT_FLOAT_EQ(blk.d, -xb[jmax] / 127);
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += blk.qs[16 * g + l];
      EXPECT_EQ(blk.bsums[g], s);
    }
  }
}

TEST(QuantRoundTrip, OtherLegacyFormatsAndScalars) {
  const int64_t n = 32 * 32;
  auto x = test::randn(size_t(n), 4);
  struct Case {
    DType t;
    double max_rel_rms;
  };
  for (Case c : {Case{DType::Q4_1, 0.12}, Case{DType::Q5_0, 0.06}, Case{DType::Q5_1, 0.05}, Case{DType::F16, 1e-3},
                 Case{DType::BF16, 1e-2}}) {
    std::vector<uint8_t> buf(size_t(row_bytes(c.t, n)));
    std::vector<float> y(static_cast<size_t>(n));
    quantize(c.t, x.data(), buf.data(), n);
    dequantize(c.t, buf.data(), y.data(), n);
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; ++i) {
      se += double(y[size_t(i)] - x[size_t(i)]) * (y[size_t(i)] - x[size_t(i)]);
      sx += double(x[size_t(i)]) * x[size_t(i)];
    }
    EXPECT_LT(std::sqrt(se / sx), c.max_rel_rms) << name(c.t);
  }
}

// K-quants on N(0, 1) values plus hard blocks: all zero, constant, all positive, one outlier.
// Per value, the error is at most one step of its sub-block (half a step from rounding, up to
// another half where the rounded 6-/8-bit scale no longer reaches the block's extreme values);
// per format, the relative RMS error is what the bit width allows. Not in the outlier's block:
// there the other sub-blocks' scales are a few units of the outlier's, and rounding them to
// integers loses up to a third of their range (the format's limit, not the quantizer's).
TEST(QuantRoundTrip, KQuantsWithinAStepOfTheirSubBlock) {
  const int64_t n = QK_K * 24;
  auto x = test::randn(size_t(n), 5);
  std::fill(x.begin(), x.begin() + QK_K, 0.0f);                                              // block 0: zeros
  std::fill(x.begin() + QK_K, x.begin() + 2 * QK_K, 0.75f);                                  // block 1: constant
  for (int64_t i = 2 * QK_K; i < 3 * QK_K; ++i) x[size_t(i)] = std::fabs(x[size_t(i)]) + 1;  // positive
  x[3 * QK_K + 17] = 40.0f;                                                                  // block 3: an outlier
  struct Case {
    DType t;
    double max_rel_rms;
  };
  for (Case c : {Case{DType::Q4_K, 0.10}, Case{DType::Q5_K, 0.05}, Case{DType::Q6_K, 0.025}}) {
    std::vector<uint8_t> buf(size_t(row_bytes(c.t, n)));
    std::vector<float> y(static_cast<size_t>(n)), step(static_cast<size_t>(n));
    quantize(c.t, x.data(), buf.data(), n);
    dequantize(c.t, buf.data(), y.data(), n);
    for (int64_t b = 0; b < n / QK_K; ++b) {  // the step of each value: d·sc of its sub-block
      const uint8_t* blk = buf.data() + b * info(c.t).type_size;
      for (int j = 0; j < QK_K; ++j) {
        float s;
        if (c.t == DType::Q6_K) {
          const auto& q6 = *reinterpret_cast<const BlockQ6_K*>(blk);
          s = std::fabs(fp16_to_f32(q6.d) * float(q6.scales[j / 16]));
        } else {
          const uint8_t* sc = blk + 4;  // d, dmin, then the packed scales (see pack_scales_k4)
          const int sb = j / 32, v = sb < 4 ? sc[sb] & 63 : (sc[sb + 4] & 15) | (sc[sb - 4] >> 6) << 4;
          uint16_t d;
          std::memcpy(&d, blk, 2);
          s = fp16_to_f32(d) * float(v);
        }
        step[size_t(b * QK_K + j)] = s;
      }
    }
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float e = std::fabs(y[size_t(i)] - x[size_t(i)]);
      if (i / QK_K != 3) {
        EXPECT_LE(e, step[size_t(i)] * 1.0001f + 1e-6f) << name(c.t) << " value " << i;
      }
      if (i >= 4 * QK_K) se += double(e) * e, sx += double(x[size_t(i)]) * x[size_t(i)];
    }
    EXPECT_LT(std::sqrt(se / sx), c.max_rel_rms) << name(c.t);
    for (int j = 0; j < QK_K; ++j) EXPECT_EQ(y[size_t(j)], 0.0f) << name(c.t);
    EXPECT_NEAR(y[3 * QK_K + 17], 40.0f, 40.0f * (c.t == DType::Q4_K ? 0.03f : 0.01f)) << name(c.t);
  }
}

// ---------------------------------------------------------------------------------------------
// Fixtures: every derived file against its F32 source

namespace {

// Relative RMS error bound of a dtype against the F32 weights (N(0, 0.02) random, so the
// quantization noise is what the bit width gives).
double max_rel_rms(DType t) {
  switch (t) {
    case DType::F16:
      return 1e-3;
    case DType::BF16:
      return 1e-2;
    case DType::Q8_0:
      return 0.01;
    case DType::Q6_K:
      return 0.04;
    case DType::Q5_K:
      return 0.06;
    case DType::Q4_0:
    case DType::Q4_K:
      return 0.15;
    default:
      return 0;  // F32: exact
  }
}

}  // namespace

TEST(QuantFixtures, DerivedFilesDequantizeToTheF32Weights) {
  auto files = test::fixture_files("models", ".gguf");
  if (files.empty()) GTEST_SKIP() << "no fixtures under " << test::fixtures_dir() << " (set TOY_FIXTURES)";
  int compared = 0, requantized = 0;
  for (const auto& path : files) {
    const std::string file = path.filename().string();
    const auto dash = file.rfind('-');
    const std::string base_name = file.substr(0, dash) + "-f32.gguf";
    if (file == base_name) continue;
    const auto base_path = path.parent_path() / base_name;
    if (!std::filesystem::exists(base_path)) continue;
    auto f = gguf::GgufFile::open(path.string());
    auto base = gguf::GgufFile::open(base_path.string());
    for (const gguf::TensorInfo& t : f->tensors()) {
      const gguf::TensorInfo* r = base->find_tensor(t.name);
      ASSERT_NE(r, nullptr) << file << ": " << t.name;
      ASSERT_EQ(r->dtype, DType::F32);
      ASSERT_EQ(r->shape, t.shape);
      const int64_t n = numel(t.shape);
      std::vector<float> y(static_cast<size_t>(n));
      dequantize(t.dtype, f->tensor_data(t), y.data(), n);
      const float* x = static_cast<const float*>(base->tensor_data(*r));
      double se = 0, sx = 0;
      for (int64_t i = 0; i < n; ++i) {
        se += double(y[size_t(i)] - x[i]) * (y[size_t(i)] - x[i]);
        sx += double(x[i]) * x[i];
      }
      const double rel = std::sqrt(se / sx);
      EXPECT_LE(rel, max_rel_rms(t.dtype)) << file << ": " << t.name << " (" << name(t.dtype) << ")";
      if (t.dtype != DType::F32) {
        EXPECT_GT(rel, 0) << file << ": " << t.name;
      }
      ++compared;
      // Formats whose quantizer we implement must reproduce llama-quantize's bytes.
      if (can_quantize(t.dtype)) {
        std::vector<uint8_t> q(size_t(t.nbytes));
        quantize(t.dtype, x, q.data(), n);
        EXPECT_EQ(std::memcmp(q.data(), f->tensor_data(t), q.size()), 0)
            << file << ": " << t.name << " (" << name(t.dtype) << ") re-quantized differs";
        ++requantized;
      }
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(requantized, 100);
}

// ---------------------------------------------------------------------------------------------
// File types: llama-quantize's choice of a dtype per tensor

// Every K-quant file of the fixtures (general.file_type Q4_K_M, Q5_K_M or Q6_K, written by
// llama-quantize from the F32 file) has the dtypes gguf::tensor_dtype chooses.
TEST(QuantFixtures, FileTypesChooseLlamaQuantizesDtypes) {
  int checked = 0;
  for (const auto& path : test::fixture_files("models", ".gguf")) {
    auto f = gguf::GgufFile::open(path.string());
    std::optional<gguf::FileType> ft;
    for (const char* n : {"Q4_K_M", "Q5_K_M", "Q6_K"})
      if (int64_t(gguf::file_type(n)->general_file_type) == f->opt_int("general.file_type").value_or(-1))
        ft = gguf::file_type(n);
    if (!ft) continue;
    const int n_layer = int(f->get_int(f->architecture() + ".block_count"));
    const bool tied = f->find_tensor("output.weight") == nullptr;
    for (const gguf::TensorInfo& t : f->tensors()) {
      EXPECT_EQ(name(gguf::tensor_dtype(*ft, t.name, t.shape, n_layer, tied)), name(t.dtype))
          << path.filename() << ": " << t.name;
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no K-quant fixtures under " << test::fixtures_dir() << " (set TOY_FIXTURES)";
  EXPECT_GE(checked, 3 * 21);
}

// What the fixtures (rows of 256 and 768, 2 layers) cannot show: the fallbacks for rows that do
// not split into super-blocks (SmolLM2-135M's d_model 576), and use_more_bits over 30 layers.
TEST(QuantFileTypes, FallbacksAndLayerChoice) {
  using gguf::tensor_dtype;
  const gguf::FileType q4km = *gguf::file_type("q4_k_m");
  EXPECT_EQ(tensor_dtype(q4km, "token_embd.weight", {49152, 576}, 30, /*tied=*/true), DType::Q8_0);
  EXPECT_EQ(tensor_dtype(q4km, "token_embd.weight", {49152, 512}, 30, /*tied=*/true), DType::Q6_K);
  EXPECT_EQ(tensor_dtype(q4km, "token_embd.weight", {49152, 512}, 30, /*tied=*/false), DType::Q4_K);
  EXPECT_EQ(tensor_dtype(q4km, "blk.0.attn_q.weight", {576, 576}, 30, true), DType::Q5_0);
  EXPECT_EQ(tensor_dtype(q4km, "blk.0.attn_v.weight", {192, 576}, 30, true), DType::Q8_0);
  EXPECT_EQ(tensor_dtype(q4km, "blk.0.attn_norm.weight", {576}, 30, true), DType::F32);
  std::vector<int> more_bits;
  for (int layer = 0; layer < 30; ++layer)
    if (tensor_dtype(q4km, "blk." + std::to_string(layer) + ".ffn_down.weight", {576, 1536}, 30, true) == DType::Q6_K)
      more_bits.push_back(layer);
  EXPECT_EQ(more_bits, (std::vector<int>{0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29}));
  EXPECT_EQ(tensor_dtype(q4km, "blk.3.ffn_down.weight", {576, 1536}, 30, true), DType::Q4_K);
  // A fused attn_qkv takes attn_v's rule (llama.cpp's category_is_attn_v): the last layer of 2 gets more bits.
  EXPECT_EQ(tensor_dtype(*gguf::file_type("Q5_K_M"), "blk.0.attn_qkv.weight", {768, 256}, 2, true), DType::Q5_K);
  EXPECT_EQ(tensor_dtype(*gguf::file_type("Q5_K_M"), "blk.1.attn_qkv.weight", {768, 256}, 2, true), DType::Q6_K);
  EXPECT_EQ(tensor_dtype(*gguf::file_type("Q5_K"), "blk.0.attn_q.weight", {576, 576}, 30, true), DType::Q5_1);
  EXPECT_EQ(tensor_dtype(*gguf::file_type("Q6_K"), "output.weight", {49152, 576}, 30, false), DType::Q8_0);
  EXPECT_EQ(tensor_dtype(*gguf::file_type("Q4_0"), "output.weight", {100, 40}, 30, false), DType::F32);
  EXPECT_FALSE(gguf::file_type("Q2_K"));
}

// `toy init` end to end: SmolLM2-135M (30 layers, tied, d_model 576) as Q4_K_M has llama.cpp's
// mix, the fallbacks included, and general.file_type 15.
TEST(QuantFileTypes, InitWritesTheQ4_K_MMix) {
  const std::string out = ::testing::TempDir() + "/toy_init_q4km_" + std::to_string(::getpid()) + ".gguf";
  auto r = test::run_toy("init --preset smollm2-135m --dtype q4_k_m -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("init: to Q4_K_M: 100% ("), std::string::npos) << r.err;  // the conversion, then the write
  EXPECT_NE(r.err.find("init: " + out + ": 100% ("), std::string::npos) << r.err;
  auto f = gguf::GgufFile::open(out);
  EXPECT_EQ(f->get_int("general.file_type"), 15);
  auto dtype_of = [&](const std::string& t) { return std::string(name(f->find_tensor(t)->dtype)); };
  EXPECT_EQ(dtype_of("token_embd.weight"), "Q8_0");  // the output (tied), rows of 576
  EXPECT_EQ(dtype_of("blk.0.attn_q.weight"), "Q5_0");
  EXPECT_EQ(dtype_of("blk.0.attn_v.weight"), "Q8_0");
  EXPECT_EQ(dtype_of("blk.0.ffn_down.weight"), "Q6_K");
  EXPECT_EQ(dtype_of("blk.3.ffn_down.weight"), "Q4_K");
  EXPECT_EQ(dtype_of("blk.3.attn_norm.weight"), "F32");
  std::filesystem::remove(out);
  EXPECT_EQ(test::run_toy("init --preset smollm2-135m --dtype Q2_K -o " + out).code, 2);
}
