// kernels/vulkan/rope.cpp — dispatches rope.comp (beside this file); see rope.h.
#include "toy/kernels/vulkan/rope.h"

#include <array>

#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // rope.comp's push constants
  uint32_t n_tok, H, Dh, n_rot, x_off, y_off;
};
}  // namespace

Rope::Rope(Context& ctx)
    : ctx_(ctx),
      norm_(ctx.pipeline(spirv::rope_norm, 5, sizeof(Push))),
      neox_(ctx.pipeline(spirv::rope_neox, 5, sizeof(Push))) {}

void Rope::operator()(bool neox, const Buffer& x, uint64_t x_off, Buffer& y, uint64_t y_off, const Buffer& cos,
                      const Buffer& sin, const Buffer& index, int64_t n_tok, int64_t H, int64_t Dh, int64_t n_rot) {
  if (n_tok < 0 || H < 1 || Dh < 1 || n_rot < 2 || n_rot % 2 || n_rot > Dh || n_tok * H > int64_t(UINT32_MAX) / Dh)
    throw Error("vulkan: rope: shape n_tok=" + std::to_string(n_tok) + " H=" + std::to_string(H) +
                " Dh=" + std::to_string(Dh) + " n_rot=" + std::to_string(n_rot) + " out of range");
  const uint64_t n = uint64_t(n_tok * H * Dh);
  check_view("rope", "x", x, x_off, n);
  check_view("rope", "y", y, y_off, n);
  check_view("rope", "index", index, 0, uint64_t(n_tok));
  if (cos.bytes() != sin.bytes() || cos.bytes() < uint64_t(n_rot / 2) * 4)
    throw Error("vulkan: rope: angle tables of " + std::to_string(cos.bytes()) + " and " + std::to_string(sin.bytes()) +
                " bytes for n_rot=" + std::to_string(n_rot));
  if (n_tok == 0) return;
  const Push push{uint32_t(n_tok), uint32_t(H), uint32_t(Dh), uint32_t(n_rot), uint32_t(x_off), uint32_t(y_off)};
  const std::array<const Buffer*, 5> buffers{&x, &cos, &sin, &index, &y};
  const Groups g = groups("rope", uint64_t(n_tok * H));  // one workgroup per head row
  ctx_.dispatch(neox ? neox_ : norm_, buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
