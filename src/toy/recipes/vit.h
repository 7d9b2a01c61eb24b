// recipes/vit.h — L5: training a ViT classifier on labelled images (Fashion-MNIST by default),
// with the run bundle of the LM recipes (engines/run_bundle.h: config.json, events.jsonl,
// weights/step-N.gguf + .optim.gguf, final.gguf, loss.svg), resume and determinism.
//
// Step s trains on batch s: images [s·B, (s+1)·B) of epoch e = s / steps_per_epoch in that
// epoch's order, a shuffle drawn from (seed, e) alone. So every batch is a pure function of the
// step, the same command gives the same bits, and a run resumed from step-N continues as if never
// stopped. The LM recipes' Trainer is not used: its data are token windows and its loss is per
// token; the pieces below it (AdamW, the schedule, clipping, the bundle's files) are shared.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "toy/archs/vit.h"
#include "toy/io/idx.h"
#include "toy/recipes/trainer.h"

namespace toy::recipes {

struct VitRunConfig {
  std::string recipe = "vit";
  // Model.
  int64_t patch = 7;     // P, e.g. 7 (16 patches of a 28×28 image)
  int64_t d_model = 64;  // e.g. 64
  int64_t n_layer = 4;   // e.g. 4
  int64_t n_head = 4;    // e.g. 4
  int64_t d_ff = 128;    // e.g. 128
  // Data: <data>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
  std::string data = "/usr/share/datasets/fashion-mnist";
  int64_t train_images = 0;  // > 0: only the first n training images (a quick run)
  int64_t test_images = 0;   // > 0: evaluate on the first n test images only
  // Optimisation.
  int64_t epochs = 12;  // with steps = 0: steps = epochs · ⌊n_train / batch⌋
  int64_t steps = 0;    // > 0: this many steps instead
  int64_t batch = 128;
  float lr = 2e-3f;
  std::string schedule = "cosine";  // or "constant"
  int64_t warmup = 200;
  float min_lr_ratio = 0.01f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.05f;
  float clip = 1.0f;  // 0: no clipping
  // Augmentation (off by default: with flip 0.5 and shift 2 the default model reached 85.4%
  // against 87.9% without, docs/vit.md): each training image is mirrored left–right with
  // probability `flip` and moved by up to ± `shift` pixels each way (zero fill).
  float flip = 0.0f;
  int64_t shift = 0;
  uint64_t seed = 0;  // weights and the shuffles
  // Run control (do not change the numbers).
  int64_t eval_every = 0;        // 0: only at the end
  int64_t checkpoint_every = 0;  // 0: only at the end
  int64_t stop_after = 0;        // > 0: end this invocation after that step
  int64_t log_every = 50;        // a `step N` line on stdout every N steps
  int threads = 0;
  std::string runs_dir = "runs";
  std::string run_id;
};

nlohmann::ordered_json to_json(const VitRunConfig& c);
VitRunConfig vit_config_from_json(const nlohmann::json& j);  // ConfigError naming a key of the wrong type
void validate(const VitRunConfig& c);                        // ConfigError naming the flag
VitHparams vit_hparams(const VitRunConfig& c);               // the model's shape (28×28 grey, 10 classes)

// The model's input for items `items` of s: pixels / 255.  -> F32 [n, 1, rows, cols]
Tensor image_batch(const ImageSet& s, const std::vector<int64_t>& items);
// The training batch of step `step`, augmented: image i is mirrored left–right with probability
// `flip` and moved by (dy, dx), each uniform in [−shift, shift], pixels moved in from outside
// being 0. The draws come from (seed, step) alone, in the batch's order: the same images whatever
// the thread count, and again after a resume.  -> F32 [n, 1, rows, cols]
Tensor augmented_batch(const ImageSet& s, const std::vector<int64_t>& items, float flip, int64_t shift, uint64_t seed,
                       int64_t step);

struct VitEval {
  int64_t n = 0;                   // images evaluated
  double loss = 0, accuracy = 0;   // mean cross-entropy, fraction right
  std::vector<int64_t> confusion;  // [K, K]: row = true class, column = predicted
};
// The model on the first n images of s (0: all), `batch` at a time, without gradients.
VitEval evaluate_vit(const VitModel& m, const ImageSet& s, int64_t n = 0, int64_t batch = 500);

// The text of a confusion matrix, rows true classes, columns predictions, with class names.
std::string confusion_text(const VitEval& e, const std::vector<std::string>& class_names);
// Fashion-MNIST's class names, by label.
const std::vector<std::string>& fashion_mnist_classes();

struct VitRunResult {
  std::string run_dir;
  int64_t steps_done = 0;
  double last_loss = 0;
  VitEval test{};  // at the end of this invocation
  bool completed = false, interrupted = false;
};
// Trains a new run (resume_dir empty) or continues the bundle resume_dir (its config.json, with
// c's stop_after, threads and log_every). Throws ConfigError (usage), IdxError, DataError,
// gguf::GgufError (bad input) and std::runtime_error (I/O, a diverged loss).
VitRunResult train_vit(const VitRunConfig& c, const RunOutput& io, const std::string& resume_dir);
// Reads `<run_dir>/config.json`. Throws DataError when it is missing or invalid.
VitRunConfig load_vit_run_config(const std::string& run_dir);

}  // namespace toy::recipes
