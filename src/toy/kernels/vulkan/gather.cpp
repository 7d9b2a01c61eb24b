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

std::vector<Variant> variants() {
  return {{DType::F32, spirv::gather_f32},   {DType::F16, spirv::gather_f16},   {DType::BF16, spirv::gather_bf16},
          {DType::Q8_0, spirv::gather_q8_0}, {DType::Q4_0, spirv::gather_q4_0}, {DType::Q5_0, spirv::gather_q5_0},
          {DType::Q4_1, spirv::gather_q4_1}, {DType::Q5_1, spirv::gather_q5_1}, {DType::Q4_K, spirv::gather_q4_k},
          {DType::Q5_K, spirv::gather_q5_k}, {DType::Q6_K, spirv::gather_q6_k}};
}
}  // namespace

GatherRows::GatherRows(Context& ctx) : ctx_(ctx), pipelines_(ctx, variants(), 3, sizeof(Push)) {}

bool GatherRows::reads(DType wt) { return Variants::find(variants(), wt) != nullptr; }

void GatherRows::operator()(const Buffer& w, DType wt, int64_t V, const Buffer& ids, Buffer& y, uint64_t y_off,
                            int64_t n, int64_t K) {
  const Pipeline& p = pipelines_(wt, "gather_rows");
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
  ctx_.dispatch(p, buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
