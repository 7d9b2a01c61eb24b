// kernels/vulkan/quantize.cpp — dispatches quantize.comp (beside this file); see quantize.h.
#include "toy/kernels/vulkan/quantize.h"

#include <array>

#include "toy/kernels/kernels.h"
#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // quantize.comp's push constants
  uint32_t n, x_off;
};
}  // namespace

Quantize::Quantize(Context& ctx)
    : ctx_(ctx),
      q8_0_(ctx.pipeline(spirv::quantize_q8_0, 2, sizeof(Push))),
      f16_(ctx.pipeline(spirv::quantize_f16, 2, sizeof(Push))),
      bf16_(ctx.pipeline(spirv::quantize_bf16, 2, sizeof(Push))) {}

bool Quantize::rounds(DType wt) {
  const DType a = activation_dtype(wt);
  return a == DType::Q8_0 || a == DType::F16 || a == DType::BF16;
}

void Quantize::operator()(DType wt, const Buffer& x, uint64_t x_off, Buffer& xq, int64_t M, int64_t K) {
  const DType a = activation_dtype(wt);
  if (!rounds(wt))
    throw Error("vulkan: quantize: activations for " + std::string(name(wt)) + " weights are " + std::string(name(a)) +
                ": no shader rounds to it");
  if (M < 0 || K < 1 || (a == DType::Q8_0 && K % 32))
    throw Error("vulkan: quantize: M=" + std::to_string(M) + " K=" + std::to_string(K) + " for " +
                std::string(name(a)) + " activations");
  const uint64_t n = uint64_t(M * K);
  check_view("quantize", "x", x, x_off, n);
  const uint64_t out = a == DType::Q8_0 ? uint64_t(row_bytes(DType::Q8_0, K)) * uint64_t(M) : n * 4;
  if (xq.bytes() < out)
    throw Error("vulkan: quantize: xq needs " + std::to_string(out) + " bytes, not " + std::to_string(xq.bytes()));
  if (n == 0) return;
  const uint64_t threads = a == DType::Q8_0 ? n / 32 : n;  // blocks, or values
  const Push push{uint32_t(threads), uint32_t(x_off)};
  const std::array<const Buffer*, 2> buffers{&x, &xq};
  const Groups g = groups("quantize", (threads + 63) / 64);
  ctx_.dispatch(a == DType::Q8_0 ? q8_0_ : a == DType::F16 ? f16_ : bf16_, buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
