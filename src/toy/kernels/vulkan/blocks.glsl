// kernels/vulkan/blocks.glsl — GGUF's block types as tensor/quant.cpp lays them out, for the
// shaders that read weights as stored (matvec.comp, gather.comp). Included after the shader has
// declared its weight bytes `wq[]` (uint8_t) and defined one WT_*; a block starts at byte o.
//   q_of(o, j)      value j's integer q (the types whose dot products are taken in integers)
//   value_of(o, j)  value j as toy::dequantize gives it: the same products in the same order,
//                   `precise` so that none is fused into an fma (the CPU's bits)
// K-quants also give each sub-block s of 32 values its integer scale and min (scale_min).
float half_at(uint o) { return unpackHalf2x16(uint(wq[o]) | uint(wq[o + 1]) << 8).x; }
uint nibble(uint b, bool high) { return high ? b >> 4 : b & 15u; }

#if defined(WT_Q8_0)  // d, then 32 int8 q: d·q
const uint kBlockValues = 32, kBlockBytes = 34;
int q_of(uint o, uint j) { return int(int8_t(wq[o + 2 + j])); }
#elif defined(WT_Q4_0)  // d, then 16 bytes: value j in byte j % 16, low nibble for j < 16: d·(q − 8)
const uint kBlockValues = 32, kBlockBytes = 18;
int q_of(uint o, uint j) { return int(nibble(uint(wq[o + 2 + j % 16]), j >= 16)) - 8; }
#elif defined(WT_Q5_0)  // d, 4 bytes of fifth bits (bit j for value j), then Q4_0's nibbles: d·(q − 16)
const uint kBlockValues = 32, kBlockBytes = 22;
uint fifth(uint o, uint j) { return (uint(wq[o + 2 + j / 8]) >> (j % 8)) & 1u; }
int q_of(uint o, uint j) { return int(nibble(uint(wq[o + 6 + j % 16]), j >= 16) | fifth(o, j) << 4) - 16; }
#elif defined(WT_Q4_1)  // d, m, then Q4_0's nibbles: q·d + m
const uint kBlockValues = 32, kBlockBytes = 20;
float value_of(uint o, uint j) {
  precise float v = float(nibble(uint(wq[o + 4 + j % 16]), j >= 16)) * half_at(o) + half_at(o + 2);
  return v;
}
#elif defined(WT_Q5_1)  // d, m, 4 bytes of fifth bits, then the nibbles: q·d + m
const uint kBlockValues = 32, kBlockBytes = 24;
float value_of(uint o, uint j) {
  const uint h = (uint(wq[o + 4 + j / 8]) >> (j % 8)) & 1u;
  precise float v = float(nibble(uint(wq[o + 8 + j % 16]), j >= 16) | h << 4) * half_at(o) + half_at(o + 2);
  return v;
}
#elif defined(WT_Q4_K) || defined(WT_Q5_K)
// Super-blocks of 256: d, dmin, 12 bytes packing 8 six-bit scales and mins, [Q5_K: 32 bytes of
// fifth bits, bit s of byte l for value 32s + l,] 128 bytes of nibbles: sub-block s in byte
// 32·(s / 2) + l, its high nibble for odd s. Value (d·sc)·q − dmin·mn.
const uint kBlockValues = 256;
#if defined(WT_Q4_K)
const uint kBlockBytes = 144, kNibbles = 16;
#else
const uint kBlockBytes = 176, kNibbles = 48;
#endif
ivec2 scale_min(uint o, uint s) {  // ggml's get_scale_min_k4
  const uint q = o + 4;
  if (s < 4) return ivec2(uint(wq[q + s]) & 63u, uint(wq[q + s + 4]) & 63u);
  return ivec2((uint(wq[q + s + 4]) & 15u) | (uint(wq[q + s - 4]) >> 6) << 4,
               (uint(wq[q + s + 4]) >> 4) | (uint(wq[q + s]) >> 6) << 4);
}
int q_of(uint o, uint j) {
  const uint s = j / 32, l = j % 32;
  uint q = nibble(uint(wq[o + kNibbles + 32 * (s / 2) + l]), s % 2 == 1);
#if defined(WT_Q5_K)
  q |= ((uint(wq[o + 16 + l]) >> s) & 1u) << 4;
#endif
  return int(q);
}
float value_of(uint o, uint j) {
  const ivec2 sm = scale_min(o, j / 32);
  precise float d1 = half_at(o) * float(sm.x), m1 = half_at(o + 2) * float(sm.y);
  precise float v = d1 * float(q_of(o, j)) - m1;
  return v;
}
#elif defined(WT_Q6_K)
// Super-blocks of 256: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales (one per
// 16 values), d. Value j = 128h + 32c + l: the low nibble of byte 64h + 32·(c % 2) + l (its high
// one for c ≥ 2), bits 2c of byte 128 + 32h + l; q − 32, times (d·sc).
const uint kBlockValues = 256, kBlockBytes = 210;
int q_of(uint o, uint j) {
  const uint h = j / 128, c = (j % 128) / 32, l = j % 32;
  const uint lo = nibble(uint(wq[o + 64 * h + 32 * (c % 2) + l]), c >= 2);
  const uint hi = (uint(wq[o + 128 + 32 * h + l]) >> (2 * c)) & 3u;
  return int(lo | hi << 4) - 32;
}
int scale_of(uint o, uint j) { return int(int8_t(wq[o + 192 + j / 16])); }
float value_of(uint o, uint j) {
  precise float v = half_at(o + 208) * float(scale_of(o, j)) * float(q_of(o, j));
  return v;
}
#endif

#if defined(WT_Q8_0) || defined(WT_Q4_0) || defined(WT_Q5_0)
float value_of(uint o, uint j) {
  precise float v = float(q_of(o, j)) * half_at(o);
  return v;
}
#endif
