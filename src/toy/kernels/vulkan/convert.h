#pragma once
// kernels/vulkan/convert.h — f32 values stored as F32 or F16 on a Vulkan device (convert.comp
// beside it): a KV cache's new rows, and the columns of a narrow. F16 rounds as the CPU does (the same bits). Only in a
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
  // dst[dst_off + r·dst_stride + c] = src[src_off + r·src_stride + c] for r < rows, c < cols, the
  // same rounding (a narrow: columns of each row). Throws Error as above, or for strides below cols.
  void rows(const Buffer& src, uint64_t src_off, uint64_t src_stride, Buffer& dst, DType dt, uint64_t dst_off,
            uint64_t dst_stride, int64_t rows, int64_t cols);

 private:
  Context& ctx_;
  Pipeline f32_, f16_;
};

}  // namespace toy::kernels::vulkan
