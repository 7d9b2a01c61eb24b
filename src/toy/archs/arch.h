// archs/arch.h — L3: an architecture described once, and everything derived from the description.
//
// An architecture is one struct, in archs/<name>.cpp or in a project of your own, holding:
//
//   name                        GGUF general.architecture, e.g. "llama"
//   variant                     the facts its algorithm card prints (norm, positions, FFN, …)
//   Hparams                     its hyper-parameters: ModelConfig plus its own fields
//   keys(v, h)                  the GGUF key table: `<arch>.<key>` ↔ field, required or default
//   Weights                     its parameters, fields named after GGUF tensors
//   tensors(v, w, h)            the tensor table: GGUF name, field, shape, init rule
//   forward(w, h, tokens, ctx)  the forward pass, on one screen
//   untrainable (optional)      why training it is not written yet (a primitive without its backward)
//   h.full_attention(ℓ) (optional, on Hparams)  which layers attend, the others being recurrent:
//                               only those get KV cache rows (archs/hybrid.h)
//
// The tables are templates over a visitor `v`; the visitors below read them to load a file with
// shape checks, validate and write metadata, make random weights, walk the parameters, and
// describe the model for its card. `architecture<A>()` bundles them into a registry entry:
//
//   Architecture llama() { return architecture<Llama>(); }          // in toy: archs/registry.cpp lists it
//   static toy::Registration reg(toy::architecture<MyArch>());      // in a project outside the tree
#pragma once

#include <cmath>
#include <initializer_list>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "toy/archs/model.h"
#include "toy/blocks/gpt2.h"

namespace toy {

// --- key tables ----------------------------------------------------------------------------
// v.key("context_length", h.n_ctx);                                      required
// v.key("rope.freq_base", h.rope_base, 10000.0f);                        default when absent
// v.key("attention.layer_norm_rms_epsilon", h.eps, Required{1e-5f});     required in a file; a new model takes 1e-5
// v.key("attention.ssmax", h.ssmax, int64_t(1), Bound::NonNegative);     0 allowed
// v.key("full_attention_interval", h.every, int64_t(4), Fresh{int64_t(2)}); default 4, a new model 2
// v.key("rope.dimension_sections", h.sections, std::vector<int64_t>{3, 3, 2, 0});  integer array
// v.check(h.n_head % h.n_kv_head == 0, "…");                             a rule across keys
// Integers must lie in [1, 2^24] (or [0, 2^24] with NonNegative); floats must be finite and
// positive (or ≥ 0 with NonNegative).

template <class T>
struct Required {
  T fresh;  // the value of a new model that does not give it
};
template <class T>
Required(T) -> Required<T>;  // clang 14 deduces no aggregate's arguments by itself
template <class T>
struct Fresh {
  T value;  // a new model's value, where it differs from the default a file takes
};
template <class T>
Fresh(T) -> Fresh<T>;
enum class Bound { Positive, NonNegative };

template <class T>
struct KeyRule {
  std::optional<T> def;    // absent from a file: this value
  std::optional<T> fresh;  // absent when making a new model: this value
  Bound bound = Bound::Positive;
};

// The overloads an architecture's key table calls; a visitor implements visit(name, field, rule).
template <class Visitor>
struct KeyTable {
  template <class T>
  void key(const char* name, T& f) {
    self().visit(name, f, KeyRule<T>{});
  }
  template <class T>
  void key(const char* name, T& f, Required<T> r) {
    self().visit(name, f, KeyRule<T>{.def = std::nullopt, .fresh = r.fresh});
  }
  template <class T>
  void key(const char* name, T& f, T def, Bound b = Bound::Positive) {
    self().visit(name, f, KeyRule<T>{.def = def, .fresh = def, .bound = b});
  }
  template <class T>
  void key(const char* name, T& f, T def, Fresh<T> fresh) {
    self().visit(name, f, KeyRule<T>{.def = def, .fresh = fresh.value});
  }
  void check(bool ok, const std::string& what) { self().rule(ok, what); }

 private:
  Visitor& self() { return static_cast<Visitor&>(*this); }
};

// Reads keys from metadata, validating each; throws std::invalid_argument naming the key.
class KeyReader : public KeyTable<KeyReader> {
 public:
  enum class Mode { File, NewModel };  // NewModel: required keys may be left out (Required::fresh)
  KeyReader(const Metadata& meta, std::string arch, Mode mode) : meta_(meta), arch_(std::move(arch)), mode_(mode) {}
  void visit(const char* name, int64_t& f, const KeyRule<int64_t>& r);
  void visit(const char* name, float& f, const KeyRule<float>& r);
  void visit(const char* name, std::vector<int64_t>& f, const KeyRule<std::vector<int64_t>>& r);
  void rule(bool ok, const std::string& what);

 private:
  const gguf::Value* find(const char* name) const;
  [[noreturn]] void fail(const std::string& what) const;
  const Metadata& meta_;
  std::string arch_;
  Mode mode_;
};

// Writes every key as GGUF u32 / f32 / i32 array.
class KeyWriter : public KeyTable<KeyWriter> {
 public:
  KeyWriter(gguf::GgufWriter& out, std::string arch) : out_(out), arch_(std::move(arch)) {}
  void visit(const char* name, int64_t& f, const KeyRule<int64_t>& r);
  void visit(const char* name, float& f, const KeyRule<float>& r);
  void visit(const char* name, std::vector<int64_t>& f, const KeyRule<std::vector<int64_t>>& r);
  void rule(bool, const std::string&) {}

 private:
  gguf::GgufWriter& out_;
  std::string arch_;
};

// Collects every scalar key with the value in force (for the card). An array key is left out:
// the scalars it is derived from are there (a new model from the card derives it again).
struct KeyValues : KeyTable<KeyValues> {
  std::vector<std::pair<std::string, double>> values;
  template <class T>
  void visit(const char* name, T& f, const KeyRule<T>&) {
    values.emplace_back(name, double(f));
  }
  void visit(const char*, std::vector<int64_t>&, const KeyRule<std::vector<int64_t>>&) {}
  void rule(bool, const std::string&) {}
};

// The keys every decoder shares (llama.cpp's generic LLM keys under `<arch>.`).
template <class V>
void decoder_keys(V& v, ModelConfig& h) {
  v.key("context_length", h.n_ctx);
  v.key("embedding_length", h.d_model);
  v.key("block_count", h.n_layer);
  v.key("feed_forward_length", h.d_ff);
  v.key("attention.head_count", h.n_head);
  v.key("attention.head_count_kv", h.n_kv_head, h.n_head);
  v.key("attention.key_length", h.d_head, h.d_model / h.n_head);
  int64_t d_value = h.d_head;  // value heads must be as wide as key heads (toy's attention)
  v.key("attention.value_length", d_value, h.d_head);
  v.check(d_value == h.d_head, "attention.value_length differs from key_length (not supported)");
  v.check(h.n_head % h.n_kv_head == 0, "attention.head_count_kv " + std::to_string(h.n_kv_head) +
                                           " must divide head_count " + std::to_string(h.n_head));
}

// --- tensor tables -------------------------------------------------------------------------
// v.tensor("attn_q.weight", L.attn.attn_q, {d.Q, d.D}, Init::Normal);         required
// v.tensor("output.weight", w.output, {d.V, d.D}, Init::Normal, !h.tied_output);  optional when tied
// v.layers(w.blk, h.n_layer, [&](Layer& L) { … });                             blk.0. … blk.{n-1}.

// A size in a tensor table: its value and the symbol the card shows.
struct Dim {
  int64_t n;
  const char* sym;
};
struct Dims {
  Dim V, D, Q, KV, F, Dh;  // n_vocab, d_model, n_head·d_head, n_kv_head·d_head, d_ff, d_head
  explicit Dims(const ModelConfig& c)
      : V{c.n_vocab, "n_vocab"},
        D{c.d_model, "d_model"},
        Q{c.n_head * c.d_head, "n_head·d_head"},
        KV{c.n_kv_head * c.d_head, "n_kv_head·d_head"},
        F{c.d_ff, "d_ff"},
        Dh{c.d_head, "d_head"} {}
};

template <class Visitor>
struct TensorTable {
  void tensor(const char* name, Tensor& t, std::initializer_list<Dim> shape, Init init, bool required = true) {
    Shape s;
    for (const Dim& d : shape) s.push_back(d.n);
    static_cast<Visitor&>(*this).visit(prefix + name, t, shape, s, init, required);
  }
  template <class Layer, class F>
  void layers(std::vector<Layer>& ls, int64_t n, F&& fn) {
    ls.resize(size_t(n));
    for (int64_t l = 0; l < n; ++l) {
      prefix = "blk." + std::to_string(l) + ".";
      call_layer(fn, ls[size_t(l)], l);
    }
    prefix.clear();
  }
  // fn(layer) when every layer has the same tensors; fn(layer, ℓ) when they differ by layer (a
  // hybrid's recurrent and attention layers).
  template <class Layer, class F>
  static void call_layer(F& fn, Layer& L, int64_t l) {
    if constexpr (std::is_invocable_v<F&, Layer&, int64_t>)
      fn(L, l);
    else
      fn(L);
  }
  std::string prefix;  // "blk.ℓ." inside layers()
};

// Views of a file's tensors, shapes checked; 1-D ones (norms, biases) converted to F32.
class TensorLoader : public TensorTable<TensorLoader> {
 public:
  explicit TensorLoader(std::shared_ptr<const gguf::GgufFile> f) : f_(std::move(f)) {}
  void visit(const std::string& name, Tensor& t, std::initializer_list<Dim>, const Shape& s, Init, bool required);

 private:
  std::shared_ptr<const gguf::GgufFile> f_;
};

// New weights by each tensor's init rule, in table order from one seeded generator.
class RandomInit : public TensorTable<RandomInit> {
 public:
  explicit RandomInit(uint64_t seed) : rng_(seed) {}
  void visit(const std::string& name, Tensor& t, std::initializer_list<Dim>, const Shape& s, Init init, bool required);

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<float> normal_{0.0f, 0.02f};
};

// Calls fn on every parameter the model has.
struct ParamWalk : TensorTable<ParamWalk> {
  const std::function<void(Tensor&)>& fn;
  explicit ParamWalk(const std::function<void(Tensor&)>& f) : fn(f) {}
  void visit(const std::string&, Tensor& t, std::initializer_list<Dim>, const Shape&, Init, bool) {
    if (t.defined()) fn(t);
  }
};

// The tensor list of a description: per-layer tensors once, named `blk.ℓ.…`.
struct TensorSpecs : TensorTable<TensorSpecs> {
  std::vector<TensorSpec> specs;
  const std::vector<std::string>& present;  // optional tensors that exist
  explicit TensorSpecs(const std::vector<std::string>& p) : present(p) {}
  void visit(const std::string& name, Tensor&, std::initializer_list<Dim> shape, const Shape& s, Init init,
             bool required);
  // Per-layer tensors once as `blk.ℓ.…`; those of layers that differ (fn takes ℓ) layer by layer.
  template <class Layer, class F>
  void layers(std::vector<Layer>&, int64_t n, F&& fn) {
    Layer one;
    if constexpr (std::is_invocable_v<F&, Layer&, int64_t>) {
      for (int64_t l = 0; l < n; ++l) {
        prefix = "blk." + std::to_string(l) + ".";
        each_layer = true;
        fn(one, l);
      }
      each_layer = false;
    } else {
      prefix = "blk.ℓ.";
      fn(one);
    }
    prefix.clear();
  }
  bool each_layer = false;  // inside layers() for a table whose layers differ
};

// --- helpers the architectures share --------------------------------------------------------

// Attention with RoPE over heads of d_head, scaled by 1/√d_head, as the variant says (NORM or
// NEOX pairs, q/k norms with the model's eps).
template <class H>
AttentionConfig rope_attention(const H& h, const Variant& variant, Tensor freq_factors = {}) {
  const RopeMode mode = variant.positions == Positions::RopeNorm ? RopeMode::Norm : RopeMode::Neox;
  return {.n_head = h.n_head,
          .n_kv_head = h.n_kv_head,
          .d_head = h.d_head,
          .rope = {.mode = mode, .n_rot = h.n_rot, .base = h.rope_base, .freq_factors = std::move(freq_factors)},
          .qk_norm = variant.qk_norm,
          .norm_eps = h.eps,
          .options = {.scale = 1.0f / std::sqrt(float(h.d_head)), .softcap = 0, .window = 0}};
}
// The RoPE keys of a rotary decoder (Hparams with rope_base, n_rot).
template <class V, class H>
void rope_keys(V& v, H& h) {
  v.key("rope.freq_base", h.rope_base, 10000.0f);
  v.key("rope.dimension_count", h.n_rot, h.d_head);
  v.check(h.n_rot <= h.d_head && h.n_rot % 2 == 0, "rope.dimension_count " + std::to_string(h.n_rot) +
                                                       " must be even and at most the head size " +
                                                       std::to_string(h.d_head));
}

// The tensors of a GPT-2 layer (blocks/gpt2.h: LayerNorms with bias, fused QKV, GELU MLP), shared
// by gpt2 and vit. QKV: the rows of attn_qkv (Q | K | V).
template <class V>
void gpt2_layer_tensors(V& v, Gpt2Layer& L, Dim D, Dim Q, Dim QKV, Dim F) {
  v.tensor("attn_norm.weight", L.attn_norm, {D}, Init::Ones);
  v.tensor("attn_norm.bias", L.attn_norm_bias, {D}, Init::Zeros);
  v.tensor("attn_qkv.weight", L.attn.attn_qkv, {QKV, D}, Init::Normal);
  v.tensor("attn_qkv.bias", L.attn.attn_qkv_bias, {QKV}, Init::Zeros);
  v.tensor("attn_output.weight", L.attn.attn_output, {D, Q}, Init::Normal);
  v.tensor("attn_output.bias", L.attn.attn_output_bias, {D}, Init::Zeros);
  v.tensor("ffn_norm.weight", L.ffn_norm, {D}, Init::Ones);
  v.tensor("ffn_norm.bias", L.ffn_norm_bias, {D}, Init::Zeros);
  v.tensor("ffn_up.weight", L.ffn.ffn_up, {F, D}, Init::Normal);
  v.tensor("ffn_up.bias", L.ffn.ffn_up_bias, {F}, Init::Zeros);
  v.tensor("ffn_down.weight", L.ffn.ffn_down, {D, F}, Init::Normal);
  v.tensor("ffn_down.bias", L.ffn.ffn_down_bias, {D}, Init::Zeros);
}

// --- the adapter -------------------------------------------------------------------------------

template <class A>
class ArchModel final : public Model {
 public:
  using Hparams = typename A::Hparams;
  using Weights = typename A::Weights;
  ArchModel(Hparams h, Weights w) : h_(std::move(h)), w_(std::move(w)) { config_ = h_; }
  Tensor forward(const Tensor& tokens, const Ctx& ctx) const override { return A::forward(w_, h_, tokens, ctx); }
  void for_each_param(const std::function<void(Tensor&)>& fn) override {
    ParamWalk v(fn);
    A::tensors(v, w_, h_);
  }
  void write_metadata(gguf::GgufWriter& out) const override {
    out.set("general.architecture", gguf::Value::of_string(A::name));
    out.set(std::string(A::name) + ".vocab_size", gguf::Value::of_u32(uint32_t(h_.n_vocab)));
    KeyWriter v(out, A::name);
    Hparams h = h_;
    A::keys(v, h);
  }
  bool attends(int64_t layer) const override {
    if constexpr (requires(const Hparams& h) { h.full_attention(int64_t{}); })  // a hybrid (archs/hybrid.h)
      return h_.full_attention(layer);
    else
      return true;
  }
  const Hparams& hparams() const { return h_; }

 private:
  Hparams h_;
  Weights w_;
};

// n_vocab and tied_output are facts of the tensors; the rest comes from the key table.
template <class A>
typename A::Hparams read_hparams(const Metadata& meta, int64_t n_vocab, bool tied, KeyReader::Mode mode) {
  if (n_vocab <= 0 || n_vocab > (int64_t(1) << 24))
    throw std::invalid_argument("vocabulary size " + std::to_string(n_vocab) + " out of range");
  typename A::Hparams h;
  h.arch = A::name;
  h.n_vocab = n_vocab;
  h.tied_output = tied;
  KeyReader r(meta, A::name, mode);
  A::keys(r, h);
  return h;
}
int64_t vocab_rows(const gguf::GgufFile& f);  // rows of token_embd.weight; GgufError when absent

template <class A>
Architecture architecture() {
  using Model_ = ArchModel<A>;
  Architecture a;
  a.name = A::name;
  a.variant = A::variant;
  if constexpr (requires { A::untrainable; }) a.untrainable = A::untrainable;
  a.load = [](std::shared_ptr<const gguf::GgufFile> f) -> std::unique_ptr<Model> {
    typename A::Hparams h;
    try {
      h = read_hparams<A>(f->metadata(), vocab_rows(*f), !f->find_tensor("output.weight"), KeyReader::Mode::File);
    } catch (const std::invalid_argument& e) {
      throw gguf::GgufError(f->path() + ": " + e.what());
    }
    typename A::Weights w;
    TensorLoader loader(f);
    A::tensors(loader, w, h);
    return std::make_unique<Model_>(std::move(h), std::move(w));
  };
  a.random = [](const Metadata& meta, int64_t n_vocab, bool tied, uint64_t seed) -> std::unique_ptr<Model> {
    typename A::Hparams h = read_hparams<A>(meta, n_vocab, tied, KeyReader::Mode::NewModel);
    typename A::Weights w;
    RandomInit init(seed);
    A::tensors(init, w, h);
    return std::make_unique<Model_>(std::move(h), std::move(w));
  };
  a.key_names = [](const Metadata& meta) {
    typename A::Hparams h = read_hparams<A>(meta, /*n_vocab=*/1, /*tied=*/true, KeyReader::Mode::NewModel);
    KeyValues kv;
    A::keys(kv, h);
    std::vector<std::string> names;
    for (const auto& [name, value] : kv.values) names.push_back(name);
    return names;
  };
  a.describe = [](const Metadata& meta, int64_t n_vocab, bool tied, const std::vector<std::string>& present) {
    typename A::Hparams h = read_hparams<A>(meta, n_vocab, tied, KeyReader::Mode::File);
    Description d{.config = h, .variant = A::variant, .values = {}, .tensors = {}};
    KeyValues kv;
    A::keys(kv, h);
    d.values = std::move(kv.values);
    typename A::Weights w;
    TensorSpecs specs(present);
    A::tensors(specs, w, h);
    d.tensors = std::move(specs.specs);
    return d;
  };
  return a;
}

}  // namespace toy
