// tests/untrainable_arch.cpp — the toy CLI with one more architecture, registered from outside the
// tree as a project of one's own does it (toy/cli.h), that says why it cannot be trained
// (Architecture::untrainable): `toy train` must refuse it up front with that reason.
// The model is a bigram: logits = token_embd · rms_norm(token_embd[tokens]).
#include "toy/archs/arch.h"
#include "toy/cli.h"

namespace {

using namespace toy;

struct FrozenBigram {
  static constexpr const char* name = "frozen_bigram";
  static constexpr Variant variant = {.hf_class = "", .positions = Positions::RopeNorm};
  static constexpr const char* untrainable = "its forward pass is a test's, with no training written for it";

  struct Hparams : ModelConfig {
    float eps = 1e-5f;  // attention.layer_norm_rms_epsilon
  };
  template <class V>
  static void keys(V& v, Hparams& h) {
    decoder_keys(v, h);
    v.key("attention.layer_norm_rms_epsilon", h.eps, Required{1e-5f});
  }

  struct Weights {
    Tensor token_embd;   // [V, D], also the output projection
    Tensor output_norm;  // [D]
  };
  template <class V>
  static void tensors(V& v, Weights& w, const Hparams& h) {
    const Dims d(h);
    v.tensor("token_embd.weight", w.token_embd, {d.V, d.D}, Init::Normal);
    v.tensor("output_norm.weight", w.output_norm, {d.D}, Init::Ones);
  }

  static Tensor forward(const Weights& w, const Hparams& h, const Tensor& tokens, const Ctx& ctx) {
    const Tensor x = embedding(w.token_embd, tokens);                                      // [B, T, D]
    return linear(rms_norm(logit_positions(x, ctx), w.output_norm, h.eps), w.token_embd);  // [B, T, V]
  }
};

const Registration reg(architecture<FrozenBigram>());

}  // namespace

int main(int argc, char** argv) { return toy::cli::main(argc, argv); }
