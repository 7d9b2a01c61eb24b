#version 450
// kernels/vulkan/matvec.comp — y[m, n] = W[n, :] · x[m, :] (+ b[n]) for M rows of x, W [N, K] read
// in its GGUF dtype as stored (dispatched by matvec.cpp beside it; the twin of kernels::matmul_wt).
// Compiled per dtype (-DWT_F32, -DWT_Q4_K, …; blocks.glsl decodes the blocks) and per tile of rows
// of x a workgroup takes (-DTILE=1 for decode, -DTILE=8 for a prompt or a batch: CMakeLists.txt).
//
// A workgroup of 64 threads takes 8 rows n of W for kTile rows m of x, 8 threads a row of W: thread
// t of row n sums the products of k = t, t + 8, t + 16, … in order of k, each with one fma, for
// each row m of its tile (a weight read and decoded once serves kTile rows of x: the tile in
// registers); the 8 partial sums of each (n, m) are then added in a fixed shared-memory tree (3
// levels), and the bias after, as the CPU adds it. (64 threads a row spent most of a decode step
// in barriers on lavapipe: a row of SmolLM2-135M holds 18 Q8_0 blocks, and 64 threads left 46 idle
// and waited at 6 levels.) The tile has no guard for rows past M: matvec.cpp gives a tile only
// whole ones and the rest to -DTILE=1 (llvmpipe runs a guarded branch masked, so a guard cost the
// tile's work even for one row).
// x comes rounded as the CPU kernel rounds it (quantize.comp): floats for F32, Q4_1 and Q5_1
// weights (those dequantized as the CPU does), halves (F16) or bfloats (BF16) as floats, Q8_0
// blocks for Q8_0, Q4_0 and Q5_0 weights, Q8_K blocks for the K-quants. Block weights: thread t
// takes blocks (K-quants: sub-blocks of 32) b = t, t + 8, …: the dot product in integers (exact),
// times the scales, with one fma (Q8_0 and Q4_0 blocks read two bytes a load: llvmpipe's byte
// loads were half of the time). No atomics, no subgroup operations (whose order is not promised):
// the order of every addition is fixed and the same in either tile, so a rerun gives the same
// bits, and row m of y depends only on row m of x, not on the batch around it.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
const uint kLanes = 8;  // threads a row of W; 64 / kLanes rows a workgroup (matvec.cpp)
const uint kTile = TILE;  // rows of x a workgroup takes: 1, or 8 for a tile of them (matvec.cpp)
layout(push_constant) uniform Push {
  uint m0;        // the first row of x of the dispatch
  uint N;         // rows of W, e.g. 4096
  uint K;         // columns of W, the length of a row of x
  uint x_off;     // where x starts: in floats, or in bytes for blocks
  uint y_off;     // where y starts, in floats
  uint w_off;     // where W starts: in its elements (F32, F16, BF16), or in bytes for blocks (an expert's slab)
  uint has_bias;  // b holds N floats to add (else y is bound in its place, unread)
} p;
#if defined(WT_Q8_0) || defined(WT_Q4_0) || defined(WT_Q5_0)
#define Q8_0_FAMILY
#elif defined(WT_Q4_K) || defined(WT_Q5_K) || defined(WT_Q6_K)
#define K_FAMILY
#endif

#if defined(Q8_0_FAMILY)
// x as Q8_0 blocks: 34 bytes, a half scale d (2 bytes, little-endian) then 32 int8 q, read two
// bytes at a time (a block starts at an even byte: matvec.cpp checks x_off). o: a block's byte.
layout(std430, binding = 0) readonly buffer X { uint16_t xh[]; };  // [M, K / 32] blocks
float scale_x(uint o) { return unpackHalf2x16(uint(xh[o / 2])).x; }
int x_q(uint o, uint j) { return bitfieldExtract(int(uint(xh[o / 2 + 1 + j / 2])), int(8 * (j % 2)), 8); }
#elif defined(K_FAMILY)
// x as Q8_K blocks: 292 bytes = 73 words: f32 d, 256 int8 q (4 to a word), 16 int16 sums of 16 q.
layout(std430, binding = 0) readonly buffer X { uint xw[]; };  // [M, K / 256] blocks
int q8(uint ow, uint j) { return bitfieldExtract(int(xw[ow + 1 + j / 4]), int(8 * (j % 4)), 8); }
int bsum(uint ow, uint g) { return bitfieldExtract(int(xw[ow + 65 + g / 2]), int(16 * (g % 2)), 16); }
#else
layout(std430, binding = 0) readonly buffer X { float x[]; };  // [M, K], rounded as matmul_wt rounds it
#endif
#if defined(WT_F32)
layout(std430, binding = 1) readonly buffer W { float w[]; };  // [N, K]
float weight(uint i) { return w[p.w_off + i]; }
#elif defined(WT_F16)
layout(std430, binding = 1) readonly buffer W { float16_t w[]; };  // [N, K]
float weight(uint i) { return float(w[p.w_off + i]); }
#elif defined(WT_BF16)
layout(std430, binding = 1) readonly buffer W { uint16_t w[]; };  // [N, K]: the high half of an f32
float weight(uint i) { return uintBitsToFloat(uint(w[p.w_off + i]) << 16); }
#elif defined(WT_Q8_0) || defined(WT_Q4_0)  // two bytes at a time (w_off even: matvec.cpp)
// Q8_0: blocks as x's. Q4_0: 18 bytes, a half d then 16 bytes; byte i holds q_i + 8 in its low
// nibble and q_(i+16) + 8 in its high one.
layout(std430, binding = 1) readonly buffer W { uint16_t wh[]; };  // [N, K / 32] blocks
#if defined(WT_Q8_0)
const uint kBlockBytes = 34;
#else
const uint kBlockBytes = 18;
#endif
float half_at(uint o) { return unpackHalf2x16(uint(wh[o / 2])).x; }
#else  // another block type: blocks.glsl decodes it
layout(std430, binding = 1) readonly buffer W { uint8_t wq[]; };  // [N, K / kBlockValues] blocks
#include "blocks.glsl"
#if defined(WT_Q4_1) || defined(WT_Q5_1)  // f32 activations: each weight dequantized as the CPU does
float weight(uint i) { return value_of(p.w_off + (i / 32) * kBlockBytes, i % 32); }
#endif
#endif
layout(std430, binding = 2) writeonly buffer Y { float y[]; };  // [M, N]
layout(std430, binding = 3) readonly buffer B { float b[]; };   // [N]

shared float partial[kTile * 64];  // [row r of the tile][thread]

void main() {
  // Rows of W past 65535 workgroups continue in y (matvec.cpp); z is a tile of kTile rows of x.
  const uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, m0 = p.m0 + gl_WorkGroupID.z * kTile;
  const uint at = gl_LocalInvocationID.x, t = at % kLanes, n = group * (64 / kLanes) + at / kLanes;
  float s[kTile];
  for (uint r = 0; r < kTile; ++r) s[r] = 0.0;
  if (n < p.N) {  // rows past N (the last workgroup's) sum nothing but still meet every barrier
#if defined(Q8_0_FAMILY)
    const uint nb = p.K / 32;
    for (uint i = t; i < nb; i += kLanes) {
      const uint ow = p.w_off + (n * nb + i) * kBlockBytes;
      uint ox[kTile];  // block i of row m0 + r of x
      int dot[kTile];  // |dot| ≤ 32·127·127 < 2²⁴: exact, and exact as a float
      for (uint r = 0; r < kTile; ++r) {
        ox[r] = p.x_off + ((m0 + r) * nb + i) * 34;
        dot[r] = 0;
      }
#if defined(WT_Q8_0)
      for (uint j = 0; j < 16; ++j) {  // 2 q of W a load, then 2 of each x
        const int wv = int(uint(wh[ow / 2 + 1 + j])), w0 = bitfieldExtract(wv, 0, 8), w1 = bitfieldExtract(wv, 8, 8);
        for (uint r = 0; r < kTile; ++r) {
          const int xv = int(uint(xh[ox[r] / 2 + 1 + j]));
          dot[r] += bitfieldExtract(xv, 0, 8) * w0 + bitfieldExtract(xv, 8, 8) * w1;
        }
      }
#elif defined(WT_Q4_0)
      for (uint h = 0; h < 8; ++h) {  // values 2h, 2h + 1 (low nibbles) and 2h + 16, 2h + 17 (high)
        const ivec4 q = ivec4(uvec4(uint(wh[ow / 2 + 1 + h])) >> uvec4(0, 8, 4, 12) & 15u) - 8;  // unsigned nibbles
        for (uint r = 0; r < kTile; ++r) {
          const int lo = int(uint(xh[ox[r] / 2 + 1 + h])), hi = int(uint(xh[ox[r] / 2 + 9 + h]));  // signed bytes
          dot[r] += bitfieldExtract(lo, 0, 8) * q.x + bitfieldExtract(lo, 8, 8) * q.y +
                    bitfieldExtract(hi, 0, 8) * q.z + bitfieldExtract(hi, 8, 8) * q.w;
        }
      }
#else
      for (uint j = 0; j < 32; ++j) {
        const int q = q_of(ow, j);
        for (uint r = 0; r < kTile; ++r) dot[r] += x_q(ox[r], j) * q;
      }
#endif
      const float dw = half_at(ow);
      for (uint r = 0; r < kTile; ++r)
        s[r] = fma(float(dot[r]), scale_x(ox[r]) * dw, s[r]);  // a half times a half: exact in f32
    }
#elif defined(K_FAMILY)
    // Sub-block u of 32 values (super-block u / 8, s = u % 8): its integer dot Σ sc·q·q8 (Q6_K: a
    // scale per 16) and, for Q4_K and Q5_K, its mins mn·Σ q8 from the stored sums; both below 2²⁴
    // in magnitude, so exact as floats. Each is added with one fma: s += (d_x·d)·dot − (d_x·dmin)·mins.
    const uint nsub = p.K / 32, nsb = p.K / 256;
    for (uint u = t; u < nsub; u += kLanes) {
      const uint i = u / 8, sub = u % 8, ow = p.w_off + (n * nsb + i) * kBlockBytes;
      uint ox[kTile];  // super-block i of row m0 + r of x, in words
      int dot[kTile];
      for (uint r = 0; r < kTile; ++r) {
        ox[r] = p.x_off / 4 + ((m0 + r) * nsb + i) * 73;
        dot[r] = 0;
      }
#if defined(WT_Q6_K)
      for (uint g = 0; g < 2; ++g) {
        int gd[kTile];
        for (uint r = 0; r < kTile; ++r) gd[r] = 0;
        for (uint l = 32 * sub + 16 * g; l < 32 * sub + 16 * g + 16; ++l) {
          const int q = q_of(ow, l);
          for (uint r = 0; r < kTile; ++r) gd[r] += q * q8(ox[r], l);
        }
        const int sc = scale_of(ow, 32 * sub + 16 * g);
        for (uint r = 0; r < kTile; ++r) dot[r] += sc * gd[r];
      }
      const float d = half_at(ow + 208);
      for (uint r = 0; r < kTile; ++r)
        s[r] = fma(uintBitsToFloat(xw[ox[r]]) * d, float(dot[r]), s[r]);
#else
      for (uint l = 32 * sub; l < 32 * sub + 32; ++l) {
        const int q = q_of(ow, l);
        for (uint r = 0; r < kTile; ++r) dot[r] += q * q8(ox[r], l);
      }
      const ivec2 sm = scale_min(ow, sub);
      const float d = half_at(ow), dmin = half_at(ow + 2);
      for (uint r = 0; r < kTile; ++r) {
        const float dx = uintBitsToFloat(xw[ox[r]]);
        s[r] = fma(dx * d, float(sm.x * dot[r]), s[r]);
        s[r] = fma(-(dx * dmin), float(sm.y * (bsum(ox[r], 2 * sub) + bsum(ox[r], 2 * sub + 1))), s[r]);
      }
#endif
    }
#else
    const uint wb = n * p.K;  // weight() adds w_off
    for (uint k = t; k < p.K; k += kLanes) {
      const float wk = weight(wb + k);
      for (uint r = 0; r < kTile; ++r) s[r] = fma(wk, x[p.x_off + (m0 + r) * p.K + k], s[r]);
    }
#endif
  }
  for (uint r = 0; r < kTile; ++r) partial[r * 64 + at] = s[r];
  barrier();
  for (uint h = kLanes / 2; h > 0; h /= 2) {
    if (t < h)
      for (uint r = 0; r < kTile; ++r) partial[r * 64 + at] += partial[r * 64 + at + h];
    barrier();
  }
  if (t == 0 && n < p.N)
    for (uint r = 0; r < kTile; ++r) {
      const float v = partial[r * 64 + at];
      y[p.y_off + (m0 + r) * p.N + n] = p.has_bias != 0 ? v + b[n] : v;
    }
}
