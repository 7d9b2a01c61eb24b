// kernels/vulkan/convert.cpp — dispatches convert.comp (beside this file); see convert.h.
#include "toy/kernels/vulkan/convert.h"

#include <array>

#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // convert.comp's push constants
  uint32_t n, src_off, dst_off;
};
}  // namespace

Convert::Convert(Context& ctx)
    : ctx_(ctx),
      f32_(ctx.pipeline(spirv::convert_f32, 2, sizeof(Push))),
      f16_(ctx.pipeline(spirv::convert_f16, 2, sizeof(Push))) {}

void Convert::operator()(const Buffer& src, uint64_t src_off, Buffer& dst, DType dt, uint64_t dst_off, int64_t n) {
  if (dt != DType::F32 && dt != DType::F16)
    throw Error("vulkan: convert: to " + std::string(name(dt)) + ": F32 or F16 only");
  if (n < 0) throw Error("vulkan: convert: n=" + std::to_string(n));
  check_view("convert", "src", src, src_off, uint64_t(n));
  // An F16 view of n halves from dst_off is (dst_off + n) / 2 floats, rounded up.
  const uint64_t per_float = dt == DType::F16 ? 2 : 1;
  if (dst_off > UINT32_MAX || uint64_t(n) > UINT32_MAX - dst_off ||
      (dst_off + uint64_t(n) + per_float - 1) / per_float * 4 > dst.bytes())
    throw Error("vulkan: convert: dst needs " + std::string(name(dt)) + " elements [" + std::to_string(dst_off) + ", " +
                std::to_string(dst_off) + " + " + std::to_string(n) + ") of a buffer of " +
                std::to_string(dst.bytes()) + " bytes");
  if (n == 0) return;
  const Push push{uint32_t(n), uint32_t(src_off), uint32_t(dst_off)};
  const std::array<const Buffer*, 2> buffers{&src, &dst};
  const Groups g = groups("convert", (uint64_t(n) + 63) / 64);
  ctx_.dispatch(dt == DType::F16 ? f16_ : f32_, buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
