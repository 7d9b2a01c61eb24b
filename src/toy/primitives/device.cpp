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

Tensor zeros_on(Device d, Shape shape) {
  const Tensor z = Tensor::zeros(std::move(shape));
  return d.is_cpu() ? z : device_ops(d)->upload(z);
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
Tensor DeviceOps::narrow(const Tensor&, int64_t, int64_t) { unsupported("narrow"); }
Tensor DeviceOps::scale_rows(const Tensor&, const Tensor&) { unsupported("scale_rows"); }
Tensor DeviceOps::scatter_add_rows(const Tensor&, const Tensor&, const Tensor&) { unsupported("scatter_add_rows"); }
Tensor DeviceOps::causal_conv1d(const Tensor&, const Tensor&, Tensor&) { unsupported("causal_conv1d"); }
Tensor DeviceOps::l2_norm(const Tensor&, float) { unsupported("l2_norm"); }
Tensor DeviceOps::delta_log_decay(const Tensor&, const Tensor&, const Tensor&) { unsupported("delta_log_decay"); }
Tensor DeviceOps::gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                                   bool) {
  unsupported("gated_delta_rule");
}

}  // namespace toy
