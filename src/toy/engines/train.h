// engines/train.h — L4: train a Model. One step is the model's own forward pass (the one
// inference runs, with Ctx{}: position 0, no cache), cross-entropy over every position,
// backward through the recorded graph, global-norm clipping and AdamW.
//
// Glossary: B batch, T tokens per sequence (the context), V n_vocab.
//
//   logits = model.forward(tokens, {})                        [B, T, V]
//   loss   = cross_entropy(logits.reshape([B·T, V]), targets) scalar, mean over B·T targets
//   loss.backward();  clip(global_norm);  AdamW(lr_at(schedule, step))
//
// Gradient accumulation (grad_accum = K): the batch's B rows are split into K micro-batches of
// B/K rows, each forward + backward gives the gradient g_k of its own mean loss, and
// ((g_0 + g_1) + …) + g_{K−1} is scaled by 1/K: the mean over all B·T targets, as one batch of B
// rows, with 1/K of the activation memory. Not bit-identical to the single batch (the weight
// gradients are summed per micro-batch first, a different float rounding order), the same within
// float rounding. Over N processes (distribute(), distributed.h) each computes K/N of the g_k and
// the group adds them in the same order: the same bits as one process.
//
// Not here: where batches come from (train_data.h), run bundles and the loop that drives steps
// (recipes/). Everything here is deterministic: the same model, batches and config give the same
// bits, whatever the thread count (the kernels reduce in a fixed order).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "toy/archs/model.h"
#include "toy/engines/distributed.h"
#include "toy/engines/optimizer.h"

namespace toy {

class Tokenizer;

// One batch: inputs and the token each input position must predict.
struct Batch {
  Tensor tokens;   // I32 [B, T]
  Tensor targets;  // I32 [B·T], targets[b·T + t] follows tokens[b, t]
};

// B sequences of T + 1 ids laid end to end (ids.size() == B·(T + 1)): sequence i is
// ids[i·(T+1), (i+1)·(T+1)); its inputs are its first T ids, its targets its last T.
// An id written as masked_id(id) (a prompt or padding token of a fine-tuning example) is the
// input `id` but not a counted target: its target is kIgnoreTarget.
Batch make_batch(std::span<const int32_t> ids, int64_t B, int64_t T);
// ~id (= −1 − id, negative): a token the loss does not predict. unmasked_id(masked_id(id)) == id.
constexpr int32_t masked_id(int32_t id) { return ~id; }
constexpr int32_t unmasked_id(int32_t id) { return id < 0 ? ~id : id; }

struct TrainConfig {
  Schedule schedule;       // learning rate: peak, warm-up, cosine or constant
  AdamWConfig adamw;       // betas, eps, weight decay
  float clip = 1.0f;       // max global gradient norm; 0 disables clipping
  int64_t grad_accum = 1;  // micro-batches per update; must divide the batch's rows
};

struct StepResult {
  double loss = 0;           // of this step's forward pass, before its update
  double grad_norm = 0;      // global L2 norm of the gradient, before clipping
  float lr = 0;              // learning rate used by the update
  float clip_scale = 1;      // factor the gradient was scaled by (1: not clipped)
  double exchange_wait = 0;  // seconds waited for the gradient exchange after the backward pass (N > 1)
};

// Replaces every parameter of `m` by an owned F32 copy that requires grad (mapped, F16 or
// quantized weights become trainable F32) and returns them in for_each_param order. A tied
// embedding is one parameter; its gradient collects both uses through the graph.
std::vector<Tensor> make_trainable(Model& m);

class TrainEngine {
 public:
  // Makes `m`'s parameters trainable; `m` must outlive the engine.
  TrainEngine(Model& m, TrainConfig c);
  // Trains only `params` (tensors that require grad, which `m`'s forward reads: LoRA adapters on
  // a frozen base); `m` itself is left as it is.
  TrainEngine(Model& m, TrainConfig c, std::vector<Tensor> params);

  // Forward, loss and backward (per micro-batch with grad_accum): leaves fresh gradients of the
  // mean loss over all of b's targets on params() and returns that loss.
  double forward_backward(const Batch& b);
  // Splits each batch's micro-batches over the processes of `g` (grad_accum must be a multiple
  // of g.size()); every process passes the whole batch and gets the same gradients and loss.
  void distribute(ProcessGroup& g) { group_ = &g; }
  // forward_backward, then clipping and one AdamW update at lr_at(schedule, steps()).
  StepResult step(const Batch& b);
  // Mean cross-entropy of a batch under NoGrad (no graph, no gradients).
  double evaluate(const Batch& b) const;

  int64_t steps() const { return opt_.steps(); }  // updates done so far
  Model& model() { return m_; }
  const std::vector<Tensor>& params() const { return params_; }
  AdamW& optimizer() { return opt_; }
  const TrainConfig& config() const { return c_; }

 private:
  Tensor loss_of(const Batch& b) const;
  Model& m_;
  TrainConfig c_;
  std::vector<Tensor> params_;
  AdamW opt_;
  ProcessGroup* group_ = &one_process();
};

struct ModelFileOptions {
  std::string_view file_type = "F32";  // a llama.cpp file type (io/file_type.h): "F16", "Q8_0", "Q4_K_M", …
  std::vector<std::pair<std::string, gguf::Value>> metadata;  // more keys (general.base_model.*, …)
};

// Writes the model as a standard GGUF: its metadata (general.architecture, <arch>.* hyper-
// parameters), `general.name`, general.file_type, the tokenizer's `tokenizer.ggml.*` keys when
// one is given, o.metadata, and every parameter under its GGUF name, in the dtype the file type
// gives it (F32 by default; 1-D tensors always F32); a weight with low-rank terms folded into
// W + Σ scale·B·A (warm-start's token_embd = W + c·E·lens). Atomic (tmp + rename). No optimizer state:
// the file is what llama.cpp and `toy infer` load. Throws std::invalid_argument for an unknown
// file type.
void write_model_gguf(Model& m, const Tokenizer* tok, const std::string& path, const std::string& name,
                      const ModelFileOptions& o = {});

// The optimizer state beside a checkpoint (`step-N.optim.gguf`): AdamW's m, v and t, plus the
// caller's keys (the data position, the seed, ...), and with `weights` the F32 parameters (when
// the model file is quantized). Atomic.
void write_optimizer_gguf(const AdamW& opt, const std::string& path,
                          const std::vector<std::pair<std::string, gguf::Value>>& extra, bool weights = false);

}  // namespace toy
