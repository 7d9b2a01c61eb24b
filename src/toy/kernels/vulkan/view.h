#pragma once
// kernels/vulkan/view.h — what every op checks of its arguments, and the workgroups it dispatches.
// A tensor on the device is a view: `count` floats from `offset` (in floats) into a buffer; the
// shaders index with 32-bit integers, so a view must end before float 2³² − 1. Workgroup counts past
// 65535 (the least every device allows in one dimension) continue in y.
#include <cstdint>
#include <string>

#include "toy/kernels/vulkan/context.h"

namespace toy::kernels::vulkan {

// Throws Error where `count` floats from `offset` do not fit in b, or lie past a 32-bit index:
// "vulkan: <op>: <what> needs floats [offset, offset + count) of a buffer of B bytes".
inline void check_view(const char* op, const char* what, const Buffer& b, uint64_t offset, uint64_t count) {
  if (offset > UINT32_MAX || count > UINT32_MAX - offset || (offset + count) * 4 > b.bytes())
    throw Error("vulkan: " + std::string(op) + ": " + what + " needs floats [" + std::to_string(offset) + ", " +
                std::to_string(offset) + " + " + std::to_string(count) + ") of a buffer of " +
                std::to_string(b.bytes()) + " bytes");
}

// n workgroups as x × y: x = min(n, 65535), y = ceil(n / x) (the shader skips the last few past n).
struct Groups {
  uint32_t x, y;
};
inline Groups groups(const char* op, uint64_t n) {
  constexpr uint64_t kMax = 65535;  // per dimension, the least every device allows
  if (n > kMax * kMax)
    throw Error("vulkan: " + std::string(op) + ": " + std::to_string(n) + " workgroups, more than 65535² can be");
  const uint64_t x = n < kMax ? n : kMax;
  return {uint32_t(x), uint32_t(x ? (n + x - 1) / x : 0)};
}

}  // namespace toy::kernels::vulkan
