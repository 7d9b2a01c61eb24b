// kernels/vulkan/half.glsl — f32 to the bits of its nearest half, ties to even: toy's f32_to_fp16
// (tensor/dtype.cpp) in integers, so a shader rounds exactly as the CPU does (GLSL's conversion
// does not promise a rounding mode). Included by the shaders that store or look up halves.
uint half_bits(float v) {
  const uint u = floatBitsToUint(v), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and above round to infinity
  if (a < 0x38800000u) {                        // a subnormal half, or zero
    if (a < 0x33000000u) return sign;           // below 2⁻²⁵: rounds to zero
    const uint m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);  // 14..24
    const uint rem = m & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
    uint h = m >> shift;
    if (rem > mid || (rem == mid && (h & 1u) != 0u)) ++h;
    return sign | h;
  }
  return sign | ((a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13);  // 10 bits of mantissa
}
