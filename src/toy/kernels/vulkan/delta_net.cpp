// kernels/vulkan/delta_net.cpp — dispatches delta_net.comp (beside this file); see delta_net.h.
#include "toy/kernels/vulkan/delta_net.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "toy/kernels/vulkan/shaders.h"
#include "toy/kernels/vulkan/view.h"

namespace toy::kernels::vulkan {

namespace {
struct ConvPush {
  uint32_t T, C, K, x_off, y_off;
};
struct DecayPush {
  uint32_t n, Hv, alpha_off;
};
struct RulePush {
  uint32_t T, Hk, Hv, Dk, Dv, tiled, q_off, k_off, v_off, g_off, beta_off;
  float scale;
};

void check_shape(bool ok, const char* op, const std::string& shape) {
  if (!ok) throw Error("vulkan: " + std::string(op) + ": shape " + shape + " out of range");
}
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

DeltaNet::DeltaNet(Context& ctx)
    : ctx_(ctx),
      conv1d_(ctx.pipeline(spirv::delta_net_conv1d, 5, sizeof(ConvPush))),
      log_decay_(ctx.pipeline(spirv::delta_net_log_decay, 4, sizeof(DecayPush))),
      delta_rule_(ctx.pipeline(spirv::delta_net_delta_rule, 7, sizeof(RulePush))) {}

void DeltaNet::conv1d(const Buffer& x, uint64_t x_off, const Buffer& w, const Buffer& state, Buffer& y,
                      Buffer& new_state, int64_t T, int64_t C, int64_t K) {
  check_shape(T >= 0 && C >= 1 && K >= 2 && (T + K) * C < int64_t(UINT32_MAX), "conv1d",
              "T=" + str(T) + " C=" + str(C) + " K=" + str(K));
  check_view("conv1d", "x", x, x_off, uint64_t(T * C));
  check_view("conv1d", "w", w, 0, uint64_t(C * K));
  check_view("conv1d", "state", state, 0, uint64_t((K - 1) * C));
  check_view("conv1d", "y", y, 0, uint64_t(T * C));
  check_view("conv1d", "new_state", new_state, 0, uint64_t((K - 1) * C));
  const ConvPush push{uint32_t(T), uint32_t(C), uint32_t(K), uint32_t(x_off), 0};
  const std::array<const Buffer*, 5> buffers{&x, &w, &state, &y, &new_state};
  const Groups g = groups("conv1d", (uint64_t((T + K - 1) * C) + 63) / 64);
  ctx_.dispatch(conv1d_, buffers, &push, g.x, g.y);
}

void DeltaNet::log_decay(const Buffer& alpha, uint64_t alpha_off, const Buffer& dt_bias, const Buffer& a, Buffer& g,
                         int64_t n, int64_t Hv) {
  check_shape(n >= 0 && Hv >= 1 && n % Hv == 0 && n < int64_t(UINT32_MAX), "log_decay",
              "n=" + str(n) + " Hv=" + str(Hv));
  check_view("log_decay", "alpha", alpha, alpha_off, uint64_t(n));
  check_view("log_decay", "dt_bias", dt_bias, 0, uint64_t(Hv));
  check_view("log_decay", "a", a, 0, uint64_t(Hv));
  check_view("log_decay", "g", g, 0, uint64_t(n));
  if (n == 0) return;
  const DecayPush push{uint32_t(n), uint32_t(Hv), uint32_t(alpha_off)};
  const std::array<const Buffer*, 4> buffers{&alpha, &dt_bias, &a, &g};
  const Groups gr = groups("log_decay", (uint64_t(n) + 63) / 64);
  ctx_.dispatch(log_decay_, buffers, &push, gr.x, gr.y);
}

void DeltaNet::delta_rule(const DeltaRuleShape& s, const Buffer& q, uint64_t q_off, const Buffer& k, uint64_t k_off,
                          const Buffer& v, uint64_t v_off, const Buffer& g, uint64_t g_off, const Buffer& beta,
                          uint64_t beta_off, Buffer& state, Buffer& o) {
  check_shape(s.T >= 0 && s.Hk >= 1 && s.Hv >= 1 && s.Hv % s.Hk == 0 && s.Dk >= 1 && s.Dv >= 1 &&
                  s.T * std::max(s.Hk * s.Dk, s.Hv * s.Dv) < int64_t(UINT32_MAX) &&
                  s.Hv * s.Dk * s.Dv < int64_t(UINT32_MAX),
              "delta_rule",
              "T=" + str(s.T) + " Hk=" + str(s.Hk) + " Hv=" + str(s.Hv) + " Dk=" + str(s.Dk) + " Dv=" + str(s.Dv));
  check_view("delta_rule", "q", q, q_off, uint64_t(s.T * s.Hk * s.Dk));
  check_view("delta_rule", "k", k, k_off, uint64_t(s.T * s.Hk * s.Dk));
  check_view("delta_rule", "v", v, v_off, uint64_t(s.T * s.Hv * s.Dv));
  check_view("delta_rule", "g", g, g_off, uint64_t(s.T * s.Hv));
  check_view("delta_rule", "beta", beta, beta_off, uint64_t(s.T * s.Hv));
  check_view("delta_rule", "state", state, 0, uint64_t(s.Hv * s.Dk * s.Dv));
  check_view("delta_rule", "o", o, 0, uint64_t(s.T * s.Hv * s.Dv));
  if (s.T == 0) return;
  const RulePush push{uint32_t(s.T),   uint32_t(s.Hk),    uint32_t(s.Hv),     uint32_t(s.Dk),
                      uint32_t(s.Dv),  s.tiled ? 1u : 0u, uint32_t(q_off),    uint32_t(k_off),
                      uint32_t(v_off), uint32_t(g_off),   uint32_t(beta_off), 1.0f / std::sqrt(float(s.Dk))};
  const std::array<const Buffer*, 7> buffers{&q, &k, &v, &g, &beta, &state, &o};
  const Groups gr = groups("delta_rule", (uint64_t(s.Hv * s.Dv) + 63) / 64);  // one thread per column of a state
  ctx_.dispatch(delta_rule_, buffers, &push, gr.x, gr.y);
}

}  // namespace toy::kernels::vulkan
