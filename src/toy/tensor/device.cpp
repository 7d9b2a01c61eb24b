// tensor/device.cpp — device names (device.h).
#include "toy/tensor/device.h"

#include <charconv>
#include <stdexcept>

namespace toy {

std::string to_string(Device d) { return d.is_cpu() ? "cpu" : "vulkan:" + std::to_string(d.index); }

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "vulkan") return Device::vulkan(0);
  const std::string prefix = "vulkan:";
  if (text.rfind(prefix, 0) == 0 && text.size() > prefix.size() && text.size() <= prefix.size() + 4) {
    int index = -1;
    const char* end = text.data() + text.size();
    const auto [at, ec] = std::from_chars(text.data() + prefix.size(), end, index);
    if (ec == std::errc() && at == end && index >= 0) return Device::vulkan(index);
  }
  throw std::invalid_argument("unknown device '" + text + "': cpu, vulkan or vulkan:N (`toy devices` lists them)");
}

}  // namespace toy
