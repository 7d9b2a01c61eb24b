#pragma once
// kernels/vulkan/delta_net.h — a Gated DeltaNet layer's own pieces on a Vulkan device
// (delta_net.comp beside it): the causal convolution (the CPU's bits), the log-decay and the
// token-by-token gated delta rule (through the device's exp and log: within the bounds of
// tests/test_vulkan_kernels.cpp). Deterministic. Only in a TOY_VULKAN build.
#include <cstdint>

#include "toy/kernels/vulkan/context.h"

namespace toy::kernels::vulkan {

struct DeltaRuleShape {
  int64_t T, Hk, Hv, Dk, Dv;
  bool tiled;  // query/key head of value head h: h % Hk (qwen35), else h / (Hv / Hk) (qwen3next)
};

class DeltaNet {
 public:
  explicit DeltaNet(Context& ctx);
  // y [T, C] = the causal depthwise convolution of x [T, C] (from float x_off) with w [C, K] over
  // state [K − 1, C]; new_state gets the window's last K − 1 rows (state is left as it was).
  void conv1d(const Buffer& x, uint64_t x_off, const Buffer& w, const Buffer& state, Buffer& y, Buffer& new_state,
              int64_t T, int64_t C, int64_t K);
  // g [n] = softplus(α + dt_bias[h])·a[h], h = i % Hv; α from float alpha_off.
  void log_decay(const Buffer& alpha, uint64_t alpha_off, const Buffer& dt_bias, const Buffer& a, Buffer& g, int64_t n,
                 int64_t Hv);
  // o [T, Hv, Dv] from q, k [T, Hk, Dk], v [T, Hv, Dv], g, beta [T, Hv] (each from its float
  // offset), updating state [Hv, Dk, Dv] token by token.
  void delta_rule(const DeltaRuleShape& s, const Buffer& q, uint64_t q_off, const Buffer& k, uint64_t k_off,
                  const Buffer& v, uint64_t v_off, const Buffer& g, uint64_t g_off, const Buffer& beta,
                  uint64_t beta_off, Buffer& state, Buffer& o);

 private:
  Context& ctx_;
  Pipeline conv1d_, log_decay_, delta_rule_;
};

}  // namespace toy::kernels::vulkan
