// tests/test_vulkan_ops.cpp — the Vulkan backend's elementwise ops and norms (kernels/vulkan/
// elementwise.h, norm.h) against their CPU twins, on vulkan:0 (Mesa's lavapipe here and in CI).
// They skip, with a message, in a build without Vulkan or where the loader reports no device.
// Shapes are small (lavapipe runs the shaders on the CPU) but odd: n of 1, 63, 65 (around a
// workgroup of 64), 100003; views at nonzero offsets; one row; D not a multiple of 64.
#include <gtest/gtest.h>

#if defined(TOY_VULKAN)
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "toy/kernels/kernels.h"
#include "toy/kernels/vulkan/context.h"
#include "toy/kernels/vulkan/devices.h"
#include "toy/kernels/vulkan/elementwise.h"
#include "toy/kernels/vulkan/norm.h"
#include "toy/kernels/vulkan/view.h"
#include "vulkan_helpers.h"

using namespace vktest;

namespace {

using Binary = vk::Elementwise::Binary;
using Unary = vk::Elementwise::Unary;

// y = a ∘ b on the device, the views at offsets a_off, b_off, y_off.
std::vector<float> run_binary(Binary op, const std::vector<float>& a, const std::vector<float>& b, uint64_t a_off,
                              uint64_t b_off, uint64_t y_off) {
  const vk::Buffer ba = upload_at(a, a_off), bb = upload_at(b, b_off);
  vk::Buffer by = upload_at(std::vector<float>(a.size(), kMarker), y_off);
  vk::Elementwise(*context()).binary(op, ba, a_off, bb, b_off, by, y_off, int64_t(a.size()));
  return download_at(by, y_off, a.size());
}

std::vector<float> run_unary(Unary op, float param, const std::vector<float>& x, uint64_t x_off, uint64_t y_off) {
  const vk::Buffer bx = upload_at(x, x_off);
  vk::Buffer by = upload_at(std::vector<float>(x.size(), kMarker), y_off);
  vk::Elementwise(*context()).unary(op, param, bx, x_off, by, y_off, int64_t(x.size()));
  return download_at(by, y_off, x.size());
}

// The CPU twin of a unary op.
std::vector<float> cpu_unary(Unary op, float param, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  const int64_t n = int64_t(x.size());
  switch (op) {
    case Unary::Scale:
      toy::kernels::scale(x.data(), param, y.data(), n);
      break;
    case Unary::Silu:
      toy::kernels::silu(x.data(), y.data(), n);
      break;
    case Unary::GeluTanh:
      toy::kernels::gelu_tanh(x.data(), y.data(), n);
      break;
    case Unary::Softcap:
      toy::kernels::softcap(x.data(), param, y.data(), n);
      break;
    case Unary::Sigmoid:
      toy::kernels::sigmoid(x.data(), y.data(), n);
      break;
  }
  return y;
}

constexpr int64_t kSizes[] = {1, 63, 65, 100003};
struct Offsets {
  uint64_t a, b, y;
};
constexpr Offsets kOffsets[] = {{0, 0, 0}, {3, 64, 5}};

}  // namespace

// add and mul: one correctly rounded operation, on both: the same bits.
TEST(VulkanElementwise, AddAndMulGiveTheCpuBits) {
  REQUIRE_DEVICE();
  for (const int64_t n : kSizes)
    for (const Offsets& o : kOffsets) {
      SCOPED_TRACE("n=" + std::to_string(n) + " offsets " + std::to_string(o.a) + ", " + std::to_string(o.b) + ", " +
                   std::to_string(o.y));
      const std::vector<float> a = uniform(size_t(n), -4, 4, uint32_t(n)),
                               b = uniform(size_t(n), -4, 4, uint32_t(n + 1));
      std::vector<float> sum(a.size()), product(a.size());
      toy::kernels::add(a.data(), b.data(), sum.data(), n);
      toy::kernels::mul(a.data(), b.data(), product.data(), n);
      const std::vector<float> y_add = run_binary(Binary::Add, a, b, o.a, o.b, o.y),
                               y_mul = run_binary(Binary::Mul, a, b, o.a, o.b, o.y);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(same_bits(y_add[i], sum[i])) << "add at " << i << ": " << y_add[i] << " vs " << sum[i];
        ASSERT_TRUE(same_bits(y_mul[i], product[i])) << "mul at " << i << ": " << y_mul[i] << " vs " << product[i];
      }
    }
}

// scale: one multiplication; gelu_tanh: the CPU's value for x's half, from the table. Both the same
// bits. gelu_tanh's x spans the halves' subnormals (x rounded to half in integers), ±10 and past.
TEST(VulkanElementwise, ScaleAndGeluTanhGiveTheCpuBits) {
  REQUIRE_DEVICE();
  for (const int64_t n : kSizes)
    for (const Offsets& o : kOffsets) {
      SCOPED_TRACE("n=" + std::to_string(n) + " offsets " + std::to_string(o.a) + ", " + std::to_string(o.y));
      std::vector<float> x = uniform(size_t(n), -12, 12, uint32_t(n));
      for (int64_t i = 0; i < n; i += 3) x[size_t(i)] *= 1e-5f;  // halves' subnormals: below 6.1e-5
      const float specials[] = {-10.0f, 10.0f, 9.999999f, -9.999999f, 0.0f, -0.0f, INFINITY, -INFINITY, 2.9802322e-8f};
      for (size_t i = 0; i < std::size(specials) && i < x.size(); ++i) x[i] = specials[i];
      for (const auto& [op, param] :
           {std::pair{Unary::Scale, 0.125f}, {Unary::Scale, -3.7f}, {Unary::GeluTanh, 0.0f}}) {
        const std::vector<float> y = run_unary(op, param, x, o.a, o.y), cpu = cpu_unary(op, param, x);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(same_bits(y[i], cpu[i])) << "op " << int(op) << " x=" << x[i] << ": " << y[i] << " vs " << cpu[i];
      }
    }
}

// silu, sigmoid, softcap go through the device's exp and division: not the CPU's bits. The bounds,
// from what Vulkan promises (exp: 3 + 2·|x| ulp; division 2.5 ulp; +, −, ×: correctly rounded) and
// the CPU (exp under 1 ulp: glibc's expf and vec_math.h's exp8; glibc's tanhf 2 ulp), with
// U = 2⁻²³ the most one ulp is relative to its value:
// * silu x/(1 + e), sigmoid 1/(1 + e), e = exp(−x): e's error passes to 1 + e at most as it is, so
//   the device is within (3 + 2|x|) + ½ + 2.5 ulp, the CPU within 1 + ½ + ½: |y − cpu| ≤ (8 + 2|x|)·U·|y|.
// * softcap cap·tanh t, t = x/cap: the device's t is within 2.5 ulp (|Δtanh| ≤ |Δt|·sech²t ≤ its
//   relative error times |tanh t|); e = exp(−2|t|) within (3 + 4|t|) ulp moves (1 − e)/(1 + e) by
//   2·|Δe|/(1 + e)²; 1 − e, 1 + e, the division and cap·: ½ + ½ + 2.5 + ½ ulp. The CPU: ½ (t) + 2
//   (tanhf) + ½ (cap·). |y − cpu| ≤ |cap|·U·(2·(3 + 4|t|)·e/(1 + e)² + 9.5·|tanh t|): absolute
//   near 0, where 1 − e cancels.
// x in [−20, 20]: no result is subnormal (which a device may flush to zero).
TEST(VulkanElementwise, SiluSigmoidAndSoftcapAreWithinTheBound) {
  REQUIRE_DEVICE();
  const double U = std::ldexp(1.0, -23);
  for (const int64_t n : kSizes)
    for (const Offsets& o : kOffsets) {
      SCOPED_TRACE("n=" + std::to_string(n) + " offsets " + std::to_string(o.a) + ", " + std::to_string(o.y));
      std::vector<float> x = uniform(size_t(n), -20, 20, uint32_t(n));
      for (int64_t i = 0; i < n; i += 5) x[size_t(i)] *= 1e-3f;  // near 0
      for (const auto& [op, param] :
           {std::pair{Unary::Silu, 0.0f}, {Unary::Sigmoid, 0.0f}, {Unary::Softcap, 30.0f}, {Unary::Softcap, 2.5f}}) {
        const std::vector<float> y = run_unary(op, param, x, o.a, o.y), cpu = cpu_unary(op, param, x);
        for (int64_t i = 0; i < n; ++i) {
          const double v = x[i], cap = param, t = v / cap, e = std::exp(-2 * std::fabs(t));
          const double bound =
              op == Unary::Softcap
                  ? std::fabs(cap) * U *
                        (2 * (3 + 4 * std::fabs(t)) * e / ((1 + e) * (1 + e)) + 9.5 * std::fabs(std::tanh(t)))
                  : (8 + 2 * std::fabs(v)) * U * std::fabs(cpu[i]);
          ASSERT_LE(std::fabs(double(y[i]) - cpu[i]), 1.01 * bound)
              << "op " << int(op) << " param " << param << " x=" << v << ": " << y[i] << " vs " << cpu[i];
        }
      }
    }
}

// Past 65535 workgroups of 64 the dispatch continues in y (view.h's groups): every element is
// computed once, the last included.
TEST(VulkanElementwise, MoreThan65535WorkgroupsContinueInY) {
  REQUIRE_DEVICE();
  const vk::Groups g = vk::groups("test", 65536);
  EXPECT_EQ(g.x, 65535u);
  EXPECT_EQ(g.y, 2u);
  const int64_t n = 65535 * 64 + 65;  // 65537 workgroups
  const std::vector<float> a = uniform(size_t(n), -1, 1, 1), b = uniform(size_t(n), -1, 1, 2);
  std::vector<float> sum(a.size());
  toy::kernels::add(a.data(), b.data(), sum.data(), n);
  const std::vector<float> y = run_binary(Binary::Add, a, b, 1, 2, 3);
  EXPECT_EQ(0, std::memcmp(y.data(), sum.data(), sum.size() * 4));
}

// Two runs give the same bits.
TEST(VulkanElementwise, TwoRunsGiveTheSameBits) {
  REQUIRE_DEVICE();
  const std::vector<float> x = uniform(100003, -20, 20, 7);
  for (const Unary op : {Unary::Scale, Unary::Silu, Unary::GeluTanh, Unary::Softcap, Unary::Sigmoid}) {
    const std::vector<float> y1 = run_unary(op, 30.0f, x, 1, 2), y2 = run_unary(op, 30.0f, x, 1, 2);
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4)) << "op " << int(op);
  }
}

TEST(VulkanElementwise, AViewPastItsBufferIsAClearError) {
  REQUIRE_DEVICE();
  vk::Elementwise ops(*context());
  vk::Buffer a = context()->buffer(400), b = context()->buffer(400), y = context()->buffer(396);
  std::string e = error_of([&] { ops.binary(Binary::Add, a, 0, b, 0, y, 0, 100); });
  EXPECT_NE(e.find("vulkan: add: y needs floats [0, 0 + 100) of a buffer of 396 bytes"), std::string::npos) << e;
  e = error_of([&] { ops.binary(Binary::Mul, a, 2, b, 0, y, 0, 99); });
  EXPECT_NE(e.find("vulkan: mul: a needs floats [2, 2 + 99) of a buffer of 400 bytes"), std::string::npos) << e;
  e = error_of([&] { ops.unary(Unary::Silu, 0, a, uint64_t(1) << 40, y, 0, 1); });
  EXPECT_NE(e.find("vulkan: silu: x needs floats [1099511627776, "), std::string::npos) << e;
  e = error_of([&] { ops.unary(Unary::Softcap, 30, a, 0, y, 0, -1); });
  EXPECT_NE(e.find("vulkan: softcap: n=-1 is negative"), std::string::npos) << e;
  EXPECT_EQ(error_of([&] { ops.unary(Unary::Scale, 2, a, 0, y, 0, 0); }), "");  // nothing to do
}

namespace {

// Rows × D shapes: one row of two (the least with a spread, for layer_norm), one row, D short of, at
// and past the 64 threads, a long row.
constexpr std::pair<int64_t, int64_t> kNormShapes[] = {{1, 2}, {1, 63}, {3, 64}, {5, 65}, {7, 300}, {2, 4099}};
struct NormOffsets {
  uint64_t x, w, b, y;
};
constexpr NormOffsets kNormOffsets[] = {{0, 0, 0, 0}, {5, 3, 7, 65}};

struct NormProblem {
  std::vector<float> x, w, b;
  NormProblem(int64_t rows, int64_t D, float x_mean)
      : x(uniform(size_t(rows * D), x_mean - 2, x_mean + 2, uint32_t(rows * 131 + D))),
        w(uniform(size_t(D), -1.5f, 1.5f, uint32_t(D + 1))),
        b(uniform(size_t(D), -1, 1, uint32_t(D + 2))) {}
};

// rms_norm (bias = false) or layer_norm (with b, or without: bias = false) on the device.
std::vector<float> run_norm(bool rms, bool bias, const NormProblem& pb, const NormOffsets& o, int64_t rows, int64_t D,
                            float eps) {
  const vk::Buffer bx = upload_at(pb.x, o.x), bw = upload_at(pb.w, o.w), bb = upload_at(pb.b, o.b);
  vk::Buffer by = upload_at(std::vector<float>(pb.x.size(), kMarker), o.y);
  vk::Norm norm(*context());
  if (rms)
    norm.rms(bx, o.x, bw, o.w, by, o.y, rows, D, eps);
  else
    norm.layer(bx, o.x, bw, o.w, bias ? &bb : nullptr, o.b, by, o.y, rows, D, eps);
  return download_at(by, o.y, pb.x.size());
}

// How far rms_norm's y may be from kernels::rms_norm's, relative to |y| (u = 2⁻²⁴, half an ulp: +, − and ×
// are correctly rounded; Vulkan promises 2.5 ulp = 5u for a division, 2 ulp = 4u for inversesqrt):
// * the device: Σx² of positive terms with ceil(D/64) + 6 additions on the way to the sum (thread,
//   then tree), one more rounding if the fma is not fused: (ceil(D/64) + 7)·u; / D: 5u; + eps: u
//   (eps ≥ 0 only shrinks the relative error); inversesqrt halves that and adds 4u; (x·rs)·w: 2u.
// * the CPU: Σx² in double, exact terms: (D + 1)·2⁻⁵³, rounded to f32: u; + eps: u; sqrt and 1/: 2u
//   after the halving; (x·rs)·w: 2u.
double rms_bound(int64_t D) {
  const double u = std::ldexp(1.0, -24);
  const double dev = double((D + 63) / 64 + 7 + 5 + 1) * u / 2 + 4 * u + 2 * u,
               cpu = (2 * u + double(D + 1) * std::ldexp(1.0, -53)) / 2 + 2 * u + 2 * u;
  return 1.01 * (dev + cpu);
}

}  // namespace

// rms_norm against kernels::rms_norm, within rms_bound.
TEST(VulkanNorm, RmsNormMatchesTheCpuKernel) {
  REQUIRE_DEVICE();
  const float eps = 1e-5f;
  for (const auto& [rows, D] : kNormShapes)
    for (const NormOffsets& o : kNormOffsets) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " D=" + std::to_string(D) + " x at " + std::to_string(o.x));
      const NormProblem pb(rows, D, 0);
      const std::vector<float> y = run_norm(true, false, pb, o, rows, D, eps);
      std::vector<float> cpu(pb.x.size()), rstd(static_cast<size_t>(rows));
      toy::kernels::rms_norm(pb.x.data(), pb.w.data(), eps, rows, D, cpu.data(), rstd.data());
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_LE(std::fabs(double(y[i]) - cpu[i]), rms_bound(D) * std::fabs(cpu[i]))
            << "at " << i << ": " << y[i] << " vs " << cpu[i];
    }
}

// layer_norm against kernels::layer_norm (with the bias, and without: the CPU's with b = 0), also on
// rows whose mean (50) is large against their spread. The bound, u and the device's promises as for
// rms_norm; μ, V = Σ(x − μ)², S = Σ|x| and rs = 1/√(V/D + eps) of each row exact (in double):
// * μ: the device's Σx has ceil(D/64) + 6 roundings, each at most u·S, then / D: 5u; the CPU's, in
//   double then rounded: D·2⁻⁵³·S/D + u·|μ|. Δ_dev, Δ_cpu: how far each mean m is from μ.
// * Σ(x − m)² = V + D·(m − μ)²: each term's x − m rounded (2u squared), the device's fma (u) and
//   sum (ceil(D/64) + 6 roundings, positive terms); the CPU's in double (D·2⁻⁵³). Then / D (device
//   5u, CPU u), + eps (u), and the square root halving it: rs within δ_dev + δ_cpu, relative.
// * y = ((x − m)·rs)·w + b: |y − cpu| ≤ rs·|w|·(Δ_dev + Δ_cpu + |x − μ|·(δ + 6u)) + 2u·|y|
//   (x − m, ·rs and ·w: u each, on each side; + b: u·|y| on each).
TEST(VulkanNorm, LayerNormMatchesTheCpuKernel) {
  REQUIRE_DEVICE();
  const double u = std::ldexp(1.0, -24), e53 = std::ldexp(1.0, -53);
  const float eps = 1e-5f;
  for (const auto& [rows, D] : kNormShapes)
    for (const NormOffsets& o : kNormOffsets)
      for (const float x_mean : {0.0f, 50.0f})
        for (const bool bias : {true, false}) {
          SCOPED_TRACE("rows=" + std::to_string(rows) + " D=" + std::to_string(D) + " x at " + std::to_string(o.x) +
                       " mean " + std::to_string(x_mean) + (bias ? " with" : " without") + " bias");
          NormProblem pb(rows, D, x_mean);
          const std::vector<float> y = run_norm(false, bias, pb, o, rows, D, eps);
          if (!bias) std::fill(pb.b.begin(), pb.b.end(), 0.0f);
          std::vector<float> cpu(pb.x.size()), xhat(pb.x.size()), rstd(static_cast<size_t>(rows));
          toy::kernels::layer_norm(pb.x.data(), pb.w.data(), pb.b.data(), eps, rows, D, cpu.data(), xhat.data(),
                                   rstd.data());
          const double n = double((D + 63) / 64 + 6);
          for (int64_t r = 0; r < rows; ++r) {
            const float* xr = pb.x.data() + r * D;
            double mu = 0, S = 0, V = 0;
            for (int64_t d = 0; d < D; ++d) mu += xr[d], S += std::fabs(xr[d]);
            mu /= double(D);
            for (int64_t d = 0; d < D; ++d) V += (xr[d] - mu) * (xr[d] - mu);
            const double rs = 1 / std::sqrt(V / double(D) + eps);
            const double d_dev = n * u * S / double(D) * (1 + 5 * u) + 5 * u * std::fabs(mu),
                         d_cpu = double(D) * e53 * S / double(D) + u * std::fabs(mu);
            const double v_dev = (n + 3) * u + double(D) * d_dev * d_dev / V + 5 * u + u,
                         v_cpu = 2 * u + double(D) * e53 + double(D) * d_cpu * d_cpu / V + u + u;
            const double delta = v_dev / 2 + 4 * u + v_cpu / 2 + 2 * u;
            for (int64_t d = 0; d < D; ++d) {
              const size_t i = size_t(r * D + d);
              const double bound = rs * std::fabs(pb.w[d]) * (d_dev + d_cpu + std::fabs(xr[d] - mu) * (delta + 6 * u)) +
                                   2 * u * std::fabs(cpu[i]);
              ASSERT_LE(std::fabs(double(y[i]) - cpu[i]), 1.01 * bound)
                  << "at " << i << ": " << y[i] << " vs " << cpu[i];
            }
          }
        }
}

// More than 65535 rows: the workgroups continue in y (view.h's groups); every row is normalized.
TEST(VulkanNorm, MoreThan65535RowsContinueInY) {
  REQUIRE_DEVICE();
  const int64_t rows = 65537, D = 3;
  const NormProblem pb(rows, D, 0);
  const std::vector<float> y = run_norm(true, false, pb, kNormOffsets[1], rows, D, 1e-5f);
  std::vector<float> cpu(pb.x.size()), rstd(static_cast<size_t>(rows));
  toy::kernels::rms_norm(pb.x.data(), pb.w.data(), 1e-5f, rows, D, cpu.data(), rstd.data());
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_LE(std::fabs(double(y[i]) - cpu[i]), rms_bound(D) * std::fabs(cpu[i])) << "at " << i;
}

TEST(VulkanNorm, TwoRunsGiveTheSameBits) {
  REQUIRE_DEVICE();
  const NormProblem pb(9, 4099, 1);
  for (const bool rms : {true, false}) {
    const std::vector<float> a = run_norm(rms, true, pb, kNormOffsets[1], 9, 4099, 1e-6f),
                             b = run_norm(rms, true, pb, kNormOffsets[1], 9, 4099, 1e-6f);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << (rms ? "rms_norm" : "layer_norm");
  }
}

TEST(VulkanNorm, BadShapesAndSmallBuffersAreClearErrors) {
  REQUIRE_DEVICE();
  vk::Norm norm(*context());
  vk::Buffer x = context()->buffer(4 * 200), w = context()->buffer(4 * 100), y = context()->buffer(4 * 199);
  std::string e = error_of([&] { norm.rms(x, 0, w, 0, y, 0, 2, 100, 1e-5f); });
  EXPECT_NE(e.find("vulkan: rms_norm: y needs floats [0, 0 + 200) of a buffer of 796 bytes"), std::string::npos) << e;
  e = error_of([&] { norm.rms(x, 0, w, 1, x, 0, 2, 100, 1e-5f); });
  EXPECT_NE(e.find("vulkan: rms_norm: w needs floats [1, 1 + 100) of a buffer of 400 bytes"), std::string::npos) << e;
  e = error_of([&] { norm.layer(x, 0, w, 0, &y, 150, x, 0, 2, 100, 1e-5f); });
  EXPECT_NE(e.find("vulkan: layer_norm: b needs floats [150, 150 + 100) of a buffer of 796 bytes"), std::string::npos)
      << e;
  e = error_of([&] { norm.layer(x, 0, w, 0, nullptr, 0, x, 0, 2, 0, 1e-5f); });
  EXPECT_NE(e.find("vulkan: layer_norm: shape rows=2 D=0 out of range"), std::string::npos) << e;
  e = error_of([&] { norm.rms(x, 0, w, 0, x, 0, -1, 100, 1e-5f); });
  EXPECT_NE(e.find("vulkan: rms_norm: shape rows=-1 D=100 out of range"), std::string::npos) << e;
}
#endif
