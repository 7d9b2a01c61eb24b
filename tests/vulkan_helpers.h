#pragma once
// tests/vulkan_helpers.h — what the Vulkan kernel tests share: one context on vulkan:0 (Mesa's
// lavapipe here and in CI), the skip where there is none, an op's error message, and views placed
// at offsets inside marker values so that a test sees a write outside them. TOY_VULKAN builds only.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "toy/kernels/vulkan/context.h"
#include "toy/kernels/vulkan/devices.h"

namespace vk = toy::kernels::vulkan;

namespace vktest {

// One context for the suite (an instance and a device cost lavapipe about 100 ms each time).
inline vk::Context* context() {
  static const std::unique_ptr<vk::Context> ctx = []() -> std::unique_ptr<vk::Context> {
    if (vk::list_devices().devices.empty()) return nullptr;
    return std::make_unique<vk::Context>(0);
  }();
  return ctx.get();
}

#define REQUIRE_DEVICE() \
  if (!vktest::context()) GTEST_SKIP() << "no Vulkan device: " << vk::list_devices().problem

// The error message of f(), "" where it throws none.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const vk::Error& e) {
    return e.what();
  }
  return "";
}

inline constexpr float kMarker = 12345.0f;  // what a buffer holds outside the views of a test

// A buffer of off + v.size() + 1 values of T: v at offset off, `marker` before and after it.
template <class T = float>
vk::Buffer upload_at(const std::vector<T>& v, uint64_t off, T marker = T(kMarker)) {
  std::vector<T> all(off, marker);
  all.insert(all.end(), v.begin(), v.end());
  all.push_back(marker);
  vk::Buffer b = context()->buffer((all.size() * sizeof(T) + 3) / 4 * 4);
  context()->upload(b, all.data(), all.size() * sizeof(T));
  return b;
}

// The n values at offset off of b (made by upload_at for n values), checking that the op wrote
// nothing outside them.
template <class T = float>
std::vector<T> download_at(const vk::Buffer& b, uint64_t off, size_t n, T marker = T(kMarker)) {
  std::vector<T> all(off + n + 1);
  context()->download(b, all.data(), all.size() * sizeof(T));
  for (uint64_t i = 0; i < all.size(); ++i)
    if ((i < off || i >= off + n) && std::memcmp(&all[i], &marker, sizeof(T)) != 0)
      ADD_FAILURE() << "value " << i << " outside the view was written";
  return {all.begin() + ptrdiff_t(off), all.begin() + ptrdiff_t(off + n)};
}

// n values uniform in [lo, hi] from a seed.
inline std::vector<float> uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace vktest
