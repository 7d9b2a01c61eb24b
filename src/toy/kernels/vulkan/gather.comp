#version 450
// kernels/vulkan/gather.comp — y[r, :] = W[ids[r], :] as f32 for n ids, W [V, K] read in its GGUF
// dtype as stored (dispatched by gather.cpp beside it; the twin of kernels::gather_rows_wt: an
// embedding's lookup). Compiled once per dtype (-DWT_F32, -DWT_Q4_K, …: CMakeLists.txt). Each value
// is dequantized as toy::dequantize does it (blocks.glsl): the CPU's bits. One workgroup per row,
// its threads over k.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n;      // rows to gather
  uint K;      // values per row
  uint y_off;  // where y starts, in floats
} p;
#if defined(WT_F32)
layout(std430, binding = 0) readonly buffer W { float w[]; };
float value(uint row, uint k) { return w[row * p.K + k]; }
#elif defined(WT_F16)
layout(std430, binding = 0) readonly buffer W { float16_t w[]; };
float value(uint row, uint k) { return float(w[row * p.K + k]); }
#elif defined(WT_BF16)
layout(std430, binding = 0) readonly buffer W { uint16_t w[]; };
float value(uint row, uint k) { return uintBitsToFloat(uint(w[row * p.K + k]) << 16); }
#else  // a block type: blocks.glsl decodes it
layout(std430, binding = 0) readonly buffer W { uint8_t wq[]; };
#include "blocks.glsl"
float value(uint row, uint k) {
  return value_of((row * (p.K / kBlockValues) + k / kBlockValues) * kBlockBytes, k % kBlockValues);
}
#endif
layout(std430, binding = 1) readonly buffer I { uint ids[]; };  // [n]
layout(std430, binding = 2) writeonly buffer Y { float y[]; };  // [n, K]

void main() {
  const uint r = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;  // past 65535 in y (view.h)
  if (r >= p.n) return;
  const uint row = ids[r];
  for (uint k = gl_LocalInvocationID.x; k < p.K; k += 64) y[p.y_off + r * p.K + k] = value(row, k);
}
