#version 450
// kernels/vulkan/attention.comp — grouped-query attention of one sequence (dispatched by
// attention.cpp beside it; the twin of kernels::attention): q [T, H, Dh], k, v [S, Hkv, Dh] (F32, or
// F16 with -DKV_F16: a KV cache) -> o [T, H, Dh]. Query t sits at position S − T + t; causal, it
// sees keys j ≤ its position (and, with a window, j > position − window); query head h reads KV
// head h / (H / Hkv). s_j = scale·q·k_j, capped to cap·tanh(s_j / cap) when softcap > 0.
//
// One workgroup of 64 threads per (t, h), in three passes over the visible keys with a barrier
// between them: thread i takes keys j = first + i, first + i + 64, …: their scores (q·k in order
// of d, one fma each) into the scratch buffer, and their maximum; then exp(s_j − max) in place and
// their sum; maximum and sum over the threads in a fixed shared-memory tree. Last, thread i takes
// dims d = i, i + 64, …: o_d = Σ_j p_j v_jd in order of j (one fma each), divided by the sum.
// Every reduction in an order fixed by the shape: a rerun gives the same bits.
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint T, S, H, Hkv, Dh;
  uint q_off, k_off, v_off, o_off;  // in elements of each buffer's type
  uint t0;                          // the first query row of this dispatch (attention.cpp chunks long prompts)
  uint window;                      // > 0: a sliding window (causal only)
  uint causal;
  float scale, softcap;
} p;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
#if defined(KV_F16)
layout(std430, binding = 1) readonly buffer K { float16_t k[]; };
layout(std430, binding = 2) readonly buffer V { float16_t v[]; };
#else
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
#endif
layout(std430, binding = 3) coherent buffer P { float score[]; };  // [rows of this dispatch · H, S]
layout(std430, binding = 4) writeonly buffer O { float o[]; };

shared float red[64];

// The tree over red[]: max (op 0) or sum (op 1) of the 64 threads' values, returned to every thread.
float reduce(float value, bool take_max) {
  const uint i = gl_LocalInvocationID.x;
  red[i] = value;
  barrier();
  for (uint h = 32; h > 0; h /= 2) {
    if (i < h) red[i] = take_max ? max(red[i], red[i + h]) : red[i] + red[i + h];
    barrier();
  }
  const float r = red[0];
  barrier();  // red may be written again
  return r;
}

void main() {
  const uint w = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;  // (t − t0)·H + h
  const uint i = gl_LocalInvocationID.x;
  const uint t = p.t0 + w / p.H, h = w % p.H, g = h / (p.H / p.Hkv);
  if (t >= p.T) return;  // the whole workgroup: no barrier is skipped by some threads only
  const uint pos = p.S - p.T + t;
  const uint first = p.causal != 0 && p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
  const uint end = p.causal != 0 ? pos + 1 : p.S;
  const uint qb = p.q_off + (t * p.H + h) * p.Dh, sb = w * p.S;

  float m = -1.0 / 0.0;
  for (uint j = first + i; j < end; j += 64) {
    const uint kb = p.k_off + (j * p.Hkv + g) * p.Dh;
    float s = 0.0;
    for (uint d = 0; d < p.Dh; ++d) s = fma(q[qb + d], float(k[kb + d]), s);
    s *= p.scale;
    if (p.softcap > 0.0) {  // cap·tanh(s/cap), tanh u = sign(u)·(1 − e)/(1 + e), e = exp(−2|u|)
      const float u = s / p.softcap, e = exp(-2.0 * abs(u));
      s = p.softcap * (sign(u) * ((1.0 - e) / (1.0 + e)));
    }
    score[sb + j] = s;
    m = max(m, s);
  }
  m = reduce(m, true);
  float l = 0.0;
  for (uint j = first + i; j < end; j += 64) {
    const float e = exp(score[sb + j] - m);
    score[sb + j] = e;
    l += e;
  }
  l = reduce(l, false);
  memoryBarrierBuffer();
  barrier();  // every thread's exp(s_j − max) is visible to all
  for (uint d = i; d < p.Dh; d += 64) {
    float acc = 0.0;
    for (uint j = first; j < end; ++j) acc = fma(score[sb + j], float(v[p.v_off + (j * p.Hkv + g) * p.Dh + d]), acc);
    o[p.o_off + (t * p.H + h) * p.Dh + d] = acc / l;
  }
}
