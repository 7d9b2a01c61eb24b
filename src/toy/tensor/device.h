// tensor/device.h — where a tensor's bytes live: the CPU's memory, or a device's (vulkan:N).
//
// A tensor on a device has no host pointer: its Storage holds DeviceMemory, which the backend
// that made it owns (primitives/vulkan/). Views (reshape, row_slice) work on it as on host bytes —
// the offset is into the device memory — and the primitives run its ops on the device
// (primitives/device.h). Reading it on the host is an explicit copy (to_vector, to_host).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace toy {

// A device that cannot be had or cannot do the work: no loader, no device N, out of device
// memory, an op without a shader (the Vulkan backend's vulkan::Error is one). `toy` exits 5.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Device {
  enum class Kind { Cpu, Vulkan };
  Kind kind = Kind::Cpu;
  int index = 0;  // vulkan:index, in the order `toy devices` lists them

  static Device cpu() { return {}; }
  static Device vulkan(int index) { return {Kind::Vulkan, index}; }
  bool is_cpu() const { return kind == Kind::Cpu; }
  bool operator==(const Device&) const = default;
};
std::string to_string(Device d);  // "cpu", "vulkan:0"
// "cpu", "vulkan" (vulkan:0) or "vulkan:N". Throws std::invalid_argument naming what it takes.
Device parse_device(const std::string& text);

// Bytes on a device, made and owned by its backend.
struct DeviceMemory {
  virtual ~DeviceMemory() = default;
  virtual Device device() const = 0;
  // Copies `bytes` bytes from `offset` to the host (after the work recorded on the device has run).
  virtual void read(size_t offset, void* dst, size_t bytes) const = 0;
};

}  // namespace toy
