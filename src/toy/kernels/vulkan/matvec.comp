#version 450
// kernels/vulkan/matvec.comp — y[N] = W[N, K] · x[K], W read in its GGUF dtype as stored
// (dispatched by matvec.cpp beside it; the twin of kernels::matmul_wt with M = 1).
// Compiled once per dtype: -DWT_F32, -DWT_F16 (CMakeLists.txt, toy_vulkan_shader).
//
// One workgroup of 64 threads per row n. Thread t sums the products of k = t, t + 64, t + 128, …
// in order of k, each with one fma; the 64 partial sums are then added in a fixed shared-memory
// tree (6 levels). No atomics, no subgroup operations (whose order is not promised): the order of
// every addition is fixed, so a rerun gives the same bits.
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint N;  // rows of W, e.g. 4096
  uint K;  // columns of W, the length of x
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };  // [K], rounded as matmul_wt rounds it
#if defined(WT_F32)
layout(std430, binding = 1) readonly buffer W { float w[]; };  // [N, K]
float weight(uint i) { return w[i]; }
#elif defined(WT_F16)
layout(std430, binding = 1) readonly buffer W { float16_t w[]; };  // [N, K]
float weight(uint i) { return float(w[i]); }
#endif
layout(std430, binding = 2) writeonly buffer Y { float y[]; };  // [N]

shared float partial[64];

void main() {
  // Rows past 65535 workgroups continue in y (matvec.cpp).
  const uint n = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  if (n >= p.N) return;  // the whole workgroup: no barrier is skipped by some threads only
  float s = 0.0;
  for (uint k = t; k < p.K; k += 64) s = fma(weight(n * p.K + k), x[k], s);
  partial[t] = s;
  barrier();
  for (uint h = 32; h > 0; h /= 2) {
    if (t < h) partial[t] += partial[t + h];
    barrier();
  }
  if (t == 0) y[n] = partial[0];
}
