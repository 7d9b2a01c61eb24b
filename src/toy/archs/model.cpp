// archs/model.cpp — the visitors that read an architecture's tables, and the registry.
#include <algorithm>
#include <cstdint>

#include "toy/archs/arch.h"
#include "toy/io/file_type.h"
#include "toy/primitives/device.h"

namespace toy {

using gguf::GgufError;
using gguf::Value;

namespace {
constexpr int64_t kMaxInt = int64_t(1) << 24;
}  // namespace

// --- keys ----------------------------------------------------------------------------------

const Value* KeyReader::find(const char* name) const {
  const std::string key = arch_ + "." + name;
  for (const auto& [k, v] : meta_)
    if (k == key) return &v;
  return nullptr;
}

void KeyReader::fail(const std::string& what) const { throw std::invalid_argument(arch_ + ": " + what); }

void KeyReader::rule(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

namespace {
// A key the metadata lacks takes, in a new model, its value for one, else its default; false when
// it has neither (a file must give it).
template <class T>
bool take_absent(T& f, const KeyRule<T>& r, bool new_model) {
  if (new_model && r.fresh)
    f = *r.fresh;
  else if (r.def)
    f = *r.def;
  else
    return false;
  return true;
}
}  // namespace

void KeyReader::visit(const char* name, int64_t& f, const KeyRule<int64_t>& r) {
  const Value* v = find(name);
  if (!v && !take_absent(f, r, mode_ == Mode::NewModel)) fail("missing integer key " + arch_ + "." + name);
  if (v && !v->is_integer()) fail(arch_ + "." + name + " must be an integer, got " + v->to_display());
  if (v) f = v->as_int();
  const int64_t lo = r.bound == Bound::NonNegative ? 0 : 1;  // a count, or a switch that may be 0
  if (f < lo || f > kMaxInt)
    fail(arch_ + "." + name + " = " + std::to_string(f) + " is out of range [" + std::to_string(lo) + ", 2^24]");
}

void KeyReader::visit(const char* name, float& f, const KeyRule<float>& r) {
  const Value* v = find(name);
  if (!v && !take_absent(f, r, mode_ == Mode::NewModel)) fail("missing key " + arch_ + "." + name);
  if (v && !v->is_float() && !v->is_integer()) fail(arch_ + "." + name + " must be a number, got " + v->to_display());
  if (v) f = float(v->as_float());
  const bool ok = std::isfinite(f) && (r.bound == Bound::Positive ? f > 0 : f >= 0);
  if (!ok)
    fail(arch_ + "." + name + " = " + std::to_string(f) + " must be finite and " +
         (r.bound == Bound::Positive ? "positive" : "at least 0"));
}

void KeyReader::visit(const char* name, std::vector<int64_t>& f, const KeyRule<std::vector<int64_t>>& r) {
  const Value* v = find(name);
  if (!v && !take_absent(f, r, mode_ == Mode::NewModel)) fail("missing integer array key " + arch_ + "." + name);
  if (v) {
    if (v->type != gguf::ValueType::ARRAY || (!v->empty() && !v->at(0).is_integer()))
      fail(arch_ + "." + name + " must be an array of integers, got " + v->to_display());
    f.clear();
    for (size_t k = 0; k < v->size(); ++k) f.push_back(v->at(k).as_int());
  }
  for (int64_t x : f)
    if (x < 0 || x > kMaxInt) fail(arch_ + "." + name + " holds " + std::to_string(x) + ", out of range [0, 2^24]");
}

// Every key is written, defaults too: llama.cpp reads them all, and a file then says what it is.
void KeyWriter::visit(const char* name, int64_t& f, const KeyRule<int64_t>&) {
  out_.set(arch_ + "." + name, Value::of_u32(uint32_t(f)));
}

void KeyWriter::visit(const char* name, float& f, const KeyRule<float>&) {
  out_.set(arch_ + "." + name, Value::of_f32(f));
}

void KeyWriter::visit(const char* name, std::vector<int64_t>& f, const KeyRule<std::vector<int64_t>>&) {
  out_.set(arch_ + "." + name, Value::of_i32s(std::vector<int32_t>(f.begin(), f.end())));
}

// --- tensors -------------------------------------------------------------------------------

void TensorLoader::visit(const std::string& name, Tensor& t, std::initializer_list<Dim>, const Shape& shape, Init,
                         bool required) {
  const gguf::TensorInfo* info = f_->find_tensor(name);
  if (!info) {
    if (required)
      throw GgufError(f_->path() + ": missing tensor '" + name + "' (expected shape " + to_string(shape) + ")");
    t = {};
    return;
  }
  if (info->shape != shape)
    throw GgufError(f_->path() + ": tensor '" + name + "' has shape " + to_string(info->shape) + ", expected " +
                    to_string(shape));
  if (!dtype_supported(info->dtype))
    throw GgufError(f_->path() + ": tensor '" + name + "' has dtype " + std::string(toy::name(info->dtype)) +
                    ", which toy cannot compute with");
  if (!f_->finite(*info)) throw GgufError(f_->path() + ": tensor '" + name + "' holds NaN or infinite values");
  t = f_->tensor(*info);
  // Vectors (norms, biases), convolution taps, routers and positions are used as F32 (they are
  // small, so a converted copy costs nothing): the tensors llama-quantize leaves in F32.
  if (gguf::stays_f32(name, shape.size()) && info->dtype != DType::F32) t = t.clone().set_name(name);
}

void RandomInit::visit(const std::string& name, Tensor& t, std::initializer_list<Dim>, const Shape& shape, Init init,
                       bool required) {
  if (!required) return;
  if (init == Init::Normal) {
    t = Tensor::empty(shape);
    float* p = t.data_mut();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = normal_(rng_);
  } else {
    t = Tensor::full(shape, init == Init::Ones ? 1.0f : init == Init::MinusOnes ? -1.0f : 0.0f);
  }
  t.set_name(name);
}

void TensorSpecs::visit(const std::string& name, Tensor&, std::initializer_list<Dim> shape, const Shape& s, Init init,
                        bool required) {
  const bool per_layer = !prefix.empty() && !each_layer;
  if (!required && std::find(present.begin(), present.end(), name) == present.end()) return;
  TensorSpec spec{.name = name, .sym = {}, .shape = s, .init = init, .per_layer = per_layer};
  for (const Dim& d : shape) spec.sym.push_back(d.sym);
  specs.push_back(std::move(spec));
}

int64_t vocab_rows(const gguf::GgufFile& f) {
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->shape.size() != 2) throw GgufError(f.path() + ": missing tensor 'token_embd.weight'");
  return embd->shape[0];
}

double Description::value(const std::string& key) const {
  for (const auto& [k, v] : values)
    if (k == key) return v;
  throw std::out_of_range(config.arch + " has no key " + key);
}

uint64_t Description::parameter_count() const {
  uint64_t n = 0;
  for (const TensorSpec& t : tensors) n += uint64_t(numel(t.shape)) * uint64_t(t.per_layer ? config.n_layer : 1);
  return n;
}

// --- the registry --------------------------------------------------------------------------

std::vector<Architecture>& builtin_architectures();  // archs/registry.cpp

const std::vector<Architecture>& architectures() { return builtin_architectures(); }

Registration::Registration(Architecture a) { builtin_architectures().push_back(std::move(a)); }

const Architecture* find_architecture(const std::string& name) {
  for (const Architecture& a : architectures())
    if (a.name == name) return &a;
  return nullptr;
}

std::string architecture_names() {
  std::string names;
  for (const Architecture& a : architectures()) names += (names.empty() ? "" : ", ") + a.name;
  return names;
}

std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufFile> f) {
  const std::string arch = f->architecture();
  const Architecture* a = find_architecture(arch);
  if (!a)
    throw GgufError(f->path() + ": unsupported architecture '" + arch + "' (toy supports: " + architecture_names() +
                    ")");
  return a->load(std::move(f));
}

Metadata shape_metadata(const ModelShape& s) {
  const std::string p = s.arch + ".";
  auto u32 = [](int64_t v) { return Value::of_u32(uint32_t(std::clamp<int64_t>(v, 0, UINT32_MAX))); };
  Metadata m = {{p + "context_length", u32(s.n_ctx)},
                {p + "embedding_length", u32(s.d_model)},
                {p + "block_count", u32(s.n_layer)},
                {p + "feed_forward_length", u32(s.d_ff)},
                {p + "attention.head_count", u32(s.n_head)}};
  if (s.n_kv_head) m.emplace_back(p + "attention.head_count_kv", u32(s.n_kv_head));
  for (const auto& [k, v] : s.keys) m.emplace_back(p + k, v);
  return m;
}

std::unique_ptr<Model> random_model(const ModelShape& s, uint64_t seed) {
  const Architecture* a = find_architecture(s.arch);
  if (!a) throw std::invalid_argument("unknown architecture '" + s.arch + "' (toy has: " + architecture_names() + ")");
  return a->random(shape_metadata(s), s.n_vocab, s.tied_output, seed);
}

void Model::to(Device d) {
  std::vector<Tensor> moved;  // every parameter on d before any is replaced: a failure leaves the model as it was
  for_each_param([&](Tensor& t) {
    Tensor m = to_device(t, d);
    if (const auto& lr = t.impl()->low_rank) {  // LoRA adapters go with their weight
      LowRank on_d = *lr;
      for (LowRankTerm& term : on_d.terms) term.A = to_device(term.A, d), term.B = to_device(term.B, d);
      m = with_low_rank(m, std::move(on_d));
    }
    moved.push_back(m);
  });
  size_t i = 0;
  for_each_param([&](Tensor& t) { t = moved[i++]; });
  device_ = d;
}

void Model::share_params(Model& other) {
  std::vector<Tensor> theirs;
  other.for_each_param([&](Tensor& t) { theirs.push_back(t); });
  size_t i = 0;
  for_each_param([&](Tensor& t) {
    if (i >= theirs.size() || theirs[i].name() != t.name() || theirs[i].shape() != t.shape())
      throw ShapeError("share_params: parameter " + std::to_string(i) + " (" + t.name() + " " + to_string(t.shape()) +
                       ") is not the other model's");
    ++i;
  });
  if (i != theirs.size())
    throw ShapeError("share_params: " + std::to_string(i) + " parameters, the other model has " +
                     std::to_string(theirs.size()));
  i = 0;
  for_each_param([&](Tensor& t) { t = theirs[i++]; });
  device_ = other.device_;
}

}  // namespace toy
