// kernels/vulkan/gather.cpp — dispatches gather.comp (beside this file); see gather.h.
#include "toy/kernels/vulkan/gather.h"

#include <array>

#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // gather.comp's push constants
  uint32_t n, K, y_off;
};
}  // namespace

GatherRows::GatherRows(Context& ctx)
    : ctx_(ctx),
      f32_(ctx.pipeline(spirv::gather_f32, 3, sizeof(Push))),
      f16_(ctx.pipeline(spirv::gather_f16, 3, sizeof(Push))),
      bf16_(ctx.pipeline(spirv::gather_bf16, 3, sizeof(Push))),
      q8_0_(ctx.pipeline(spirv::gather_q8_0, 3, sizeof(Push))),
      q4_0_(ctx.pipeline(spirv::gather_q4_0, 3, sizeof(Push))) {}

bool GatherRows::reads(DType wt) {
  return wt == DType::F32 || wt == DType::F16 || wt == DType::BF16 || wt == DType::Q8_0 || wt == DType::Q4_0;
}

void GatherRows::operator()(const Buffer& w, DType wt, int64_t V, const Buffer& ids, Buffer& y, uint64_t y_off,
                            int64_t n, int64_t K) {
  const Pipeline* p = wt == DType::F32    ? &f32_
                      : wt == DType::F16  ? &f16_
                      : wt == DType::BF16 ? &bf16_
                      : wt == DType::Q8_0 ? &q8_0_
                      : wt == DType::Q4_0 ? &q4_0_
                                          : nullptr;
  if (!p) throw Error("vulkan: gather_rows: no shader for " + std::string(name(wt)) + " weights yet");
  if (V < 1 || n < 0 || K < 1 || K % info(wt).block_size || uint64_t(row_bytes(wt, K)) * uint64_t(V) > w.bytes() ||
      uint64_t(V) * uint64_t(K) > UINT32_MAX)
    throw Error("vulkan: gather_rows: V=" + std::to_string(V) + " K=" + std::to_string(K) + " of " +
                std::string(name(wt)) + " in a buffer of " + std::to_string(w.bytes()) + " bytes");
  check_view("gather_rows", "ids", ids, 0, uint64_t(n));
  check_view("gather_rows", "y", y, y_off, uint64_t(n * K));
  if (n == 0) return;
  const Push push{uint32_t(n), uint32_t(K), uint32_t(y_off)};
  const std::array<const Buffer*, 3> buffers{&w, &ids, &y};
  const Groups g = groups("gather_rows", uint64_t(n));  // one workgroup per row
  ctx_.dispatch(*p, buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
