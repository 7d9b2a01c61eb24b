#pragma once
// kernels/vulkan/devices.h — the Vulkan devices this machine offers, as the loader reports them.
//
// The first piece of the Vulkan compute backend (issue #32, docs/vulkan.md). The loader
// (libvulkan.so.1) is opened at run time, so toy starts and runs on the CPU where it is absent;
// a build without Vulkan's headers (TOY_VULKAN off) reports that instead.
#include <cstdint>
#include <string>
#include <vector>

namespace toy::kernels::vulkan {

struct DeviceInfo {
  int index = 0;       // N of --device vulkan:N, in the loader's order
  std::string name;    // "llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA H100 80GB HBM3"
  std::string type;    // "discrete", "integrated", "virtual", "cpu" or "other"
  std::string driver;  // the driver's name and version text, e.g. "Mesa 22.3.6 (LLVM 15.0.6)"
  uint32_t api_major = 0, api_minor = 0, api_patch = 0;  // the Vulkan version the device supports
  uint64_t device_local_bytes = 0;                       // the largest DEVICE_LOCAL memory heap
  uint32_t subgroup_size = 0;                            // 0 where the device does not say
  // What the shaders may use: 16-bit float arithmetic, 8-bit integers, 8- and 16-bit loads and
  // stores from storage buffers (quantized blocks, halves), integer dot products (Vulkan 1.3).
  bool float16 = false, int8 = false, storage8 = false, storage16 = false, int_dot = false;
};

struct DeviceList {
  bool built = true;    // false: this toy was built without Vulkan (TOY_VULKAN off)
  std::string problem;  // why there are no devices: no loader, no Vulkan 1.1 instance
  std::vector<DeviceInfo> devices;
};

// Asks the loader. Never throws: a missing loader or a failing instance is `problem`.
DeviceList list_devices();

}  // namespace toy::kernels::vulkan
