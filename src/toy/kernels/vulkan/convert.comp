#version 450
// kernels/vulkan/convert.comp — dst[r, c] = src[r, c] for rows × n columns, each side with its
// own row stride, f32 into F32 or F16 (dispatched by convert.cpp beside it; the twin of
// toy::quantize for F32 and F16 — how a KV cache row is stored — and of kernels::copy_columns: a
// narrow). Compiled twice: -DDST_F32 (a copy), -DDST_F16 (rounded to the nearest half, ties to
// even, in integers as toy's f32_to_fp16: the same bits as the CPU). One thread per element.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n;           // elements: rows × cols
  uint cols;        // columns per row
  uint src_off;     // where src starts, in floats
  uint src_stride;  // from one row of src to the next, in floats
  uint dst_off;     // where dst starts, in elements of its dtype
  uint dst_stride;  // from one row of dst to the next, in its elements
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
  const uint r = i / p.cols, c = i % p.cols, from = p.src_off + r * p.src_stride + c, to = p.dst_off + r * p.dst_stride + c;
#if defined(DST_F16)
  dst[to] = uint16_t(half_bits(src[from]));
#else
  dst[to] = src[from];
#endif
}
