// archs/vit.h — L3: a Vision Transformer (ViT, Dosovitskiy et al. 2020) that classifies images.
//
// Glossary: B batch, C channels, S image side in pixels, P patch side, N = (S/P)² patches,
// T = N + 1 tokens (the class token first), D d_model, K n_class.
//
// Its input is images, not tokens, so it is not a `Model` (archs/model.h: tokens in, logits per
// token out) and has no place in the LM registry; it is described in archs/vit.cpp with the same
// key and tensor tables (arch.h) as the decoders, which give it GGUF in and out, random
// initialisation, the parameter walk and the tensor list of `describe`.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "toy/archs/model.h"

namespace toy {

struct VitHparams {
  int64_t image_size = 28;  // S: images are S×S pixels, e.g. 28
  int64_t patch_size = 7;   // P: divides S, e.g. 7 (16 patches)
  int64_t n_channel = 1;    // C: 1 grey, 3 RGB
  int64_t d_model = 64;     // e.g. 64
  int64_t n_layer = 4;      // e.g. 4
  int64_t n_head = 4;       // e.g. 4
  int64_t d_ff = 128;       // e.g. 128
  int64_t n_class = 10;     // K: e.g. 10 (Fashion-MNIST)
  float eps = 1e-5f;        // LayerNorm epsilon (PyTorch's default)
  int64_t n_patch() const { return (image_size / patch_size) * (image_size / patch_size); }  // N
};

class VitModel {
 public:
  // The model a GGUF file (general.architecture "vit") holds. Throws gguf::GgufError for a missing
  // or invalid key or a missing or mis-shaped tensor.
  static std::unique_ptr<VitModel> load(std::shared_ptr<const gguf::GgufFile> f);
  // New weights for `h` (N(0, 0.02) matrices and embeddings, unit norms, zero biases), deterministic
  // in `seed`. Throws std::invalid_argument for sizes that do not fit (P not dividing S, …).
  static std::unique_ptr<VitModel> random(const VitHparams& h, uint64_t seed);
  ~VitModel();

  // images: F32 [B, C, S, S] (pixels scaled to [0, 1]) -> logits [B, K]
  Tensor forward(const Tensor& images) const;
  // Every parameter, named with its GGUF name, in file order.
  void for_each_param(const std::function<void(Tensor&)>& fn);
  // general.architecture = "vit", the vit.* keys (vit.class_names when set), every parameter as F32.
  void write_gguf(const std::string& path, const std::string& name);
  const VitHparams& hparams() const;
  // The name of each class (K of them; empty when the file names none), kept in the GGUF key
  // vit.class_names (an array of strings) so that the file alone says what its outputs mean.
  const std::vector<std::string>& class_names() const;
  void set_class_names(std::vector<std::string> names);  // throws std::invalid_argument unless K names
  std::vector<TensorSpec> tensor_specs() const;          // name, symbolic and numeric shape of each tensor

  struct Impl;

 private:
  explicit VitModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace toy
