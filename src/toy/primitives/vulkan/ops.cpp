// primitives/vulkan/ops.cpp — the primitives on a Vulkan device (primitives/device.h): a tensor's
// bytes are a vulkan::Buffer, views sit at byte offsets into it, and each op records the shader
// beside it in kernels/vulkan/ (the primitive has checked the shapes, as on the CPU). Nothing runs
// until a tensor is read back (to_host, to_vector): a whole forward pass is one submission. Built
// with TOY_VULKAN only.
#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "toy/kernels/vulkan/attention.h"
#include "toy/kernels/vulkan/context.h"
#include "toy/kernels/vulkan/convert.h"
#include "toy/kernels/vulkan/delta_net.h"
#include "toy/kernels/vulkan/elementwise.h"
#include "toy/kernels/vulkan/gather.h"
#include "toy/kernels/vulkan/matvec.h"
#include "toy/kernels/vulkan/norm.h"
#include "toy/kernels/vulkan/quantize.h"
#include "toy/kernels/vulkan/rope.h"
#include "toy/kernels/vulkan/rows.h"
#include "toy/primitives/device.h"
#include "toy/tensor/quant.h"

namespace toy {
namespace {

namespace vk = kernels::vulkan;

class VulkanOps;

// A tensor's bytes on the device: one Buffer, which views share at their offsets.
struct VulkanMemory final : DeviceMemory {
  VulkanMemory(VulkanOps& o, vk::Buffer b) : ops(o), buffer(std::move(b)) {}
  ~VulkanMemory() override;
  Device device() const override;
  void read(size_t offset, void* dst, size_t bytes) const override;
  VulkanOps& ops;
  vk::Buffer buffer;
};

class VulkanOps final : public DeviceOps {
 public:
  explicit VulkanOps(int index)
      : index_(index),
        ctx_(open(index)),
        matvec_(*ctx_),
        quantize_(*ctx_),
        gather_(*ctx_),
        elementwise_(*ctx_),
        norm_(*ctx_),
        rope_(*ctx_),
        attention_(*ctx_),
        convert_(*ctx_),
        delta_net_(*ctx_),
        rows_(*ctx_) {}

  Device device() const override { return Device::vulkan(index_); }
  std::string name() const override { return to_string(device()) + " (" + ctx_->name() + ")"; }
  std::recursive_mutex& mutex() { return mutex_; }

  // --- memory ---

  Tensor upload(const Tensor& host) override {
    Lock lock(mutex_);
    Tensor t = empty(host.shape(), host.dtype());
    t.set_name(host.name());
    ctx_->upload(buffer(t), host.raw(), host.nbytes());
    return t;
  }

  Tensor empty(Shape shape, DType dtype) override {
    Lock lock(mutex_);
    const size_t bytes = size_t(row_bytes(dtype, toy::numel(shape)));
    auto memory = std::make_shared<VulkanMemory>(*this, ctx_->buffer(std::max<size_t>(bytes, 4)));
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
    Lock lock(mutex_);
    ctx_->download(m.buffer, dst, bytes, offset);
  }

  // dst[row0 + i] = src[i]: the rows of src rounded to dst's dtype (F32, or a KV cache's F16).
  void store_rows(Tensor& dst, int64_t row0, const Tensor& src) override {
    Lock lock(mutex_);
    const int64_t row = dst.numel() / std::max<int64_t>(dst.size(0), 1);
    if (src.dtype() != DType::F32 || src.numel() % std::max<int64_t>(row, 1) || row0 < 0 ||
        row0 + src.numel() / row > dst.size(0))
      throw ShapeError("store_rows: " + to_string(src.shape()) + " at row " + std::to_string(row0) + " of " +
                       to_string(dst.shape()));
    convert_(buffer(src), floats(src), buffer(dst), dst.dtype(), elements(dst) + uint64_t(row0 * row), src.numel());
  }

  // --- elementwise ---

  Tensor add(const Tensor& a, const Tensor& b) override { return binary(vk::Elementwise::Binary::Add, a, b); }
  Tensor mul(const Tensor& a, const Tensor& b) override { return binary(vk::Elementwise::Binary::Mul, a, b); }
  Tensor scale(const Tensor& x, float s) override { return unary(vk::Elementwise::Unary::Scale, s, x); }
  Tensor silu(const Tensor& x) override { return unary(vk::Elementwise::Unary::Silu, 0, x); }
  Tensor gelu_tanh(const Tensor& x) override { return unary(vk::Elementwise::Unary::GeluTanh, 0, x); }
  Tensor softcap(const Tensor& x, float cap) override { return unary(vk::Elementwise::Unary::Softcap, cap, x); }
  Tensor sigmoid(const Tensor& x) override { return unary(vk::Elementwise::Unary::Sigmoid, 0, x); }

  // --- projections ---

  // y [M, N] = x [M, K] · W [N, K]ᵀ (+ b): x rounded as the CPU rounds it for W's dtype (quantize.h),
  // then one matrix-vector product per row, W read in its dtype as stored. W's low-rank terms
  // (LoRA) are not this op's: linear() adds them with the device's ops.
  Tensor linear(const Tensor& x, const Tensor& W, const Tensor& b) override {
    Lock lock(mutex_);
    auto [N, K] = W.dims<2>("linear: W");
    if (x.size(-1) != K)
      throw ShapeError("linear: x " + to_string(x.shape()) + " for W " + to_string(W.shape()) + " (" + W.name() + ")");
    if (b.defined() && b.numel() != N)
      throw ShapeError("linear: bias " + to_string(b.shape()) + " for W " + to_string(W.shape()) + " (" + W.name() +
                       ")");
    if (!vk::has_matvec(W.dtype())) unsupported(std::string(toy::name(W.dtype())) + " weights (" + W.name() + ")");
    f32("linear: x", x);
    const int64_t M = x.numel() / K;
    Shape out = x.shape();
    out.back() = N;
    Tensor y = empty(out, DType::F32);
    if (M == 0) return y;
    const vk::Buffer* bias = b.defined() ? &whole(b, "a bias") : nullptr;
    const vk::Buffer& w = buffer(W);  // at its byte offset: an expert's slab of a stacked tensor
    const uint64_t w_off = W.impl()->offset;
    if (vk::Quantize::rounds(W.dtype())) {
      vk::Buffer xq = ctx_->buffer(vk::x_bytes(W.dtype(), K) * uint64_t(M));
      quantize_(W.dtype(), buffer(x), floats(x), xq, M, K);
      matvec_(w, w_off, W.dtype(), xq, 0, buffer(y), 0, M, N, K, bias);
    } else {
      matvec_(w, w_off, W.dtype(), buffer(x), x.impl()->offset, buffer(y), 0, M, N, K, bias);
    }
    return y;
  }

  // Rows ids of the table W [V, D], as f32: the ids go up as uint32 (embedding() checked them).
  Tensor embedding(const Tensor& W, const Tensor& ids) override {
    Lock lock(mutex_);
    auto [V, D] = W.dims<2>("embedding: W");
    if (W.impl()->low_rank) unsupported("an embedding with low-rank terms");
    if (!vk::GatherRows::reads(W.dtype())) unsupported(std::string(toy::name(W.dtype())) + " embeddings");
    Shape out = ids.shape();
    out.push_back(D);
    return gather(whole(W, "an embedding"), W.dtype(), V, ids, out, D);
  }

  Tensor gather_rows(const Tensor& x, const Tensor& rows) override {
    Lock lock(mutex_);
    auto [N, D] = x.dims<2>("gather_rows: x");
    f32("gather_rows: x", x);
    return gather(whole(x, "gather_rows' x"), DType::F32, N, rows, {rows.numel(), D}, D);
  }

  // Columns [begin, begin + n) of each row of x (narrow() checked them).
  Tensor narrow(const Tensor& x, int64_t begin, int64_t n) override {
    Lock lock(mutex_);
    f32("narrow: x", x);
    const int64_t C = x.size(-1), R = x.numel() / C;
    Shape out = x.shape();
    out.back() = n;
    Tensor y = empty(out, DType::F32);
    convert_.rows(buffer(x), floats(x) + uint64_t(begin), uint64_t(C), buffer(y), DType::F32, 0, uint64_t(n), R, n);
    return y;
  }

  // y [M, D] = s[m]·x[m, :]: the router's weights (made on the host) go up first.
  Tensor scale_rows(const Tensor& x, const Tensor& s) override {
    Lock lock(mutex_);
    f32("scale_rows: x", x);
    const Tensor sd = on_this(s);
    Tensor y = empty(x.shape(), DType::F32);
    rows_.scale(buffer(x), floats(x), buffer(sd), floats(sd), buffer(y), x.size(0), x.size(1));
    return y;
  }

  // base + src's rows added into rows `rows` (host ids, checked by scatter_add_rows).
  Tensor scatter_add_rows(const Tensor& base, const Tensor& rows, const Tensor& src) override {
    Lock lock(mutex_);
    f32("scatter_add_rows: src", src);
    const Tensor bd = on_this(base);
    Tensor y = empty(base.shape(), DType::F32);
    rows_.scatter_add(buffer(bd), floats(bd), rows.ids(), buffer(src), floats(src), buffer(y), base.size(0),
                      src.size(0), src.size(1));
    return y;
  }

  // --- normalisation ---

  Tensor rms_norm(const Tensor& x, const Tensor& w, float eps) override {
    Lock lock(mutex_);
    const int64_t D = x.size(-1);
    check_norm("rms_norm", x, w, D);
    Tensor y = empty(x.shape(), DType::F32);
    norm_.rms(buffer(x), floats(x), buffer(w), floats(w), buffer(y), 0, x.numel() / D, D, eps);
    return y;
  }

  Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps) override {
    Lock lock(mutex_);
    const int64_t D = x.size(-1);
    check_norm("layer_norm", x, w, D);
    if (b.defined()) check_norm("layer_norm", x, b, D);
    Tensor y = empty(x.shape(), DType::F32);
    norm_.layer(buffer(x), floats(x), buffer(w), floats(w), b.defined() ? &buffer(b) : nullptr,
                b.defined() ? floats(b) : 0, buffer(y), 0, x.numel() / D, D, eps);
    return y;
  }

  // --- positions ---

  // x [B, T, H, Dh] rotated by the angles of its rows' positions: the tables go up once per
  // forward pass (every layer's q and k share them).
  Tensor rope(const Tensor& x, const RopeAngles& a) override {
    Lock lock(mutex_);
    const auto [B, T, H, Dh] = x.dims<4>("rope: x");
    f32("rope: x", x);
    if (int64_t(a.pos.size()) != B * T)
      throw ShapeError("rope: angles for " + std::to_string(a.pos.size()) + " positions, x " + to_string(x.shape()));
    if (a.rope.n_rot > Dh)
      throw ShapeError("rope: n_rot " + std::to_string(a.rope.n_rot) + " exceeds d_head " + std::to_string(Dh));
    const AnglesView t = angles(a);
    Tensor y = empty(x.shape(), DType::F32);
    rope_(a.rope.mode == RopeMode::Neox, buffer(x), floats(x), buffer(y), 0, t.cos, t.sin, t.index, B * T, H, Dh,
          a.rope.n_rot);
    return y;
  }

  // --- attention ---

  // One sequence per batch row b: q [T, H, Dh] over k, v [S, Hkv, Dh] (F32, or a KV cache's F16).
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) override {
    Lock lock(mutex_);
    const auto [B, T, H, Dh] = q.dims<4>("attention: q");
    const int64_t S = k.size(1), Hkv = k.size(2);
    f32("attention: q", q);
    Tensor out = empty(q.shape(), DType::F32);
    const vk::AttentionParams params{.scale = o.scale, .softcap = o.softcap, .window = o.window, .causal = o.causal};
    for (int64_t b = 0; b < B; ++b)
      attention_(buffer(q), floats(q) + uint64_t(b * T * H * Dh), buffer(k), elements(k) + uint64_t(b * S * Hkv * Dh),
                 buffer(v), elements(v) + uint64_t(b * S * Hkv * Dh), k.dtype(), buffer(out), uint64_t(b * T * H * Dh),
                 T, S, H, Hkv, Dh, params);
    return out;
  }

  // --- Gated DeltaNet (delta_rule.h checked the shapes) ---

  // y [T, C]; state [K − 1, C] becomes a new tensor holding the window's last rows.
  Tensor causal_conv1d(const Tensor& x, const Tensor& w, Tensor& state) override {
    Lock lock(mutex_);
    f32("causal_conv1d: x", x);
    const int64_t T = x.size(0), C = x.size(1), K = w.size(1);
    Tensor y = empty({T, C}, DType::F32), next = empty(state.shape(), DType::F32);
    delta_net_.conv1d(buffer(x), floats(x), whole(w, "a convolution's weights"), whole(state, "a convolution's state"),
                      buffer(y), buffer(next), T, C, K);
    state = next;
    return y;
  }

  Tensor l2_norm(const Tensor& x, float eps) override {
    Lock lock(mutex_);
    f32("l2_norm: x", x);
    const int64_t D = x.size(-1);
    Tensor y = empty(x.shape(), DType::F32);
    norm_.l2(buffer(x), floats(x), buffer(y), 0, x.numel() / D, D, eps);
    return y;
  }

  Tensor delta_log_decay(const Tensor& alpha, const Tensor& dt_bias, const Tensor& a) override {
    Lock lock(mutex_);
    f32("delta_log_decay: alpha", alpha);
    Tensor g = empty(alpha.shape(), DType::F32);
    delta_net_.log_decay(buffer(alpha), floats(alpha), whole(dt_bias, "dt_bias"), whole(a, "ssm_a"), buffer(g),
                         alpha.numel(), alpha.size(-1));
    return g;
  }

  // o [T, Hv, Dv]; state [Hv, Dk, Dv] updated in place, token by token.
  Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                          Tensor& state, bool tiled) override {
    Lock lock(mutex_);
    for (const Tensor* t : {&q, &k, &v, &g, &beta, static_cast<const Tensor*>(&state)}) f32("gated_delta_rule", *t);
    const vk::DeltaRuleShape s{
        .T = q.size(0), .Hk = q.size(1), .Hv = v.size(1), .Dk = q.size(2), .Dv = v.size(2), .tiled = tiled};
    Tensor o = empty({s.T, s.Hv, s.Dv}, DType::F32);
    delta_net_.delta_rule(s, buffer(q), floats(q), buffer(k), floats(k), buffer(v), floats(v), buffer(g), floats(g),
                          buffer(beta), floats(beta), const_cast<vk::Buffer&>(whole(state, "a delta rule's state")),
                          buffer(o));
    return o;
  }

 private:
  using Lock = std::lock_guard<std::recursive_mutex>;

  // A forward pass's rope tables on the device: cos, sin [P, n_rot/2] and each row's table row.
  struct Angles {
    std::vector<int32_t> pos;     // the positions they are for
    std::vector<float> cos, sin;  // and their values (a new table of the same positions may differ: another rope)
    vk::Buffer cos_buf, sin_buf, index_buf;
  };
  struct AnglesView {
    const vk::Buffer &cos, &sin, &index;
  };

  AnglesView angles(const RopeAngles& a) {
    if (!(angles_.pos == a.pos && angles_.cos == a.cos && angles_.sin == a.sin)) {
      std::vector<uint32_t> index(a.pos.size());
      for (size_t r = 0; r < index.size(); ++r)
        index[r] = uint32_t(std::lower_bound(a.at.begin(), a.at.end(), a.pos[r]) - a.at.begin());
      angles_.pos = a.pos;
      angles_.cos = a.cos;
      angles_.sin = a.sin;
      angles_.cos_buf = up(a.cos.data(), a.cos.size() * 4);
      angles_.sin_buf = up(a.sin.data(), a.sin.size() * 4);
      angles_.index_buf = up(index.data(), index.size() * 4);
    }
    return {angles_.cos_buf, angles_.sin_buf, angles_.index_buf};
  }

  vk::Buffer up(const void* data, size_t bytes) {
    vk::Buffer b = ctx_->buffer(std::max<size_t>(bytes, 4));
    if (bytes) ctx_->upload(b, data, bytes);
    return b;
  }

  // y [out] = rows ids of a table of V rows of D values in dtype wt.
  Tensor gather(const vk::Buffer& table, DType wt, int64_t V, const Tensor& ids, Shape out, int64_t D) {
    const int64_t n = ids.numel();
    Tensor y = empty(std::move(out), DType::F32);
    if (n == 0) return y;
    std::vector<uint32_t> rows(ids.ids(), ids.ids() + n);
    const vk::Buffer id_buf = up(rows.data(), rows.size() * 4);
    gather_(table, wt, V, id_buf, buffer(y), 0, n, D);
    return y;
  }

  Tensor binary(vk::Elementwise::Binary op, const Tensor& a, const Tensor& b) {
    Lock lock(mutex_);
    f32("elementwise: a", a);
    f32("elementwise: b", b);
    Tensor y = empty(a.shape(), DType::F32);
    elementwise_.binary(op, buffer(a), floats(a), buffer(b), floats(b), buffer(y), 0, a.numel());
    return y;
  }

  Tensor unary(vk::Elementwise::Unary op, float param, const Tensor& x) {
    Lock lock(mutex_);
    f32("elementwise: x", x);
    Tensor y = empty(x.shape(), DType::F32);
    elementwise_.unary(op, param, buffer(x), floats(x), buffer(y), 0, x.numel());
    return y;
  }

  // t on this device: uploaded where it is on the host (an F32 tensor the host made).
  Tensor on_this(const Tensor& t) {
    if (!t.device().is_cpu()) return t;
    f32("a host operand", t);
    return upload(t);
  }

  static void f32(const char* what, const Tensor& t) {
    if (t.dtype() != DType::F32)
      throw ShapeError(std::string(what) + " is " + std::string(toy::name(t.dtype())) + " on the device, not F32");
  }
  static void check_norm(const char* op, const Tensor& x, const Tensor& w, int64_t D) {
    f32(op, x);
    if (w.numel() != D || w.dtype() != DType::F32)
      throw ShapeError(std::string(op) + ": weight " + std::string(toy::name(w.dtype())) + " " + to_string(w.shape()) +
                       " for x " + to_string(x.shape()) + " (" + w.name() + ")");
  }

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
  // Where a view starts, in floats (an f32 tensor) or in elements of its dtype (a KV cache's F16).
  static uint64_t floats(const Tensor& t) { return t.impl()->offset / 4; }
  static uint64_t elements(const Tensor& t) { return t.impl()->offset / uint64_t(info(t.dtype()).type_size); }
  // The buffer of a tensor that starts at its beginning (the shaders that take no offset for it).
  const vk::Buffer& whole(const Tensor& t, const char* what) {
    if (t.impl()->offset != 0)
      unsupported(std::string(what) + " that is a view into another tensor (" + t.name() + ")");
    return memory(t).buffer;
  }

  std::recursive_mutex mutex_;  // one thread at a time records or submits (the server's slots share a device)
  int index_;
  std::unique_ptr<vk::Context> ctx_;
  vk::Matvec matvec_;
  vk::Quantize quantize_;
  vk::GatherRows gather_;
  vk::Elementwise elementwise_;
  vk::Norm norm_;
  vk::Rope rope_;
  vk::Attention attention_;
  vk::Convert convert_;
  vk::DeltaNet delta_net_;
  vk::Rows rows_;
  Angles angles_;
};

VulkanMemory::~VulkanMemory() {
  std::lock_guard lock(ops.mutex());  // a tensor may be freed on any thread
  buffer = vk::Buffer();
}
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
