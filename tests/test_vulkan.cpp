// tests/test_vulkan.cpp — the Vulkan backend's first piece: the devices the loader reports
// (kernels/vulkan/devices.h, `toy devices`), checked against Khronos' own vulkaninfo where it is
// installed (Debian's vulkan-tools; scripts/setup.sh installs it with lavapipe, Mesa's CPU driver).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.h"
#include "toy/kernels/vulkan/devices.h"

using toy::test::run_toy;
namespace vk = toy::kernels::vulkan;

namespace {

// The deviceName lines of `vulkaninfo --summary`, in order; nullopt where vulkaninfo is absent.
std::optional<std::vector<std::string>> vulkaninfo_names() {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen("vulkaninfo --summary 2>/dev/null", "r"), pclose);
  if (!p) return std::nullopt;
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p.get())) text.append(buf, n);
  if (text.find("VULKANINFO") == std::string::npos) return std::nullopt;
  std::vector<std::string> names;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (const size_t at = line.find("deviceName"); at != std::string::npos) {
      const size_t eq = line.find("= ", at);
      if (eq != std::string::npos) names.push_back(line.substr(eq + 2));
    }
  return names;
}

}  // namespace

TEST(VulkanDevices, AreTheOnesVulkaninfoSees) {
  const vk::DeviceList list = vk::list_devices();
  if (!list.built) GTEST_SKIP() << list.problem;
  const auto want = vulkaninfo_names();
  if (!want) GTEST_SKIP() << "vulkaninfo (Debian's vulkan-tools) is not installed: nothing to compare with";
  ASSERT_EQ(list.devices.size(), want->size()) << list.problem;
  for (size_t i = 0; i < want->size(); ++i) {
    const vk::DeviceInfo& d = list.devices[i];
    EXPECT_EQ(d.index, int(i));
    EXPECT_EQ(d.name, (*want)[i]);
    EXPECT_GE(d.api_major * 100 + d.api_minor, 101u) << d.name;  // an instance of 1.1 or newer was made
    EXPECT_GT(d.device_local_bytes, 0u) << d.name;
    if (d.type == "cpu") {
      EXPECT_TRUE(d.storage16) << "lavapipe has 16-bit storage";
    }
  }
  if (want->empty()) {
    EXPECT_FALSE(list.problem.empty());
  }

  // The command shows the same, as text and JSON.
  const auto r = run_toy("devices --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["vulkan"]["devices"].size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    EXPECT_EQ(j["vulkan"]["devices"][i]["name"], (*want)[i]);
    EXPECT_EQ(j["vulkan"]["devices"][i]["device"], "vulkan:" + std::to_string(i));
  }
  const auto text = run_toy("--list-devices");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("cpu ", 0), 0u) << text.out;
  for (size_t i = 0; i < want->size(); ++i) {
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "vulkan:%-3zu ", i);
    EXPECT_NE(text.out.find(prefix + (*want)[i]), std::string::npos) << text.out;
  }
}

// No driver: the loader finds no device, which is said, not an error (exit 0).
TEST(VulkanDevices, NoDriverIsSaidPlainly) {
  if (!vk::list_devices().built) GTEST_SKIP() << "built without Vulkan";
  toy::test::ScopedEnv env;
  env.set("VK_ICD_FILENAMES", "/nonexistent/icd.json");  // the loader reads only this driver list
  env.set("VK_DRIVER_FILES", "/nonexistent/icd.json");
  const vk::DeviceList none = vk::list_devices();
  EXPECT_TRUE(none.devices.empty());
  EXPECT_FALSE(none.problem.empty());
  const auto r = run_toy("devices");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("vulkan     none: "), std::string::npos) << r.out;
  const auto j = run_toy("devices --json");
  EXPECT_TRUE(nlohmann::json::parse(j.out)["vulkan"]["devices"].empty());
}

// The device context (kernels/vulkan/context.h) and the shaders against their CPU twins
// (kernels/vulkan/matvec.h), on vulkan:0 (Mesa's lavapipe here and in CI). They skip, with a
// message, in a build without Vulkan or where the loader reports no device. Shapes are small:
// lavapipe runs the shaders on the CPU.
#if defined(TOY_VULKAN)
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "toy/kernels/kernels.h"
#include "toy/kernels/reference.h"
#include "toy/kernels/vulkan/context.h"
#include "toy/kernels/vulkan/matvec.h"
#include "toy/tensor/quant.h"
#include "vulkan_helpers.h"

using toy::DType;
using namespace vktest;

TEST(VulkanContext, NoDeviceNIsAClearError) {
  REQUIRE_DEVICE();
  const std::string e = error_of([] { vk::Context bad(1000); });
  EXPECT_NE(e.find("no device vulkan:1000 (the loader reports"), std::string::npos) << e;
}

TEST(VulkanContext, OutOfDeviceMemoryIsAClearError) {
  REQUIRE_DEVICE();
  const uint64_t heap = vk::list_devices().devices[0].device_local_bytes;
  const std::string e = error_of([&] { context()->buffer(heap + 1); });
  EXPECT_NE(e.find("out of device memory"), std::string::npos) << e;
}

// Upload and download, straight into mapped memory (lavapipe's is host-visible) and through a
// staging buffer (the path of a discrete GPU's device-local memory).
TEST(VulkanContext, UploadAndDownloadGiveBackTheBytes) {
  REQUIRE_DEVICE();
  std::vector<uint8_t> bytes(1001), back(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 7 + 3);
  vk::Context staged(0, {.always_stage = true});
  for (vk::Context* ctx : {context(), &staged}) {
    vk::Buffer b = ctx->buffer(bytes.size());
    ctx->upload(b, bytes.data(), bytes.size());
    std::fill(back.begin(), back.end(), 0);
    ctx->download(b, back.data(), back.size());
    EXPECT_EQ(bytes, back);
  }
}

// A freed buffer waits in the pool for the next of its size; one that recorded work still uses
// goes there only once that work has run; the largest are freed at once.
TEST(VulkanContext, FreedBuffersAreReusedBySize) {
  REQUIRE_DEVICE();
  vk::Context ctx(0);
  { vk::Buffer a = ctx.buffer(1000); }
  EXPECT_EQ(ctx.pooled_bytes(), 1000u);
  vk::Buffer b = ctx.buffer(999);  // another size: a new one
  EXPECT_EQ(ctx.pooled_bytes(), 1000u);
  const std::vector<uint8_t> bytes(1000, 7);
  std::vector<uint8_t> back(1000);
  {
    vk::Buffer c = ctx.buffer(1000);  // the pooled one
    EXPECT_EQ(ctx.pooled_bytes(), 0u);
    ctx.upload(c, bytes.data(), bytes.size());
    ctx.download(c, back.data(), back.size());
    EXPECT_EQ(back, bytes);
  }
  { vk::Buffer big = ctx.buffer(vk::Context::kPoolLargest + 4); }
  EXPECT_EQ(ctx.pooled_bytes(), 1000u);
}

// A submission that cannot finish (it waits for an event the host sets only later) is an Error
// after the timeout, not a hang; the context refuses work from then on and is freed once the work ends.
TEST(VulkanContext, ASubmissionThatDoesNotFinishIsATimeout) {
  REQUIRE_DEVICE();
  vk::Context ctx(0, {.timeout = std::chrono::milliseconds(50)});
  auto ei = vk::tagged<VkEventCreateInfo>(VK_STRUCTURE_TYPE_EVENT_CREATE_INFO);
  VkEvent event = VK_NULL_HANDLE;
  ASSERT_EQ(ctx.fn<PFN_vkCreateEvent>("vkCreateEvent")(ctx.device(), &ei, nullptr, &event), VK_SUCCESS);
  const VkCommandBuffer cb = ctx.begin();
  ctx.fn<PFN_vkCmdWaitEvents>("vkCmdWaitEvents")(cb, 1, &event, VK_PIPELINE_STAGE_HOST_BIT,
                                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, nullptr, 0, nullptr, 0,
                                                 nullptr);
  const std::string e = error_of([&] { ctx.submit(cb); });
  EXPECT_NE(e.find("a submission did not finish within 50 ms"), std::string::npos) << e;
  const std::string again = error_of([&] { ctx.begin(); });
  EXPECT_NE(again.find("unusable after a timed-out submission"), std::string::npos) << again;
  ctx.fn<PFN_vkSetEvent>("vkSetEvent")(ctx.device(), event);
  ctx.fn<PFN_vkDeviceWaitIdle>("vkDeviceWaitIdle")(ctx.device());
  ctx.fn<PFN_vkDestroyEvent>("vkDestroyEvent")(ctx.device(), event, nullptr);
}

namespace {

// W [N, K] in dtype wt, x [M, K] and b [N], values in [-1, 1] from a seed made of the shape.
struct Problem {
  std::vector<float> x, w32, b;
  std::vector<uint8_t> w;
  Problem(DType wt, int64_t N, int64_t K, int64_t M = 1)
      : x(size_t(M * K)), w32(size_t(N * K)), b(size_t(N)), w(size_t(toy::row_bytes(wt, K) * N)) {
    std::mt19937 rng(uint32_t(N * 7 + K + M * 1009));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : x) v = u(rng);
    for (float& v : w32) v = u(rng);
    for (float& v : b) v = u(rng);
    toy::quantize(wt, w32.data(), w.data(), N * K);
  }
};

// matvec.comp against the double reference and the CPU kernel (kernels::matmul_wt).
//
// The bound: x is rounded to activation_dtype(wt) by both (F16: to half; BF16: to bfloat; Q8_0,
// Q4_0: to Q8_0 blocks), W read as stored. F32, F16, BF16: every product x_k·w_k is exact inside an
// fma (a half times a half fits in f32's 24 bits); matvec.comp's thread t adds ceil(K/8) of them
// in order of k, then a 3-level tree adds the 8 partial sums of its row. Q8_0, Q4_0: a block's dot
// product is exact (integers), and so is its scale d_x·d_w (halves) and their product inside an
// fma; a thread adds ceil(K/32/8) such block terms, then the same tree. So each y sees at most
// n = (terms per thread) + 3 roundings of a partial sum: |y − ref| ≤ n·u·Σ|x_k·w_k| to first order
// (1.01 covers the second), u = 2⁻²⁴. A bias is added after the tree, once more rounded: n + 1
// roundings of at most Σ|x_k·w_k| + |b|. The CPU kernel sums the same exact terms (K products, or
// K/32 block terms each rounded at most once more) in its own order and adds b after: at most
// terms + 2 roundings more.
void check_matvec(DType wt, int64_t M, int64_t N, int64_t K, bool bias = false) {
  SCOPED_TRACE(std::string(toy::name(wt)) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
               " K=" + std::to_string(K) + (bias ? " with a bias" : ""));
  const Problem pb(wt, N, K, M);
  const std::vector<float> y =
      vk::matvec(*context(), pb.w.data(), wt, pb.x.data(), M, N, K, bias ? pb.b.data() : nullptr);
  const size_t MN = size_t(M * N);
  std::vector<float> ref(MN), cpu(MN);
  toy::kernels::reference::matmul_wt<double>(pb.x.data(), pb.w.data(), wt, ref.data(), M, N, K);
  toy::kernels::matmul_wt(pb.x.data(), pb.w.data(), wt, cpu.data(), M, N, K);
  // Σ|x_k·w_k|: the reference on |x| (rounded as for wt) and |W| as stored. A K-quant weight is
  // d·sc·q − dmin·mn, and the shader adds the two parts apart: Σ|x_k|·(|d·sc·q| + |dmin·mn|), the
  // weights dequantized with dmin and then d zeroed in every block.
  std::vector<float> ax(size_t(M * K));
  for (int64_t m = 0; m < M; ++m)
    toy::kernels::reference::round_activations(wt, pb.x.data() + m * K, ax.data() + m * K, K);
  for (float& v : ax) v = std::fabs(v);
  const DType a = toy::kernels::activation_dtype(wt);
  const bool mins = wt == DType::Q4_K || wt == DType::Q5_K;
  std::vector<double> mag(MN, 0.0);
  for (const int zeroed : mins ? std::vector<int>{2, 0} : std::vector<int>{-1}) {  // the byte of dmin, of d
    std::vector<uint8_t> w = pb.w;
    if (zeroed >= 0)
      for (size_t o = 0; o < w.size(); o += size_t(toy::info(wt).type_size)) w[o + zeroed] = w[o + zeroed + 1] = 0;
    std::vector<float> aw(size_t(N * K)), part(MN);
    toy::dequantize(wt, w.data(), aw.data(), N * K);
    for (float& v : aw) v = std::fabs(v);
    toy::kernels::reference::matmul_wt<double>(ax.data(), aw.data(), DType::F32, part.data(), M, N, K);
    for (size_t i = 0; i < MN; ++i) mag[i] += part[i];
  }
  // Roundings of a partial sum per thread: one per product (floats), per block (Q8_0 blocks), two
  // per sub-block of 32 (K-quants: the dot and the mins; one more for d_x·d and, against the
  // reference's dequantized weights, three for their products).
  const int64_t terms = a == DType::Q8_0 ? K / 32 : a == DType::Q8_K ? 2 * (K / 32) : K;
  const double u = std::ldexp(1.0, -24), n = double((terms + 7) / 8 + 3) + (a == DType::Q8_K ? 4 : 0) + (bias ? 1 : 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < N; ++i) {
      const size_t at = size_t(m * N + i);
      const double b = bias ? pb.b[size_t(i)] : 0.0, bound = mag[at] + std::fabs(b);
      const float c = bias ? cpu[at] + float(b) : cpu[at];
      ASSERT_LE(std::fabs(double(y[at]) - (double(ref[at]) + b)), 1.01 * n * u * bound)
          << "row " << m << ", column " << i << " against the reference";
      ASSERT_LE(std::fabs(double(y[at]) - c), 1.01 * (n + double(terms) + 2) * u * bound)
          << "row " << m << ", column " << i << " against the CPU kernel";
    }
}

}  // namespace

// One row, one value; K short of, at and past a row's 8 threads; 8 rows (a workgroup), 9 and 17
// (a workgroup and part of one); a long row; several rows of x: 5 (one a workgroup), 11 (a tile of
// 8 and 3 one a workgroup), 16 (two tiles); a bias.
TEST(VulkanMatvec, F32MatchesTheReferenceAndTheCpuKernel) {
  REQUIRE_DEVICE();
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1, 1}, {1, 7}, {8, 8}, {17, 9}, {7, 64}, {9, 301}, {3, 4099}})
    check_matvec(DType::F32, 1, N, K);
  check_matvec(DType::F32, 5, 9, 301);
  check_matvec(DType::F32, 11, 9, 301);
  check_matvec(DType::F32, 16, 17, 9);
  check_matvec(DType::F32, 3, 7, 64, true);
  check_matvec(DType::F32, 9, 7, 64, true);
}

TEST(VulkanMatvec, F16MatchesTheReferenceAndTheCpuKernel) {
  REQUIRE_DEVICE();
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1, 1}, {1, 65}, {5, 128}, {9, 301}, {3, 4097}})
    check_matvec(DType::F16, 1, N, K);
  check_matvec(DType::F16, 4, 5, 129, true);
  check_matvec(DType::F16, 9, 5, 129, true);
}

TEST(VulkanMatvec, Bf16MatchesTheReferenceAndTheCpuKernel) {
  REQUIRE_DEVICE();
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1, 1}, {1, 65}, {9, 301}, {3, 4097}})
    check_matvec(DType::BF16, 1, N, K);
  check_matvec(DType::BF16, 3, 5, 128, true);
  check_matvec(DType::BF16, 8, 5, 301);
}

// Q8_0 and Q4_0 weights, x as Q8_0 blocks: one block; 3 blocks; 9 blocks (one past a row's 8
// threads) on 9 rows (one past a workgroup's 8); 65 blocks; a long row of 129 blocks; several
// rows (a tile of 8 and the rest); a bias.
TEST(VulkanMatvec, Q8_0MatchesTheReferenceAndTheCpuKernel) {
  REQUIRE_DEVICE();
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1, 32}, {7, 96}, {9, 288}, {5, 2080}, {3, 4128}})
    check_matvec(DType::Q8_0, 1, N, K);
  check_matvec(DType::Q8_0, 6, 7, 96, true);
  check_matvec(DType::Q8_0, 13, 9, 288, true);
}

TEST(VulkanMatvec, Q4_0MatchesTheReferenceAndTheCpuKernel) {
  REQUIRE_DEVICE();
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1, 32}, {7, 96}, {9, 288}, {5, 2080}, {3, 4128}})
    check_matvec(DType::Q4_0, 1, N, K);
  check_matvec(DType::Q4_0, 6, 7, 96, true);
  check_matvec(DType::Q4_0, 11, 7, 96);
}

// The other block types: Q5_0 against Q8_0 blocks of x; Q4_1 and Q5_1 against f32 x (each weight
// dequantized as the CPU does); the K-quants against Q8_K blocks: one super-block, 65 sub-blocks of
// 32 (K = 2080 is not a multiple of 256, so 2304; 72 sub-blocks, 9 a thread), a long row, rows, a bias.
TEST(VulkanMatvec, OtherBlockTypesMatchTheReferenceAndTheCpuKernel) {
  REQUIRE_DEVICE();
  for (const DType wt : {DType::Q5_0, DType::Q4_1, DType::Q5_1}) {
    for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1, 32}, {7, 96}, {5, 2080}}) check_matvec(wt, 1, N, K);
    check_matvec(wt, 3, 5, 64, true);
    check_matvec(wt, 10, 5, 96);
  }
  for (const DType wt : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1, 256}, {7, 512}, {5, 2304}, {3, 4352}})
      check_matvec(wt, 1, N, K);
    check_matvec(wt, 4, 5, 768, true);
    check_matvec(wt, 10, 5, 768);
  }
}

// 8·65535 + 3 rows: more workgroups (of 8 rows each) than a dimension holds, so they continue in
// y (matvec.cpp), and the last holds 3 rows.
TEST(VulkanMatvec, MoreThan65535WorkgroupsContinueInY) {
  REQUIRE_DEVICE();
  check_matvec(DType::F32, 1, 8 * 65535 + 3, 3);
}

TEST(VulkanMatvec, KNotAMultipleOfTheBlockIsAClearError) {
  REQUIRE_DEVICE();
  vk::Matvec matvec(*context());
  vk::Buffer w = context()->buffer(1024), x = context()->buffer(1024), y = context()->buffer(4);
  const std::string e = error_of([&] { matvec(w, 0, DType::Q8_0, x, 0, y, 0, 1, 1, 48); });
  EXPECT_NE(e.find("K=48 is not a multiple of Q8_0's block of 32"), std::string::npos) << e;
}

// Q8_0 blocks are read two bytes a load, words for f32 x: an offset between them is refused.
TEST(VulkanMatvec, AnOffsetOffItsBoundaryIsAClearError) {
  REQUIRE_DEVICE();
  vk::Matvec matvec(*context());
  vk::Buffer w = context()->buffer(1024), x = context()->buffer(1024), y = context()->buffer(4);
  std::string e = error_of([&] { matvec(w, 0, DType::Q8_0, x, 1, y, 0, 1, 1, 32); });
  EXPECT_NE(e.find("x at byte 1, not on a 2-byte boundary"), std::string::npos) << e;
  e = error_of([&] { matvec(w, 3, DType::Q8_0, x, 0, y, 0, 1, 1, 32); });
  EXPECT_NE(e.find("W at byte 3"), std::string::npos) << e;
  e = error_of([&] { matvec(w, 0, DType::F32, x, 2, y, 0, 1, 1, 32); });
  EXPECT_NE(e.find("x at byte 2, not on a 4-byte boundary"), std::string::npos) << e;
}

// Two runs of the same product give the same bits (no atomics, a fixed reduction order), and a
// row's bits do not depend on the other rows of the batch: of 19 rows (two tiles of 8, then 3 one
// a workgroup), each row alone, or rows 5 … 14 as a batch of their own (a tile of 8 from row 5,
// then 2), give its bits, whether it ran in a tile or alone (exact speculative decoding rests on this).
TEST(VulkanMatvec, TwoRunsGiveTheSameBitsWhateverTheBatch) {
  REQUIRE_DEVICE();
  for (const DType wt :
       {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K}) {
    SCOPED_TRACE(toy::name(wt));
    const int64_t K = 2304, N = 33, M = 19;
    const Problem pb(wt, N, K, M);
    const std::vector<float> a = vk::matvec(*context(), pb.w.data(), wt, pb.x.data(), M, N, K),
                             b = vk::matvec(*context(), pb.w.data(), wt, pb.x.data(), M, N, K),
                             some = vk::matvec(*context(), pb.w.data(), wt, pb.x.data() + 5 * K, 10, N, K);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(a.data() + 5 * N, some.data(), some.size() * sizeof(float)));
    for (const int64_t m : {0, 7, 8, 13, 18}) {
      const std::vector<float> one = vk::matvec(*context(), pb.w.data(), wt, pb.x.data() + m * K, 1, N, K);
      EXPECT_EQ(0, std::memcmp(a.data() + m * N, one.data(), one.size() * sizeof(float))) << "row " << m;
    }
  }
}

TEST(VulkanMatvec, AWeightTypeWithoutAShaderIsAClearError) {
  REQUIRE_DEVICE();
  const Problem pb(DType::Q8_K, 1, 256);
  const std::string e = error_of([&] { vk::matvec(*context(), pb.w.data(), DType::Q8_K, pb.x.data(), 1, 1, 256); });
  EXPECT_NE(e.find("no shader for Q8_K weights yet"), std::string::npos) << e;
}
// Dispatches are recorded and submitted together at the download: a chain y1 = W1·x, y2 = W2·y1
// (the second reads what the first wrote: the barrier between them) is one submission, gives the
// bits of two separate ones, and survives its input buffers being destroyed before it runs.
TEST(VulkanContext, RecordedDispatchesRunTogetherAtTheDownload) {
  REQUIRE_DEVICE();
  vk::Context& ctx = *context();
  const int64_t K = 300, N1 = 70, N2 = 5;
  const Problem p1(DType::F32, N1, K), p2(DType::F32, N2, N1);
  const std::vector<float> y1 = vk::matvec(ctx, p1.w.data(), DType::F32, p1.x.data(), 1, N1, K);
  const std::vector<float> y2 = vk::matvec(ctx, p2.w.data(), DType::F32, y1.data(), 1, N2, N1);
  vk::Matvec matvec(ctx);
  vk::Buffer out = ctx.buffer(N2 * 4);
  {
    vk::Buffer w1 = ctx.buffer(p1.w.size()), x = ctx.buffer(K * 4), w2 = ctx.buffer(p2.w.size()),
               mid = ctx.buffer(N1 * 4);
    ctx.upload(w1, p1.w.data(), w1.bytes());
    ctx.upload(x, p1.x.data(), x.bytes());
    ctx.upload(w2, p2.w.data(), w2.bytes());
    matvec(w1, 0, DType::F32, x, 0, mid, 0, 1, N1, K);
    matvec(w2, 0, DType::F32, mid, 0, out, 0, 1, N2, N1);
    EXPECT_EQ(ctx.recorded(), 2u);
  }  // w1, x, w2 and mid go while the work that reads them is only recorded
  std::vector<float> chained(size_t(N2), 0.0f);
  ctx.download(out, chained.data(), out.bytes());
  EXPECT_EQ(ctx.recorded(), 0u);
  EXPECT_EQ(0, std::memcmp(chained.data(), y2.data(), y2.size() * sizeof(float)));
}

// An upload into a mapped buffer no dispatch has named yet does not submit the recorded work (no
// recorded work can read it); an upload into one that recorded work reads does, first.
TEST(VulkanContext, UploadsIntoFreshBuffersDoNotSubmit) {
  REQUIRE_DEVICE();
  vk::Context& ctx = *context();
  const int64_t K = 64, N = 3;
  const Problem p(DType::F32, N, K);
  vk::Matvec matvec(ctx);
  vk::Buffer w = ctx.buffer(p.w.size()), x = ctx.buffer(K * 4), y = ctx.buffer(N * 4), fresh = ctx.buffer(K * 4);
  ctx.upload(w, p.w.data(), w.bytes());
  ctx.upload(x, p.x.data(), x.bytes());
  matvec(w, 0, DType::F32, x, 0, y, 0, 1, N, K);
  ASSERT_EQ(ctx.recorded(), 1u);
  ctx.upload(fresh, p.x.data(), fresh.bytes());
  EXPECT_EQ(ctx.recorded(), fresh.host_visible() ? 1u : 0u);
  ctx.upload(x, p.x.data(), x.bytes());  // x is read by the recorded product
  EXPECT_EQ(ctx.recorded(), 0u);
  std::vector<float> got(static_cast<size_t>(N));
  ctx.download(y, got.data(), y.bytes());
  EXPECT_EQ(got, vk::matvec(ctx, p.w.data(), DType::F32, p.x.data(), 1, N, K));
}
#endif
