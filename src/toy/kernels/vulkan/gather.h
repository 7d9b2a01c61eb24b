#pragma once
// kernels/vulkan/gather.h — rows of a weight gathered as f32 on a Vulkan device (gather.comp beside
// it): an embedding's lookup, the twin of kernels::gather_rows_wt, the same bits. Only in a
// TOY_VULKAN build.
#include <cstdint>

#include "toy/kernels/vulkan/context.h"
#include "toy/kernels/vulkan/variants.h"
#include "toy/tensor/dtype.h"

namespace toy::kernels::vulkan {

class GatherRows {
 public:
  explicit GatherRows(Context& ctx);
  // Whether gather.comp reads weights of type wt.
  static bool reads(DType wt);
  // y[r, :] = W[ids[r], :] for r < n: w holds V rows of K values in dtype wt as stored, ids n
  // uint32 row numbers below V (checked by the caller: the shader reads what it is told), y n·K
  // floats from float y_off. Throws Error for another dtype, K not a multiple of its block, or a
  // view past its buffer.
  void operator()(const Buffer& w, DType wt, int64_t V, const Buffer& ids, Buffer& y, uint64_t y_off, int64_t n,
                  int64_t K);

 private:
  Context& ctx_;
  Variants pipelines_;
};

}  // namespace toy::kernels::vulkan
