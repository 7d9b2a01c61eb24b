#version 450
// kernels/vulkan/rope.comp — rotary position embedding of x [n_tok, H, Dh] (dispatched by rope.cpp
// beside it; the twin of primitives/rope.cpp's rotate). Row r's angles are row index[r] of the
// tables cos, sin [P, n_rot/2] (rope_angles: built once per forward pass on the host). Pair i
// rotates dims a, b: NORM a = 2i, b = 2i + 1; NEOX (-DNEOX) a = i, b = i + n_rot/2; dims from
// n_rot on are copied. y_a = x_a·c − x_b·s, y_b = x_a·s + x_b·c, each product rounded before the
// sum (precise: no fma), as the CPU computes them: the same bits.
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint n_tok, H, Dh, n_rot;
  uint x_off, y_off;  // in floats
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Cos { float cos_t[]; };
layout(std430, binding = 2) readonly buffer Sin { float sin_t[]; };
layout(std430, binding = 3) readonly buffer I { uint index[]; };  // [n_tok]: the table row of each token
layout(std430, binding = 4) writeonly buffer Y { float y[]; };

void main() {
  // One thread per output element of one head row: workgroup (r·H + h) covers dims t, t + 64, …
  const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= p.n_tok * p.H) return;
  const uint r = row / p.H, base = row * p.Dh, half_rot = p.n_rot / 2, t = index[r] * half_rot;
  for (uint d = gl_LocalInvocationID.x; d < p.Dh; d += 64) {
    if (d >= p.n_rot) {
      y[p.y_off + base + d] = x[p.x_off + base + d];
      continue;
    }
#if defined(NEOX)
    const uint i = d % half_rot, a = i, b = i + half_rot;
#else
    const uint i = d / 2, a = 2 * i, b = a + 1;
#endif
    const float xa = x[p.x_off + base + a], xb = x[p.x_off + base + b], c = cos_t[t + i], s = sin_t[t + i];
    precise float u, v, res;
    if (d == a) {
      u = xa * c;
      v = xb * s;
      res = u - v;
    } else {
      u = xa * s;
      v = xb * c;
      res = u + v;
    }
    y[p.y_off + base + d] = res;
  }
}
