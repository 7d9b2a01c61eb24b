// recipes/from_scratch.h — L5: train a model of any registered architecture (--arch) from random
// weights (or from given weights) on a text corpus or a token-id file, and write a run bundle (engines/run_bundle.h).
// The loop, its bundle and what it reports are the Trainer's (trainer.h, observers.h); this
// recipe contributes the initial model.
// Not here: flag parsing (cli/cmd_train.cpp), the settings (run_config.h), the training step
// itself (engines/train.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "toy/archs/model.h"
#include "toy/recipes/run_config.h"
#include "toy/recipes/trainer.h"

namespace toy::recipes {

// The shape of a new c.arch model the settings give (ConfigError for an unknown architecture).
ModelShape model_shape(const TrainRunConfig& c, int64_t n_vocab);
// A c.arch model with random weights (seeded by c.seed) of that shape. Throws ConfigError.
std::unique_ptr<Model> build_model(const TrainRunConfig& c, int64_t n_vocab);

// Runs a new training run, or continues the one in `resume_dir` from its newest checkpoint
// (then `c` is normally load_run_config(resume_dir), with --steps etc. changed as wanted).
// Throws ConfigError (usage), toy::DataError, gguf::GgufError or TokenizerError (bad input files)
// and std::runtime_error (I/O failures, a diverged loss).
RunResult train_run(const TrainRunConfig& c, const RunOutput& io, const std::string& resume_dir = "");

}  // namespace toy::recipes
