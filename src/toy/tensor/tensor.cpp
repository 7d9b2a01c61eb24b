// tensor/tensor.cpp — storage, views and the reverse-mode autograd walk.
#include "toy/tensor/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "toy/tensor/quant.h"

namespace toy {

std::string to_string(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// --- storage --------------------------------------------------------------------------

namespace {

// Freed tensor buffers by size, for the next tensor of that size. A decode step allocates
// the same sizes layer after layer and token after token, so nearly every buffer comes from
// here; malloc/free of them (small frees between large mallocs, with the consolidation that
// causes) cost ~4% of a decode step. Idle bytes are bounded: a buffer that would take the
// cache past kCacheMaxIdle empties it first, so sizes that stopped coming (a prefill's) leave.
class BufferCache {
 public:
  void* take(size_t block) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(block);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    idle_ -= block;
    return p;
  }

  void give(void* p, size_t block) {
    if (block > Storage::kCacheMaxBlock) return std::free(p);
    std::lock_guard lock(mutex_);
    if (idle_ + block > Storage::kCacheMaxIdle) {
      for (auto& [size, blocks] : free_)
        for (void* q : blocks) std::free(q);
      free_.clear();
      idle_ = 0;
    }
    try {
      free_[block].push_back(p);
    } catch (const std::bad_alloc&) {  // called from ~Storage: never throw, just free
      return std::free(p);
    }
    idle_ += block;
  }

  size_t idle() {
    std::lock_guard lock(mutex_);
    return idle_;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t idle_ = 0;
};

// Never destroyed: tensors in static objects may be freed after main returns.
BufferCache& buffers() {
  static auto* cache = new BufferCache;
  return *cache;
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t bytes, bool zero) {
  auto s = std::make_shared<Storage>();
  const size_t block = (bytes + 63) / 64 * 64 + 64;  // the tail: room for kernels' vector over-reads
  void* reused = kCacheBuffers ? buffers().take(block) : nullptr;
  auto* p = static_cast<unsigned char*>(reused ? reused : std::aligned_alloc(64, block));
  if (!p) throw std::bad_alloc();
#ifdef TOY_POISON_EMPTY
  std::memset(p, zero ? 0 : 0xff, bytes);
#else
  if (zero) std::memset(p, 0, bytes);
#endif
  std::memset(p + bytes, 0, block - bytes);  // over-read bytes are zeros, never NaN
  s->data = p;
  s->bytes = bytes;
  s->block = block;
  return s;
}

Storage::~Storage() {
  if (!block) return;
  if (kCacheBuffers)
    buffers().give(data, block);
  else
    std::free(data);
}

size_t Storage::cached_bytes() { return buffers().idle(); }

std::shared_ptr<Storage> Storage::borrow(const void* data, size_t bytes, std::shared_ptr<void> keepalive) {
  auto s = std::make_shared<Storage>();
  s->data = const_cast<void*>(data);
  s->bytes = bytes;
  s->writable = false;
  s->keepalive = std::move(keepalive);
  return s;
}

std::shared_ptr<Storage> Storage::on_device(std::shared_ptr<const DeviceMemory> memory, size_t bytes) {
  auto s = std::make_shared<Storage>();
  s->bytes = bytes;
  s->device = std::move(memory);
  return s;
}

// --- construction ---------------------------------------------------------------------

namespace {
Tensor allocated(Shape shape, DType dtype, bool zero) {
  for (int64_t d : shape)
    if (d < 0) throw ShapeError("empty: negative dimension in " + to_string(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  const DTypeInfo& i = info(dtype);
  const int64_t n = toy::numel(impl->shape);
  impl->storage = Storage::allocate(size_t((n + i.block_size - 1) / i.block_size * i.type_size), zero);
  return Tensor(impl);
}
}  // namespace

Tensor Tensor::empty(Shape shape, DType dtype) { return allocated(std::move(shape), dtype, false); }
Tensor Tensor::zeros(Shape shape, DType dtype) { return allocated(std::move(shape), dtype, true); }

Tensor Tensor::full(Shape shape, float value) {
  Tensor t = empty(std::move(shape));
  float* p = t.data_mut();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = value;
  return t;
}

Tensor Tensor::from(Shape shape, std::span<const float> values) {
  Tensor t = empty(std::move(shape));
  if (int64_t(values.size()) != t.numel())
    throw ShapeError("Tensor::from: " + std::to_string(values.size()) + " values for shape " + to_string(t.shape()));
  std::memcpy(t.data_mut(), values.data(), values.size() * 4);
  return t;
}

Tensor Tensor::from_ids(Shape shape, std::span<const int32_t> ids) {
  Tensor t = empty(std::move(shape), DType::I32);
  if (int64_t(ids.size()) != t.numel())
    throw ShapeError("Tensor::from_ids: " + std::to_string(ids.size()) + " ids for shape " + to_string(t.shape()));
  std::memcpy(t.raw_mut(), ids.data(), ids.size() * 4);
  return t;
}

Tensor Tensor::view_of(Shape shape, DType dtype, const void* data, std::shared_ptr<void> keepalive) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  const int64_t n = toy::numel(impl->shape);
  impl->storage = Storage::borrow(data, size_t(row_bytes(dtype, n)), std::move(keepalive));
  return Tensor(impl);
}

// --- inspection and access ------------------------------------------------------------

int64_t Tensor::size(int d) const {
  const int n = dim();
  if (d < 0) d += n;
  if (d < 0 || d >= n) throw ShapeError("size: dimension " + std::to_string(d) + " of " + to_string(shape()));
  return impl_->shape[size_t(d)];
}

size_t Tensor::nbytes() const { return size_t(row_bytes(dtype(), numel())); }

void Tensor::check_dim(int n, const char* what) const {
  if (!impl_) throw ShapeError(std::string(what) + ": undefined tensor");
  if (dim() != n)
    throw ShapeError(std::string(what) + ": expected " + std::to_string(n) + " dimensions, got " + to_string(shape()));
}

void Tensor::on_device_error(const char* what) const {
  throw std::logic_error(std::string(what) + ": tensor '" + impl_->name + "' " + to_string(shape()) + " is on " +
                         toy::to_string(device()) + ": copy it to the host first (to_host)");
}

void* Tensor::raw_mut() {
  if (impl_->storage->device) on_device_error("raw_mut");
  if (!impl_->storage->writable) throw std::logic_error("tensor '" + impl_->name + "' is read-only (mapped file)");
  return static_cast<char*>(impl_->storage->data) + impl_->offset;
}

const float* Tensor::data() const {
  if (dtype() != DType::F32) throw ShapeError("data: expected F32, got " + std::string(toy::name(dtype())));
  return static_cast<const float*>(raw());
}

float* Tensor::data_mut() {
  if (dtype() != DType::F32) throw ShapeError("data_mut: expected F32, got " + std::string(toy::name(dtype())));
  return static_cast<float*>(raw_mut());
}

const int32_t* Tensor::ids() const {
  if (dtype() != DType::I32) throw ShapeError("ids: expected I32, got " + std::string(toy::name(dtype())));
  return static_cast<const int32_t*>(raw());
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> v(static_cast<size_t>(numel()));
  std::vector<char> copy;  // a device tensor's bytes, read to the host
  const void* bytes = nullptr;
  if (const auto& memory = impl_->storage->device) {
    copy.resize(nbytes());
    memory->read(impl_->offset, copy.data(), copy.size());
    bytes = copy.data();
  } else {
    bytes = raw();
  }
  if (dtype() == DType::I32) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(static_cast<const int32_t*>(bytes)[i]);
  } else {
    dequantize(dtype(), bytes, v.data(), numel());
  }
  return v;
}

float Tensor::item() const {
  if (numel() != 1) throw ShapeError("item: expected one element, got " + to_string(shape()));
  return data()[0];
}

// --- views ----------------------------------------------------------------------------

Tensor Tensor::reshape(Shape shape) const {
  if (toy::numel(shape) != numel())
    throw ShapeError("reshape: cannot view " + to_string(this->shape()) + " as " + to_string(shape));
  auto impl = std::make_shared<TensorImpl>(*impl_);
  impl->shape = std::move(shape);
  impl->grad_fn.reset();
  impl->grad.reset();
  impl->requires_grad = false;
  Tensor out(impl);
  if (needs_grad({this})) {
    Shape in_shape = this->shape();
    record(out, "reshape", {*this}, [in_shape](const Tensor& d) { return std::vector<Tensor>{d.reshape(in_shape)}; });
  }
  return out;
}

Tensor Tensor::row_slice(int64_t begin, int64_t end) const {
  if (dim() < 1 || begin < 0 || end < begin || end > size(0))
    throw ShapeError("row_slice: rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " +
                     to_string(shape()));
  const int64_t row = numel() / std::max<int64_t>(size(0), 1);
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape();
  impl->shape[0] = end - begin;
  impl->dtype = dtype();
  impl->storage = impl_->storage;
  impl->offset = impl_->offset + size_t(row_bytes(dtype(), row * begin));
  return Tensor(impl);
}

Tensor Tensor::clone() const {
  if (dtype() == DType::I32) {
    Tensor t = empty(shape(), DType::I32);
    std::memcpy(t.raw_mut(), raw(), nbytes());
    return t;
  }
  Tensor t = empty(shape());
  dequantize(dtype(), raw(), t.data_mut(), numel());
  return t;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape();
  impl->dtype = dtype();
  impl->storage = impl_->storage;
  impl->offset = impl_->offset;
  impl->name = impl_->name;
  return Tensor(impl);
}

// --- autograd -------------------------------------------------------------------------

namespace {
thread_local bool g_grad_enabled = true;
}

NoGrad::NoGrad() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGrad::~NoGrad() { g_grad_enabled = prev_; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

Tensor& Tensor::requires_grad_(bool on) {
  if (on && dtype() != DType::F32) throw ShapeError("requires_grad_: only F32 tensors can be trained");
  impl_->requires_grad = on;
  return *this;
}

void record(Tensor& out, const char* op, std::vector<Tensor> inputs,
            std::function<std::vector<Tensor>(const Tensor& dout)> backward) {
  auto node = std::make_shared<Node>();
  node->op = op;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  out.impl()->grad_fn = std::move(node);
  out.impl()->requires_grad = true;
}

void accumulate(std::shared_ptr<TensorImpl>& acc, const Tensor& g) {
  if (!acc) {
    Tensor copy = Tensor::empty(g.shape());
    std::memcpy(copy.data_mut(), g.data(), g.nbytes());
    acc = copy.impl_ptr();
    return;
  }
  if (acc->shape != g.shape())
    throw ShapeError("backward: gradient " + to_string(g.shape()) + " for tensor " + to_string(acc->shape));
  float* a = static_cast<float*>(acc->storage->data) + acc->offset / 4;
  const float* b = g.data();
  for (int64_t i = 0, n = g.numel(); i < n; ++i) a[i] += b[i];
}

void Tensor::backward(const std::function<void(const Tensor& leaf)>& on_grad_final) const {
  if (numel() != 1) throw ShapeError("backward: expected a scalar, got " + to_string(shape()));
  if (!requires_grad()) throw std::logic_error("backward: the tensor does not require grad");
  NoGrad no_grad;  // backward rules are not themselves recorded

  // Reverse topological order of the recorded graph (iterative DFS; graphs can be deep).
  std::vector<TensorImpl*> order;
  std::unordered_set<TensorImpl*> seen;
  std::vector<std::pair<TensorImpl*, size_t>> stack{{impl_.get(), 0}};
  seen.insert(impl_.get());
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    const Node* n = t->grad_fn.get();
    if (n && next < n->inputs.size()) {
      TensorImpl* in = n->inputs[next++].impl();
      if (in && in->grad_fn && seen.insert(in).second) stack.push_back({in, 0});
      continue;
    }
    order.push_back(t);
    stack.pop_back();
  }
  std::reverse(order.begin(), order.end());  // the walk: the output first

  // final_after[i]: the leaves whose last use is node order[i], so whose grad is final once it has run.
  std::vector<std::vector<Tensor>> final_after(on_grad_final ? order.size() : 0);
  if (on_grad_final) {
    std::unordered_map<TensorImpl*, size_t> last_use;
    for (size_t i = 0; i < order.size(); ++i)
      for (const Tensor& in : order[i]->grad_fn->inputs)
        if (in.requires_grad() && !in.impl()->grad_fn) last_use[in.impl()] = i;
    for (size_t i = 0; i < order.size(); ++i)
      for (const Tensor& in : order[i]->grad_fn->inputs)
        if (const auto u = last_use.find(in.impl()); u != last_use.end() && u->second == i) {
          final_after[i].push_back(in);
          last_use.erase(u);  // once, though a node may list the leaf twice
        }
  }

  std::unordered_map<TensorImpl*, std::shared_ptr<TensorImpl>> grads;
  grads[impl_.get()] = Tensor::full(shape(), 1.0f).impl_ptr();
  for (size_t i = 0; i < order.size(); ++i) {
    TensorImpl* t = order[i];
    if (auto g = grads.find(t); g != grads.end()) {
      Tensor dout(g->second);
      grads.erase(g);
      const Node& n = *t->grad_fn;
      std::vector<Tensor> dins = n.backward(dout);
      for (size_t k = 0; k < n.inputs.size() && k < dins.size(); ++k) {
        const Tensor& in = n.inputs[k];
        if (!dins[k].defined() || !in.requires_grad()) continue;
        if (dins[k].shape() != in.shape())
          throw ShapeError(std::string(n.op) + " backward: gradient " + to_string(dins[k].shape()) + " for input " +
                           to_string(in.shape()));
        std::shared_ptr<TensorImpl>& slot = in.impl()->grad_fn ? grads[in.impl()] : in.impl()->grad;
        // A fresh gradient that nothing else references (no other handle, no view of its
        // storage) becomes the slot itself instead of being copied into a new one.
        Tensor gi = std::move(dins[k]);
        if (!slot && gi.impl_ptr().use_count() == 1 && gi.impl()->storage.use_count() == 1 &&
            gi.impl()->storage->writable && gi.impl()->offset == 0 && gi.dtype() == DType::F32 && !gi.impl()->grad_fn) {
          slot = gi.impl_ptr();
          continue;
        }
        accumulate(slot, gi);
      }
    }
    if (on_grad_final)
      for (const Tensor& leaf : final_after[i]) on_grad_final(leaf);
  }
}

}  // namespace toy
