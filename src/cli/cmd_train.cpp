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
#include "toy/engines/distributed.h"
#include "toy/engines/train_data.h"
#include "toy/recipes/from_scratch.h"
#include "toy/recipes/lora.h"
#include "toy/recipes/warm_start.h"
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
const std::set<std::string> kResumable = {"steps",      "log-every", "eval-every",  "checkpoint-every",
                                          "stop-after", "threads",   "eval-batches"};
// Flags that are not settings.
const std::set<std::string> kNotSettings = {"resume",      "untied",          "no-mask-prompt", "train-embd",
                                            "no-progress", "no-differential", "no-ssmax"};

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
      {"corpus", FlagType::Path, "",
       "UTF-8 text to train on (tokenized once; the last --eval-fraction held out); default, without --data-ids: "
       "the built-in 200 KB of Tiny Shakespeare (public domain)"},
      {"tokenizer", FlagType::Path, "",
       "GGUF file whose tokenizer.ggml.* vocabulary to use (default: that of --init-weights, else byte-level: 260 "
       "tokens)"},
      {"data-ids", FlagType::Path, "",
       "little-endian int32 token ids instead of --corpus: step N reads the N-th block of batch*grad-accum*(context+1) "
       "ids"},
      {"eval-ids", FlagType::Path, "", "held-out int32 ids to evaluate on (with --data-ids)"},
      {"data", FlagType::Path, "",
       "JSONL fine-tuning examples: {\"text\"}, {\"prompt\", \"completion\"} or chat {\"messages\"} lines "
       "(docs/training.md); the last --eval-fraction held out"},
      {"no-mask-prompt", FlagType::Bool, "",
       "with --data: count the loss on the prompts too (default: on the completions / last assistant message only)"},
      {"init-weights", FlagType::Path, "",
       "start from this GGUF model (its architecture and shapes) instead of random weights"},
      // lora
      {"base", FlagType::Path, "", "lora: the frozen base model (GGUF, any architecture and dtype, used in place)"},
      {"init-adapter", FlagType::Path, "",
       "lora: start from this adapter (llama.cpp LoRA GGUF; its targets, rank and alpha apply)"},
      {"targets", FlagType::String, d.targets,
       "lora: the weights adapted in every layer (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down, "
       "...)"},
      {"rank", FlagType::Int, std::to_string(d.rank), "lora: rank r of each adapter"},
      {"alpha", FlagType::Float, num(d.alpha), "lora: W + (alpha/r)·B·A"},
      {"dropout", FlagType::Float, num(d.dropout), "lora: dropout on the adapters' input while training"},
      // warm-start
      {"donor", FlagType::Path, "",
       "warm-start: the model whose token embedding (any dtype, through a learned lens) and tokenizer the new "
       "model takes over"},
      {"train-embd", FlagType::Bool, "",
       "warm-start: also train a token embedding of the new model's own, added to the lensed donor's (starts at "
       "zero)"},
      {"eval-fraction", FlagType::Float, num(d.eval_fraction),
       "fraction of the corpus held out for evaluation (0: none)"},
      {"eval-batches", FlagType::Int, std::to_string(d.eval_batches), "held-out batches per evaluation"},
      // model
      {"arch", FlagType::String, d.arch,
       "architecture of the new model: any toy runs (" + architecture_names() +
           "); the flags below become its hyper-parameters"},
      {"d-model", FlagType::Int, std::to_string(d.d_model), "model width d_model"},
      {"layers", FlagType::Int, std::to_string(d.n_layer), "number of layers n_layer"},
      {"heads", FlagType::Int, std::to_string(d.n_head), "attention heads n_head (must divide d-model)"},
      {"kv-heads", FlagType::Int, std::to_string(d.n_kv_head),
       "key/value heads n_kv_head, must divide heads (0: = heads)"},
      {"ff", FlagType::Int, std::to_string(d.d_ff), "feed-forward width d_ff (0: 4 x d-model for gpt2, else 3 x)"},
      {"untied", FlagType::Bool, "", "give the output projection its own weights (default: tied to token_embd)"},
      {"rope-base", FlagType::Float, num(d.rope_base), "RoPE base frequency (0: the architecture's, e.g. 10000)"},
      {"rms-eps", FlagType::Float, num(d.rms_eps),
       "norm epsilon, RMSNorm or LayerNorm (0: the architecture's, e.g. 1e-5 for llama)"},
      {"experts", FlagType::Int, std::to_string(d.n_expert),
       "experts per layer of a mixture-of-experts architecture (olmoe; 0: its default, 8)"},
      {"experts-used", FlagType::Int, std::to_string(d.n_expert_used),
       "experts each token is routed to, top-k (olmoe; 0: its default, 2)"},
      {"full-attention-interval", FlagType::Int, std::to_string(d.full_attention_interval),
       "the layer pattern of a Gated DeltaNet hybrid (qwen35, qwen3next, dragon; GGUF full_attention_interval): "
       "layer l is attention when (l + 1) % N == 0, the others Gated DeltaNet (0: its default, 4: three Gated "
       "DeltaNet layers, then attention)"},
      {"no-differential", FlagType::Bool, "",
       "dragon: plain softmax attention instead of differential attention (attention.differential = 0)"},
      {"no-ssmax", FlagType::Bool, "",
       "dragon: the attention logits without Scalable-Softmax's s·log n scale (attention.ssmax = 0)"},
      // optimisation
      {"context", FlagType::Int, std::to_string(d.context), "tokens per training sequence T"},
      {"batch", FlagType::Int, std::to_string(d.batch), "sequences per step B (per micro-batch with --grad-accum)"},
      {"grad-accum", FlagType::Int, std::to_string(d.grad_accum),
       "micro-batches of --batch sequences per update: the result of a batch N times larger, in 1/N of the memory; "
       "under mpirun -np P shared out over the P processes (a multiple of P; docs/distributed.md)"},
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
      // output
      {"save-dtype", FlagType::String, d.save_dtype,
       "write checkpoint models as this llama.cpp file type (F32, F16, BF16, Q8_0, Q4_0, Q6_K, Q4_K_M, ...; "
       "the exact F32 weights then go into the .optim.gguf for --resume)"},
      // run
      {"log-every", FlagType::Int, std::to_string(d.log_every),
       "print the stdout `step N: loss=X` line every N steps (and the last step); events.jsonl has every step"},
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
  if (recipe && *recipe != "from-scratch" && *recipe != "warm-start" && *recipe != "lora")
    throw UsageError("unknown recipe '" + *recipe + "' (recipes: from-scratch, warm-start, lora, vit)");
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
    j["mask-prompt"] = !a.flag("no-mask-prompt");
    j["train-embd"] = a.flag("train-embd");
    j["differential"] = !a.flag("no-differential");
    j["ssmax"] = !a.flag("no-ssmax");
  } else {
    j["stop-after"] = 0;  // per invocation, not per run
    j["threads"] = 0;
    for (const char* f : {"untied", "no-mask-prompt", "train-embd", "no-differential", "no-ssmax"})
      if (a.has(f)) throw UsageError(std::string("--") + f + " cannot be changed when resuming (config.json fixes it)");
  }
  for (const Flag& f : flags()) {
    if (kNotSettings.count(f.name)) continue;
    if (!resume.empty()) {
      if (!a.has(f.name)) continue;
      if (!kResumable.count(f.name))
        throw UsageError("--" + f.name +
                         " cannot be changed when resuming (the run's config.json fixes it; resumable: --steps, "
                         "--log-every, --eval-every, --checkpoint-every, --stop-after, --threads, --eval-batches)");
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
    for (const char* f : {"arch", "d-model", "layers", "heads", "kv-heads", "ff", "untied", "rope-base", "rms-eps",
                          "experts", "experts-used", "full-attention-interval", "no-differential", "no-ssmax"})
      if (a.has(f)) std::fprintf(stderr, "warning: --%s is ignored: the shapes come from --init-weights\n", f);
  if (!a.str("init-adapter").empty())
    for (const char* f : {"targets", "rank", "alpha"})
      if (a.has(f)) std::fprintf(stderr, "warning: --%s is ignored: --init-adapter gives it\n", f);

  // Training frees and re-allocates the same large buffers every step: keep freed memory in the
  // heap for reuse instead of returning it to the kernel (and faulting it back in, zeroed).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  stop_on_signals();
  recipes::RunOutput io{
      .out = stdout, .err = stderr, .progress = !a.flag("no-progress") && ::isatty(2), .stop = &g_stop};
  try {
    const TrainRunConfig c = recipes::config_from_json(j);
    ProcessGroup* world = nullptr;
    try {
      world = &toy::world();  // mpirun: the other ranks (docs/distributed.md)
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
    io.world = world;
    if (world->rank() != 0) {  // rank 0 reports; the others print only their errors
      static std::FILE* null = std::fopen("/dev/null", "w");
      if (null) io.out = io.err = null;
      io.progress = false;
    }
    const auto result = c.recipe == "lora"         ? recipes::train_lora(c, io, resume)
                        : c.recipe == "warm-start" ? recipes::train_warm_start(c, io, resume)
                                                   : recipes::train_run(c, io, resume);
    leave_world();
    if (result.interrupted) return kInterrupted;
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
    .positionals =
        {{"RECIPE",
          "from-scratch, warm-start or lora (optional with --resume, which continues a vit run too); vit has flags "
          "of its own: toy train vit --help",
          /*required=*/false}},
    .flags = flags(),
    .run = run,
    .details = "prints `step N: loss=X` for every step (steps count from 1: the loss before update N) and\n"
               "`eval N: val_loss=X` (after N updates) on stdout;\n"
               "writes runs/<id>/{config.json,events.jsonl,weights/step-N.gguf,loss.svg} (docs/training.md).\n"
               "Ctrl-C or SIGTERM ends the run after the step in flight with a checkpoint (exit 130; continue\n"
               "with --resume); a second one ends it at once.\n"
               "Under mpirun -np P the processes share each step's --grad-accum micro-batches and give the\n"
               "same bits as one process; rank 0 writes the bundle (docs/distributed.md).\n\n"
               "examples:\n"
               "  toy train from-scratch --corpus ../shared/corpora/tinystories_sample.txt --tokenizer model.gguf \\\n"
               "      --d-model 128 --layers 4 --heads 4 --kv-heads 2 --ff 384 --context 128 --batch 16 --steps 2000 "
               "--warmup 100\n"
               "  toy train --resume runs/20261130-034501-from-scratch --steps 4000",
});

}  // namespace
}  // namespace toy::cli
