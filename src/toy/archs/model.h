// archs/model.h — L3: what engines see of a model, and the registry of architectures.
//
// Each architecture is described once, in archs/<name>.cpp (see archs/arch.h for what a
// description holds); the registry turns a GGUF file, or a shape for a new model, into a Model.
// Engines, recipes, the server and the CLI use only this header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "toy/blocks/blocks.h"
#include "toy/io/gguf.h"
#include "toy/primitives/delta_rule.h"

namespace toy {

// The sizes every engine needs (the KV cache, the sampler, training). Every architecture's
// hyper-parameters extend it.
struct ModelConfig {
  std::string arch;         // GGUF general.architecture, e.g. "llama"
  int64_t n_vocab = 0;      // rows of token_embd, e.g. 49152
  int64_t d_model = 0;      // e.g. 576
  int64_t n_layer = 0;      // e.g. 30
  int64_t n_head = 0;       // e.g. 9
  int64_t n_kv_head = 0;    // e.g. 3
  int64_t d_head = 0;       // e.g. 64
  int64_t d_ff = 0;         // e.g. 1536
  int64_t n_ctx = 0;        // training context, e.g. 8192
  bool tied_output = true;  // logits use token_embd (the file has no output.weight)
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelConfig& config() const { return config_; }
  // tokens: I32 [B, T], row b at positions ctx.seq(b).pos0 … -> logits [B, T, n_vocab], or the
  // final hidden states [B, T, d_model] when ctx.hidden_states (every architecture honours both)
  virtual Tensor forward(const Tensor& tokens, const Ctx& ctx) const = 0;
  // Every parameter tensor, named with its GGUF name (tensor.name()), each visited once
  // (a tied embedding is one parameter). Loading, saving, the optimizer and LoRA all walk this.
  virtual void for_each_param(const std::function<void(Tensor&)>& fn) = 0;
  // general.architecture and the `<arch>.*` keys that describe this model.
  virtual void write_metadata(gguf::GgufWriter& w) const = 0;
  // Whether `layer` attends, and so keeps keys and values in a KV cache: every layer, except a
  // hybrid's recurrent ones (their state is a RecurrentState).
  virtual bool attends(int64_t layer) const = 0;
  // Moves every parameter to `d` (Device::cpu(): back to the host), LoRA adapters with their
  // weights: forward() runs there from then on, and engines keep their caches there. On a model
  // already on `d` it moves what is not (adapters attached since). Throws DeviceError where d
  // cannot be had; the model is then left where it was.
  void to(Device d);
  // This model's parameters become `other`'s, the same tensors (on a device, the same device
  // memory), and its device other's: a second model over one set of weights, to attach other
  // adapters to (serve/adapters.h) without a second upload. `other` is the same model, loaded
  // from the same file; throws ShapeError where a parameter's name or shape differs.
  void share_params(Model& other);
  Device device() const { return device_; }

 protected:
  ModelConfig config_;
  Device device_ = Device::cpu();
};

// GGUF metadata: keys and values in file order (GgufFile::metadata(), a card's block).
using Metadata = std::vector<std::pair<std::string, gguf::Value>>;

// A new model's shape, as `toy train from-scratch` and `toy init` choose it. The sizes become
// the architecture's GGUF keys; `keys` adds others (without the `<arch>.` prefix, e.g.
// {"rope.freq_base", 1e5}). Keys left out take the architecture's defaults.
struct ModelShape {
  std::string arch = "llama";
  int64_t n_vocab = 0, d_model = 0, n_layer = 0, n_head = 0;  // e.g. 49152, 576, 30, 9
  int64_t n_kv_head = 0;                                      // 0: n_head
  int64_t d_ff = 0, n_ctx = 0;                                // e.g. 1536, 8192
  bool tied_output = true;
  Metadata keys;
};

// What a card shows of a model: the architecture's facts, every key with the value in force, and
// every tensor with its symbolic and numeric shape (per-layer ones once, named `blk.ℓ.…`).
enum class NormKind { Rms, Layer };
enum class Positions { RopeNorm, RopeNeox, Learned };
enum class FfnKind { SwiGlu, GeGlu, GeluMlp, Moe };
struct Variant {
  const char* hf_class = "";  // e.g. "LlamaForCausalLM"
  NormKind norm = NormKind::Rms;
  Positions positions = Positions::RopeNorm;
  QkNorm qk_norm = QkNorm::None;
  FfnKind ffn = FfnKind::SwiGlu;
  bool sandwich_norms = false;             // post_attention_norm / post_ffw_norm (gemma2)
  bool embed_scale = false;                // x·√d_model after the lookup (gemma2)
  bool softcap = false;                    // attention and final logit soft-caps (gemma2)
  bool sliding_window = false;             // local attention on some layers (gemma2)
  bool moe_renormalize = false;            // the k chosen experts' weights divided by their sum (qwen3next; olmoe: not)
  HeadMap delta_heads = HeadMap::Grouped;  // Gated DeltaNet: the key head value head h reads (qwen35: Tiled)
  const char* norm_note = "";              // what the card adds about the norm weights
};
enum class Init { Normal, Ones, Zeros, MinusOnes };  // a new weight: N(0, 0.02), 1, 0 or −1
struct TensorSpec {
  std::string name;              // e.g. "blk.ℓ.attn_q.weight" or "token_embd.weight"
  std::vector<std::string> sym;  // e.g. {"n_head·d_head", "d_model"}
  Shape shape;                   // e.g. {576, 576}
  Init init;
  bool per_layer;
};
struct Description {
  ModelConfig config;
  Variant variant;
  std::vector<std::pair<std::string, double>> values;  // `<arch>.` key -> value in force (defaults applied)
  std::vector<TensorSpec> tensors;                     // in the order a file lists them
  double value(const std::string& key) const;          // throws std::out_of_range for an unknown key
  uint64_t parameter_count() const;
};

// One registered architecture (archs/arch.h builds it from a description).
struct Architecture {
  std::string name;         // GGUF general.architecture
  Variant variant;          // its facts: which norm, positions and FFN (a new model's flags depend on them)
  std::string untrainable;  // why training it is not written yet; empty: it trains
  std::function<std::unique_ptr<Model>(std::shared_ptr<const gguf::GgufFile>)> load;
  // A model with random weights (N(0, 0.02) matrices, unit norms, zero biases, deterministic in
  // `seed`) for metadata `meta`; keys a file must have but `meta` lacks take their defaults for
  // a new model. Throws std::invalid_argument naming the key.
  std::function<std::unique_ptr<Model>(const Metadata& meta, int64_t n_vocab, bool tied, uint64_t seed)> random;
  // The names of the keys (without `<arch>.`) a new model of metadata `meta` has: its key table,
  // so that a flag setting a key can be refused for an architecture without it. Throws as random.
  std::function<std::vector<std::string>(const Metadata& meta)> key_names;
  // The model a file or a card with metadata `meta` describes. `present` names the optional
  // tensors that exist (e.g. rope_freqs.weight). Throws std::invalid_argument.
  std::function<Description(const Metadata& meta, int64_t n_vocab, bool tied, const std::vector<std::string>& present)>
      describe;
};

// The registry: toy's own architectures, then any registered by the program (a project outside
// the tree adds its own with one `static toy::Registration`).
const std::vector<Architecture>& architectures();
const Architecture* find_architecture(const std::string& name);  // nullptr when unknown
std::string architecture_names();                                // "llama, qwen2, …"
struct Registration {
  explicit Registration(Architecture a);
};

// Loads the model a GGUF file describes. Throws gguf::GgufError for an unsupported
// architecture (naming the supported ones) or a missing / mis-shaped tensor.
std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufFile> f);
// A new model of `s`'s shape with random weights. Throws std::invalid_argument.
std::unique_ptr<Model> random_model(const ModelShape& s, uint64_t seed);
// The `<arch>.*` keys of a shape (the sizes first, then s.keys), with the `<arch>.` prefix.
Metadata shape_metadata(const ModelShape& s);

}  // namespace toy
