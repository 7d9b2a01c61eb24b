#version 450
// kernels/vulkan/elementwise.comp — y[i] = a[i] ∘ b[i] or y[i] = f(x[i]) for i < n, f32 views at
// offsets into their buffers (dispatched by elementwise.cpp beside it; the twins of kernels::add, mul,
// scale, silu, gelu_tanh, softcap, sigmoid). Compiled twice: -DBINARY (add, mul), -DUNARY (the rest);
// the op is a push constant, the same for every thread.
//
// One thread per element, 64 to a workgroup. add, mul and scale are one correctly rounded operation,
// as on the CPU: the same bits. gelu_tanh is the CPU's value for x's half (the CPU rounds x to half
// first), read from a table of the 65536 the CPU gives (elementwise.cpp), x rounded to half here
// in integers as toy's f32_to_fp16 rounds it: the same bits. silu, sigmoid and softcap use the
// device's exp (Vulkan promises 3 + 2·|x| ulp) and division (2.5 ulp): close to the CPU, not its bits.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint op;     // Elementwise::Binary or Elementwise::Unary, in the order of their enumerators
  uint n;      // elements
  uint a_off;  // where a (BINARY) or x (UNARY) starts in its buffer, in floats
  uint b_off;  // where b starts (BINARY)
  uint y_off;  // where y starts
  float param; // Scale's factor, Softcap's cap
} p;
#if defined(BINARY)
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
#else
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer T { float16_t gelu_table[]; };  // [65536]: gelu_tanh of each half
#endif
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

#if defined(UNARY)
#include "half.glsl"

float f(float v) {
  switch (p.op) {
    case 0:  // Scale
      return p.param * v;
    case 1:  // Silu: v·σ(v)
      return v / (1.0 + exp(-v));
    case 2:  // GeluTanh, as kernels::gelu_tanh: 0 and v past ±10, else the table at v's half
      return v <= -10.0 ? 0.0 : v >= 10.0 ? v : float(gelu_table[half_bits(v)]);
    case 3: {  // Softcap: cap·tanh(v / cap), tanh t = sign(t)·(1 − e) / (1 + e) with e = exp(−2|t|) ≤ 1
      const float t = v / p.param, e = exp(-2.0 * abs(t));
      return p.param * (sign(t) * ((1.0 - e) / (1.0 + e)));
    }
    default:  // Sigmoid
      return 1.0 / (1.0 + exp(-v));
  }
}
#endif

void main() {
  // Workgroups past 65535 continue in y (view.h); those past the last element's do nothing.
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (g > (p.n - 1) / 64) return;
  const uint i = g * 64 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
#if defined(BINARY)
  const float u = a[p.a_off + i], v = b[p.b_off + i];
  y[p.y_off + i] = p.op == 0 ? u + v : u * v;
#else
  y[p.y_off + i] = f(x[p.a_off + i]);
#endif
}
