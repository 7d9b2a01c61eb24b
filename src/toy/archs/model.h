// archs/model.h — L3: what every architecture provides, and the registry that loads them.
//
// An architecture file (archs/<name>.cpp) turns GGUF metadata into a typed config, GGUF
// tensors into a weight struct, and defines the forward pass. It registers itself with one
// line in archs/registry.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "toy/blocks/blocks.h"
#include "toy/io/gguf.h"

namespace toy {

// The sizes every engine needs (the KV cache, the sampler, training).
struct ModelConfig {
  std::string arch;       // GGUF general.architecture, e.g. "llama"
  int64_t n_vocab = 0;    // e.g. 49152
  int64_t d_model = 0;    // e.g. 576
  int64_t n_layer = 0;    // e.g. 30
  int64_t n_head = 0;     // e.g. 9
  int64_t n_kv_head = 0;  // e.g. 3
  int64_t d_head = 0;     // e.g. 64
  int64_t d_ff = 0;       // e.g. 1536
  int64_t n_ctx = 0;      // training context, e.g. 8192
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelConfig& config() const { return config_; }
  // tokens: I32 [B, T], row b at positions ctx.seq(b).pos0 … -> logits [B, T, n_vocab]
  virtual Tensor forward(const Tensor& tokens, const Ctx& ctx) const = 0;
  // Every parameter tensor, named with its GGUF name (tensor.name()), each visited once
  // (a tied embedding is one parameter). Loading, saving, the optimizer and LoRA all walk this.
  virtual void for_each_param(const std::function<void(Tensor&)>& fn) = 0;
  // Metadata keys that describe this model (for writing it back as GGUF).
  virtual void write_metadata(gguf::GgufWriter& w) const = 0;

 protected:
  ModelConfig config_;
};

// Reads weights by GGUF name with their expected PyTorch-order shape; errors name the tensor.
class WeightLoader {
 public:
  explicit WeightLoader(std::shared_ptr<const gguf::GgufFile> f) : f_(std::move(f)) {}
  Tensor need(const std::string& name, const Shape& shape) const;
  Tensor maybe(const std::string& name, const Shape& shape) const;  // undefined when absent
  const gguf::GgufFile& file() const { return *f_; }
  // `<arch>.<key>` metadata.
  int64_t hp_int(const std::string& key) const;
  int64_t hp_int(const std::string& key, int64_t def) const;
  float hp_float(const std::string& key) const;
  float hp_float(const std::string& key, float def) const;

 private:
  std::shared_ptr<const gguf::GgufFile> f_;
};

using ArchLoader = std::unique_ptr<Model> (*)(const WeightLoader&);
struct Architecture {
  const char* name;  // GGUF general.architecture
  ArchLoader load;
};
const std::vector<Architecture>& architectures();

// Loads the model a GGUF file describes. Throws gguf::GgufError for an unsupported
// architecture (naming the supported ones) or a missing / mis-shaped tensor.
std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufFile> f);

// Validates hyper-parameters shared by all architectures; throws GgufError naming the key.
void check_config(const gguf::GgufFile& f, const ModelConfig& c);

// The sizes every architecture reads the same way: `<arch>.embedding_length`, block_count,
// feed_forward_length, attention.head_count(_kv), context_length, attention.key_length
// (default d_model / n_head; value_length must equal it) and n_vocab = rows of token_embd.
// Validated with check_config.
ModelConfig read_config(const WeightLoader& f);
// Writes general.architecture and those keys back. Which optional keys a converter writes
// differs per architecture: key/value_length only when they differ from the default unless
// `head_size`; head_count_kv always unless `kv_heads` is false (then only when ≠ n_head).
struct ConfigKeys {
  bool head_size = false;
  bool kv_heads = true;
};
void write_config(gguf::GgufWriter& w, const ModelConfig& c, ConfigKeys keys = {});

}  // namespace toy
