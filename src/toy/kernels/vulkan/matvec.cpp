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
      f16_(ctx.pipeline(spirv::matvec_f16, 3, sizeof(Push))) {}

void Matvec::operator()(const Buffer& w, DType wt, const Buffer& x, Buffer& y, int64_t N, int64_t K) {
  const Pipeline* p = wt == DType::F32 ? &f32_ : wt == DType::F16 ? &f16_ : nullptr;
  if (!p) throw Error("vulkan: matvec: no shader for " + std::string(name(wt)) + " weights yet");
  if (N < 1 || K < 1 || N > int64_t(kMaxGroups) * kMaxGroups || K > int64_t(UINT32_MAX) / N)
    throw Error("vulkan: matvec: shape N=" + std::to_string(N) + " K=" + std::to_string(K) + " out of range");
  if (w.bytes() < uint64_t(row_bytes(wt, K) * N) || x.bytes() < uint64_t(K) * 4 || y.bytes() < uint64_t(N) * 4)
    throw Error("vulkan: matvec: a buffer is smaller than N=" + std::to_string(N) + " K=" + std::to_string(K) +
                " needs");
  const Push push{uint32_t(N), uint32_t(K)};
  const std::array<const Buffer*, 3> buffers{&x, &w, &y};
  const uint32_t gx = uint32_t(std::min<int64_t>(N, kMaxGroups)), gy = uint32_t((N + gx - 1) / gx);
  ctx_.dispatch(*p, buffers, &push, gx, gy);
}

std::vector<float> matvec(Context& ctx, const void* w, DType wt, const float* x, int64_t N, int64_t K) {
  std::vector<float> xr(static_cast<size_t>(K)), y(static_cast<size_t>(N));
  reference::round_activations(wt, x, xr.data(), K);
  const uint64_t w_bytes = uint64_t(row_bytes(wt, K) * N);
  Buffer bw = ctx.buffer(w_bytes), bx = ctx.buffer(uint64_t(K) * 4), by = ctx.buffer(uint64_t(N) * 4);
  ctx.upload(bw, w, w_bytes);
  ctx.upload(bx, xr.data(), bx.bytes());
  Matvec{ctx}(bw, wt, bx, by, N, K);
  ctx.download(by, y.data(), by.bytes());
  return y;
}

}  // namespace toy::kernels::vulkan
