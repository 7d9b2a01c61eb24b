#version 450
// kernels/vulkan/quantize.comp — rows of x rounded as kernels::matmul_wt rounds its activations
// before the dot products (dispatched by quantize.cpp beside it; the twin of
// reference::round_activations and reference::quantize_activations_q8_0). Compiled four times:
//   -DQ8_0: each block of 32 values to a Q8_0 block (for Q8_0, Q4_0 and Q5_0 weights): amax = max
//           |x|, d = half(amax / 127), q = round(x · 127/amax) to nearest, ties to even; one thread
//           per block.
//   -DQ8_K: each block of 256 values to a Q8_K block (for the K-quants) as ggml's quantize_row_q8_K:
//           max = the first value of largest magnitude, with its sign; iscale = −127/max, q =
//           min(127, round(iscale·x)), d = 1/iscale, and the sums of each 16 q; one thread per block.
//   -DF16:  each value to its nearest half, back as a float (for F16 weights); one thread per value.
//   -DBF16: each value to its nearest bfloat16, back as a float (for BF16 weights).
// The CPU's bits: the rounding in integers (half.glsl), and each division corrected to the
// correctly rounded quotient (Vulkan's division is only within 2.5 ulp).
#extension GL_EXT_shader_8bit_storage : require
#extension GL_GOOGLE_include_directive : require
#include "half.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n;      // blocks (Q8_0, Q8_K) or values (F16, BF16)
  uint x_off;  // where x starts, in floats
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
#if defined(Q8_0) || defined(Q8_K)
#if defined(Q8_0)
layout(std430, binding = 1) writeonly buffer Q { uint8_t q[]; };  // [n] blocks of 34 bytes
#else
layout(std430, binding = 1) writeonly buffer Q { uint qw[]; };  // [n] blocks of 73 words: d, 64 of q, 8 of sums
#endif

// a / b correctly rounded (b ≠ 0, both finite): the quotient's residual a − q·b is exact in an fma,
// and one step on it gives the nearest float (Markstein).
float divide(float a, float b) {
  precise float q0 = a / b;
  precise float r = fma(-q0, b, a);
  precise float q1 = fma(r, 1.0 / b, q0);
  precise float r1 = fma(-q1, b, a);
  return abs(r1) <= abs(r) ? q1 : q0;
}
#else
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
#endif

void main() {
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;  // past 65535 in y (view.h)
  const uint i = g * 64 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
#if defined(Q8_0)
  const uint xb = p.x_off + i * 32, qb = i * 34;
  float amax = 0.0;
  for (uint k = 0; k < 32; ++k) amax = max(amax, abs(x[xb + k]));
  const float id = amax != 0.0 ? divide(127.0, amax) : 0.0;
  const uint d = half_bits(divide(amax, 127.0));
  q[qb] = uint8_t(d & 0xffu);
  q[qb + 1] = uint8_t(d >> 8);
  for (uint k = 0; k < 32; ++k) {
    precise float v = x[xb + k] * id;
    q[qb + 2 + k] = uint8_t(uint(int(roundEven(v))) & 0xffu);
  }
#elif defined(Q8_K)
  const uint xb = p.x_off + i * 256, qb = i * 73;
  float amax = 0.0, mx = 0.0;
  for (uint k = 0; k < 256; ++k)
    if (abs(x[xb + k]) > amax) {
      amax = abs(x[xb + k]);
      mx = x[xb + k];
    }
  if (amax == 0.0) {  // d = 0, q = 0, sums 0
    for (uint w = 0; w < 73; ++w) qw[qb + w] = 0u;
    return;
  }
  const float iscale = divide(-127.0, mx);
  qw[qb] = floatBitsToUint(divide(1.0, iscale));
  uint sums = 0u;                   // two int16 sums to a word
  for (uint g = 0; g < 16; ++g) {  // 16 values: 4 words of q, and their sum
    int sum = 0;
    for (uint w = 0; w < 4; ++w) {
      uint word = 0u;
      for (uint b = 0; b < 4; ++b) {
        precise float v = iscale * x[xb + 16 * g + 4 * w + b];
        const int qv = min(127, int(roundEven(v)));
        sum += qv;
        word |= (uint(qv) & 0xffu) << (8 * b);
      }
      qw[qb + 1 + 4 * g + w] = word;
    }
    sums |= (uint(sum) & 0xffffu) << (16 * (g % 2));
    if (g % 2 == 1) {
      qw[qb + 65 + g / 2] = sums;
      sums = 0u;
    }
  }
#elif defined(F16)
  y[i] = unpackHalf2x16(half_bits(x[p.x_off + i])).x;
#elif defined(BF16)
  const uint u = floatBitsToUint(x[p.x_off + i]);
  const uint h = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 64u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  y[i] = uintBitsToFloat(h << 16);
#endif
}
