#version 450
// kernels/vulkan/rows.comp — the row ops of a mixture of experts (dispatched by rows.cpp beside it;
// the twins of kernels::scale_rows and kernels::scatter_add_rows). Compiled twice:
//   -DSCALE:       y[m, d] = s[m]·x[m, d]: one product, the CPU's bits.
//   -DSCATTER_ADD: y[n, d] = base[n, d] + Σ src[m, d] over the m with rows[m] = n, added in order
//                  of m as the CPU adds them (its bits); the host lists each n's m in order
//                  (members[first[n] .. first[n + 1]]), so each output has one thread and no
//                  atomics are needed.
// One thread per element of y.
layout(local_size_x = 64) in;
#if defined(SCALE)
layout(push_constant) uniform Push {
  uint M, D;
  uint x_off, s_off;  // in floats
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };   // [M, D]
layout(std430, binding = 1) readonly buffer S { float s[]; };   // [M]
layout(std430, binding = 2) writeonly buffer Y { float y[]; };  // [M, D]
#else
layout(push_constant) uniform Push {
  uint N, D;
  uint base_off, src_off;  // in floats
} p;
layout(std430, binding = 0) readonly buffer Base { float base[]; };  // [N, D]
layout(std430, binding = 1) readonly buffer Src { float src[]; };    // [M, D]
layout(std430, binding = 2) readonly buffer F { uint first[]; };     // [N + 1]
layout(std430, binding = 3) readonly buffer Mm { uint members[]; };  // [M]
layout(std430, binding = 4) writeonly buffer Y { float y[]; };       // [N, D]
#endif

void main() {
  const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64 + gl_LocalInvocationID.x;
#if defined(SCALE)
  if (i >= p.M * p.D) return;
  precise float v = s[p.s_off + i / p.D] * x[p.x_off + i];
  y[i] = v;
#else
  if (i >= p.N * p.D) return;
  const uint n = i / p.D, d = i % p.D;
  precise float acc = base[p.base_off + i];
  for (uint j = first[n]; j < first[n + 1]; ++j) acc += src[p.src_off + members[j] * p.D + d];
  y[i] = acc;
#endif
}
