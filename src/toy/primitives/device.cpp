// primitives/device.cpp — finding a device's backend, moving tensors, and the ops a backend has
// no shader for yet (device.h).
#include "toy/primitives/device.h"

#include "toy/tensor/tensor.h"

namespace toy {

#ifdef TOY_VULKAN
DeviceOps& vulkan_ops(int index);  // primitives/vulkan/ops.cpp
#endif

DeviceOps* device_ops(Device d) {
  if (d.is_cpu()) return nullptr;
#ifdef TOY_VULKAN
  return &vulkan_ops(d.index);
#else
  throw DeviceError(to_string(d) +
                    ": this toy was built without the Vulkan backend (docs/vulkan.md: it needs "
                    "Vulkan's headers and glslc at configure time)");
#endif
}

DeviceOps* device_ops(const Tensor& x) {
  return x.defined() && !x.device().is_cpu() ? device_ops(x.device()) : nullptr;
}

Tensor to_device(const Tensor& x, Device d) {
  if (x.device() == d) return x;
  if (!x.device().is_cpu()) return to_device(to_host(x), d);
  return device_ops(d)->upload(x);
}

Tensor to_host(const Tensor& x) {
  DeviceOps* d = device_ops(x);
  return d ? d->to_host(x) : x;
}

void DeviceOps::unsupported(const std::string& op) const {
  throw DeviceError(to_string(device()) + ": no shader for " + op + " yet");
}

void DeviceOps::store_rows(Tensor&, int64_t, const Tensor&) { unsupported("store_rows"); }
Tensor DeviceOps::add(const Tensor&, const Tensor&) { unsupported("add"); }
Tensor DeviceOps::mul(const Tensor&, const Tensor&) { unsupported("mul"); }
Tensor DeviceOps::scale(const Tensor&, float) { unsupported("scale"); }
Tensor DeviceOps::silu(const Tensor&) { unsupported("silu"); }
Tensor DeviceOps::gelu_tanh(const Tensor&) { unsupported("gelu_tanh"); }
Tensor DeviceOps::softcap(const Tensor&, float) { unsupported("softcap"); }
Tensor DeviceOps::sigmoid(const Tensor&) { unsupported("sigmoid"); }
Tensor DeviceOps::linear(const Tensor&, const Tensor&, const Tensor&) { unsupported("linear"); }
Tensor DeviceOps::embedding(const Tensor&, const Tensor&) { unsupported("embedding"); }
Tensor DeviceOps::gather_rows(const Tensor&, const Tensor&) { unsupported("gather_rows"); }
Tensor DeviceOps::rms_norm(const Tensor&, const Tensor&, float) { unsupported("rms_norm"); }
Tensor DeviceOps::layer_norm(const Tensor&, const Tensor&, const Tensor&, float) { unsupported("layer_norm"); }
Tensor DeviceOps::rope(const Tensor&, const RopeAngles&) { unsupported("rope"); }
Tensor DeviceOps::attention(const Tensor&, const Tensor&, const Tensor&, const AttentionOptions&) {
  unsupported("attention");
}

}  // namespace toy
