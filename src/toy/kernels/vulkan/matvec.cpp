// kernels/vulkan/matvec.cpp — dispatches matvec.comp (beside this file); see matvec.h.
#include "toy/kernels/vulkan/matvec.h"

#include <array>
#include <span>

#include "toy/kernels/kernels.h"
#include "toy/kernels/reference.h"
#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"
#include "toy/tensor/quant.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // matvec.comp's push constants
  uint32_t m0, N, K, x_off, y_off, w_off, has_bias;
};
constexpr int64_t kMaxGroups = 65535;  // per dimension, the least every device allows
constexpr int64_t kRowsPerGroup = 8;   // rows of W a workgroup takes (matvec.comp's 64 / kLanes)
constexpr int64_t kTile = 8;           // rows of x a workgroup takes (matvec.comp's kTile)

// matvec.comp per weight dtype, compiled for a row of x a workgroup (tile 1) and for 8 (tile 8).
std::vector<Variant> variants(int64_t tile) {
  using namespace spirv;
  const struct {
    DType dtype;
    std::span<const uint32_t> one, eight;
  } shaders[] = {{DType::F32, matvec_f32, matvec8_f32},    {DType::F16, matvec_f16, matvec8_f16},
                 {DType::BF16, matvec_bf16, matvec8_bf16}, {DType::Q8_0, matvec_q8_0, matvec8_q8_0},
                 {DType::Q4_0, matvec_q4_0, matvec8_q4_0}, {DType::Q5_0, matvec_q5_0, matvec8_q5_0},
                 {DType::Q4_1, matvec_q4_1, matvec8_q4_1}, {DType::Q5_1, matvec_q5_1, matvec8_q5_1},
                 {DType::Q4_K, matvec_q4_k, matvec8_q4_k}, {DType::Q5_K, matvec_q5_k, matvec8_q5_k},
                 {DType::Q6_K, matvec_q6_k, matvec8_q6_k}};
  std::vector<Variant> v;
  for (const auto& sh : shaders) v.push_back({sh.dtype, tile == 1 ? sh.one : sh.eight});
  return v;
}
}  // namespace

Matvec::Matvec(Context& ctx)
    : ctx_(ctx), rows_(ctx, variants(1), 4, sizeof(Push)), tiles_(ctx, variants(kTile), 4, sizeof(Push)) {}

bool has_matvec(DType wt) { return Variants::find(variants(1), wt) != nullptr; }

uint64_t x_bytes(DType wt, int64_t K) {
  const DType a = activation_dtype(wt);
  return a == DType::Q8_0 || a == DType::Q8_K ? uint64_t(row_bytes(a, K)) : uint64_t(K) * 4;
}

void Matvec::operator()(const Buffer& w, uint64_t w_off, DType wt, const Buffer& x, uint64_t x_off, Buffer& y,
                        uint64_t y_off, int64_t M, int64_t N, int64_t K, const Buffer* b) {
  const Pipeline& one = rows_(wt, "matvec");  // Error for a dtype without a shader
  if (M < 1 || N < 1 || K < 1 || M > kMaxGroups * kTile || N > kMaxGroups * kMaxGroups || K > int64_t(UINT32_MAX) / N ||
      M > int64_t(UINT32_MAX) / N)
    throw Error("vulkan: matvec: shape M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                " out of range");
  if (K % info(wt).block_size)
    throw Error("vulkan: matvec: K=" + std::to_string(K) + " is not a multiple of " + std::string(name(wt)) +
                "'s block of " + std::to_string(info(wt).block_size));
  const uint64_t row = x_bytes(wt, K);
  const DType a = activation_dtype(wt);
  const bool q8_0 = a == DType::Q8_0;  // x in blocks of 34 bytes, read in halves; else in words
  if (x_off % (q8_0 ? 2 : 4))
    throw Error("vulkan: matvec: x at byte " + std::to_string(x_off) + ", not on a " + (q8_0 ? "2" : "4") +
                "-byte boundary");
  // W's offset in the shader's unit: bytes for blocks, else elements (a whole number of them).
  const uint64_t w_unit = info(wt).block_size > 1 ? 1 : uint64_t(info(wt).type_size);
  if (w_off % (wt == DType::Q8_0 || wt == DType::Q4_0 ? 2 : w_unit))  // Q8_0 and Q4_0 blocks: read in halves
    throw Error("vulkan: matvec: W at byte " + std::to_string(w_off) + ", not a " + std::string(name(wt)) + " value");
  if (w_off > UINT32_MAX || w.bytes() < w_off + uint64_t(row_bytes(wt, K) * N) || x_off > UINT32_MAX ||
      x.bytes() < x_off + row * uint64_t(M))
    throw Error("vulkan: matvec: a buffer is smaller than M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " needs");
  check_view("matvec", "y", y, y_off, uint64_t(M * N));
  if (b) check_view("matvec", "b", *b, 0, uint64_t(N));
  const std::array<const Buffer*, 4> buffers{&x, &w, &y, b ? b : &y};
  // Workgroups of 8 rows n of W and a tile of 8 rows m of x, then one row m each for the rest
  // (the push constants are copied as each dispatch is recorded).
  const Groups g = groups("matvec", uint64_t((N + kRowsPerGroup - 1) / kRowsPerGroup));
  const int64_t tiled = M / kTile * kTile;  // rows of x in whole tiles
  Push push{0,
            uint32_t(N),
            uint32_t(K),
            uint32_t(q8_0 || a == DType::Q8_K ? x_off : x_off / 4),
            uint32_t(y_off),
            uint32_t(w_off / w_unit),
            b ? 1u : 0u};
  if (tiled > 0) ctx_.dispatch(tiles_(wt, "matvec"), buffers, &push, g.x, g.y, uint32_t(tiled / kTile));
  push.m0 = uint32_t(tiled);
  if (M > tiled) ctx_.dispatch(one, buffers, &push, g.x, g.y, uint32_t(M - tiled));
}

std::vector<float> matvec(Context& ctx, const void* w, DType wt, const float* x, int64_t M, int64_t N, int64_t K,
                          const float* b) {
  std::vector<float> y(static_cast<size_t>(M * N));
  const uint64_t w_bytes = uint64_t(row_bytes(wt, K) * N), row = x_bytes(wt, K);
  Buffer bw = ctx.buffer(w_bytes), bx = ctx.buffer(row * uint64_t(M)), by = ctx.buffer(y.size() * 4);
  ctx.upload(bw, w, w_bytes);
  std::vector<uint8_t> xr(row * uint64_t(M));
  for (int64_t m = 0; m < M; ++m) {
    uint8_t* dst = xr.data() + row * uint64_t(m);
    if (activation_dtype(wt) == DType::Q8_0)
      reference::quantize_activations_q8_0(x + m * K, reinterpret_cast<BlockQ8_0*>(dst), K);
    else if (activation_dtype(wt) == DType::Q8_K)
      quantize(DType::Q8_K, x + m * K, dst, K);
    else
      reference::round_activations(wt, x + m * K, reinterpret_cast<float*>(dst), K);
  }
  ctx.upload(bx, xr.data(), xr.size());
  Buffer bb = ctx.buffer(b ? uint64_t(N) * 4 : 4);
  if (b) ctx.upload(bb, b, uint64_t(N) * 4);
  Matvec{ctx}(bw, 0, wt, bx, 0, by, 0, M, N, K, b ? &bb : nullptr);
  ctx.download(by, y.data(), by.bytes());
  return y;
}

}  // namespace toy::kernels::vulkan
