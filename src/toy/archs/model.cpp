// archs/model.cpp — weight loading helpers and the architecture registry lookup.
#include "toy/archs/model.h"

namespace toy {

using gguf::GgufError;

Tensor WeightLoader::maybe(const std::string& name, const Shape& shape) const {
  const gguf::TensorInfo* t = f_->find_tensor(name);
  if (!t) return {};
  if (t->shape != shape)
    throw GgufError(f_->path() + ": tensor '" + name + "' has shape " + to_string(t->shape) + ", expected " +
                    to_string(shape));
  if (!dtype_supported(t->dtype))
    throw GgufError(f_->path() + ": tensor '" + name + "' has dtype " + std::string(toy::name(t->dtype)) +
                    ", which toy cannot compute with");
  Tensor w = f_->tensor(*t);
  // Vectors (norms, biases) are used as F32; they are tiny, so a converted copy costs nothing.
  if (shape.size() == 1 && t->dtype != DType::F32) w = w.clone().set_name(name);
  return w;
}

Tensor WeightLoader::need(const std::string& name, const Shape& shape) const {
  Tensor w = maybe(name, shape);
  if (!w.defined())
    throw GgufError(f_->path() + ": missing tensor '" + name + "' (expected shape " + to_string(shape) + ")");
  return w;
}

int64_t WeightLoader::hp_int(const std::string& key) const { return f_->get_int(f_->architecture() + "." + key); }
int64_t WeightLoader::hp_int(const std::string& key, int64_t def) const {
  return f_->opt_int(f_->architecture() + "." + key).value_or(def);
}
float WeightLoader::hp_float(const std::string& key) const {
  return float(f_->get_float(f_->architecture() + "." + key));
}
float WeightLoader::hp_float(const std::string& key, float def) const {
  return float(f_->opt_float(f_->architecture() + "." + key).value_or(def));
}

void check_config(const gguf::GgufFile& f, const ModelConfig& c) {
  auto bad = [&](const std::string& what) { throw GgufError(f.path() + ": " + c.arch + ": " + what); };
  constexpr int64_t kMax = int64_t(1) << 24;
  if (c.n_layer <= 0 || c.n_layer > 4096) bad("block_count " + std::to_string(c.n_layer) + " out of range");
  if (c.d_model <= 0 || c.d_model > kMax) bad("embedding_length " + std::to_string(c.d_model) + " out of range");
  if (c.n_head <= 0 || c.n_head > 4096) bad("attention.head_count " + std::to_string(c.n_head) + " out of range");
  if (c.n_kv_head <= 0 || c.n_head % c.n_kv_head)
    bad("attention.head_count_kv " + std::to_string(c.n_kv_head) + " must divide head_count " +
        std::to_string(c.n_head));
  if (c.d_head <= 0 || c.d_head > 4096) bad("head size " + std::to_string(c.d_head) + " out of range");
  if (c.d_ff <= 0 || c.d_ff > kMax) bad("feed_forward_length " + std::to_string(c.d_ff) + " out of range");
  if (c.n_ctx <= 0 || c.n_ctx > kMax) bad("context_length " + std::to_string(c.n_ctx) + " out of range");
  if (c.n_vocab <= 0 || c.n_vocab > kMax) bad("vocabulary size " + std::to_string(c.n_vocab) + " out of range");
}

ModelConfig read_config(const WeightLoader& f) {
  ModelConfig c;
  c.arch = f.file().architecture();
  c.d_model = f.hp_int("embedding_length");
  c.n_layer = f.hp_int("block_count");
  c.d_ff = f.hp_int("feed_forward_length");
  c.n_head = f.hp_int("attention.head_count");
  c.n_kv_head = f.hp_int("attention.head_count_kv", c.n_head);
  c.n_ctx = f.hp_int("context_length");
  c.d_head = f.hp_int("attention.key_length", c.n_head > 0 ? c.d_model / c.n_head : 0);
  const gguf::TensorInfo* embd = f.file().find_tensor("token_embd.weight");
  if (!embd || embd->shape.size() != 2) throw GgufError(f.file().path() + ": missing tensor 'token_embd.weight'");
  c.n_vocab = embd->shape[0];
  check_config(f.file(), c);
  if (f.hp_int("attention.value_length", c.d_head) != c.d_head)
    throw GgufError(f.file().path() + ": attention.value_length differs from key_length (not supported)");
  return c;
}

void write_config(gguf::GgufWriter& out, const ModelConfig& c, ConfigKeys keys) {
  using gguf::Value;
  const std::string& a = c.arch;
  out.set("general.architecture", Value::of_string(a));
  out.set(a + ".context_length", Value::of_u32(uint32_t(c.n_ctx)));
  out.set(a + ".embedding_length", Value::of_u32(uint32_t(c.d_model)));
  out.set(a + ".block_count", Value::of_u32(uint32_t(c.n_layer)));
  out.set(a + ".feed_forward_length", Value::of_u32(uint32_t(c.d_ff)));
  out.set(a + ".attention.head_count", Value::of_u32(uint32_t(c.n_head)));
  if (keys.kv_heads || c.n_kv_head != c.n_head)
    out.set(a + ".attention.head_count_kv", Value::of_u32(uint32_t(c.n_kv_head)));
  if (keys.head_size || c.d_head * c.n_head != c.d_model) {
    out.set(a + ".attention.key_length", Value::of_u32(uint32_t(c.d_head)));
    out.set(a + ".attention.value_length", Value::of_u32(uint32_t(c.d_head)));
  }
}

std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufFile> f) {
  const std::string arch = f->architecture();
  std::string names;
  for (const Architecture& a : architectures()) {
    if (arch == a.name) return a.load(WeightLoader(f));
    names += (names.empty() ? "" : ", ") + std::string(a.name);
  }
  throw GgufError(f->path() + ": unsupported architecture '" + arch + "' (toy supports: " + names + ")");
}

}  // namespace toy
