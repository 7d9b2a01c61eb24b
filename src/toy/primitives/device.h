// primitives/device.h — the device seam: a primitive whose tensors live on a device runs there.
//
// Each primitive begins with one line, `if (DeviceOps* d = device_ops(x)) return d->op(...);`:
// on the CPU it goes on to its kernels, on a device the backend's op runs the shaders beside it
// (primitives/vulkan/ops.cpp for Vulkan). Architectures and blocks call the same primitives
// whatever the device, so a forward reads the same on both. A model moves with Model::to; engines
// read their logits back with to_host.
//
// On a device, inference only so far (issue #33 adds the gradients); an op a backend has no shader
// for yet is an Error that names it, never a silent copy to the host.
#pragma once

#include <memory>
#include <string>

#include "toy/primitives/primitives.h"
#include "toy/tensor/device.h"

namespace toy {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // "vulkan:0 (llvmpipe (LLVM 15.0.6, 256 bits))"

  // --- memory ---
  virtual Tensor upload(const Tensor& host) = 0;  // same shape, dtype and name, on the device
  virtual Tensor empty(Shape shape, DType dtype) = 0;
  virtual Tensor to_host(const Tensor& x) = 0;  // an owned host copy, same dtype
  // dst[row0 + i] = src[i] for the rows of src (dim 0), rounded to dst's dtype (a KV cache's F16).
  virtual void store_rows(Tensor& dst, int64_t row0, const Tensor& src);

  // --- the primitives (primitives.h and indexing.h say what each computes) ---
  virtual Tensor add(const Tensor& a, const Tensor& b);
  virtual Tensor mul(const Tensor& a, const Tensor& b);
  virtual Tensor scale(const Tensor& x, float s);
  virtual Tensor silu(const Tensor& x);
  virtual Tensor gelu_tanh(const Tensor& x);
  virtual Tensor softcap(const Tensor& x, float cap);
  virtual Tensor sigmoid(const Tensor& x);
  virtual Tensor linear(const Tensor& x, const Tensor& W, const Tensor& b);
  virtual Tensor embedding(const Tensor& W, const Tensor& ids);
  virtual Tensor gather_rows(const Tensor& x, const Tensor& rows);
  virtual Tensor rms_norm(const Tensor& x, const Tensor& w, float eps);
  virtual Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps);
  virtual Tensor rope(const Tensor& x, const RopeAngles& angles);
  virtual Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o);
  virtual Tensor narrow(const Tensor& x, int64_t begin, int64_t n);
  // A mixture of experts' rows (indexing.h); s and base may be on the host (the router's weights
  // and a zero base are made there: routing.cpp routes on the host).
  virtual Tensor scale_rows(const Tensor& x, const Tensor& s);
  virtual Tensor scatter_add_rows(const Tensor& base, const Tensor& rows, const Tensor& src);
  // Gated DeltaNet (delta_rule.h); the state tensors live on the device and are updated there.
  virtual Tensor causal_conv1d(const Tensor& x, const Tensor& w, Tensor& state);
  virtual Tensor l2_norm(const Tensor& x, float eps);
  virtual Tensor delta_log_decay(const Tensor& alpha, const Tensor& dt_bias, const Tensor& a);
  virtual Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                  const Tensor& beta, Tensor& state, bool tiled);

 protected:
  [[noreturn]] void unsupported(const std::string& op) const;  // "vulkan:0: no shader for rope yet"
};

// The backend of x's device; null for a tensor on the CPU (the primitive's own kernels run).
DeviceOps* device_ops(const Tensor& x);
// The backend of `d` (null for the CPU), started on first use. Throws DeviceError where it cannot
// be had: toy built without it, no loader, no device d.index, a device without the features needed.
DeviceOps* device_ops(Device d);

// x on device d (itself when it is there already); gradients do not follow.
Tensor to_device(const Tensor& x, Device d);
// x on the host (itself when it is there already).
Tensor to_host(const Tensor& x);
// F32 zeros of `shape` on device d (a recurrent layer's first state).
Tensor zeros_on(Device d, Shape shape);

}  // namespace toy
