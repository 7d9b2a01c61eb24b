// kernels/vulkan/attention.cpp — dispatches attention.comp (beside this file); see attention.h.
#include "toy/kernels/vulkan/attention.h"

#include <algorithm>
#include <array>

#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct Push {  // attention.comp's push constants
  uint32_t T, S, H, Hkv, Dh, q_off, k_off, v_off, o_off, t0, window, causal;
  float scale, softcap;
};
// The scores of one dispatch are at most this many bytes: a long prompt goes in chunks of rows.
constexpr uint64_t kScratchBytes = uint64_t(64) << 20;

// A view of n elements of dtype kv at `offset` elements: the floats it touches.
void check_kv(const char* what, const Buffer& b, DType kv, uint64_t offset, uint64_t n) {
  if (kv == DType::F32) return check_view("attention", what, b, offset, n);
  if (offset > UINT32_MAX || n > UINT32_MAX - offset || (offset + n + 1) / 2 * 4 > b.bytes())
    throw Error("vulkan: attention: " + std::string(what) + " needs halves [" + std::to_string(offset) + ", " +
                std::to_string(offset) + " + " + std::to_string(n) + ") of a buffer of " + std::to_string(b.bytes()) +
                " bytes");
}
}  // namespace

Attention::Attention(Context& ctx)
    : ctx_(ctx),
      f32_(ctx.pipeline(spirv::attention_f32, 5, sizeof(Push))),
      f16_(ctx.pipeline(spirv::attention_f16, 5, sizeof(Push))) {}

void Attention::operator()(const Buffer& q, uint64_t q_off, const Buffer& k, uint64_t k_off, const Buffer& v,
                           uint64_t v_off, DType kv, Buffer& o, uint64_t o_off, int64_t T, int64_t S, int64_t H,
                           int64_t Hkv, int64_t Dh, AttentionParams params) {
  if (kv != DType::F32 && kv != DType::F16)
    throw Error("vulkan: attention: keys and values of " + std::string(name(kv)) + ": F32 or F16 only");
  if (T < 1 || S < T || H < 1 || Hkv < 1 || H % Hkv || Dh < 1 || params.window < 0 ||
      S * std::max(H, Hkv) > int64_t(UINT32_MAX) / Dh)
    throw Error("vulkan: attention: shape T=" + std::to_string(T) + " S=" + std::to_string(S) + " H=" +
                std::to_string(H) + " Hkv=" + std::to_string(Hkv) + " Dh=" + std::to_string(Dh) + " out of range");
  check_view("attention", "q", q, q_off, uint64_t(T * H * Dh));
  check_view("attention", "o", o, o_off, uint64_t(T * H * Dh));
  check_kv("k", k, kv, k_off, uint64_t(S * Hkv * Dh));
  check_kv("v", v, kv, v_off, uint64_t(S * Hkv * Dh));
  const int64_t rows = std::clamp<int64_t>(int64_t(kScratchBytes / uint64_t(H * S * 4)), 1, T);  // per dispatch
  Buffer scores = ctx_.buffer(uint64_t(rows * H * S) * 4);
  const std::array<const Buffer*, 5> buffers{&q, &k, &v, &scores, &o};
  for (int64_t t0 = 0; t0 < T; t0 += rows) {
    const Push push{uint32_t(T),
                    uint32_t(S),
                    uint32_t(H),
                    uint32_t(Hkv),
                    uint32_t(Dh),
                    uint32_t(q_off),
                    uint32_t(k_off),
                    uint32_t(v_off),
                    uint32_t(o_off),
                    uint32_t(t0),
                    uint32_t(std::min<int64_t>(params.window, UINT32_MAX)),
                    params.causal ? 1u : 0u,
                    params.scale,
                    params.softcap};
    const Groups g = groups("attention", uint64_t(std::min(rows, T - t0) * H));  // one workgroup per (t, h)
    ctx_.dispatch(kv == DType::F16 ? f16_ : f32_, buffers, &push, g.x, g.y);
  }
}

}  // namespace toy::kernels::vulkan
