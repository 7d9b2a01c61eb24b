// kernels/vulkan/rows.cpp — dispatches rows.comp (beside this file); see rows.h.
#include "toy/kernels/vulkan/rows.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // rows.comp's push constants (both variants)
  uint32_t rows, D, a_off, b_off;
};
void check_shape(const char* op, int64_t rows, int64_t D) {
  if (rows < 0 || D < 1 || rows * D > int64_t(UINT32_MAX))
    throw Error("vulkan: " + std::string(op) + ": shape rows=" + std::to_string(rows) + " D=" + std::to_string(D) +
                " out of range");
}
}  // namespace

Rows::Rows(Context& ctx)
    : ctx_(ctx),
      scale_(ctx.pipeline(spirv::rows_scale, 3, sizeof(Push))),
      scatter_add_(ctx.pipeline(spirv::rows_scatter_add, 5, sizeof(Push))) {}

void Rows::scale(const Buffer& x, uint64_t x_off, const Buffer& s, uint64_t s_off, Buffer& y, int64_t M, int64_t D) {
  check_shape("scale_rows", M, D);
  check_view("scale_rows", "x", x, x_off, uint64_t(M * D));
  check_view("scale_rows", "s", s, s_off, uint64_t(M));
  check_view("scale_rows", "y", y, 0, uint64_t(M * D));
  if (M == 0) return;
  const Push push{uint32_t(M), uint32_t(D), uint32_t(x_off), uint32_t(s_off)};
  const std::array<const Buffer*, 3> buffers{&x, &s, &y};
  const Groups g = groups("scale_rows", (uint64_t(M * D) + 63) / 64);
  ctx_.dispatch(scale_, buffers, &push, g.x, g.y);
}

void Rows::scatter_add(const Buffer& base, uint64_t base_off, const int32_t* rows, const Buffer& src, uint64_t src_off,
                       Buffer& y, int64_t N, int64_t M, int64_t D) {
  check_shape("scatter_add_rows", N, D);
  check_shape("scatter_add_rows", M, D);
  check_view("scatter_add_rows", "base", base, base_off, uint64_t(N * D));
  check_view("scatter_add_rows", "src", src, src_off, uint64_t(M * D));
  check_view("scatter_add_rows", "y", y, 0, uint64_t(N * D));
  if (N == 0) return;
  std::vector<uint32_t> first(size_t(N) + 1, 0), members(static_cast<size_t>(M));  // each n's m, in order of m
  for (int64_t m = 0; m < M; ++m) ++first[size_t(rows[m]) + 1];
  for (int64_t n = 0; n < N; ++n) first[size_t(n) + 1] += first[size_t(n)];
  std::vector<uint32_t> at(first.begin(), first.end() - 1);
  for (int64_t m = 0; m < M; ++m) members[at[size_t(rows[m])]++] = uint32_t(m);
  Buffer bf = ctx_.buffer(first.size() * 4), bm = ctx_.buffer(std::max<size_t>(members.size(), 1) * 4);
  ctx_.upload(bf, first.data(), first.size() * 4);
  if (M) ctx_.upload(bm, members.data(), members.size() * 4);
  const Push push{uint32_t(N), uint32_t(D), uint32_t(base_off), uint32_t(src_off)};
  const std::array<const Buffer*, 5> buffers{&base, &src, &bf, &bm, &y};
  const Groups g = groups("scatter_add_rows", (uint64_t(N * D) + 63) / 64);
  ctx_.dispatch(scatter_add_, buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
