// recipes/run_config.h — L5: the settings of a training run, as `toy train` flags and as the
// bundle's config.json (one table of both, so they cannot drift), and their validation.
// Every recipe reads the same settings; a recipe ignores those that do not concern it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace toy::recipes {

// Settings that make no sense (d_model not divisible by n_head, lr ≤ 0, …): a usage error.
struct ConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct TrainRunConfig {
  std::string recipe = "from-scratch";
  // Model (from scratch; ignored with init_weights, whose file fixes the architecture).
  std::string arch = "llama";  // any registered architecture (architecture_names()), e.g. "gpt2"
  int64_t d_model = 128;       // e.g. 576
  int64_t n_layer = 4;         // e.g. 30
  int64_t n_head = 4;          // e.g. 9
  int64_t n_kv_head = 0;       // 0: = n_head; e.g. 3
  int64_t d_ff = 0;            // 0: 4·d_model for a GELU MLP (gpt2), else 3·d_model; e.g. 1536
  bool tied = true;            // output projection = token_embd
  float rope_base = 0;         // 0: the architecture's default (10000 for llama)
  float rms_eps = 0;           // norm epsilon (RMSNorm, or LayerNorm for gpt2); 0: the architecture's default
  int64_t n_expert = 0;        // mixture of experts (olmoe): experts per layer; 0: the architecture's default (8)
  int64_t n_expert_used = 0;   // experts each token uses (top-k); 0: the architecture's default (2)
  int64_t full_attention_interval = 0;  // hybrids (qwen35, qwen3next, dragon): layer ℓ attends when (ℓ + 1) % N == 0,
                                        // the others are Gated DeltaNet; 0: the architecture's default (4)
  bool differential = true;             // dragon: differential attention (false: plain softmax attention)
  bool ssmax = true;                    // dragon: Scalable-Softmax on the attention logits
  // Data.
  std::string corpus;           // UTF-8 text, tokenized once; empty (and no data_ids): default_corpus.h
  std::string tokenizer;        // GGUF with tokenizer.ggml.*; empty: from init_weights, else bytes
  std::string data_ids;         // little-endian int32 ids instead of a corpus
  std::string eval_ids;         // held-out ids for data_ids runs (optional)
  std::string data;             // JSONL fine-tuning examples (recipes/jsonl_data.h)
  bool mask_prompt = true;      // with data: the loss on the completions / assistant answers only
  std::string init_weights;     // start from this GGUF instead of random weights
  double eval_fraction = 0.05;  // last part of the corpus held out
  int64_t eval_batches = 8;     // batches of held-out windows per evaluation
  // LoRA (recipe "lora"): adapters on a frozen base (recipes/lora.h).
  std::string base;                                          // the frozen base model (GGUF, any dtype)
  std::string init_adapter;                                  // start from this adapter instead of A random, B zero
  std::string targets = "attn_q,attn_k,attn_v,attn_output";  // the weights adapted, in every layer
  int64_t rank = 8;                                          // r
  float alpha = 16.0f;                                       // W + (alpha/r)·B·A
  float dropout = 0.0f;                                      // on the adapter's input, while training
  // Warm-start (recipe "warm-start"): the donor's token embedding through a learned lens (recipes/warm_start.h).
  std::string donor;        // the model whose token embedding (any dtype) and tokenizer the new model takes over
  bool train_embd = false;  // token_embd = W + c·E·lens with W trained too (from zero); false: W = 0, frozen
  // Optimisation.
  int64_t context = 128;   // T
  int64_t batch = 16;      // B: sequences per micro-batch
  int64_t grad_accum = 1;  // micro-batches per update: an update sees batch·grad_accum sequences
  int64_t steps = 1000;
  float lr = 1e-3f;
  std::string schedule = "cosine";  // or "constant"
  int64_t warmup = 0;
  float min_lr_ratio = 0.1f;  // cosine floor, as a fraction of lr
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  float clip = 1.0f;  // 0: no clipping
  uint64_t seed = 0;  // weights and batch sampling
  // Output.
  std::string save_dtype = "F32";  // checkpoint model files as this llama.cpp file type: F16, Q8_0, Q4_K_M, …
  // Run control (do not change the numbers).
  int64_t log_every = 1;           // stdout `step N` lines at multiples of N and the last step
  int64_t eval_every = 100;        // 0: only at the end
  int64_t checkpoint_every = 500;  // 0: only at the end
  int64_t stop_after = 0;          // > 0: end this invocation after that step (resume later)
  int threads = 0;                 // 0: the kernels' default
  std::string runs_dir = "runs";
  std::string run_id;  // empty: <UTC date>-<time>-<recipe>
};

nlohmann::ordered_json to_json(const TrainRunConfig& c);
// For settings tables of other recipes (recipes/vit.h): a float as the shortest decimal that reads
// back as the same float (0.001, not 0.0010000000474974513); `v` = a JSON value of v's type (bool,
// string, integer in range, number), else ConfigError naming the key and the type it must have.
double json_number(float v);
template <class T>
void read_setting(const nlohmann::json& value, const char* key, T& v);
// Reads config.json back; missing keys keep their defaults. Throws ConfigError naming the key and
// the type it must have (`"lr" must be a number, got a string ("abc")`).
TrainRunConfig config_from_json(const nlohmann::json& j);
// True when `name` is one directory entry name: not empty, ".", "..", no '/', '\\' or control
// character, at most 255 bytes (a --run-id must not escape --runs-dir).
bool is_single_path_component(std::string_view name);
// Training tokens one update sees: batch · grad_accum · context.
inline int64_t tokens_per_step(const TrainRunConfig& c) { return c.batch * c.grad_accum * c.context; }
// Throws ConfigError naming the flag (--d-model, --lr, …) of the first nonsense setting.
void validate(const TrainRunConfig& c);
// Reads `<run_dir>/config.json`. Throws toy::DataError when it is missing, unreadable, not JSON
// or holds a value of the wrong type.
TrainRunConfig load_run_config(const std::string& run_dir);
// The "recipe" of `<run_dir>/config.json` (from-scratch, vit; "" when it names none), so that
// `toy train --resume DIR` continues a run with its own recipe. Throws as load_run_config.
std::string run_recipe(const std::string& run_dir);

}  // namespace toy::recipes
