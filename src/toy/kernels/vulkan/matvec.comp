#version 450
// kernels/vulkan/matvec.comp — y[N] = W[N, K] · x[K], W read in its GGUF dtype as stored
// (dispatched by matvec.cpp beside it; the twin of kernels::matmul_wt with M = 1).
// Compiled once per dtype: -DWT_F32, -DWT_F16, -DWT_Q8_0 (CMakeLists.txt, toy_vulkan_shader).
//
// One workgroup of 64 threads per row n. Thread t sums the products of k = t, t + 64, t + 128, …
// in order of k, each with one fma; the 64 partial sums are then added in a fixed shared-memory
// tree (6 levels). Q8_0: x comes as Q8_0 blocks too (as the CPU kernel rounds it), and thread t
// takes blocks b = t, t + 64, …: the block's dot product in integers (exact), times the two
// scales, with one fma. No atomics, no subgroup operations (whose order is not promised): the order of
// every addition is fixed, so a rerun gives the same bits.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint N;  // rows of W, e.g. 4096
  uint K;  // columns of W, the length of x
} p;
#if defined(WT_Q8_0)
// Q8_0 blocks as stored: 34 bytes, a half scale d (2 bytes, little-endian) then 32 int8 q.
layout(std430, binding = 0) readonly buffer X { int8_t xq[]; };  // [K / 32] blocks
layout(std430, binding = 1) readonly buffer W { int8_t wq[]; };  // [N, K / 32] blocks
float scale_x(uint o) { return unpackHalf2x16(uint(uint8_t(xq[o])) | uint(uint8_t(xq[o + 1])) << 8).x; }
float scale_w(uint o) { return unpackHalf2x16(uint(uint8_t(wq[o])) | uint(uint8_t(wq[o + 1])) << 8).x; }
#else
layout(std430, binding = 0) readonly buffer X { float x[]; };  // [K], rounded as matmul_wt rounds it
#if defined(WT_F32)
layout(std430, binding = 1) readonly buffer W { float w[]; };  // [N, K]
float weight(uint i) { return w[i]; }
#elif defined(WT_F16)
layout(std430, binding = 1) readonly buffer W { float16_t w[]; };  // [N, K]
float weight(uint i) { return float(w[i]); }
#endif
#endif
layout(std430, binding = 2) writeonly buffer Y { float y[]; };  // [N]

shared float partial[64];

void main() {
  // Rows past 65535 workgroups continue in y (matvec.cpp).
  const uint n = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  if (n >= p.N) return;  // the whole workgroup: no barrier is skipped by some threads only
  float s = 0.0;
#if defined(WT_Q8_0)
  const uint nb = p.K / 32;
  for (uint b = t; b < nb; b += 64) {
    const uint ox = b * 34, ow = (n * nb + b) * 34;
    int dot = 0;  // |dot| ≤ 32·127·127 < 2²⁴: exact, and exact as a float
    for (uint j = 2; j < 34; ++j) dot += int(xq[ox + j]) * int(wq[ow + j]);
    s = fma(float(dot), scale_x(ox) * scale_w(ow), s);  // a half times a half: exact in f32
  }
#else
  for (uint k = t; k < p.K; k += 64) s = fma(weight(n * p.K + k), x[k], s);
#endif
  partial[t] = s;
  barrier();
  for (uint h = 32; h > 0; h /= 2) {
    if (t < h) partial[t] += partial[t + h];
    barrier();
  }
  if (t == 0) y[n] = partial[0];
}
