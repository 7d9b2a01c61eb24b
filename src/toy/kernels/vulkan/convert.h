#pragma once
// kernels/vulkan/convert.h — f32 values stored as F32 or F16 on a Vulkan device (convert.comp
// beside it): a KV cache's new rows. F16 rounds as the CPU does (the same bits). Only in a
// TOY_VULKAN build.
#include <cstdint>

#include "toy/kernels/vulkan/context.h"
#include "toy/tensor/dtype.h"

namespace toy::kernels::vulkan {

class Convert {
 public:
  explicit Convert(Context& ctx);
  // dst[dst_off + i] = src[src_off + i] for i < n, rounded to dt (F32 or F16); src_off in floats,
  // dst_off in elements of dt. Throws Error for another dt, n < 0 or a view past its buffer.
  void operator()(const Buffer& src, uint64_t src_off, Buffer& dst, DType dt, uint64_t dst_off, int64_t n);

 private:
  Context& ctx_;
  Pipeline f32_, f16_;
};

}  // namespace toy::kernels::vulkan
