#version 450
// kernels/vulkan/convert.comp — dst[i] = src[i] for i < n, f32 into F32 or F16 (dispatched by
// convert.cpp beside it; the twin of toy::quantize for F32 and F16: how a KV cache row is stored).
// Compiled twice: -DDST_F32 (a copy), -DDST_F16 (rounded to the nearest half, ties to even, in
// integers as toy's f32_to_fp16: the same bits as the CPU). One thread per element.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n;        // elements
  uint src_off;  // where src starts, in floats
  uint dst_off;  // where dst starts, in elements of its dtype
} p;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
#if defined(DST_F16)
#include "half.glsl"
layout(std430, binding = 1) writeonly buffer Dst { uint16_t dst[]; };
#else
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
#endif

void main() {
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;  // past 65535 in y (view.h)
  if (g > (p.n - 1) / 64) return;
  const uint i = g * 64 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
#if defined(DST_F16)
  dst[p.dst_off + i] = uint16_t(half_bits(src[p.src_off + i]));
#else
  dst[p.dst_off + i] = src[p.src_off + i];
#endif
}
