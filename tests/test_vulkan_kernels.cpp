// tests/test_vulkan_kernels.cpp — the shaders a decoder's forward needs besides the products
// (kernels/vulkan/quantize.h, gather.h, convert.h, rope.h, attention.h) against their CPU twins, on
// vulkan:0 (Mesa's lavapipe here and in CI); they skip, with a message, without a device. The
// first four give the CPU's bits and are compared bit for bit; attention goes through the
// device's exp and is held to a bound derived from its order of operations (beside the test).
#include <gtest/gtest.h>

#if defined(TOY_VULKAN)
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "toy/kernels/kernels.h"
#include "toy/kernels/reference.h"
#include "toy/kernels/vulkan/attention.h"
#include "toy/kernels/vulkan/convert.h"
#include "toy/kernels/vulkan/gather.h"
#include "toy/kernels/vulkan/matvec.h"
#include "toy/kernels/vulkan/quantize.h"
#include "toy/kernels/vulkan/rope.h"
#include "toy/primitives/primitives.h"
#include "toy/tensor/quant.h"
#include "vulkan_helpers.h"

using toy::DType;
using namespace vktest;

namespace {

// Rows of x with what rounding finds hard: an all-zero block, exact ties (amax 127: x·127/amax = x,
// and 2.5 rounds to 2), the largest magnitude negative (Q8_K keeps its sign), tiny values.
std::vector<float> activations(int64_t M, int64_t K) {
  std::vector<float> x = uniform(size_t(M * K), -2.0f, 2.0f, uint32_t(M * 31 + K));
  for (int64_t k = 0; k < 256 && k < K; ++k) x[size_t(k)] = 0.0f;  // row 0: a zero block of either size
  if (M > 1) {
    float* r = x.data() + K;
    const float ties[] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 126.5f, -127.0f};
    for (int64_t k = 0; k < 256 && k < K; ++k) r[k] = ties[k % 8];
  }
  if (M > 2) {
    float* r = x.data() + 2 * K;
    for (int64_t k = 0; k < K; ++k) r[k] = (k % 3 ? 1e-30f : -3e-38f) * float(k % 7);
    r[K / 2] = -5.0f;  // the largest magnitude, negative
  }
  return x;
}

}  // namespace

// Q8_0 and Q8_K blocks byte for byte as the CPU makes them; F16 and BF16 values bit for bit.
TEST(VulkanQuantize, GivesTheCpuBits) {
  REQUIRE_DEVICE();
  vk::Quantize quantize(*context());
  const int64_t M = 3, K = 512;
  const std::vector<float> x = activations(M, K);
  for (const DType wt : {DType::Q8_0, DType::Q4_K, DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string("for ") + std::string(toy::name(wt)) + " weights");
    const DType a = toy::kernels::activation_dtype(wt);
    const uint64_t row = vk::x_bytes(wt, K), off = 5;
    std::vector<uint8_t> want(row * M);
    for (int64_t m = 0; m < M; ++m) {
      uint8_t* dst = want.data() + row * uint64_t(m);
      if (a == DType::Q8_0)
        toy::kernels::reference::quantize_activations_q8_0(x.data() + m * K, reinterpret_cast<toy::BlockQ8_0*>(dst), K);
      else if (a == DType::Q8_K)
        toy::quantize(DType::Q8_K, x.data() + m * K, dst, K);
      else
        toy::kernels::reference::round_activations(wt, x.data() + m * K, reinterpret_cast<float*>(dst), K);
    }
    const vk::Buffer bx = upload_at(x, off);
    vk::Buffer out = upload_at(std::vector<uint8_t>(want.size(), 0xAB), 0, uint8_t(0xAB));
    quantize(wt, bx, off, out, M, K);
    EXPECT_EQ(download_at(out, 0, want.size(), uint8_t(0xAB)), want);
  }
  const vk::Buffer b = context()->buffer(4096);
  vk::Buffer o = context()->buffer(4096);
  std::string e = error_of([&] { quantize(DType::Q4_K, b, 0, o, 1, 288); });
  EXPECT_NE(e.find("vulkan: quantize: M=1 K=288 for Q8_K activations"), std::string::npos) << e;
  e = error_of([&] { quantize(DType::F32, b, 0, o, 1, 32); });
  EXPECT_NE(e.find("activations for F32 weights are F32: no shader rounds to it"), std::string::npos) << e;
}

// Rows of every weight dtype as toy::dequantize gives them, repeated and out of order, into a
// view at an offset.
TEST(VulkanGatherRows, GiveTheCpuBitsForEveryDtype) {
  REQUIRE_DEVICE();
  vk::GatherRows gather(*context());
  const int64_t V = 5, K = 512;
  const std::vector<float> w32 = uniform(size_t(V * K), -1.0f, 1.0f, 7);
  const std::vector<uint32_t> ids = {4, 0, 4, 2};
  const vk::Buffer bids = upload_at(ids, 0, 0u);
  for (const DType wt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_1,
                         DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(toy::name(wt));
    ASSERT_TRUE(vk::GatherRows::reads(wt));
    const size_t row = size_t(toy::row_bytes(wt, K));
    std::vector<uint8_t> w(row * V);
    toy::quantize(wt, w32.data(), w.data(), V * K);
    std::vector<float> want(ids.size() * size_t(K));
    for (size_t r = 0; r < ids.size(); ++r) toy::dequantize(wt, w.data() + row * ids[r], want.data() + r * K, K);
    const vk::Buffer bw = upload_at(w, 0, uint8_t(0));
    vk::Buffer by = upload_at(std::vector<float>(want.size(), kMarker), 3);
    gather(bw, wt, V, bids, by, 3, int64_t(ids.size()), K);
    const std::vector<float> got = download_at(by, 3, want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));
  }
  EXPECT_FALSE(vk::GatherRows::reads(DType::Q8_K));
  vk::Buffer y = context()->buffer(4096);
  const std::string e = error_of([&] { gather(y, DType::Q4_K, 1, bids, y, 0, 1, 32); });
  EXPECT_NE(e.find("vulkan: gather_rows: V=1 K=32 of Q4_K"), std::string::npos) << e;
}

// F16 stores round as toy's f32_to_fp16: ties to even, subnormal halves, overflow to infinity,
// NaN; F32 stores copy. dst at an odd half, so that 16-bit stores share words with their neighbours.
TEST(VulkanConvert, F16StoresGiveTheCpuBits) {
  REQUIRE_DEVICE();
  vk::Convert convert(*context());
  std::vector<float> x = uniform(1000, -70000.0f, 70000.0f, 3);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f,
                           -0.0f,
                           5.96e-8f,
                           2.98e-8f,
                           2.99e-8f,
                           3.0e-5f,
                           6.1e-5f,
                           65504.0f,
                           65519.0f,
                           65520.0f,
                           -65520.0f,
                           inf,
                           -inf,
                           1e-40f,
                           1.0f + 0x1p-11f,
                           1.0f + 0x3p-11f,
                           std::numeric_limits<float>::quiet_NaN(),
                           -1.0f / 3.0f};
  std::copy(std::begin(special), std::end(special), x.begin());
  for (size_t i = 100; i < 400; ++i) x[i] = x[i] * 1e-9f;  // the subnormal range
  const vk::Buffer bx = upload_at(x, 2);
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = toy::f32_to_fp16(x[i]);
  vk::Buffer h = upload_at(std::vector<uint16_t>(x.size(), 0xBEEF), 7, uint16_t(0xBEEF));
  convert(bx, 2, h, DType::F16, 7, int64_t(x.size()));
  EXPECT_EQ(download_at(h, 7, x.size(), uint16_t(0xBEEF)), want);
  vk::Buffer f = upload_at(std::vector<float>(x.size(), kMarker), 1);
  convert(bx, 2, f, DType::F32, 1, int64_t(x.size()));
  const std::vector<float> copy = download_at(f, 1, x.size());
  EXPECT_EQ(0, std::memcmp(copy.data(), x.data(), x.size() * 4));
  const std::string e = error_of([&] { convert(bx, 0, f, DType::BF16, 0, 4); });
  EXPECT_NE(e.find("vulkan: convert: to BF16: F32 or F16 only"), std::string::npos) << e;
}

// Columns [4, 9) of each of 3 rows of 10 (a narrow), into rows of 5 and into F16 rows of 6.
TEST(VulkanConvert, RowsCopyColumnsAsCopyColumns) {
  REQUIRE_DEVICE();
  vk::Convert convert(*context());
  const int64_t R = 3, C = 10, begin = 4, n = 5;
  const std::vector<float> x = uniform(size_t(R * C), -1.0f, 1.0f, 5);
  std::vector<float> want(size_t(R * n));
  toy::kernels::copy_columns(x.data(), C, begin, want.data(), n, 0, R, n);
  const vk::Buffer bx = upload_at(x, 2);
  vk::Buffer y = upload_at(std::vector<float>(want.size(), kMarker), 3);
  convert.rows(bx, 2 + begin, C, y, DType::F32, 3, n, R, n);
  EXPECT_EQ(download_at(y, 3, want.size()), want);
  std::vector<uint16_t> want16(size_t(R * 6), 0xBEEF);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < n; ++c) want16[size_t(r * 6 + c)] = toy::f32_to_fp16(want[size_t(r * n + c)]);
  want16.resize(want16.size() - 1);  // the last row ends at its 5th half
  vk::Buffer h = upload_at(std::vector<uint16_t>(want16.size(), 0xBEEF), 1, uint16_t(0xBEEF));
  convert.rows(bx, 2 + begin, C, h, DType::F16, 1, 6, R, n);
  EXPECT_EQ(download_at(h, 1, want16.size(), uint16_t(0xBEEF)), want16);
  const std::string e = error_of([&] { convert.rows(bx, 0, 3, y, DType::F32, 0, 5, 2, 4); });
  EXPECT_NE(e.find("vulkan: convert: rows=2 cols=4 strides 3, 5"), std::string::npos) << e;
}

// Both pairings, n_rot below d_head (the rest copied), rows of a batch at different positions, a
// view at an offset: the bits of primitives/rope.cpp given the same tables.
TEST(VulkanRope, GivesTheCpuBits) {
  REQUIRE_DEVICE();
  vk::Rope rope(*context());
  const int64_t B = 2, T = 3, H = 3, Dh = 10, n_rot = 6;
  const std::vector<int32_t> pos = {0, 1, 2, 5, 6, 700};
  const std::vector<float> x = uniform(size_t(B * T * H * Dh), -3.0f, 3.0f, 11);
  for (const toy::RopeMode mode : {toy::RopeMode::Norm, toy::RopeMode::Neox}) {
    SCOPED_TRACE(mode == toy::RopeMode::Norm ? "NORM" : "NEOX");
    toy::Rope r;
    r.mode = mode;
    r.n_rot = n_rot;
    r.base = 500000.0f;
    const toy::RopeTable a = toy::rope_angles(toy::Tensor::from_ids({B, T}, pos), r);
    const std::vector<float> want = toy::rope(toy::Tensor::from({B, T, H, Dh}, x), a).to_vector();
    std::vector<uint32_t> index(pos.size());
    for (size_t i = 0; i < pos.size(); ++i)
      index[i] = uint32_t(std::lower_bound(a->at.begin(), a->at.end(), pos[i]) - a->at.begin());
    const vk::Buffer bx = upload_at(x, 4), bc = upload_at(a->cos, 0), bs = upload_at(a->sin, 0),
                     bi = upload_at(index, 0, 0u);
    vk::Buffer by = upload_at(std::vector<float>(x.size(), kMarker), 9);
    rope(mode == toy::RopeMode::Neox, bx, 4, by, 9, bc, bs, bi, B * T, H, Dh, n_rot);
    const std::vector<float> got = download_at(by, 9, x.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));
  }
  vk::Buffer y = context()->buffer(4096);
  const std::string e = error_of([&] { rope(false, y, 0, y, 0, y, y, y, 1, 1, 4, 5); });
  EXPECT_NE(e.find("vulkan: rope: shape n_tok=1 H=1 Dh=4 n_rot=5 out of range"), std::string::npos) << e;
}

namespace {

struct AttentionCase {
  int64_t T, S, H, Hkv, Dh;
  vk::AttentionParams params;
  DType kv;
};

// attention.comp against a double-precision reference, within a bound derived from its order of
// operations (u = 2⁻²⁴, for each query row and dim d):
//   score s_j: Dh fmas and the scale, E_s = scale·(Dh + 1)·u·Σ_d|q_d·k_jd|; soft-capped, the cap is
//     1-Lipschitz and its own evaluation (a division, exp, a division, a product) adds
//     (12 + 4|s/cap|)·u·cap;
//   p_j = exp(s_j − max): the shift carries 2·E_s and rounds once (u·|x|), Vulkan's exp is within
//     3 + 2|x| ulp (≤ 2u relative each): η = 2·E_s + (7 + 5·x_max)·u relative to p_j;
//   o_d = Σ_j p_j·v_jd / Σ_j p_j: reweighting by 1 ± η moves o_d by at most 2η·A_d, A_d =
//     Σ_j p_j|v_jd| / Σ_j p_j; the two sums of S positive or signed terms in a fixed order S·u each,
//     the tree 6 levels, the division 2.5 ulp: (2S + 12)·u·A_d.
// So |o_d − ref_d| ≤ 1.01·(2η + (2S + 12)·u)·A_d.
void check_attention(const AttentionCase& c) {
  const auto [T, S, H, Hkv, Dh, prm, kv] = c;
  SCOPED_TRACE("T=" + std::to_string(T) + " S=" + std::to_string(S) + " H=" + std::to_string(H) +
               " Hkv=" + std::to_string(Hkv) + " Dh=" + std::to_string(Dh) + " window=" + std::to_string(prm.window) +
               " softcap=" + std::to_string(prm.softcap) + (prm.causal ? "" : " bidirectional") + " " +
               std::string(toy::name(kv)));
  const std::vector<float> q = uniform(size_t(T * H * Dh), -2.0f, 2.0f, uint32_t(T * 7 + S));
  std::vector<float> k = uniform(size_t(S * Hkv * Dh), -2.0f, 2.0f, uint32_t(S * 5 + H)),
                     v = uniform(size_t(S * Hkv * Dh), -1.0f, 1.0f, uint32_t(S * 3 + Dh));
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  if (kv == DType::F16)  // the reference sees the halves the shader reads
    for (size_t i = 0; i < k.size(); ++i) {
      k16[i] = toy::f32_to_fp16(k[i]), k[i] = toy::fp16_to_f32(k16[i]);
      v16[i] = toy::f32_to_fp16(v[i]), v[i] = toy::fp16_to_f32(v16[i]);
    }
  const uint64_t qo = 3, ko = 5, vo = 7, oo = 2;
  const vk::Buffer bq = upload_at(q, qo);
  const vk::Buffer bk = kv == DType::F16 ? upload_at(k16, ko, uint16_t(0)) : upload_at(k, ko);
  const vk::Buffer bv = kv == DType::F16 ? upload_at(v16, vo, uint16_t(0)) : upload_at(v, vo);
  vk::Buffer bo = upload_at(std::vector<float>(q.size(), kMarker), oo);
  vk::Attention{*context()}(bq, qo, bk, ko, bv, vo, kv, bo, oo, T, S, H, Hkv, Dh, prm);
  const std::vector<float> o = download_at(bo, oo, q.size());

  const double u = std::ldexp(1.0, -24);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hkv), p = S - T + t;
      const int64_t first = prm.causal && prm.window > 0 ? std::max<int64_t>(0, p - prm.window + 1) : 0;
      const int64_t end = prm.causal ? p + 1 : S;
      std::vector<double> s(size_t(end - first));
      double m = -INFINITY, Es = 0;
      for (int64_t j = first; j < end; ++j) {
        double dot = 0, mag = 0;
        for (int64_t d = 0; d < Dh; ++d) {
          const double a = q[size_t((t * H + h) * Dh + d)], b = k[size_t((j * Hkv + g) * Dh + d)];
          dot += a * b, mag += std::fabs(a * b);
        }
        double sj = prm.scale * dot, e = prm.scale * double(Dh + 1) * u * mag;
        if (prm.softcap > 0) {
          e += (12 + 4 * std::fabs(sj / prm.softcap)) * u * prm.softcap;
          sj = prm.softcap * std::tanh(sj / prm.softcap);
        }
        s[size_t(j - first)] = sj, m = std::max(m, sj), Es = std::max(Es, e);
      }
      double l = 0, x_max = 0;
      for (double& sj : s) x_max = std::max(x_max, m - sj + Es), sj = std::exp(sj - m), l += sj;
      const double eta = 2 * Es + (7 + 5 * x_max) * u;
      for (int64_t d = 0; d < Dh; ++d) {
        double ref = 0, A = 0;
        for (int64_t j = first; j < end; ++j) {
          const double pj = s[size_t(j - first)] / l, vj = v[size_t((j * Hkv + g) * Dh + d)];
          ref += pj * vj, A += pj * std::fabs(vj);
        }
        const double got = o[size_t((t * H + h) * Dh + d)];
        ASSERT_LE(std::fabs(got - ref), 1.01 * (2 * eta + double(2 * (end - first) + 12) * u) * A)
            << "t " << t << " h " << h << " d " << d;
      }
    }
}

}  // namespace

// One key; keys past the 64 threads of a workgroup (S = 130) for a few queries; grouped heads;
// Dh not a multiple of 64; a sliding window; soft-capping; all keys (an encoder); F16 keys and values.
TEST(VulkanAttention, IsWithinTheBoundOfTheDoubleReference) {
  REQUIRE_DEVICE();
  const float s8 = 1 / std::sqrt(8.0f), s80 = 1 / std::sqrt(80.0f);
  const std::vector<AttentionCase> cases = {
      {1, 1, 2, 1, 8, {.scale = s8}, DType::F32},
      {5, 130, 4, 2, 80, {.scale = s80}, DType::F32},
      {4, 70, 4, 4, 16, {.scale = 0.25f, .window = 7}, DType::F32},
      {3, 40, 2, 1, 32, {.scale = 1.0f, .softcap = 5.0f}, DType::F32},
      {33, 33, 2, 2, 24, {.scale = 0.2f, .causal = false}, DType::F32},
      {2, 100, 6, 2, 72, {.scale = s80}, DType::F16},
  };
  for (const AttentionCase& c : cases) check_attention(c);
}

// The same bits run after run, and a query row's bits do not depend on the other rows of the
// prompt (a decode step gives what the prompt gave for that row).
TEST(VulkanAttention, IsDeterministicAndRowIndependent) {
  REQUIRE_DEVICE();
  const int64_t T = 6, S = 90, H = 4, Hkv = 2, Dh = 40;
  const std::vector<float> q = uniform(size_t(T * H * Dh), -2.0f, 2.0f, 1), k = uniform(size_t(S * Hkv * Dh), -2, 2, 2),
                           v = uniform(size_t(S * Hkv * Dh), -1, 1, 3);
  const vk::Buffer bq = upload_at(q, 0), bk = upload_at(k, 0), bv = upload_at(v, 0);
  auto run = [&](int64_t rows, uint64_t q_off, int64_t s) {
    vk::Buffer o = upload_at(std::vector<float>(size_t(rows * H * Dh), kMarker), 0);
    vk::Attention{*context()}(bq, q_off, bk, 0, bv, 0, DType::F32, o, 0, rows, s, H, Hkv, Dh, {.scale = 0.15f});
    return download_at(o, 0, size_t(rows * H * Dh));
  };
  const std::vector<float> a = run(T, 0, S), b = run(T, 0, S);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  const std::vector<float> last = run(1, uint64_t((T - 1) * H * Dh), S);  // the last row alone
  EXPECT_EQ(0, std::memcmp(last.data(), a.data() + (T - 1) * H * Dh, last.size() * 4));
  const std::string e = error_of([&] { run(4, 0, 3); });
  EXPECT_NE(e.find("vulkan: attention: shape T=4 S=3"), std::string::npos) << e;
}
#endif
