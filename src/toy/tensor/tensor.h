// tensor/tensor.h — the one tensor type of toy: shape, dtype, storage, and the autograd record.
//
// Shapes are in PyTorch order, outermost first, last dimension contiguous: a weight is
// [out, in], activations are [B, T, d_model]. Tensors are always contiguous; a view shares
// its storage at an offset (a weight inside a mapped GGUF file, the first S rows of a KV cache).
//
// Autograd (reverse mode, dynamic graph): an op that produces a tensor from inputs that
// require gradients records a Node holding its backward rule. `backward()` on a scalar walks
// the recorded graph in reverse topological order and accumulates `grad` on the leaves.
// Under `NoGrad` nothing is recorded and an op costs what its kernel costs.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "toy/tensor/device.h"
#include "toy/tensor/dtype.h"

// clang (before 15) says ASan is on only through __has_feature, GCC only through __SANITIZE_ADDRESS__.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TOY_ASAN 1
#endif
#endif

namespace toy {

using Shape = std::vector<int64_t>;
std::string to_string(const Shape& s);  // "[2, 3]"
int64_t numel(const Shape& s);

// Raised for a shape or dtype that does not fit an op; the message starts with the op's name.
struct ShapeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bytes that tensors point into: an owned, 64-byte aligned buffer, memory owned by someone
// else (a mapped file) that `keepalive` keeps alive, or a device's memory (data is null then).
//
// Owned buffers come from a small cache of freed buffers keyed by size (a decode step
// allocates the same sizes every token, so malloc/free would otherwise be paid per op): at
// most kCacheMaxIdle bytes idle in all, buffers above kCacheMaxBlock go straight back to the
// system, and the sanitizer build bypasses the cache so use-after-free stays visible.
struct Storage {
  void* data = nullptr;
  size_t bytes = 0;
  size_t block = 0;  // size of the owned buffer, 0 when borrowed
  bool writable = true;
  std::shared_ptr<void> keepalive;             // the owner of borrowed bytes
  std::shared_ptr<const DeviceMemory> device;  // set for bytes on a device (device.h)
  // `bytes` owned bytes, zero-filled when `zero`, else left as they come (see Tensor::empty).
  static std::shared_ptr<Storage> allocate(size_t bytes, bool zero);
  static std::shared_ptr<Storage> borrow(const void* data, size_t bytes, std::shared_ptr<void> keepalive);
  static std::shared_ptr<Storage> on_device(std::shared_ptr<const DeviceMemory> memory, size_t bytes);
#if defined(__SANITIZE_ADDRESS__) || defined(TOY_ASAN)
  static constexpr bool kCacheBuffers = false;  // a reused buffer would hide use-after-free
#else
  static constexpr bool kCacheBuffers = true;
#endif
  static constexpr size_t kCacheMaxBlock = size_t(1) << 20;
  static constexpr size_t kCacheMaxIdle = size_t(8) << 20;
  static size_t cached_bytes();  // bytes of freed buffers held for reuse now

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
};

class Tensor;
struct Node;
struct LowRank;  // LoRA terms a weight carries (primitives.h)

struct TensorImpl {
  Shape shape;
  DType dtype = DType::F32;
  std::shared_ptr<Storage> storage;
  size_t offset = 0;  // bytes into storage
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;            // set when this tensor was produced by a recorded op
  std::shared_ptr<TensorImpl> grad;         // accumulated gradient of a leaf
  std::string name;                         // GGUF name for parameters ("blk.0.attn_q.weight")
  std::shared_ptr<const LowRank> low_rank;  // adapters linear() adds to this weight (LoRA), or null
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // --- construction ---
  // Owned tensors. `empty` leaves the contents unspecified, for outputs that are written in
  // full (builds with TOY_POISON_EMPTY, the sanitizer build, fill them with 0xFF bytes: NaN,
  // so a read before the write shows up in the tests); `zeros` fills them with zeros.
  static Tensor empty(Shape shape, DType dtype = DType::F32);
  static Tensor zeros(Shape shape, DType dtype = DType::F32);
  static Tensor full(Shape shape, float value);
  static Tensor from(Shape shape, std::span<const float> values);
  static Tensor from_ids(Shape shape, std::span<const int32_t> ids);  // I32 tensor
  // A read-only view of bytes owned elsewhere (mapped GGUF data).
  static Tensor view_of(Shape shape, DType dtype, const void* data, std::shared_ptr<void> keepalive);

  // --- inspection ---
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  int dim() const { return int(impl_->shape.size()); }
  int64_t size(int d) const;  // negative d counts from the end
  int64_t numel() const { return toy::numel(impl_->shape); }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device ? impl_->storage->device->device() : Device::cpu(); }
  size_t nbytes() const;
  const std::string& name() const { return impl_->name; }
  Tensor& set_name(std::string n) {
    impl_->name = std::move(n);
    return *this;
  }

  // Destructuring shape check: `auto [T, D] = x.dims<2>("rms_norm: x");` throws
  // "rms_norm: x: expected 2 dimensions, got [5, 3, 2]".
  template <size_t N>
  std::array<int64_t, N> dims(const char* what) const {
    check_dim(int(N), what);
    std::array<int64_t, N> a{};
    for (size_t i = 0; i < N; ++i) a[i] = impl_->shape[i];
    return a;
  }

  // --- data access (host tensors: a tensor on a device throws, copy it with to_vector or to_host) ---
  const void* raw() const {
    if (impl_->storage->device) on_device_error("raw");
    return static_cast<const char*>(impl_->storage->data) + impl_->offset;
  }
  void* raw_mut();            // throws for read-only (mapped) tensors
  const float* data() const;  // F32 only
  float* data_mut();
  const int32_t* ids() const;            // I32 only
  std::vector<float> to_vector() const;  // any dtype, dequantized to float; a copy from a device too
  float item() const;                    // single F32 value

  // --- views and copies (views share storage; gradients flow through reshape) ---
  Tensor reshape(Shape shape) const;
  Tensor row_slice(int64_t begin, int64_t end) const;  // rows [begin, end) of dim 0, no grad
  Tensor clone() const;                                // owned F32 copy (dequantizes), no grad
  Tensor detach() const;                               // same storage, no grad history

  // --- autograd ---
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  Tensor& requires_grad_(bool on = true);
  Tensor grad() const { return impl_->grad ? Tensor(impl_->grad) : Tensor(); }
  void zero_grad() { impl_->grad.reset(); }
  // this must be a scalar (numel 1). `on_grad_final`, when given, is called once for each leaf
  // that requires grad and that the graph reaches, as soon as the leaf's grad() is final: right
  // after the last node that uses it has run (data-parallel training starts sending a parameter's
  // gradient then while the walk goes on: docs/distributed.md, "Overlap").
  void backward(const std::function<void(const Tensor& leaf)>& on_grad_final = {}) const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  void check_dim(int n, const char* what) const;
  [[noreturn]] void on_device_error(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

// ---------------------------------------------------------------------------------------
// Recording ops.
struct Node {
  const char* op;              // "rms_norm", for error messages and traces
  std::vector<Tensor> inputs;  // inputs that take part in differentiation
  // Maps d(loss)/d(output) to d(loss)/d(input_i) for each input (undefined = no gradient).
  std::function<std::vector<Tensor>(const Tensor& dout)> backward;
};

// Ops record themselves unless a NoGrad is alive on this thread.
class NoGrad {  // RAII: `{ NoGrad ng; logits = model.forward(...); }`
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool prev_;
};

// True when the op with these inputs must record a Node.
bool needs_grad(std::initializer_list<const Tensor*> inputs);

// Attach a backward rule to `out`. `inputs` are the op's differentiable inputs in the order
// the rule returns their gradients.
void record(Tensor& out, const char* op, std::vector<Tensor> inputs,
            std::function<std::vector<Tensor>(const Tensor& dout)> backward);

// Adds `g` into the gradient slot `acc` (allocating it on first use).
void accumulate(std::shared_ptr<TensorImpl>& acc, const Tensor& g);

}  // namespace toy
