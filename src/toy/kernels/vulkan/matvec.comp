#version 450
// kernels/vulkan/matvec.comp — y[m, n] = W[n, :] · x[m, :] (+ b[n]) for M rows of x, W [N, K] read
// in its GGUF dtype as stored (dispatched by matvec.cpp beside it; the twin of kernels::matmul_wt).
// Compiled once per dtype: -DWT_F32, -DWT_F16, -DWT_BF16, -DWT_Q8_0, -DWT_Q4_0 (CMakeLists.txt).
//
// One workgroup of 64 threads per (n, m). Thread t sums the products of k = t, t + 64, t + 128, …
// in order of k, each with one fma; the 64 partial sums are then added in a fixed shared-memory
// tree (6 levels), and the bias after, as the CPU adds it. x comes rounded as the CPU kernel rounds
// it (quantize.comp): floats for F32 weights, halves (F16) or bfloats (BF16) as floats, Q8_0 blocks
// for Q8_0 and Q4_0 weights. Quantized weights: thread t takes blocks b = t, t + 64, …: the block's
// dot product in integers (exact), times the two scales, with one fma. No atomics, no subgroup
// operations (whose order is not promised): the order of every addition is fixed, so a rerun gives
// the same bits, and row m of y depends only on row m of x.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint N;         // rows of W, e.g. 4096
  uint K;         // columns of W, the length of a row of x
  uint x_off;     // where x starts: in floats, or in bytes for blocks
  uint y_off;     // where y starts, in floats
  uint has_bias;  // b holds N floats to add (else y is bound in its place, unread)
} p;
#if defined(WT_Q8_0) || defined(WT_Q4_0)
// Q8_0 blocks as stored: 34 bytes, a half scale d (2 bytes, little-endian) then 32 int8 q.
layout(std430, binding = 0) readonly buffer X { int8_t xq[]; };  // [M, K / 32] blocks
float scale_x(uint o) { return unpackHalf2x16(uint(uint8_t(xq[o])) | uint(uint8_t(xq[o + 1])) << 8).x; }
// Q4_0 blocks: 18 bytes, a half scale d then 16 bytes: value j in the low nibble of byte j, value
// j + 16 in its high nibble, each q − 8.
layout(std430, binding = 1) readonly buffer W { uint8_t wq[]; };  // [N, K / 32] blocks
float scale_w(uint o) { return unpackHalf2x16(uint(wq[o]) | uint(wq[o + 1]) << 8).x; }
#if defined(WT_Q8_0)
const uint kBlock = 34;
#else
const uint kBlock = 18;
#endif
#else
layout(std430, binding = 0) readonly buffer X { float x[]; };  // [M, K], rounded as matmul_wt rounds it
#if defined(WT_F32)
layout(std430, binding = 1) readonly buffer W { float w[]; };  // [N, K]
float weight(uint i) { return w[i]; }
#elif defined(WT_F16)
layout(std430, binding = 1) readonly buffer W { float16_t w[]; };  // [N, K]
float weight(uint i) { return float(w[i]); }
#elif defined(WT_BF16)
layout(std430, binding = 1) readonly buffer W { uint16_t w[]; };  // [N, K]: the high half of an f32
float weight(uint i) { return uintBitsToFloat(uint(w[i]) << 16); }
#endif
#endif
layout(std430, binding = 2) writeonly buffer Y { float y[]; };  // [M, N]
layout(std430, binding = 3) readonly buffer B { float b[]; };   // [N]

shared float partial[64];

void main() {
  // Rows past 65535 workgroups continue in y (matvec.cpp); z is the row m of x.
  const uint n = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, m = gl_WorkGroupID.z;
  const uint t = gl_LocalInvocationID.x;
  if (n >= p.N) return;  // the whole workgroup: no barrier is skipped by some threads only
  float s = 0.0;
#if defined(WT_Q8_0) || defined(WT_Q4_0)
  const uint nb = p.K / 32;
  for (uint i = t; i < nb; i += 64) {
    const uint ox = p.x_off + (m * nb + i) * 34, ow = (n * nb + i) * kBlock;
    int dot = 0;  // |dot| ≤ 32·127·127 < 2²⁴: exact, and exact as a float
#if defined(WT_Q8_0)
    for (uint j = 0; j < 32; ++j) dot += int(xq[ox + 2 + j]) * int(int8_t(wq[ow + 2 + j]));
#else
    for (uint j = 0; j < 16; ++j) {
      const int q = int(wq[ow + 2 + j]);
      dot += int(xq[ox + 2 + j]) * ((q & 15) - 8) + int(xq[ox + 18 + j]) * ((q >> 4) - 8);
    }
#endif
    s = fma(float(dot), scale_x(ox) * scale_w(ow), s);  // a half times a half: exact in f32
  }
#else
  const uint xb = p.x_off + m * p.K, wb = n * p.K;
  for (uint k = t; k < p.K; k += 64) s = fma(weight(wb + k), x[xb + k], s);
#endif
  partial[t] = s;
  barrier();
  for (uint h = 32; h > 0; h /= 2) {
    if (t < h) partial[t] += partial[t + h];
    barrier();
  }
  if (t == 0) y[p.y_off + m * p.N + n] = p.has_bias != 0 ? partial[0] + b[n] : partial[0];
}
