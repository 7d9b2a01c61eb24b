// recipes/from_scratch.h — L5: train a Llama-architecture model from random weights (or from
// given weights) on a text corpus or a token-id file, and write a run bundle (engines/run_bundle.h).
//
// The loop, for s = first step … steps:
//   eval    when s is a multiple of eval_every, and at s = steps      (weights after s updates)
//   save    when s is a multiple of checkpoint_every, at stop_after and at s = steps
//   train   step s: batch s (train_data.h), forward, backward, clip, AdamW → "step s: loss=…"
// so "step s" always names the weights after s updates: the training loss printed for step s
// is that of batch s on those weights, before the update; checkpoint step-N holds N updates.
//
// Everything that decides the numbers (settings, data, seed) is in config.json, and every batch
// is a pure function of the step, so the same command gives the same losses and checkpoint
// bytes, and a run resumed from step-N continues exactly as if never stopped.
// Not here: flag parsing (cli/cmd_train.cpp), the training step itself (engines/train.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace toy::recipes {

// Settings that make no sense (d_model not divisible by n_head, lr ≤ 0, …): a usage error.
struct ConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct TrainRunConfig {
  std::string recipe = "from-scratch";
  // Model (from scratch; ignored with init_weights, whose file fixes the architecture).
  int64_t d_model = 128;  // e.g. 576
  int64_t n_layer = 4;    // e.g. 30
  int64_t n_head = 4;     // e.g. 9
  int64_t n_kv_head = 0;  // 0: = n_head; e.g. 3
  int64_t d_ff = 0;       // 0: = 3·d_model; e.g. 1536
  bool tied = true;       // output projection = token_embd
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  // Data.
  std::string corpus;           // UTF-8 text, tokenized once
  std::string tokenizer;        // GGUF with tokenizer.ggml.*; empty: from init_weights, else bytes
  std::string data_ids;         // little-endian int32 ids instead of a corpus
  std::string eval_ids;         // held-out ids for data_ids runs (optional)
  std::string init_weights;     // start from this GGUF instead of random weights
  double eval_fraction = 0.05;  // last part of the corpus held out
  int64_t eval_batches = 8;     // batches of held-out windows per evaluation
  // Optimisation.
  int64_t context = 128;  // T
  int64_t batch = 16;     // B
  int64_t steps = 1000;
  float lr = 1e-3f;
  std::string schedule = "cosine";  // or "constant"
  int64_t warmup = 0;
  float min_lr_ratio = 0.1f;  // cosine floor, as a fraction of lr
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  float clip = 1.0f;  // 0: no clipping
  uint64_t seed = 0;  // weights and batch sampling
  // Run control (do not change the numbers).
  int64_t eval_every = 100;        // 0: only at the end
  int64_t checkpoint_every = 500;  // 0: only at the end
  int64_t stop_after = 0;          // > 0: end this invocation after that step (resume later)
  int threads = 0;                 // 0: the kernels' default
  std::string runs_dir = "runs";
  std::string run_id;  // empty: <UTC date>-<time>-<recipe>
};

nlohmann::ordered_json to_json(const TrainRunConfig& c);
// Reads config.json back; missing keys keep their defaults. Throws ConfigError on a bad type.
TrainRunConfig config_from_json(const nlohmann::json& j);
// Throws ConfigError naming the flag (--d-model, --lr, …) of the first nonsense setting.
void validate(const TrainRunConfig& c);
// Reads `<run_dir>/config.json`. Throws toy::DataError when it is missing or unreadable.
TrainRunConfig load_run_config(const std::string& run_dir);

struct RunOutput {
  std::FILE* out = stdout;  // "step N: loss=…" and "eval N: val_loss=…" lines
  std::FILE* err = stderr;  // summaries and warnings
  bool progress = false;    // a progress bar on `err` (the CLI: when it is a terminal)
};

struct RunResult {
  std::string run_dir;
  int64_t steps_done = 0;      // updates in the last checkpoint
  double last_loss = 0;        // training loss of the last step run
  double last_eval_loss = -1;  // of the last evaluation (-1: none)
  bool completed = false;      // reached `steps` (not stopped by stop_after)
};

// Runs a new training run, or continues the one in `resume_dir` from its newest checkpoint
// (then `c` is normally load_run_config(resume_dir), with --steps etc. changed as wanted).
// Throws ConfigError (usage), toy::DataError, gguf::GgufError or TokenizerError (bad input files)
// and std::runtime_error (I/O failures, a diverged loss).
RunResult train_run(const TrainRunConfig& c, const RunOutput& io, const std::string& resume_dir = "");

}  // namespace toy::recipes
