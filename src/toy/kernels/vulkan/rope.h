#pragma once
// kernels/vulkan/rope.h — rotary position embedding on a Vulkan device (rope.comp beside it): the
// twin of primitives/rope.cpp, the same bits given the same angle tables. Only in a TOY_VULKAN build.
#include <cstdint>

#include "toy/kernels/vulkan/context.h"

namespace toy::kernels::vulkan {

class Rope {
 public:
  explicit Rope(Context& ctx);
  // y [n_tok, H, Dh] = x rotated: token r by the angles of table row index[r] (uint32) of cos and
  // sin [P, n_rot/2]; neox pairs (i, i + n_rot/2), else (2i, 2i + 1); dims ≥ n_rot copied. x_off,
  // y_off in floats (P is what index names: the tables must hold its rows). Throws Error for an
  // odd n_rot or one past Dh, or a view past its buffer.
  void operator()(bool neox, const Buffer& x, uint64_t x_off, Buffer& y, uint64_t y_off, const Buffer& cos,
                  const Buffer& sin, const Buffer& index, int64_t n_tok, int64_t H, int64_t Dh, int64_t n_rot);

 private:
  Context& ctx_;
  Pipeline norm_, neox_;
};

}  // namespace toy::kernels::vulkan
