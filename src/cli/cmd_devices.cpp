// cli/cmd_devices.cpp — `toy devices` (and `toy --list-devices`, as llama.cpp spells it): the
// devices toy can compute on: the CPU, and what the Vulkan loader reports (docs/vulkan.md).
//
// Output: one line a device, "cpu" then "vulkan:N" (the name --device will take), its name,
// type, memory and the features the shaders may use; --json the same as one object. No Vulkan
// device is not an error: the line says why (no loader, no driver, a build without Vulkan).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/cli.h"
#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/kernels/vulkan/devices.h"

namespace toy::cli {
namespace {

std::string features(const kernels::vulkan::DeviceInfo& d) {
  std::string s;
  for (auto [on, name] : {std::pair{d.float16, "fp16"},
                          {d.int8, "int8"},
                          {d.storage16, "storage16"},
                          {d.storage8, "storage8"},
                          {d.int_dot, "int-dot"}})
    if (on) s += std::string(s.empty() ? "" : " ") + name;
  return s.empty() ? "-" : s;
}

std::string version(const kernels::vulkan::DeviceInfo& d) {
  return std::to_string(d.api_major) + "." + std::to_string(d.api_minor) + "." + std::to_string(d.api_patch);
}

int run(const Args& a) {
  const kernels::vulkan::DeviceList vk = kernels::vulkan::list_devices();
  if (a.flag("json")) {
    nlohmann::ordered_json j;
    j["cpu"] = {{"simd", kernels::simd_level()}, {"threads", kernels::num_threads()}};
    j["vulkan"] = {{"built", vk.built}, {"devices", nlohmann::ordered_json::array()}};
    if (!vk.problem.empty()) j["vulkan"]["problem"] = vk.problem;
    for (const auto& d : vk.devices)
      j["vulkan"]["devices"].push_back({{"device", "vulkan:" + std::to_string(d.index)},
                                        {"name", d.name},
                                        {"type", d.type},
                                        {"driver", d.driver},
                                        {"api_version", version(d)},
                                        {"device_local_bytes", d.device_local_bytes},
                                        {"subgroup_size", d.subgroup_size},
                                        {"float16", d.float16},
                                        {"int8", d.int8},
                                        {"storage16", d.storage16},
                                        {"storage8", d.storage8},
                                        {"integer_dot_product", d.int_dot}});
    std::cout << j.dump(2) << "\n";
    return kOk;
  }
  std::printf("cpu        %s, %d threads\n", kernels::simd_level().c_str(), kernels::num_threads());
  for (const auto& d : vk.devices)
    std::printf("vulkan:%-3d %s (%s; Vulkan %s; %.2f GiB device memory; subgroup %u; %s)%s%s\n", d.index,
                d.name.c_str(), d.type.c_str(), version(d).c_str(), double(d.device_local_bytes) / (1ull << 30),
                d.subgroup_size, features(d).c_str(),
                d.driver.empty() ? "" : "\n           driver: ", d.driver.c_str());
  if (!vk.problem.empty()) std::printf("vulkan     none: %s\n", vk.problem.c_str());
  return kOk;
}

Registrar reg({
    .name = "devices",
    .summary = "list the devices toy can compute on: the CPU and what the Vulkan loader sees",
    .positionals = {},
    .flags = {{"json", FlagType::Bool, "",
               "print one JSON object: cpu, vulkan.devices (name, type, memory, features)"}},
    .run = run,
    .details = "Each Vulkan device is named vulkan:N, in the loader's order: the name --device takes (toy infer,\n"
               "chat, eval, serve and bench; docs/vulkan.md). `toy --list-devices` is the same.\n"
               "example: toy devices --json",
});

}  // namespace
}  // namespace toy::cli
