// kernels/vulkan/matvec.cpp — dispatches matvec.comp (beside this file); see matvec.h.
#include "toy/kernels/vulkan/matvec.h"

#include <array>

#include "toy/kernels/reference.h"
#include "toy/kernels/vulkan/shaders.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // matvec.comp's push constants
  uint32_t N, K;
};
constexpr uint32_t kMaxGroups = 65535;  // per dimension, the least every device allows
}  // namespace

Matvec::Matvec(Context& ctx)
    : ctx_(ctx),
      f32_(ctx.pipeline(spirv::matvec_f32, 3, sizeof(Push))),
      f16_(ctx.pipeline(spirv::matvec_f16, 3, sizeof(Push))),
      q8_0_(ctx.pipeline(spirv::matvec_q8_0, 3, sizeof(Push))) {}

uint64_t x_bytes(DType wt, int64_t K) {
  return wt == DType::Q8_0 ? uint64_t(row_bytes(DType::Q8_0, K)) : uint64_t(K) * 4;
}

void Matvec::operator()(const Buffer& w, DType wt, const Buffer& x, Buffer& y, int64_t N, int64_t K) {
  const Pipeline* p = wt == DType::F32 ? &f32_ : wt == DType::F16 ? &f16_ : wt == DType::Q8_0 ? &q8_0_ : nullptr;
  if (!p) throw Error("vulkan: matvec: no shader for " + std::string(name(wt)) + " weights yet");
  if (N < 1 || K < 1 || N > int64_t(kMaxGroups) * kMaxGroups || K > int64_t(UINT32_MAX) / N)
    throw Error("vulkan: matvec: shape N=" + std::to_string(N) + " K=" + std::to_string(K) + " out of range");
  if (K % info(wt).block_size)
    throw Error("vulkan: matvec: K=" + std::to_string(K) + " is not a multiple of " + std::string(name(wt)) +
                "'s block of " + std::to_string(info(wt).block_size));
  if (w.bytes() < uint64_t(row_bytes(wt, K) * N) || x.bytes() < x_bytes(wt, K) || y.bytes() < uint64_t(N) * 4)
    throw Error("vulkan: matvec: a buffer is smaller than N=" + std::to_string(N) + " K=" + std::to_string(K) +
                " needs");
  const Push push{uint32_t(N), uint32_t(K)};
  const std::array<const Buffer*, 3> buffers{&x, &w, &y};
  const uint32_t gx = uint32_t(std::min<int64_t>(N, kMaxGroups)), gy = uint32_t((N + gx - 1) / gx);
  ctx_.dispatch(*p, buffers, &push, gx, gy);
}

std::vector<float> matvec(Context& ctx, const void* w, DType wt, const float* x, int64_t N, int64_t K) {
  std::vector<float> y(static_cast<size_t>(N));
  const uint64_t w_bytes = uint64_t(row_bytes(wt, K) * N);
  Buffer bw = ctx.buffer(w_bytes), bx = ctx.buffer(x_bytes(wt, K)), by = ctx.buffer(uint64_t(N) * 4);
  ctx.upload(bw, w, w_bytes);
  if (wt == DType::Q8_0) {
    std::vector<BlockQ8_0> xq(static_cast<size_t>(K / 32));
    reference::quantize_activations_q8_0(x, xq.data(), K);
    ctx.upload(bx, xq.data(), bx.bytes());
  } else {
    std::vector<float> xr(static_cast<size_t>(K));
    reference::round_activations(wt, x, xr.data(), K);
    ctx.upload(bx, xr.data(), bx.bytes());
  }
  Matvec{ctx}(bw, wt, bx, by, N, K);
  ctx.download(by, y.data(), by.bytes());
  return y;
}

}  // namespace toy::kernels::vulkan
