// archs/vit.cpp — ViT: a Vision Transformer classifier. GGUF arch "vit". HF: ViTForImageClassification.
//
//   x = patch_embd · patches(images) + b                       [B, N, D]  (= a P×P conv with stride P)
//   x = [class_embd; x] + position_embd                        [B, T, D]  (T = N + 1, learned positions)
//   for each layer:  h = x + attention(layer_norm(x))          bidirectional, fused attn_qkv (+ bias)
//                    x = h + mlp(layer_norm(h))                ffn_down(gelu(ffn_up·h + b)) + b
//   logits = output · layer_norm(x[:, 0]) + b                  [B, K]     (the class token's row)
//
// The encoder layer is GPT-2's (blocks/gpt2.h) with attention that is not causal: every token
// sees every other. GELU is the tanh form (PyTorch: nn.GELU(approximate="tanh")).
#include "toy/archs/vit.h"

#include <algorithm>
#include <cmath>

#include "toy/archs/arch.h"
#include "toy/primitives/indexing.h"

namespace toy {

namespace {

struct Vit {
  static constexpr const char* name = "vit";
  using Hparams = VitHparams;
  template <class V>
  static void keys(V& v, Hparams& h) {
    v.key("image_size", h.image_size);
    v.key("patch_size", h.patch_size);
    v.key("num_channels", h.n_channel, int64_t(1));
    v.key("embedding_length", h.d_model);
    v.key("block_count", h.n_layer);
    v.key("attention.head_count", h.n_head);
    v.key("feed_forward_length", h.d_ff);
    v.key("class_count", h.n_class);
    v.key("attention.layer_norm_epsilon", h.eps, 1e-5f);
    v.check(h.image_size % h.patch_size == 0,
            "patch_size " + std::to_string(h.patch_size) + " must divide image_size " + std::to_string(h.image_size));
    v.check(h.d_model % h.n_head == 0, "attention.head_count " + std::to_string(h.n_head) +
                                           " must divide embedding_length " + std::to_string(h.d_model));
  }

  struct Weights {
    Tensor patch_embd, patch_embd_bias;    // [D, C·P·P], [D]
    Tensor class_embd;                     // [D]
    Tensor position_embd;                  // [T, D]
    std::vector<Gpt2Layer> blk;            // the encoder layers
    Tensor output_norm, output_norm_bias;  // [D], [D]
    Tensor output, output_bias;            // [K, D], [K]
  };
  template <class V>
  static void tensors(V& v, Weights& w, const Hparams& h) {
    const Dim D{h.d_model, "d_model"}, F{h.d_ff, "d_ff"}, K{h.n_class, "n_class"};
    const Dim pixels{h.n_channel * h.patch_size * h.patch_size, "C·P·P"}, T{h.n_patch() + 1, "N + 1"};
    v.tensor("patch_embd.weight", w.patch_embd, {D, pixels}, Init::Normal);
    v.tensor("patch_embd.bias", w.patch_embd_bias, {D}, Init::Zeros);
    v.tensor("class_embd.weight", w.class_embd, {D}, Init::Normal);
    v.tensor("position_embd.weight", w.position_embd, {T, D}, Init::Normal);
    const Dim QKV{3 * h.d_model, "3·d_model"};
    v.layers(w.blk, h.n_layer, [&](Gpt2Layer& L) { gpt2_layer_tensors(v, L, D, D, QKV, F); });
    v.tensor("output_norm.weight", w.output_norm, {D}, Init::Ones);
    v.tensor("output_norm.bias", w.output_norm_bias, {D}, Init::Zeros);
    v.tensor("output.weight", w.output, {K, D}, Init::Normal);
    v.tensor("output.bias", w.output_bias, {K}, Init::Zeros);
  }

  static Tensor forward(const Weights& w, const Hparams& h, const Tensor& images) {
    auto [B, C, S, S2] = images.dims<4>("vit: images");
    if (C != h.n_channel || S != h.image_size || S2 != h.image_size)
      throw ShapeError("vit: images " + to_string(images.shape()) + ", the model takes [B, " +
                       std::to_string(h.n_channel) + ", " + std::to_string(h.image_size) + ", " +
                       std::to_string(h.image_size) + "]");
    AttentionConfig a;  // no rope: positions are in the embeddings
    a.n_head = h.n_head, a.n_kv_head = h.n_head, a.d_head = h.d_model / h.n_head;
    a.options = {.scale = 1.0f / std::sqrt(float(a.d_head)), .causal = false};
    Tensor x = linear(patches(images, h.patch_size), w.patch_embd, w.patch_embd_bias);                 // [B, N, D]
    x = prepend_row(w.class_embd, x) + embedding(w.position_embd, Ctx{}.positions(B, x.size(1) + 1));  // [B, T, D]
    for (int64_t l = 0; l < h.n_layer; ++l) x = gpt2_block(w.blk[size_t(l)], a, h.eps, x, Ctx{}, l);   // [B, T, D]
    x = layer_norm(first_rows(x), w.output_norm, w.output_norm_bias, h.eps);                           // [B, D]
    return linear(x, w.output, w.output_bias);                                                         // [B, K]
  }

  // The P×P patches of each image, row by row, each flattened as (channel, y, x): the layout of a
  // Conv2d weight [D, C, P, P], so patch_embd is that weight reshaped. images: [B, C, S, S] ->
  // [B, N, C·P·P]. A copy of the input, which takes no gradient.
  static Tensor patches(const Tensor& images, int64_t P) {
    auto [B, C, S, _] = images.dims<4>("vit: images");
    const int64_t G = S / P, L = C * P * P;  // G×G patches of L values
    Tensor out = Tensor::empty({B, G * G, L});
    const float* in = images.data();
    float* o = out.data_mut();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t gy = 0; gy < G; ++gy)
        for (int64_t gx = 0; gx < G; ++gx, o += L)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t y = 0; y < P; ++y)
              std::copy_n(in + ((b * C + c) * S + gy * P + y) * S + gx * P, P, o + (c * P + y) * P);
    return out;
  }
};

// Applies the key table's rules (and the reader's bounds) to sizes given in code.
struct KeyRules : KeyTable<KeyRules> {
  template <class T>
  void visit(const char* name, T& f, const KeyRule<T>&) {
    if (!(f > 0) || !(double(f) <= double(int64_t(1) << 24)))
      throw std::invalid_argument(std::string("vit: ") + name + " must be positive (got " + std::to_string(f) + ")");
  }
  void rule(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("vit: " + what);
  }
};

const char* const kClassNamesKey = "vit.class_names";

}  // namespace

struct VitModel::Impl {
  VitHparams h;
  Vit::Weights w;
  std::vector<std::string> class_names;  // K names, or none
};

VitModel::VitModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VitModel::~VitModel() = default;

std::unique_ptr<VitModel> VitModel::load(std::shared_ptr<const gguf::GgufFile> f) {
  auto impl = std::make_unique<Impl>();
  if (f->architecture() != Vit::name)
    throw gguf::GgufError(f->path() + ": architecture '" + f->architecture() + "' is not a vision transformer (vit)");
  try {
    KeyReader r(f->metadata(), Vit::name, KeyReader::Mode::File);
    Vit::keys(r, impl->h);
  } catch (const std::invalid_argument& e) {
    throw gguf::GgufError(f->path() + ": " + e.what());
  }
  for (std::string_view name : f->get_strings(kClassNamesKey)) impl->class_names.emplace_back(name);
  if (!impl->class_names.empty() && int64_t(impl->class_names.size()) != impl->h.n_class)
    throw gguf::GgufError(f->path() + ": " + kClassNamesKey + " holds " + std::to_string(impl->class_names.size()) +
                          " names for " + std::to_string(impl->h.n_class) + " classes");
  TensorLoader loader(f);
  Vit::tensors(loader, impl->w, impl->h);
  return std::unique_ptr<VitModel>(new VitModel(std::move(impl)));
}

std::unique_ptr<VitModel> VitModel::random(const VitHparams& h, uint64_t seed) {
  auto impl = std::make_unique<Impl>();
  impl->h = h;
  KeyRules rules;
  Vit::keys(rules, impl->h);
  RandomInit init(seed);
  Vit::tensors(init, impl->w, impl->h);
  return std::unique_ptr<VitModel>(new VitModel(std::move(impl)));
}

Tensor VitModel::forward(const Tensor& images) const { return Vit::forward(impl_->w, impl_->h, images); }

void VitModel::for_each_param(const std::function<void(Tensor&)>& fn) {
  ParamWalk v(fn);
  Vit::tensors(v, impl_->w, impl_->h);
}

void VitModel::write_gguf(const std::string& path, const std::string& name) {
  gguf::GgufWriter out;
  out.set("general.architecture", gguf::Value::of_string(Vit::name));
  out.set("general.name", gguf::Value::of_string(name));
  out.set("general.file_type", gguf::Value::of_u32(0));  // LLAMA_FTYPE_ALL_F32
  KeyWriter keys(out, Vit::name);
  VitHparams h = impl_->h;
  Vit::keys(keys, h);
  if (!impl_->class_names.empty()) out.set(kClassNamesKey, gguf::Value::of_strings(impl_->class_names));
  for_each_param([&](Tensor& t) { out.add_tensor(t.name(), t); });
  out.write(path);
}

const VitHparams& VitModel::hparams() const { return impl_->h; }

const std::vector<std::string>& VitModel::class_names() const { return impl_->class_names; }

void VitModel::set_class_names(std::vector<std::string> names) {
  if (int64_t(names.size()) != impl_->h.n_class)
    throw std::invalid_argument("vit: " + std::to_string(names.size()) + " class names for " +
                                std::to_string(impl_->h.n_class) + " classes");
  impl_->class_names = std::move(names);
}

std::vector<TensorSpec> VitModel::tensor_specs() const {
  const std::vector<std::string> present;  // vit has no optional tensors
  TensorSpecs specs(present);
  Vit::Weights w;
  Vit::tensors(specs, w, impl_->h);
  return std::move(specs.specs);
}

}  // namespace toy
