// tests/test_device.cpp — the device seam (primitives/device.h): device names, tensors moved to a
// Vulkan device and back, the primitives that run there against their CPU selves, clear errors.
// The device tests run on vulkan:0 (lavapipe in CI) and skip where there is none.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "fixtures.h"
#include "helpers.h"
#include "toy/kernels/reference.h"
#include "toy/primitives/device.h"
#include "toy/primitives/indexing.h"
#include "toy/tensor/quant.h"

using namespace toy;

TEST(Device, NamesParseAndPrint) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_EQ(parse_device("vulkan"), Device::vulkan(0));
  EXPECT_EQ(parse_device("vulkan:2"), Device::vulkan(2));
  EXPECT_EQ(to_string(Device::vulkan(3)), "vulkan:3");
  EXPECT_EQ(to_string(Device::cpu()), "cpu");
  for (const char* bad : {"", "gpu", "vulkan:", "vulkan:-1", "vulkan:1x", "vulkan:99999", "cuda:0", "Vulkan"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("cpu, vulkan or vulkan:N"), std::string::npos) << e.what();
    }
  }
}

TEST(Device, ACpuTensorStaysWhereItIs) {
  const Tensor x = Tensor::from({2}, std::vector<float>{1, 2});
  EXPECT_TRUE(x.device().is_cpu());
  EXPECT_EQ(device_ops(x), nullptr);
  EXPECT_EQ(to_host(x).impl(), x.impl());
  EXPECT_EQ(to_device(x, Device::cpu()).impl(), x.impl());
}

// --device, TOY_DEVICE and -ngl: a malformed name is a usage error (2); a device that cannot be
// had is exit 5 with a message that says why — in a build without Vulkan as in one with it.
TEST(DeviceCli, ADeviceThatCannotBeHadIsExit5) {
  using test::run_toy;
  for (const char* cmd : {"infer -n 1", "eval --ids 1,2", "bench --reps 1", "chat -n 1"}) {
    SCOPED_TRACE(cmd);
    const std::string model =
        std::string(cmd).rfind("bench", 0) == 0 ? " " TOY_SOURCE_DIR "/models/toy-stories.gguf" : "";
    const auto r = run_toy(std::string(cmd) + model + " --device vulkan:99", "hi\n");
    EXPECT_EQ(r.code, 5) << r.err;
    EXPECT_TRUE(r.err.find("no device vulkan:99") != std::string::npos ||
                r.err.find("built without the Vulkan backend") != std::string::npos)
        << r.err;
    EXPECT_EQ(run_toy(std::string(cmd) + model + " --device gpu").code, 2);
  }
  const auto serve = run_toy("serve --port 0 --device vulkan:99");
  EXPECT_EQ(serve.code, 5) << serve.err;
  EXPECT_EQ(serve.out.find("listening"), std::string::npos) << serve.out;  // it never started
  test::ScopedEnv env;
  env.set("TOY_DEVICE", "vulkan:x");
  const auto r = run_toy("infer -n 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("TOY_DEVICE='vulkan:x'"), std::string::npos) << r.err;
}

#ifdef TOY_VULKAN
namespace {

const Device kGpu = Device::vulkan(0);

std::vector<float> uniform(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

// A host tensor of dtype dt holding `values` rounded to it.
Tensor host_tensor(Shape shape, DType dt, const std::vector<float>& values) {
  Tensor t = Tensor::empty(shape, dt);
  quantize(dt, values.data(), t.raw_mut(), int64_t(values.size()));
  return t;
}

}  // namespace

// Tensors go to the device and come back with the same bytes (dtype, name and shape kept), views
// of them included; read on the host without a copy, they are a clear error.
TEST(Device, TensorsGoToTheDeviceAndBackByteForByte) {
  TOY_REQUIRE_VULKAN();
  for (const DType dt : {DType::F32, DType::F16, DType::Q8_0}) {
    SCOPED_TRACE(name(dt));
    const Tensor h = host_tensor({3, 64}, dt, uniform(3 * 64, 7)).set_name("w");
    const Tensor d = to_device(h, kGpu);
    EXPECT_EQ(d.device(), kGpu);
    EXPECT_EQ(d.shape(), h.shape());
    EXPECT_EQ(d.dtype(), dt);
    EXPECT_EQ(d.name(), "w");
    const Tensor back = to_host(d);
    EXPECT_TRUE(back.device().is_cpu());
    EXPECT_EQ(0, std::memcmp(back.raw(), h.raw(), h.nbytes()));
    EXPECT_EQ(d.row_slice(1, 3).to_vector(), h.row_slice(1, 3).to_vector());  // a view at an offset
    try {
      (void)d.raw();
      ADD_FAILURE() << "raw() of a device tensor";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("is on vulkan:0: copy it to the host first"), std::string::npos) << e.what();
    }
  }
}

// linear() of tensors on the device runs the matrix-vector shader: within the bound of
// VulkanMatvec's check_matvec (tests/test_vulkan.cpp) of the double reference, since it is that shader.
TEST(Device, LinearRunsOnTheDevice) {
  TOY_REQUIRE_VULKAN();
  const int64_t N = 37, K = 300;
  const auto xv = uniform(K, 1), wv = uniform(N * K, 2);
  const Tensor x = Tensor::from({1, K}, xv), W = Tensor::from({N, K}, wv);
  NoGrad no_grad;
  const Tensor y = linear(to_device(x, kGpu), to_device(W, kGpu));
  EXPECT_EQ(y.device(), kGpu);
  ASSERT_EQ(y.shape(), (Shape{1, N}));
  const std::vector<float> got = y.to_vector();
  for (int64_t n = 0; n < N; ++n) {
    double s = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      s += double(xv[size_t(k)]) * wv[size_t(n * K + k)];
      mag += std::fabs(double(xv[size_t(k)]) * wv[size_t(n * K + k)]);
    }
    const double bound = 1.01 * double((K + 63) / 64 + 6) * std::ldexp(1.0, -24) * mag;
    EXPECT_LE(std::fabs(got[size_t(n)] - s), bound) << "row " << n;
  }
}

// A mixture of experts on the device: an expert's slab of a stacked weight (a view at a byte
// offset, every block type's unit) gives the bits of the whole expert uploaded alone; scale_rows
// and scatter_add_rows (repeated rows, a row no source adds to, a host base and host scales) give
// the CPU's bits.
TEST(Device, ExpertRowsGiveTheCpuBits) {
  TOY_REQUIRE_VULKAN();
  NoGrad no_grad;
  const int64_t E = 3, N = 5, K = 256, M = 4;
  const Tensor x = Tensor::from({M, K}, uniform(M * K, 3));
  for (const DType dt : {DType::F32, DType::F16, DType::Q4_0, DType::Q6_K}) {
    SCOPED_TRACE(name(dt));
    const Tensor stacked = host_tensor({E, N, K}, dt, uniform(E * N * K, 4));
    const Tensor on_device = to_device(stacked, kGpu), xd = to_device(x, kGpu);
    for (int64_t e = 0; e < E; ++e) {
      const std::vector<float> from_slab = linear(xd, slab(on_device, e)).to_vector();
      Tensor expert = Tensor::empty({N, K}, dt);  // its bytes, in a tensor of their own
      std::memcpy(expert.raw_mut(), slab(stacked, e).raw(), expert.nbytes());
      const std::vector<float> alone = linear(xd, to_device(expert, kGpu)).to_vector();
      EXPECT_EQ(from_slab, alone) << "expert " << e;
    }
  }
  const Tensor src = Tensor::from({6, 7}, uniform(42, 5)), base = Tensor::from({4, 7}, uniform(28, 6));
  const Tensor rows = Tensor::from_ids({6}, std::vector<int32_t>{2, 0, 2, 3, 0, 2});  // row 1 gets nothing
  const Tensor s = Tensor::from({6}, uniform(6, 7));
  EXPECT_EQ(scale_rows(to_device(src, kGpu), s).to_vector(), scale_rows(src, s).to_vector());
  EXPECT_EQ(scatter_add_rows(base, rows, to_device(src, kGpu)).to_vector(),
            scatter_add_rows(base, rows, src).to_vector());
  EXPECT_EQ(scatter_add_rows(to_device(base, kGpu), rows, to_device(src, kGpu)).to_vector(),
            scatter_add_rows(base, rows, src).to_vector());
}

// Tensors of two devices in one op, and a device that is not there, are clear errors.
TEST(Device, MixedDevicesAndMissingOnesAreClearErrors) {
  TOY_REQUIRE_VULKAN();
  NoGrad no_grad;
  const Tensor x = Tensor::from({1, 4}, std::vector<float>{1, 2, 3, 4});
  const Tensor W = Tensor::from({2, 4}, std::vector<float>(8, 1.0f)).set_name("w");
  try {
    linear(to_device(x, kGpu), W);
    ADD_FAILURE() << "a host weight for a device x";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'w' is on cpu, not on vulkan:0"), std::string::npos) << e.what();
  }
  try {
    to_device(x, Device::vulkan(99));
    ADD_FAILURE() << "vulkan:99";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("no device vulkan:99"), std::string::npos) << e.what();
  }
}
#endif
