// cli/cmd_vit.cpp — the ViT image classifier on the command line: `toy train vit` (the command
// train-vit; main() maps `toy train vit` to it), and what `toy eval --images` and `toy infer
// --image` do with a vit model (docs/vit.md).
//
// The train flags are the settings of recipes::VitRunConfig under the same names (config.json
// uses them as keys), as for `toy train` (cmd_train.cpp).
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli/common.h"
#include "cli/vit.h"
#include "toy/engines/distributed.h"
#include "toy/engines/train_data.h"
#include "toy/recipes/vit.h"

namespace toy::cli {

namespace {

using recipes::VitRunConfig;

const VitRunConfig kDefaults;
const char* const kDataDir = "/usr/share/datasets/fashion-mnist";

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// Settings a resumed run may change: how long it runs and how it is observed, not the numbers.
const std::set<std::string> kResumable = {"stop-after", "threads", "log-every"};
const std::set<std::string> kNotSettings = {"resume"};

std::atomic<bool> g_stop{false};
extern "C" void request_vit_stop(int) {
  if (g_stop.exchange(true)) std::_Exit(kInterrupted);
}

std::vector<Flag> train_flags() {
  const VitRunConfig& d = kDefaults;
  auto i = [](int64_t v) { return std::to_string(v); };
  return {
      {"data", FlagType::Path, d.data, "directory of the IDX files train-* and t10k-* (Debian: dataset-fashion-mnist)"},
      {"train-images", FlagType::Int, i(d.train_images), "train on the first N training images only (0: all)"},
      {"test-images", FlagType::Int, i(d.test_images), "evaluate on the first N test images only (0: all)"},
      {"patch", FlagType::Int, i(d.patch), "patch side P in pixels (divides 28)"},
      {"d-model", FlagType::Int, i(d.d_model), "model width d_model"},
      {"layers", FlagType::Int, i(d.n_layer), "encoder layers n_layer"},
      {"heads", FlagType::Int, i(d.n_head), "attention heads n_head (must divide d-model)"},
      {"ff", FlagType::Int, i(d.d_ff), "MLP width d_ff"},
      {"epochs", FlagType::Int, i(d.epochs), "passes over the training images (when --steps is 0)"},
      {"steps", FlagType::Int, i(d.steps), "optimizer steps (0: epochs x training images / batch)"},
      {"batch", FlagType::Int, i(d.batch), "images per step B"},
      {"lr", FlagType::Float, num(d.lr), "peak learning rate"},
      {"schedule", FlagType::String, d.schedule, "after warm-up: cosine (to --min-lr-ratio x lr) or constant"},
      {"warmup", FlagType::Int, i(d.warmup), "steps of linear learning-rate warm-up"},
      {"min-lr-ratio", FlagType::Float, num(d.min_lr_ratio), "cosine floor as a fraction of --lr"},
      {"beta1", FlagType::Float, num(d.beta1), "AdamW beta1"},
      {"beta2", FlagType::Float, num(d.beta2), "AdamW beta2"},
      {"eps", FlagType::Float, num(d.eps), "AdamW epsilon"},
      {"weight-decay", FlagType::Float, num(d.weight_decay), "AdamW decoupled weight decay, on 2-D weights only"},
      {"clip", FlagType::Float, num(d.clip), "clip the global gradient norm to this (0: no clipping)"},
      {"flip", FlagType::Float, num(d.flip), "augmentation: probability of mirroring a training image left-right"},
      {"shift", FlagType::Int, i(d.shift), "augmentation: move training images by up to +-N pixels (0: none)"},
      {"seed", FlagType::Int, i(int64_t(d.seed)), "seed of the initial weights and the shuffles"},
      {"eval-every", FlagType::Int, i(d.eval_every), "test accuracy every N steps (0: only at the end)"},
      {"checkpoint-every", FlagType::Int, i(d.checkpoint_every), "weights/step-N.gguf every N steps (0: at the end)"},
      {"stop-after", FlagType::Int, i(d.stop_after), "end this invocation after step N (continue with --resume)"},
      {"log-every", FlagType::Int, i(d.log_every), "a `step N` line on stdout every N steps (0: none)"},
      {"threads", FlagType::Int, "0", "compute threads (0: all cores or TOY_THREADS); results do not depend on it"},
      {"runs-dir", FlagType::Path, d.runs_dir, "where run bundles go"},
      {"run-id", FlagType::String, "", "name of the run directory (default: <UTC date>-<time>-vit)"},
      {"resume", FlagType::Path, "", "continue the run in this bundle directory from its newest checkpoint"},
  };
}

}  // namespace

int train_vit(const Args& a) {
  if (launched_size() > 1)  // N copies would write one bundle; only the LM recipes share steps (docs/distributed.md)
    throw UsageError("a vit run trains in one process: run it without mpirun");
  const std::string resume = a.str("resume");
  if (a.integer("seed") < 0) throw UsageError("--seed must be ≥ 0");
  nlohmann::json j;
  try {
    j = recipes::to_json(resume.empty() ? kDefaults : recipes::load_vit_run_config(resume));
  } catch (const DataError& e) {
    throw InputError(e.what());
  }
  if (!resume.empty()) j["stop-after"] = 0, j["threads"] = 0;  // per invocation, not per run
  for (const Flag& f : train_flags()) {
    if (kNotSettings.count(f.name) || (!resume.empty() && !a.has(f.name))) continue;
    if (!resume.empty() && !kResumable.count(f.name))
      throw UsageError("--" + f.name +
                       " cannot be changed when resuming (resumable: --stop-after, --threads, --log-every)");
    if (f.type == FlagType::Int)
      j[f.name] = a.integer(f.name);
    else if (f.type == FlagType::Float)
      j[f.name] = a.number(f.name);
    else
      j[f.name] = a.str(f.name);
  }
  mallopt(M_MMAP_MAX, 0);  // the same buffers every step: keep freed memory for reuse (as cmd_train.cpp)
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  struct sigaction sa {};
  sa.sa_handler = request_vit_stop;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const recipes::RunOutput io{.out = stdout, .err = stderr, .progress = false, .stop = &g_stop};
  try {
    const auto r = recipes::train_vit(recipes::vit_config_from_json(j), io, resume);
    std::fprintf(stderr, "run bundle: %s\n", r.run_dir.c_str());
    return r.interrupted ? kInterrupted : kOk;
  } catch (const recipes::ConfigError& e) {
    throw UsageError(e.what());
  } catch (const DataError& e) {
    throw InputError(e.what());
  } catch (const IdxError& e) {
    throw InputError(e.what());
  }
}

namespace {

Registrar reg({
    .name = "train-vit",
    .summary = "train a ViT image classifier on Fashion-MNIST (also: toy train vit) and write a run bundle",
    .positionals = {},
    .flags = train_flags(),
    .run = train_vit,
    .details = "prints `step N: loss=X acc=Y` every --log-every steps and `eval N: test_loss=X accuracy=Y`;\n"
               "writes runs/<id>/{config.json,events.jsonl,weights/step-N.gguf,weights/final.gguf,loss.svg,\n"
               "accuracy.svg,confusion.txt,confusion.svg} (docs/vit.md). Ctrl-C ends the run after the step in\n"
               "flight with a checkpoint.\n\n"
               "examples:\n"
               "  toy train vit --run-id fmnist            the defaults: >= 88% test accuracy (docs/vit.md)\n"
               "  toy train vit --train-images 2000 --steps 100 --test-images 500\n"
               "  toy train vit --resume runs/fmnist     (toy train --resume runs/fmnist: the same)",
});

std::unique_ptr<VitModel> load_vit(const Args& a) {
  if (!model_given(a)) throw UsageError("give a vit model file (MODEL or -m)");
  return VitModel::load(gguf::GgufFile::open(model_argument(a)));  // GgufError: exit 3
}

ImageSet test_split(const std::string& dir) {
  try {
    return read_image_set(dir, "t10k", 10);
  } catch (const IdxError& e) {
    throw InputError(e.what());
  }
}

}  // namespace

std::vector<Flag> vit_eval_flags() {
  return {{"images", FlagType::Path, "",
           std::string("a vit model: accuracy on the IDX test split in this directory (e.g. ") + kDataDir + ")"},
          {"n-images", FlagType::Int, "0", "--images: only the first N test images (0: all)"}};
}

std::vector<Flag> vit_infer_flags() {
  return {{"image", FlagType::String, "",
           "a vit model: classify this PNG or PGM file, or the test image of this index in --images"},
          {"images", FlagType::Path, kDataDir, "--image INDEX: the directory of the IDX test split"}};
}

int eval_vit(const Args& a) {
  apply_threads(a);
  const long long n = a.integer("n-images");
  if (n < 0) throw UsageError("--n-images must be ≥ 0");
  std::unique_ptr<VitModel> m = load_vit(a);
  const ImageSet test = test_split(a.str("images"));
  if (test.rows != m->hparams().image_size || test.cols != m->hparams().image_size)
    throw InputError(a.str("images") + ": the images are not of the model's size");
  const recipes::VitEval e = recipes::evaluate_vit(*m, test, n);
  if (a.flag("json")) {
    nlohmann::ordered_json j = {{"accuracy", e.accuracy}, {"n", e.n}, {"loss", e.loss}};
    const int64_t K = m->hparams().n_class;
    for (int64_t t = 0; t < K; ++t)
      j["confusion"].push_back(std::vector<int64_t>(e.confusion.begin() + t * K, e.confusion.begin() + (t + 1) * K));
    std::cout << json_text(j) << "\n";
    return kOk;
  }
  std::printf("accuracy %.4f on %lld images (mean cross-entropy %.4f)\n\n", e.accuracy, (long long)e.n, e.loss);
  std::cout << recipes::confusion_text(e, m->class_names());
  return kOk;
}

int infer_vit(const Args& a) {
  apply_threads(a);
  std::unique_ptr<VitModel> m = load_vit(a);
  const std::string what = a.str("image");
  ImageSet one;
  int64_t item = 0;
  if (!what.empty() && what.find_first_not_of("0123456789") == std::string::npos) {
    one = test_split(a.str("images"));
    item = what.size() > 9 ? one.n : std::stoll(what);
    if (item >= one.n)
      throw UsageError("--image " + what + ": the test split has images 0 … " + std::to_string(one.n - 1));
  } else {
    try {
      one = read_image(what);  // PNG or PGM
    } catch (const IdxError& e) {
      throw InputError(e.what());
    }
  }
  const int64_t S = m->hparams().image_size, K = m->hparams().n_class;
  if (one.rows != S || one.cols != S)
    throw InputError(what + ": a " + std::to_string(one.cols) + "×" + std::to_string(one.rows) +
                     " image; the model takes " + std::to_string(S) + "×" + std::to_string(S));
  NoGrad no_grad;
  const Tensor logits = m->forward(recipes::image_batch(one, {item}));  // [1, K]
  const float* z = logits.data();
  const float top = *std::max_element(z, z + K);
  std::vector<double> p(static_cast<size_t>(K));
  double sum = 0;
  for (int64_t k = 0; k < K; ++k) sum += p[size_t(k)] = std::exp(double(z[k] - top));
  std::vector<int64_t> order(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) order[size_t(k)] = k;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return p[size_t(x)] > p[size_t(y)]; });
  const long long k_shown = a.has("top-k") && a.integer("top-k") > 0 ? std::min<long long>(a.integer("top-k"), K) : 3;
  const std::vector<std::string>& names = m->class_names();  // K names, or none
  auto name = [&](int64_t k) { return k < int64_t(names.size()) ? names[size_t(k)].c_str() : ""; };
  if (what.find_first_not_of("0123456789") == std::string::npos)
    std::printf("test image %lld, labelled %d (%s)\n", (long long)item, one.labels[size_t(item)],
                name(one.labels[size_t(item)]));
  for (long long r = 0; r < k_shown; ++r) {
    const int64_t k = order[size_t(r)];
    std::printf("%6.2f%%  %lld %s\n", 100 * p[size_t(k)] / sum, (long long)k, name(k));
  }
  return kOk;
}

}  // namespace toy::cli
