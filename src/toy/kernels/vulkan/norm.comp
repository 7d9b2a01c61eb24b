#version 450
// kernels/vulkan/norm.comp — RMSNorm (-DRMS), LayerNorm (-DLAYER) and the L2 norm (-DL2) over rows
// of D floats at offsets into their buffers (dispatched by norm.cpp beside it; the twins of
// kernels::rms_norm, kernels::layer_norm and kernels::l2_norm):
//   rms:   y[r, d] = x[r, d] · rs · w[d],               rs = 1/√(Σ_d x[r, d]² / D + eps)
//   layer: y[r, d] = (x[r, d] − μ) · rs · w[d] + b[d],  μ = Σ_d x[r, d] / D,  rs = 1/√(Σ_d (x[r, d] − μ)² / D + eps)
//   l2:    y[r, d] = x[r, d] · s,                       s = 1/max(√(Σ_d x[r, d]²), eps)  (no w: x bound in its place)
//
// One workgroup of 64 threads per row r. Thread t sums the terms of d = t, t + 64, … in order of d
// in f32 (x² with one fma each), then a fixed shared-memory tree (6 levels) adds the 64 partial sums;
// LayerNorm does so twice, for μ and then for the squares about μ. rs by inversesqrt. The products
// after are in the CPU's order ((x·rs)·w, then + b) and `precise` (not fused into an fma). No atomics, no
// subgroup operations: the order of every addition is fixed, so a rerun gives the same bits.
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint rows;   // rows of x and y
  uint D;      // the last dimension, normalized over
  uint x_off;  // where x, w, b, y start in their buffers, in floats
  uint w_off;
  uint b_off;
  uint y_off;
  uint has_b;  // LAYER: 0 where there is no bias
  float eps;
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };  // [rows, D]
layout(std430, binding = 1) readonly buffer W { float w[]; };  // [D]
#if defined(LAYER)
layout(std430, binding = 2) readonly buffer B { float b[]; };  // [D]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };  // [rows, D]
#else
layout(std430, binding = 2) writeonly buffer Y { float y[]; };  // [rows, D]
#endif

shared float partial[64];

// The sum of the 64 threads' s, in a fixed tree; every thread gets it.
float sum64(float s) {
  const uint t = gl_LocalInvocationID.x;
  partial[t] = s;
  barrier();
  for (uint h = 32; h > 0; h /= 2) {
    if (t < h) partial[t] += partial[t + h];
    barrier();
  }
  const float total = partial[0];
  barrier();  // every thread has read it before partial is written again
  return total;
}

void main() {
  // Rows past 65535 workgroups continue in y (view.h).
  const uint r = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  if (r >= p.rows) return;  // the whole workgroup: no barrier is skipped by some threads only
  const uint xr = p.x_off + r * p.D, yr = p.y_off + r * p.D;
#if defined(LAYER)
  float s = 0.0;
  for (uint d = t; d < p.D; d += 64) s += x[xr + d];
  const float mean = sum64(s) / float(p.D);
  float v = 0.0;
  for (uint d = t; d < p.D; d += 64) {
    const float c = x[xr + d] - mean;
    v = fma(c, c, v);
  }
  const float rs = inversesqrt(sum64(v) / float(p.D) + p.eps);
  for (uint d = t; d < p.D; d += 64) {
    precise float xhat = (x[xr + d] - mean) * rs;
    precise float yd = xhat * w[p.w_off + d] + (p.has_b != 0 ? b[p.b_off + d] : 0.0);
    y[yr + d] = yd;
  }
#elif defined(L2)
  float ss = 0.0;
  for (uint d = t; d < p.D; d += 64) ss = fma(x[xr + d], x[xr + d], ss);
  const float scale = 1.0 / max(sqrt(sum64(ss)), p.eps);
  for (uint d = t; d < p.D; d += 64) {
    precise float yd = x[xr + d] * scale;
    y[yr + d] = yd;
  }
#else
  float ss = 0.0;
  for (uint d = t; d < p.D; d += 64) ss = fma(x[xr + d], x[xr + d], ss);
  const float rs = inversesqrt(sum64(ss) / float(p.D) + p.eps);
  for (uint d = t; d < p.D; d += 64) {
    precise float yd = x[xr + d] * rs * w[p.w_off + d];
    y[yr + d] = yd;
  }
#endif
}
