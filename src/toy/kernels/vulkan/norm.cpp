// kernels/vulkan/norm.cpp — dispatches norm.comp (beside this file); see norm.h.
#include "toy/kernels/vulkan/norm.h"

#include <array>

#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // norm.comp's push constants
  uint32_t rows, D, x_off, w_off, b_off, y_off, has_b;
  float eps;
};

// The checks both norms make: the shape, then x and y of rows × D floats, w of D.
void check(const char* op, const Buffer& x, uint64_t x_off, const Buffer& w, uint64_t w_off, const Buffer& y,
           uint64_t y_off, int64_t rows, int64_t D) {
  if (rows < 0 || D < 1 || rows > int64_t(UINT32_MAX) || D > int64_t(UINT32_MAX))
    throw Error("vulkan: " + std::string(op) + ": shape rows=" + std::to_string(rows) + " D=" + std::to_string(D) +
                " out of range");
  check_view(op, "x", x, x_off, uint64_t(rows) * uint64_t(D));
  check_view(op, "w", w, w_off, uint64_t(D));
  check_view(op, "y", y, y_off, uint64_t(rows) * uint64_t(D));
}
}  // namespace

Norm::Norm(Context& ctx)
    : ctx_(ctx),
      rms_(ctx.pipeline(spirv::norm_rms, 3, sizeof(Push))),
      layer_(ctx.pipeline(spirv::norm_layer, 4, sizeof(Push))),
      l2_(ctx.pipeline(spirv::norm_l2, 3, sizeof(Push))) {}

void Norm::l2(const Buffer& x, uint64_t x_off, Buffer& y, uint64_t y_off, int64_t rows, int64_t D, float eps) {
  check("l2_norm", x, x_off, x, x_off, y, y_off, rows, D);
  if (rows == 0) return;
  const Push push{uint32_t(rows), uint32_t(D), uint32_t(x_off), 0, 0, uint32_t(y_off), 0, eps};
  const std::array<const Buffer*, 3> buffers{&x, &x, &y};  // x in w's place, unread
  const Groups g = groups("l2_norm", uint64_t(rows));
  ctx_.dispatch(l2_, buffers, &push, g.x, g.y);
}

void Norm::rms(const Buffer& x, uint64_t x_off, const Buffer& w, uint64_t w_off, Buffer& y, uint64_t y_off,
               int64_t rows, int64_t D, float eps) {
  check("rms_norm", x, x_off, w, w_off, y, y_off, rows, D);
  if (rows == 0) return;
  const Push push{uint32_t(rows), uint32_t(D), uint32_t(x_off), uint32_t(w_off), 0, uint32_t(y_off), 0, eps};
  const std::array<const Buffer*, 3> buffers{&x, &w, &y};
  const Groups g = groups("rms_norm", uint64_t(rows));  // one workgroup per row
  ctx_.dispatch(rms_, buffers, &push, g.x, g.y);
}

void Norm::layer(const Buffer& x, uint64_t x_off, const Buffer& w, uint64_t w_off, const Buffer* b, uint64_t b_off,
                 Buffer& y, uint64_t y_off, int64_t rows, int64_t D, float eps) {
  check("layer_norm", x, x_off, w, w_off, y, y_off, rows, D);
  if (b) check_view("layer_norm", "b", *b, b_off, uint64_t(D));
  if (rows == 0) return;
  const Push push{uint32_t(rows),          uint32_t(D),     uint32_t(x_off), uint32_t(w_off),
                  b ? uint32_t(b_off) : 0, uint32_t(y_off), b ? 1u : 0u,     eps};
  const std::array<const Buffer*, 4> buffers{&x, &w, b ? b : &w, &y};  // no bias: w bound in its place, unread
  const Groups g = groups("layer_norm", uint64_t(rows));
  ctx_.dispatch(layer_, buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
