// kernels/vulkan/quantize.cpp — dispatches quantize.comp (beside this file); see quantize.h.
#include "toy/kernels/vulkan/quantize.h"

#include <array>

#include "toy/kernels/kernels.h"
#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"
#include "toy/tensor/quant.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // quantize.comp's push constants
  uint32_t n, x_off;
};

// One pipeline per activation dtype.
std::vector<Variant> variants() {
  return {{DType::Q8_0, spirv::quantize_q8_0},
          {DType::Q8_K, spirv::quantize_q8_k},
          {DType::F16, spirv::quantize_f16},
          {DType::BF16, spirv::quantize_bf16}};
}
}  // namespace

Quantize::Quantize(Context& ctx) : ctx_(ctx), pipelines_(ctx, variants(), 2, sizeof(Push)) {}

bool Quantize::rounds(DType wt) { return Variants::find(variants(), activation_dtype(wt)) != nullptr; }

void Quantize::operator()(DType wt, const Buffer& x, uint64_t x_off, Buffer& xq, int64_t M, int64_t K) {
  const DType a = activation_dtype(wt);
  if (!rounds(wt))
    throw Error("vulkan: quantize: activations for " + std::string(name(wt)) + " weights are " + std::string(name(a)) +
                ": no shader rounds to it");
  const bool blocks = a == DType::Q8_0 || a == DType::Q8_K;
  if (M < 0 || K < 1 || (blocks && K % info(a).block_size))
    throw Error("vulkan: quantize: M=" + std::to_string(M) + " K=" + std::to_string(K) + " for " +
                std::string(name(a)) + " activations");
  const uint64_t n = uint64_t(M * K);
  check_view("quantize", "x", x, x_off, n);
  const uint64_t out = blocks ? uint64_t(row_bytes(a, K)) * uint64_t(M) : n * 4;
  if (xq.bytes() < out)
    throw Error("vulkan: quantize: xq needs " + std::to_string(out) + " bytes, not " + std::to_string(xq.bytes()));
  if (n == 0) return;
  const uint64_t threads = blocks ? n / uint64_t(info(a).block_size) : n;  // blocks, or values
  const Push push{uint32_t(threads), uint32_t(x_off)};
  const std::array<const Buffer*, 2> buffers{&x, &xq};
  const Groups g = groups("quantize", (threads + 63) / 64);
  ctx_.dispatch(pipelines_(a, "quantize"), buffers, &push, g.x, g.y);
}

}  // namespace toy::kernels::vulkan
