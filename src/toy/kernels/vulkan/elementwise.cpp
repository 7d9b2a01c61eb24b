// kernels/vulkan/elementwise.cpp — dispatches elementwise.comp (beside this file); see elementwise.h.
#include "toy/kernels/vulkan/elementwise.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "toy/kernels/kernels.h"
#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // elementwise.comp's push constants
  uint32_t op, n, a_off, b_off, y_off;
  float param;
};
constexpr uint32_t kThreads = 64;  // elementwise.comp's local_size_x: one element each
constexpr const char* kBinary[] = {"add", "mul"};
constexpr const char* kUnary[] = {"scale", "silu", "gelu_tanh", "softcap", "sigmoid"};
}  // namespace

Elementwise::Elementwise(Context& ctx)
    : ctx_(ctx),
      binary_(ctx.pipeline(spirv::elementwise_binary, 3, sizeof(Push))),
      unary_(ctx.pipeline(spirv::elementwise_unary, 3, sizeof(Push))),
      gelu_table_(ctx.buffer(65536 * 2)) {
  // For |x| < 10 the CPU's gelu_tanh depends on x only through its half h, which may be ±10 itself:
  // the entry of h is the CPU's value at x = the half h, pulled inside (−10, 10) (the halves past ±10
  // are never read).
  const float inside = std::nextafter(10.0f, 0.0f);
  std::vector<float> x(65536), y(65536);
  for (uint32_t h = 0; h < 65536; ++h) x[h] = std::clamp(fp16_to_f32(uint16_t(h)), -inside, inside);
  kernels::gelu_tanh(x.data(), y.data(), 65536);
  std::vector<uint16_t> table(65536);
  for (uint32_t h = 0; h < 65536; ++h) table[h] = f32_to_fp16(y[h]);  // a half already: exact
  ctx.upload(gelu_table_, table.data(), gelu_table_.bytes());
}

void Elementwise::binary(Binary op, const Buffer& a, uint64_t a_off, const Buffer& b, uint64_t b_off, Buffer& y,
                         uint64_t y_off, int64_t n) {
  const char* name = kBinary[int(op)];
  if (n < 0) throw Error("vulkan: " + std::string(name) + ": n=" + std::to_string(n) + " is negative");
  check_view(name, "a", a, a_off, uint64_t(n));
  check_view(name, "b", b, b_off, uint64_t(n));
  check_view(name, "y", y, y_off, uint64_t(n));
  if (n == 0) return;
  const Push push{uint32_t(op), uint32_t(n), uint32_t(a_off), uint32_t(b_off), uint32_t(y_off), 0.0f};
  const std::array<const Buffer*, 3> buffers{&a, &b, &y};
  const Groups g = groups(name, (uint64_t(n) + kThreads - 1) / kThreads);
  ctx_.dispatch(binary_, buffers, &push, g.x, g.y);
}

void Elementwise::unary(Unary op, float param, const Buffer& x, uint64_t x_off, Buffer& y, uint64_t y_off, int64_t n) {
  const char* name = kUnary[int(op)];
  if (n < 0) throw Error("vulkan: " + std::string(name) + ": n=" + std::to_string(n) + " is negative");
  check_view(name, "x", x, x_off, uint64_t(n));
  check_view(name, "y", y, y_off, uint64_t(n));
  if (n == 0) return;
  const Push push{uint32_t(op), uint32_t(n), uint32_t(x_off), 0, uint32_t(y_off), param};
  const std::array<const Buffer*, 3> buffers{&x, &gelu_table_, &y};
  const Groups g = groups(name, (uint64_t(n) + kThreads - 1) / kThreads);
  ctx_.dispatch(unary_, buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
