#version 450
// kernels/vulkan/delta_net.comp — the pieces of a Gated DeltaNet layer (dispatched by delta_net.cpp
// beside it; the twins of kernels::causal_conv1d, the log-decay of primitives/delta_rule.cpp and
// the token recurrence of kernels::gated_delta_rule). Compiled three times:
//   -DCONV1D:     y[t, c] = Σ_j w[c, j]·win[t + j, c], win = [state; x] (K − 1 + T rows), summed in
//                 order of j as the CPU does (precise: the CPU's bits); the new state, win's last
//                 K − 1 rows, goes to its own buffer (the old one is still being read). One thread
//                 per (row, c) of y and of the new state.
//   -DLOG_DECAY:  g[r, h] = softplus(α[r, h] + dt_bias[h])·a[h], softplus(u) = u above 20, else
//                 log(1 + exp(u)) (the device's log and exp). One thread per value.
//   -DDELTA_RULE: per value head h with state S [Dk, Dv], token by token: S ← e^{g_t}·S;
//                 u = Sᵀk_t; d = β_t·(v_t − u); S ← S + k_t dᵀ; o_t = Sᵀq_t·scale. Column j of S
//                 is thread (h, j)'s alone: it reads and writes only its column, in the order of
//                 the CPU's recurrence (precise), so no thread waits on another and a rerun gives
//                 the same bits. Query/key head of h: h % Hk (tiled) or h / (Hv / Hk).
layout(local_size_x = 64) in;

uint thread_index() { return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64 + gl_LocalInvocationID.x; }

#if defined(CONV1D)
layout(push_constant) uniform Push {
  uint T, C, K;
  uint x_off, y_off;  // in floats
} p;
layout(std430, binding = 0) readonly buffer X { float x[]; };          // [T, C]
layout(std430, binding = 1) readonly buffer W { float w[]; };          // [C, K]
layout(std430, binding = 2) readonly buffer S { float state[]; };      // [K − 1, C]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };         // [T, C]
layout(std430, binding = 4) writeonly buffer N { float new_state[]; };  // [K − 1, C]

float win(uint s, uint c) { return s < p.K - 1 ? state[s * p.C + c] : x[p.x_off + (s - (p.K - 1)) * p.C + c]; }

void main() {
  const uint i = thread_index(), row = i / p.C, c = i % p.C;
  if (row >= p.T + p.K - 1) return;
  if (row >= p.T) {
    new_state[(row - p.T) * p.C + c] = win(row, c);
    return;
  }
  precise float acc = 0.0;
  for (uint j = 0; j < p.K; ++j) acc += win(row + j, c) * w[c * p.K + j];
  y[p.y_off + row * p.C + c] = acc;
}

#elif defined(LOG_DECAY)
layout(push_constant) uniform Push {
  uint n, Hv;
  uint alpha_off;  // in floats
} p;
layout(std430, binding = 0) readonly buffer Alpha { float alpha[]; };  // [n / Hv, Hv]
layout(std430, binding = 1) readonly buffer Dt { float dt_bias[]; };   // [Hv]
layout(std430, binding = 2) readonly buffer A { float a[]; };          // [Hv]
layout(std430, binding = 3) writeonly buffer G { float g[]; };         // [n / Hv, Hv]

void main() {
  const uint i = thread_index();
  if (i >= p.n) return;
  const uint h = i % p.Hv;
  precise float u = alpha[p.alpha_off + i] + dt_bias[h];
  precise float sp = u > 20.0 ? u : log(1.0 + exp(u));
  precise float gi = sp * a[h];
  g[i] = gi;
}

#elif defined(DELTA_RULE)
layout(push_constant) uniform Push {
  uint T, Hk, Hv, Dk, Dv, tiled;
  uint q_off, k_off, v_off, g_off, beta_off;  // in floats
  float scale;                                // 1/√Dk
} p;
layout(std430, binding = 0) readonly buffer Q { float q[]; };        // [T, Hk, Dk]
layout(std430, binding = 1) readonly buffer K { float k[]; };        // [T, Hk, Dk]
layout(std430, binding = 2) readonly buffer V { float v[]; };        // [T, Hv, Dv]
layout(std430, binding = 3) readonly buffer G { float gate[]; };     // [T, Hv]
layout(std430, binding = 4) readonly buffer B { float beta[]; };     // [T, Hv]
layout(std430, binding = 5) buffer S { float s[]; };                 // [Hv, Dk, Dv], updated
layout(std430, binding = 6) writeonly buffer O { float o[]; };       // [T, Hv, Dv]

void main() {
  const uint i = thread_index();
  if (i >= p.Hv * p.Dv) return;
  const uint h = i / p.Dv, j = i % p.Dv, hk = p.tiled != 0 ? h % p.Hk : h / (p.Hv / p.Hk);
  const uint sb = h * p.Dk * p.Dv + j;  // S[h, r, j] at sb + r·Dv
  for (uint t = 0; t < p.T; ++t) {
    const uint qk = (t * p.Hk + hk) * p.Dk;
    const float decay = exp(gate[p.g_off + t * p.Hv + h]), b = beta[p.beta_off + t * p.Hv + h];
    precise float u = 0.0;
    for (uint r = 0; r < p.Dk; ++r) {
      precise float sr = s[sb + r * p.Dv] * decay;
      s[sb + r * p.Dv] = sr;
      u += sr * k[p.k_off + qk + r];
    }
    precise float d = b * (v[p.v_off + (t * p.Hv + h) * p.Dv + j] - u);
    precise float acc = 0.0;
    for (uint r = 0; r < p.Dk; ++r) {
      precise float sr = s[sb + r * p.Dv] + k[p.k_off + qk + r] * d;
      s[sb + r * p.Dv] = sr;
      acc += sr * q[p.q_off + qk + r];
    }
    precise float ot = acc * p.scale;
    o[(t * p.Hv + h) * p.Dv + j] = ot;
  }
}
#endif
