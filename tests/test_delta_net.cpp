// tests/test_delta_net.cpp — the Gated DeltaNet pieces (qwen35, qwen3next): the chunked delta rule
// against the token-by-token recurrence in double, a sequence fed in pieces through its state, the
// causal convolution, the L2 norm, the gradients of the convolution, the L2 norm and the log-decay
// against finite differences of double references, and the recurrent state as a layer's cache. The models
// themselves are checked against llama.cpp by test_models.cpp and test_archs.cpp (long reference).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "helpers.h"
#include "toy/archs/model.h"
#include "toy/blocks/delta_net.h"
#include "toy/engines/decode.h"
#include "toy/kernels/delta_net_grad.h"
#include "toy/kernels/reference.h"
#include "toy/primitives/delta_rule.h"
#include "toy/primitives/device.h"

using namespace toy;
using test::nmse;
using test::randn;

namespace {

// Inputs of one sequence as a Gated DeltaNet layer makes them: unit q and k, β in (0, 1), g < 0.
struct Inputs {
  Tensor q, k, v, g, beta, state;
};
Inputs inputs(int64_t T, int64_t Hk, int64_t Hv, int64_t D, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Inputs in{.q = l2_norm(randn({T, Hk, D}, rng), 1e-6f),
            .k = l2_norm(randn({T, Hk, D}, rng), 1e-6f),
            .v = randn({T, Hv, D}, rng),
            .g = Tensor::empty({T, Hv}),
            .beta = sigmoid(randn({T, Hv}, rng)),
            .state = randn({Hv, D, D}, rng, 0.5f)};
  std::uniform_real_distribution<float> decay(-2.0f, 0.0f);  // from a strong decay (e⁻²) to none
  for (int64_t i = 0; i < in.g.numel(); ++i) in.g.data_mut()[i] = decay(rng);
  return in;
}

std::span<const float> values(const Tensor& t) { return {t.data(), size_t(t.numel())}; }

kernels::DeltaRuleGeometry geometry(const Inputs& in, HeadMap map) {
  return {.T = in.q.size(0),
          .Hk = in.q.size(1),
          .Hv = in.v.size(1),
          .Dk = in.q.size(2),
          .Dv = in.v.size(2),
          .tiled = map == HeadMap::Tiled};
}

// The token-by-token recurrence in double from in.state: the output and the final state.
std::pair<Tensor, Tensor> double_recurrence(const Inputs& in, HeadMap map) {
  Tensor state = in.state.clone(), o = Tensor::empty(in.v.shape());
  kernels::reference::gated_delta_rule<double>(geometry(in, map), in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                                               in.beta.data(), state.data_mut(), o.data_mut());
  return {o, state};
}

}  // namespace

// 1,000 tokens (16 chunks of 64 and a partial one), both head maps, and Qwen3.5's head size: the
// chunked form equals the plain recurrence computed in double, output and final state, to float32
// precision.
TEST(DeltaRule, ChunkedFormMatchesTheRecurrenceInDouble) {
  const int64_t T = 1000, Hk = 2, Hv = 4, D = 16;
  for (HeadMap map : {HeadMap::Tiled, HeadMap::Grouped}) {
    Inputs in = inputs(T, Hk, Hv, D, 7);
    const auto [want, want_state] = double_recurrence(in, map);
    Tensor state = in.state.clone();
    const Tensor got = gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, state, map);
    EXPECT_LE(nmse(values(want), values(got)), 1e-12);
    EXPECT_LE(nmse(values(want_state), values(state)), 1e-12);
    // Chunks of one token are the recurrence itself, in float.
    Tensor one_state = in.state.clone(), one = Tensor::empty({T, Hv, D});
    kernels::gated_delta_rule(geometry(in, map), in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                              one_state.data_mut(), one.data_mut(), 1);
    EXPECT_LE(nmse(values(want), values(one)), 1e-12);
  }
  // Qwen3.5's head size (128) over two chunks of 64 and a tail of 3 tokens (run as the recurrence).
  const int64_t T2 = 131, D2 = 128;
  Inputs in = inputs(T2, 1, 2, D2, 9);
  const auto [want, want_state] = double_recurrence(in, HeadMap::Tiled);
  Tensor state = in.state.clone();
  const Tensor got = gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, state, HeadMap::Tiled);
  EXPECT_LE(nmse(values(want), values(got)), 1e-12);
  EXPECT_LE(nmse(values(want_state), values(state)), 1e-12);
}

// The recorded gradient of q, k, v, g and β (token by token backwards through the states) against
// central differences of the forward, over 12 tokens, both head maps (the chunked form's equality
// with the recurrence is checked above, so a short sequence suffices and keeps this fast).
TEST(DeltaRule, GradientsMatchFiniteDifferences) {
  for (HeadMap map : {HeadMap::Tiled, HeadMap::Grouped}) {
    const Inputs in = inputs(12, 2, 4, 4, 5);
    std::vector<Tensor> x = {in.q, in.k, in.v, in.g, in.beta};
    auto f = [&](std::span<const Tensor> t) {
      Tensor state = in.state.clone();
      return gated_delta_rule(t[0], t[1], t[2], t[3], t[4], state, map);
    };
    std::mt19937_64 rng(2);
    test::check_gradients({.f = f, .name = "gated_delta_rule"}, x, randn({12, 4, 4}, rng));
  }
}

// The two head maps differ (value head 1 of 4 reads key head 1 when tiled, 0 when grouped), and
// the reference follows them: swapping the map changes the output.
TEST(DeltaRule, HeadMapsDiffer) {
  Inputs in = inputs(8, 2, 4, 8, 3);
  Tensor s1 = in.state.clone(), s2 = in.state.clone();
  const Tensor tiled = gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, s1, HeadMap::Tiled);
  const Tensor grouped = gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, s2, HeadMap::Grouped);
  EXPECT_GT(nmse(values(tiled), values(grouped)), 1e-3);
}

// A sequence fed in pieces of 37, 1, 5, 64 and 93 tokens through the state gives the outputs of one
// call, and the same final state (to float32 rounding: chunks fall at other places).
TEST(DeltaRule, PiecesThroughTheStateEqualOneCall) {
  const int64_t T = 200, Hk = 2, Hv = 4, D = 16;
  Inputs in = inputs(T, Hk, Hv, D, 11);
  Tensor whole_state = in.state.clone();
  const Tensor whole = gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, whole_state, HeadMap::Tiled);
  Tensor state = in.state.clone();
  std::vector<float> got;
  int64_t at = 0;
  for (int64_t n : {37, 1, 5, 64, 93}) {
    auto rows = [&](const Tensor& x) { return x.row_slice(at, at + n).clone(); };
    const Tensor o =
        gated_delta_rule(rows(in.q), rows(in.k), rows(in.v), rows(in.g), rows(in.beta), state, HeadMap::Tiled);
    got.insert(got.end(), o.data(), o.data() + o.numel());
    at += n;
  }
  EXPECT_LE(nmse(values(whole), got), 1e-12);
  EXPECT_LE(nmse(values(whole_state), values(state)), 1e-12);
  EXPECT_THROW(gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, state = Tensor::zeros({Hv, D + 1, D}), HeadMap::Tiled),
               ShapeError);
}

// y[t, c] = Σ_j w[c, j]·[state; x][t + j, c], by hand on 2 channels, width 3; then the same
// sequence in two pieces through the window state.
TEST(DeltaRule, CausalConvolutionKeepsItsWindow) {
  const Tensor x = Tensor::from({4, 2}, std::vector<float>{1, 10, 2, 20, 3, 30, 4, 40});
  const Tensor w = Tensor::from({2, 3}, std::vector<float>{1, 2, 3, -1, 0, 1});  // channel 0: 1,2,3; 1: −1,0,1
  Tensor state = Tensor::zeros({2, 2});
  const Tensor y = causal_conv1d(x, w, state);
  // channel 0: [0,0,1]·[1,2,3] = 3, [0,1,2] → 8, [1,2,3] → 14, [2,3,4] → 20; channel 1: x_t − x_{t−2}
  EXPECT_EQ(y.to_vector(), (std::vector<float>{3, 10, 8, 20, 14, 20, 20, 20}));
  EXPECT_EQ(state.to_vector(), (std::vector<float>{3, 30, 4, 40}));
  Tensor s2 = Tensor::zeros({2, 2});
  std::vector<float> pieces = causal_conv1d(x.row_slice(0, 1).clone(), w, s2).to_vector();
  for (float v : causal_conv1d(x.row_slice(1, 4).clone(), w, s2).to_vector()) pieces.push_back(v);
  EXPECT_EQ(pieces, y.to_vector());
  EXPECT_EQ(l2_norm(Tensor::from({2, 2}, std::vector<float>{3, 4, 0, 0}), 1e-6f).to_vector(),
            (std::vector<float>{0.6f, 0.8f, 0, 0}));
}

// The log-decay g = softplus(α + dt_bias)·a per value head.
TEST(DeltaRule, LogDecay) {
  const Tensor g =
      delta_log_decay(Tensor::from({2, 2}, std::vector<float>{0, 1, -1, 30}),
                      Tensor::from({2}, std::vector<float>{0, 0.5f}), Tensor::from({2}, std::vector<float>{-1, -2}));
  const std::vector<float> v = g.to_vector();
  EXPECT_NEAR(v[0], -std::log(2.0), 1e-6);
  EXPECT_NEAR(v[1], -2 * std::log1p(std::exp(1.5)), 1e-5);
  EXPECT_NEAR(v[2], -std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_FLOAT_EQ(v[3], -61.0f);  // above 20: softplus(x) = x
}

// The gradients of the pieces around the delta rule against central differences of naive double
// references (kernels/delta_net_grad.h): the convolution in x and w, continuing from a non-zero
// window (7 tokens, 3 channels, width 4); the L2 norm (rows of 5); the log-decay in α, dt_bias and
// a. Then the forward kernels equal those references to float rounding.
TEST(DeltaRule, ConvolutionNormAndDecayGradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(21);
  const int64_t T = 7, C = 3, K = 4;
  const Tensor state0 = randn({K - 1, C}, rng);
  auto conv = [&](std::span<const Tensor> t) {
    Tensor state = state0.clone();
    return causal_conv1d(t[0], t[1], state);
  };
  auto conv_ref = [&](std::span<const Tensor> t) {
    Tensor state = state0.clone(), y = Tensor::empty({T, C});
    kernels::reference::causal_conv1d<double>(t[0].data(), t[1].data(), state.data_mut(), y.data_mut(), T, C, K);
    return y;
  };
  std::vector<Tensor> cx = {randn({T, C}, rng), randn({C, K}, rng)};
  test::check_gradients({.f = conv, .numeric = conv_ref, .name = "causal_conv1d"}, cx, randn({T, C}, rng));

  auto l2 = [](std::span<const Tensor> t) { return l2_norm(t[0], 1e-6f); };
  auto l2_ref = [](std::span<const Tensor> t) {
    Tensor y = Tensor::empty(t[0].shape());
    kernels::reference::l2_norm<double>(t[0].data(), 1e-6f, 4, 5, y.data_mut());
    return y;
  };
  std::vector<Tensor> lx = {randn({2, 2, 5}, rng)};
  test::check_gradients({.f = l2, .numeric = l2_ref, .name = "l2_norm"}, lx, randn({2, 2, 5}, rng));

  auto decay = [](std::span<const Tensor> t) { return delta_log_decay(t[0], t[1], t[2]); };
  std::vector<Tensor> dx = {randn({3, 2, 4}, rng, 2.0f), randn({4}, rng), randn({4}, rng, 0.3f, -1.0f)};
  test::check_gradients({.f = decay, .name = "delta_log_decay"}, dx, randn({3, 2, 4}, rng));

  Tensor s1 = state0.clone(), s2 = state0.clone(), want = Tensor::empty({T, C});
  const Tensor got = causal_conv1d(cx[0].detach(), cx[1].detach(), s1);
  kernels::reference::causal_conv1d<double>(cx[0].data(), cx[1].data(), s2.data_mut(), want.data_mut(), T, C, K);
  EXPECT_LE(nmse(values(want), values(got)), 1e-12);
  EXPECT_EQ(s1.to_vector(), s2.to_vector());
}

// A small random qwen35 (a Gated DeltaNet layer, then an attention layer): a prompt fed in pieces
// through the engine's caches gives the logits of one batch; after reset() the state starts from
// zero again; the KV cache has rows for the attention layer only; a layer asked to continue a
// sequence whose state it does not hold refuses.
TEST(DeltaNet, TheStateIsTheLayersCache) {
  auto u32 = [](int64_t v) { return gguf::Value::of_u32(uint32_t(v)); };
  const ModelShape shape{.arch = "qwen35",
                         .n_vocab = 64,
                         .d_model = 32,
                         .n_layer = 2,
                         .n_head = 2,
                         .n_kv_head = 1,
                         .d_ff = 64,
                         .n_ctx = 64,
                         .tied_output = true,
                         .keys = {{"ssm.state_size", u32(8)}, {"full_attention_interval", u32(2)}}};
  auto model = random_model(shape, 5);
  const std::vector<int32_t> ids = {1, 7, 9, 3, 60, 2, 2, 41};
  DecodeEngine engine(*model);
  const std::vector<float> whole = engine.feed(ids).to_vector();
  engine.reset();
  std::vector<float> pieces = engine.feed(std::span(ids).first(5)).to_vector();
  for (float v : engine.feed(std::span(ids).subspan(5)).to_vector()) pieces.push_back(v);
  EXPECT_LE(nmse(whole, pieces), 1e-12);
  engine.reset();
  EXPECT_EQ(engine.feed(ids).to_vector(), whole);
  // KV rows for the attention layer only: layers × (K, V) × n_ctx × Hkv × Dh × 4 bytes, one layer.
  EXPECT_EQ(engine.kv_cache_bytes(), size_t(1 * 2 * 64 * 1 * 16) * 4);
  EXPECT_LE(nmse(whole, model->forward(Tensor::from_ids({1, 8}, ids), Ctx{}).to_vector()), 1e-12);  // no cache

  NoGrad no_grad;
  RecurrentState fresh;
  KvCache kv(2, 64, 1, 16);
  const Ctx later{.seqs = {{.pos0 = 5, .kv = &kv, .state = &fresh}}};
  EXPECT_THROW(model->forward(Tensor::from_ids({1, 1}, std::vector<int32_t>{3}), later), std::logic_error);
}

#ifdef TOY_VULKAN
// The same pieces on vulkan:0 (lavapipe in CI) through the primitives, their tensors uploaded: the
// convolution and its window give the CPU's bits (the same products in the same order); the delta
// rule, token by token on the device, holds the CPU's limit against the double recurrence (1,000
// tokens, both head maps, the state included); the L2 norm and the log-decay (the device's sqrt,
// log and exp) hold float32 precision against their double references, the log's absolute error
// within [0.5, 2] (2⁻²¹, Vulkan's promise) included.
namespace {
const Device kGpu = Device::vulkan(0);
}  // namespace

TEST(DeltaRule, OnVulkanTheConvolutionGivesTheCpuBits) {
  TOY_REQUIRE_VULKAN();
  std::mt19937_64 rng(5);
  const int64_t T = 37, C = 70, K = 4;
  const Tensor x = randn({T, C}, rng), w = randn({C, K}, rng), s0 = randn({K - 1, C}, rng);
  Tensor cpu_state = s0.clone(), gpu_state = to_device(s0, kGpu);
  const Tensor want = causal_conv1d(x, w, cpu_state);
  const Tensor got = to_host(causal_conv1d(to_device(x, kGpu), to_device(w, kGpu), gpu_state));
  EXPECT_EQ(got.to_vector(), want.to_vector());
  EXPECT_EQ(gpu_state.device(), kGpu);
  EXPECT_EQ(to_host(gpu_state).to_vector(), cpu_state.to_vector());
  const Tensor x1 = randn({1, C}, rng);  // a decode step from the window the prompt left
  EXPECT_EQ(to_host(causal_conv1d(to_device(x1, kGpu), to_device(w, kGpu), gpu_state)).to_vector(),
            causal_conv1d(x1, w, cpu_state).to_vector());
  EXPECT_EQ(to_host(gpu_state).to_vector(), cpu_state.to_vector());
}

TEST(DeltaRule, OnVulkanMatchesTheRecurrenceInDouble) {
  TOY_REQUIRE_VULKAN();
  const int64_t T = 1000, Hk = 2, Hv = 4, D = 16;
  for (HeadMap map : {HeadMap::Tiled, HeadMap::Grouped}) {
    const Inputs in = inputs(T, Hk, Hv, D, 7);
    const auto [want, want_state] = double_recurrence(in, map);
    Tensor state = to_device(in.state, kGpu);
    const Tensor got = to_host(gated_delta_rule(to_device(in.q, kGpu), to_device(in.k, kGpu), to_device(in.v, kGpu),
                                                to_device(in.g, kGpu), to_device(in.beta, kGpu), state, map));
    EXPECT_LE(nmse(values(want), values(got)), 1e-12);
    const Tensor host_state = to_host(state);
    EXPECT_LE(nmse(values(want_state), values(host_state)), 1e-12);
  }
}

TEST(DeltaRule, OnVulkanTheNormAndTheDecayHoldFloatPrecision) {
  TOY_REQUIRE_VULKAN();
  std::mt19937_64 rng(9);
  const int64_t R = 9, D = 130, Hv = 8;
  const Tensor x = randn({R, D}, rng);
  const std::vector<float> y = to_host(l2_norm(to_device(x, kGpu), 1e-6f)).to_vector();
  std::vector<float> ref(size_t(R * D));
  kernels::reference::l2_norm<double>(x.data(), 1e-6f, R, D, ref.data());
  // The sum: ceil(D/64) + 6 roundings of partial sums (half of it in the norm); sqrt, the division
  // and the product: 2.5 + 2.5 + 1 ulp; u = 2⁻²⁴, an ulp at most 2u.
  const double u = std::ldexp(1.0, -24), bound = (double((D + 63) / 64 + 6) / 2 + 12) * u;
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_LE(std::fabs(y[i] - ref[i]), bound * std::fabs(ref[i])) << i;

  Tensor alpha = randn({R, Hv}, rng, 4.0f);
  alpha.data_mut()[0] = 25.0f, alpha.data_mut()[1] = -30.0f;  // past 20 (softplus = u) and deep in the tail
  const Tensor dt = randn({Hv}, rng), a = scale(sigmoid(randn({Hv}, rng)), -2.0f);
  const std::vector<float> g =
      to_host(delta_log_decay(to_device(alpha, kGpu), to_device(dt, kGpu), to_device(a, kGpu))).to_vector();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < Hv; ++h) {
      const double uu = double(alpha.data()[r * Hv + h]) + dt.data()[h], ah = a.data()[h];
      const double sp = uu > 20 ? uu : std::log1p(std::exp(uu));
      // u rounded (|u|·u, through softplus' slope ≤ 1), exp within 3 + 2|u| ulp (≤ 1 through log(1 + ·)),
      // 1 + e once, log: 2⁻²¹ absolute in [0.5, 2] or 3 ulp, then the product by a.
      const double e_sp =
          std::fabs(uu) * u + (3 + 2 * std::fabs(uu)) * 2 * u + 2 * u * sp + std::ldexp(1.0, -21) + 6 * u * sp;
      ASSERT_LE(std::fabs(g[size_t(r * Hv + h)] - sp * ah), std::fabs(ah) * e_sp + 2 * u * std::fabs(sp * ah))
          << "row " << r << " head " << h;
    }
}
#endif
