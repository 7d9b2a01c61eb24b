// cli/cmd_train.cpp — `toy train RECIPE`: train a model and write a run bundle (docs/training.md).
//
// The flags are the settings of recipes::TrainRunConfig under the same names (config.json
// uses them as keys), so the table below, --help, --manifest and config.json cannot drift.
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "cli/cli.h"
#include "cli/vit.h"
#include "toy/engines/train_data.h"
#include "toy/recipes/from_scratch.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::cli {
namespace {

using recipes::TrainRunConfig;

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

const TrainRunConfig kDefaults;

// Settings a resumed run may change: they decide how long and how observed, not the numbers.
const std::set<std::string> kResumable = {"steps",      "eval-every", "checkpoint-every",
                                          "stop-after", "threads",    "eval-batches"};
// Flags that are not settings.
const std::set<std::string> kNotSettings = {"resume", "untied", "no-progress"};

// Ctrl-C (SIGINT) or SIGTERM: the run ends after the step in flight with a checkpoint (exit 130);
// a second one ends the process at once, as main()'s handler does.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void request_stop(int) {
  if (g_stop.exchange(true)) std::_Exit(kInterrupted);
}

void stop_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = request_stop;
  sa.sa_flags = SA_RESTART;  // let the step in flight finish its reads and writes
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::vector<Flag> flags() {
  const TrainRunConfig& d = kDefaults;
  return {
      // data
      {"corpus", FlagType::Path, "", "UTF-8 text to train on (tokenized once; the last --eval-fraction held out)"},
      {"tokenizer", FlagType::Path, "",
       "GGUF file whose tokenizer.ggml.* vocabulary to use (default: that of --init-weights, else byte-level: 260 "
       "tokens)"},
      {"data-ids", FlagType::Path, "",
       "little-endian int32 token ids instead of --corpus: step s reads the s-th block of batch*(context+1) ids"},
      {"eval-ids", FlagType::Path, "", "held-out int32 ids to evaluate on (with --data-ids)"},
      {"init-weights", FlagType::Path, "",
       "start from this GGUF model (its architecture and shapes) instead of random weights"},
      {"eval-fraction", FlagType::Float, num(d.eval_fraction),
       "fraction of the corpus held out for evaluation (0: none)"},
      {"eval-batches", FlagType::Int, std::to_string(d.eval_batches), "held-out batches per evaluation"},
      // model
      {"d-model", FlagType::Int, std::to_string(d.d_model), "model width d_model"},
      {"layers", FlagType::Int, std::to_string(d.n_layer), "number of layers n_layer"},
      {"heads", FlagType::Int, std::to_string(d.n_head), "attention heads n_head (must divide d-model)"},
      {"kv-heads", FlagType::Int, std::to_string(d.n_kv_head),
       "key/value heads n_kv_head, must divide heads (0: = heads)"},
      {"ff", FlagType::Int, std::to_string(d.d_ff), "feed-forward width d_ff (0: 3 x d-model)"},
      {"untied", FlagType::Bool, "", "give the output projection its own weights (default: tied to token_embd)"},
      {"rope-base", FlagType::Float, num(d.rope_base), "RoPE base frequency"},
      {"rms-eps", FlagType::Float, num(d.rms_eps), "RMSNorm epsilon"},
      // optimisation
      {"context", FlagType::Int, std::to_string(d.context), "tokens per training sequence T"},
      {"batch", FlagType::Int, std::to_string(d.batch), "sequences per step B"},
      {"steps", FlagType::Int, std::to_string(d.steps), "optimizer steps"},
      {"lr", FlagType::Float, num(d.lr), "peak learning rate"},
      {"schedule", FlagType::String, d.schedule,
       "learning-rate schedule after warm-up: cosine (down to --min-lr-ratio x lr at --steps) or constant"},
      {"warmup", FlagType::Int, std::to_string(d.warmup), "steps of linear learning-rate warm-up"},
      {"min-lr-ratio", FlagType::Float, num(d.min_lr_ratio), "cosine floor as a fraction of --lr"},
      {"beta1", FlagType::Float, num(d.beta1), "AdamW beta1"},
      {"beta2", FlagType::Float, num(d.beta2), "AdamW beta2"},
      {"eps", FlagType::Float, num(d.eps), "AdamW epsilon (added after the square root)"},
      {"weight-decay", FlagType::Float, num(d.weight_decay), "AdamW decoupled weight decay, on 2-D weights only"},
      {"clip", FlagType::Float, num(d.clip), "clip the global gradient norm to this (0: no clipping)"},
      {"seed", FlagType::Int, std::to_string(d.seed), "seed of the initial weights and of batch sampling"},
      // run
      {"eval-every", FlagType::Int, std::to_string(d.eval_every),
       "evaluate on held-out data every N steps (0: only at the end)"},
      {"checkpoint-every", FlagType::Int, std::to_string(d.checkpoint_every),
       "write weights/step-N.gguf every N steps (0: only at the end)"},
      {"stop-after", FlagType::Int, std::to_string(d.stop_after),
       "end this invocation after step N with a checkpoint (continue with --resume)"},
      {"threads", FlagType::Int, "0", "compute threads (0: all cores or TOY_THREADS); results do not depend on it"},
      {"runs-dir", FlagType::Path, d.runs_dir, "where run bundles go"},
      {"run-id", FlagType::String, "", "name of the run directory (default: <UTC date>-<time>-<recipe>)"},
      {"resume", FlagType::Path, "", "continue the run in this bundle directory from its newest checkpoint"},
      {"no-progress", FlagType::Bool, "", "no progress bar (it is shown only when stderr is a terminal)"},
  };
}

int run(const Args& a) {
  const std::string resume = a.str("resume");
  const auto recipe = a.positional(0);
  if (!recipe && resume.empty()) throw UsageError("'toy train' needs RECIPE (from-scratch) or --resume DIR");
  if (recipe && *recipe != "from-scratch")
    throw UsageError("unknown recipe '" + *recipe + "' (recipes: from-scratch, vit)");
  if (a.integer("seed") < 0) throw UsageError("--seed must be ≥ 0");

  nlohmann::json j;
  try {
    if (!recipe && !resume.empty() && recipes::run_recipe(resume) == "vit") {  // its own flags: cmd_vit.cpp
      for (const Flag& f : flags())
        if (a.has(f.name) && f.name != "resume" && f.name != "stop-after" && f.name != "threads")
          throw UsageError("--" + f.name + " is not a setting of a vit run (resuming one: --stop-after, --threads)");
      return train_vit(a);
    }
    if (!resume.empty()) j = recipes::to_json(recipes::load_run_config(resume));
  } catch (const DataError& e) {
    throw InputError(e.what());
  }
  if (resume.empty()) {
    j = recipes::to_json(kDefaults);
    j["tied"] = !a.flag("untied");
  } else {
    j["stop-after"] = 0;  // per invocation, not per run
    j["threads"] = 0;
    if (a.has("untied")) throw UsageError("--untied cannot be changed when resuming (config.json fixes it)");
  }
  for (const Flag& f : flags()) {
    if (kNotSettings.count(f.name)) continue;
    if (!resume.empty()) {
      if (!a.has(f.name)) continue;
      if (!kResumable.count(f.name))
        throw UsageError("--" + f.name +
                         " cannot be changed when resuming (the run's config.json fixes it; resumable: --steps, "
                         "--eval-every, --checkpoint-every, --stop-after, --threads, --eval-batches)");
    }
    switch (f.type) {
      case FlagType::Int:
        j[f.name] = a.integer(f.name);
        break;
      case FlagType::Float:
        j[f.name] = a.number(f.name);
        break;
      default:
        j[f.name] = a.str(f.name);
        break;
    }
  }
  if (recipe) j["recipe"] = *recipe;
  if (!a.str("init-weights").empty())
    for (const char* f : {"d-model", "layers", "heads", "kv-heads", "ff", "untied", "rope-base", "rms-eps"})
      if (a.has(f)) std::fprintf(stderr, "warning: --%s is ignored: the shapes come from --init-weights\n", f);

  // Training frees and re-allocates the same large buffers every step: keep freed memory in the
  // heap for reuse instead of returning it to the kernel (and faulting it back in, zeroed).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  stop_on_signals();
  recipes::RunOutput io{
      .out = stdout, .err = stderr, .progress = !a.flag("no-progress") && ::isatty(2), .stop = &g_stop};
  try {
    if (recipes::train_run(recipes::config_from_json(j), io, resume).interrupted) return kInterrupted;
  } catch (const recipes::ConfigError& e) {
    throw UsageError(e.what());
  } catch (const DataError& e) {
    throw InputError(e.what());
  } catch (const TokenizerError& e) {
    throw InputError(std::string("tokenizer: ") + e.what());
  }
  return kOk;
}

Registrar reg({
    .name = "train",
    .summary = "train a model from scratch (or from given weights) and write a run bundle",
    .positionals = {{"RECIPE",
                     "from-scratch (optional with --resume, which continues a vit run too); vit has flags of its own: "
                     "toy train vit --help",
                     /*required=*/false}},
    .flags = flags(),
    .run = run,
    .details = "prints `step N: loss=X` for every step (the loss before update N) and `eval N: val_loss=X` on stdout;\n"
               "writes runs/<id>/{config.json,events.jsonl,weights/step-N.gguf,loss.svg} (docs/training.md).\n"
               "Ctrl-C or SIGTERM ends the run after the step in flight with a checkpoint (exit 130; continue\n"
               "with --resume); a second one ends it at once.\n\n"
               "examples:\n"
               "  toy train from-scratch --corpus ../shared/corpora/tinystories_sample.txt --tokenizer model.gguf \\\n"
               "      --d-model 128 --layers 4 --heads 4 --kv-heads 2 --ff 384 --context 128 --batch 16 --steps 2000 "
               "--warmup 100\n"
               "  toy train --resume runs/20261130-034501-from-scratch --steps 4000",
});

}  // namespace
}  // namespace toy::cli
