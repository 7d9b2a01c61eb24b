// kernels/vulkan/convert.cpp — dispatches convert.comp (beside this file); see convert.h.
#include "toy/kernels/vulkan/convert.h"

#include <algorithm>
#include <array>

#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // convert.comp's push constants
  uint32_t n, cols, src_off, src_stride, dst_off, dst_stride;
};
}  // namespace

Convert::Convert(Context& ctx)
    : ctx_(ctx),
      f32_(ctx.pipeline(spirv::convert_f32, 2, sizeof(Push))),
      f16_(ctx.pipeline(spirv::convert_f16, 2, sizeof(Push))) {}

void Convert::operator()(const Buffer& src, uint64_t src_off, Buffer& dst, DType dt, uint64_t dst_off, int64_t n) {
  rows(src, src_off, uint64_t(std::max<int64_t>(n, 0)), dst, dt, dst_off, uint64_t(std::max<int64_t>(n, 0)), 1, n);
}

void Convert::rows(const Buffer& src, uint64_t src_off, uint64_t src_stride, Buffer& dst, DType dt, uint64_t dst_off,
                   uint64_t dst_stride, int64_t rows, int64_t cols) {
  if (dt != DType::F32 && dt != DType::F16)
    throw Error("vulkan: convert: to " + std::string(name(dt)) + ": F32 or F16 only");
  if (cols < 0 || rows < 0 || (rows > 1 && (src_stride < uint64_t(cols) || dst_stride < uint64_t(cols))) ||
      (cols > 0 && uint64_t(rows) > UINT32_MAX / uint64_t(cols)))
    throw Error("vulkan: convert: rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + " strides " +
                std::to_string(src_stride) + ", " + std::to_string(dst_stride));
  if (rows == 0 || cols == 0) return;
  // The elements a view spans: from its offset to the end of its last row.
  const uint64_t src_n = uint64_t(rows - 1) * src_stride + uint64_t(cols),
                 dst_n = uint64_t(rows - 1) * dst_stride + uint64_t(cols);
  check_view("convert", "src", src, src_off, src_n);
  // An F16 view of n halves from dst_off is (dst_off + n) / 2 floats, rounded up.
  const uint64_t per_float = dt == DType::F16 ? 2 : 1;
  if (dst_off > UINT32_MAX || dst_n > UINT32_MAX - dst_off ||
      (dst_off + dst_n + per_float - 1) / per_float * 4 > dst.bytes())
    throw Error("vulkan: convert: dst needs " + std::string(name(dt)) + " elements [" + std::to_string(dst_off) + ", " +
                std::to_string(dst_off) + " + " + std::to_string(dst_n) + ") of a buffer of " +
                std::to_string(dst.bytes()) + " bytes");
  const uint64_t n = uint64_t(rows) * uint64_t(cols);
  const Push push{uint32_t(n),          uint32_t(cols),    uint32_t(src_off),
                  uint32_t(src_stride), uint32_t(dst_off), uint32_t(dst_stride)};
  const std::array<const Buffer*, 2> buffers{&src, &dst};
  const Groups g = groups("convert", (n + 63) / 64);
  ctx_.dispatch(dt == DType::F16 ? f16_ : f32_, buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
