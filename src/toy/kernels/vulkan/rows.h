#pragma once
// kernels/vulkan/rows.h — a mixture of experts' row ops on a Vulkan device (rows.comp beside it):
// scaling rows by the router's weights and adding the experts' rows back into their tokens, with
// the CPU's bits. Only in a TOY_VULKAN build.
#include <cstdint>

#include "toy/kernels/vulkan/context.h"

namespace toy::kernels::vulkan {

class Rows {
 public:
  explicit Rows(Context& ctx);
  // y [M, D] = s[m]·x[m, :]; x and s from float offsets.
  void scale(const Buffer& x, uint64_t x_off, const Buffer& s, uint64_t s_off, Buffer& y, int64_t M, int64_t D);
  // y [N, D] = base + the M rows of src added into rows rows[m] (< N, checked by the caller: the
  // shader reads what it is told) in order of m: the host turns rows into each n's list.
  void scatter_add(const Buffer& base, uint64_t base_off, const int32_t* rows, const Buffer& src, uint64_t src_off,
                   Buffer& y, int64_t N, int64_t M, int64_t D);

 private:
  Context& ctx_;
  Pipeline scale_, scatter_add_;
};

}  // namespace toy::kernels::vulkan
