// primitives/vulkan/ops.cpp — the primitives on a Vulkan device (primitives/device.h): a tensor's
// bytes are a vulkan::Buffer, and each op validates its tensors as the CPU primitive does, then
// records the shader beside it in kernels/vulkan/. Nothing runs until a tensor is read back
// (to_host, to_vector): a whole forward pass is one submission. Built with TOY_VULKAN only.
#include <mutex>
#include <unordered_map>

#include "toy/kernels/vulkan/context.h"
#include "toy/kernels/vulkan/matvec.h"
#include "toy/primitives/device.h"
#include "toy/tensor/quant.h"

namespace toy {
namespace {

namespace vk = kernels::vulkan;

class VulkanOps;

// A tensor's bytes on the device: one Buffer, which views share at their offsets.
struct VulkanMemory final : DeviceMemory {
  VulkanMemory(VulkanOps& o, vk::Buffer b) : ops(o), buffer(std::move(b)) {}
  Device device() const override;
  void read(size_t offset, void* dst, size_t bytes) const override;
  VulkanOps& ops;
  vk::Buffer buffer;
};

class VulkanOps final : public DeviceOps {
 public:
  explicit VulkanOps(int index) : index_(index), ctx_(open(index)), matvec_(*ctx_) {}

  Device device() const override { return Device::vulkan(index_); }
  std::string name() const override { return to_string(device()) + " (" + ctx_->name() + ")"; }

  Tensor upload(const Tensor& host) override {
    Tensor t = empty(host.shape(), host.dtype());
    t.set_name(host.name());
    std::lock_guard lock(mutex_);
    ctx_->upload(buffer(t), host.raw(), host.nbytes());
    return t;
  }

  Tensor empty(Shape shape, DType dtype) override {
    const size_t bytes = size_t(row_bytes(dtype, toy::numel(shape)));
    std::lock_guard lock(mutex_);
    auto memory = std::make_shared<VulkanMemory>(*this, ctx_->buffer(bytes));
    auto impl = std::make_shared<TensorImpl>();
    impl->shape = std::move(shape);
    impl->dtype = dtype;
    impl->storage = Storage::on_device(std::move(memory), bytes);
    return Tensor(impl);
  }

  Tensor to_host(const Tensor& x) override {
    Tensor h = Tensor::empty(x.shape(), x.dtype());
    h.set_name(x.name());
    read(memory(x), x.impl()->offset, h.raw_mut(), x.nbytes());
    return h;
  }

  void read(const VulkanMemory& m, size_t offset, void* dst, size_t bytes) {
    std::lock_guard lock(mutex_);
    ctx_->download(m.buffer, dst, bytes, offset);
  }

  // y[M, N] = x[M, K] · W[N, K]ᵀ: the matrix-vector shader, row by row.
  Tensor linear(const Tensor& x, const Tensor& W, const Tensor& b) override {
    auto [N, K] = W.dims<2>("linear: W");
    if (x.size(-1) != K)
      throw ShapeError("linear: x " + to_string(x.shape()) + " for W " + to_string(W.shape()) + " (" + W.name() + ")");
    if (b.defined() || W.impl()->low_rank || W.dtype() != DType::F32 || x.numel() != K) unsupported("this linear");
    Shape out = x.shape();
    out.back() = N;
    Tensor y = empty(out, DType::F32);
    std::lock_guard lock(mutex_);
    matvec_(whole(W), W.dtype(), whole(x), buffer(y), N, K);
    return y;
  }

 private:
  static std::unique_ptr<vk::Context> open(int index) {
    try {
      return std::make_unique<vk::Context>(index);
    } catch (const vk::Error& e) {
      throw DeviceError(e.what());
    }
  }
  const VulkanMemory& memory(const Tensor& t) const {
    const auto* m = dynamic_cast<const VulkanMemory*>(t.impl()->storage->device.get());
    if (!m || &m->ops != this)
      throw DeviceError("tensor '" + t.name() + "' is on " + to_string(t.device()) + ", not on " + to_string(device()));
    return *m;
  }
  vk::Buffer& buffer(const Tensor& t) { return const_cast<vk::Buffer&>(memory(t).buffer); }
  // The buffer of a tensor that starts at its beginning (the shaders without offsets yet).
  const vk::Buffer& whole(const Tensor& t) {
    if (t.impl()->offset != 0) unsupported("a view into a buffer");
    return memory(t).buffer;
  }

  std::mutex mutex_;  // one thread at a time records or submits (the server's slots share a device)
  int index_;
  std::unique_ptr<vk::Context> ctx_;
  vk::Matvec matvec_;
};

Device VulkanMemory::device() const { return ops.device(); }
void VulkanMemory::read(size_t offset, void* dst, size_t bytes) const { ops.read(*this, offset, dst, bytes); }

}  // namespace

// One backend per device, started on first use and never destroyed: tensors in static objects
// may be freed after main returns, and each keeps its device's memory.
DeviceOps& vulkan_ops(int index) {
  static std::mutex mutex;
  static auto* backends = new std::unordered_map<int, std::unique_ptr<VulkanOps>>;
  std::lock_guard lock(mutex);
  auto& b = (*backends)[index];
  if (!b) b = std::make_unique<VulkanOps>(index);
  return *b;
}

}  // namespace toy
