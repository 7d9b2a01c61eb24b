// recipes/warm_start.cpp — the warm-start recipe: the donor's embedding through a learned lens,
// on the from-scratch recipe's model and the Trainer.
#include "toy/recipes/warm_start.h"

#include <cmath>
#include <filesystem>
#include <random>

#include "toy/engines/train_data.h"
#include "toy/recipes/from_scratch.h"
#include "toy/recipes/jsonl_data.h"
#include "toy/recipes/observers.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::recipes {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLensName = "token_embd.lens";  // its name in the optimizer state

struct Donor {
  std::shared_ptr<const gguf::GgufFile> file;  // keeps the mapped table alive
  Tensor embd;                                 // E [n_vocab, donor_d], the file's dtype
};

// The donor's token embedding, checked against its own vocabulary.
Donor open_donor(const std::string& path) {
  if (!fs::exists(path)) throw DataError("--donor " + path + ": no such file");
  Donor d{.file = gguf::GgufFile::open(path), .embd = {}};
  if (!d.file->has("tokenizer.ggml.tokens"))
    throw DataError("--donor " + path + ": no vocabulary (tokenizer.ggml.*); warm-start takes over the donor's");
  const gguf::TensorInfo* ti = d.file->find_tensor("token_embd.weight");
  if (!ti || ti->shape.size() != 2) throw DataError("--donor " + path + ": no 2-D token_embd.weight");
  d.embd = d.file->tensor(*ti);
  const int64_t n_tokens = Tokenizer::from_gguf(*d.file)->n_vocab();
  if (d.embd.size(0) != n_tokens)
    throw DataError("--donor " + path + ": token_embd.weight has " + std::to_string(d.embd.size(0)) +
                    " rows but its vocabulary has " + std::to_string(n_tokens) + " tokens");
  return d;
}

// A --tokenizer must be the donor's vocabulary: the rows of E are its tokens.
void check_same_vocabulary(const std::string& tokenizer_path, const std::string& donor_path, const Donor& d) {
  if (!fs::exists(tokenizer_path)) throw DataError("--tokenizer " + tokenizer_path + ": no such file");
  const auto tok = Tokenizer::from_gguf(*gguf::GgufFile::open(tokenizer_path));
  const auto donor_tok = Tokenizer::from_gguf(*d.file);
  bool same = tok->n_vocab() == donor_tok->n_vocab() && tok->model() == donor_tok->model();
  for (int32_t id = 0; same && id < tok->n_vocab(); ++id) same = tok->token_text(id) == donor_tok->token_text(id);
  if (!same)
    throw DataError("--tokenizer " + tokenizer_path + " (" + std::to_string(tok->n_vocab()) +
                    " tokens) is not the vocabulary of --donor " + donor_path + " (" +
                    std::to_string(donor_tok->n_vocab()) + " tokens): warm-start needs the donor's tokens");
}

// How much faster the lens learns than the other weights: see initial_lens().
constexpr double kLensSpeed = 32;

// token_embd as the donor's table through the lens: W [n_vocab, d_model] carrying the term
// c·E·lens, c = kLensSpeed / (rms(E)·√donor_d) (c·E has rows of norm kLensSpeed on average).
Tensor lensed_embedding(const Tensor& W, const Tensor& E, const Tensor& lens, float c) {
  return with_low_rank(W, {.terms = {{.A = lens, .B = E, .scale = c}}, .dropout = {}, .id = 0});
}

float term_scale(const Tensor& E) {
  const Tensor Ef = E.clone();  // F32 [n_vocab, donor_d], whatever the donor's dtype
  double sum_sq = 0;
  for (int64_t i = 0; i < Ef.numel(); ++i) sum_sq += double(Ef.data()[i]) * Ef.data()[i];
  const double rms = std::sqrt(sum_sq / double(Ef.numel()));
  return float(kLensSpeed / (std::max(rms, 1e-12) * std::sqrt(double(E.size(1)))));
}

// lens ~ N(0, (0.02 / kLensSpeed)²): each entry of c·E·lens then starts with standard deviation
// 0.02, as a from-scratch token_embd does. Adam's steps do not depend on the gradient's scale, so
// a weight used k times larger and started k times smaller trains as if its learning rate were k
// times --lr: the lens, one matrix shared by every token, learns kLensSpeed times faster. Measured
// on the TinyStories sample (docs/training.md): at 0.5 and 2 the warm start trailed from-scratch,
// at 8 it kept level, at 32 and 128 it led (by 0.2 nats at step 50).
Tensor initial_lens(int64_t donor_d, int64_t d_model, uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x6c656e73ULL);  // "lens": a stream apart from the model's weights
  std::normal_distribution<float> normal(0.0f, float(0.02 / kLensSpeed));
  Tensor lens = Tensor::empty({donor_d, d_model});  // [donor_d, d_model]
  for (int64_t i = 0; i < lens.numel(); ++i) lens.data_mut()[i] = normal(rng);
  return lens;
}

}  // namespace

RunResult train_warm_start(const TrainRunConfig& c0, const RunOutput& io, const std::string& resume_dir) {
  TrainRunConfig c = c0;
  validate(c);
  const Donor donor = open_donor(c.donor);
  if (!c.tokenizer.empty() && c.tokenizer != c.donor) check_same_vocabulary(c.tokenizer, c.donor, donor);
  c.tokenizer = c.donor;  // the new model takes over the donor's vocabulary
  c.tied = false;         // token_embd is E·lens; the output projection has its own weights
  if (!resume_dir.empty())
    if (const auto k = latest_resumable_checkpoint(resume_dir);
        k && !gguf::GgufFile::open(k->optimizer)->find_tensor(std::string("optim.w.") + kLensName))
      throw DataError(k->optimizer + ": no lens (optim.w." + std::string(kLensName) + "): not a warm-start checkpoint");

  const Tensor& E = donor.embd;
  const float scale = term_scale(E);
  Tensor lens;  // [donor_d, d_model]; a new run's from initial_lens(), a resumed one's from the optimizer state
  Recipe recipe{.new_model =
                    [&](const TrainRunConfig& cfg, int64_t n_vocab) {
                      std::unique_ptr<Model> m = build_model(cfg, n_vocab);
                      lens = initial_lens(E.size(1), m->config().d_model, cfg.seed);
                      return m;
                    },
                .trainable =
                    [&](Model& m) {
                      const ModelConfig& mc = m.config();
                      if (mc.n_vocab != E.size(0))
                        throw DataError("the model has " + std::to_string(mc.n_vocab) +
                                        " tokens, the donor's embedding " + std::to_string(E.size(0)));
                      if (!lens.defined()) lens = Tensor::zeros({E.size(1), mc.d_model});  // resumed: loaded next
                      lens.set_name(kLensName).requires_grad_();
                      std::vector<Tensor> params{lens};  // first: the optimizer looks for optim.w.<first>
                      for (const Tensor& p : make_trainable(m))
                        if (p.name() != "token_embd.weight") params.push_back(p);
                      m.for_each_param([&](Tensor& t) {
                        if (t.name() != "token_embd.weight") return;
                        // W: zero, and trained with --train-embd (a resumed run's comes from the optimizer state).
                        // The parameter is the handle the forward reads, which is where its gradient collects.
                        t = lensed_embedding(Tensor::zeros(t.shape()).set_name(t.name()), E, lens, scale);
                        if (c.train_embd) params.push_back(t.requires_grad_());
                      });
                      return params;
                    },
                .data = load_any_training_data};
  Trainer trainer(c, io, resume_dir, recipe);
  add_standard_observers(trainer);
  return trainer.run();
}

}  // namespace toy::recipes
