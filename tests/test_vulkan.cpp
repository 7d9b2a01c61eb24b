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
