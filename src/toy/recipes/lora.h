// recipes/lora.h — L5: LoRA fine-tuning on the Trainer. The base model (any architecture, any
// dtype) stays frozen and mapped, used in place: its weights carry low-rank terms (archs/lora.h)
// and only the adapters' A and B (F32), their gradients and AdamW's m and v are allocated. The
// gradient reaches the input of a frozen weight (dx = dy·W), never the weight itself.
//
//   toy train lora --base B.gguf [--init-adapter A0.gguf] --targets attn_q,attn_v --rank 8 --alpha 16 …
//
// Adapters start as PEFT's: A ~ U(−1/√n_in, 1/√n_in) (kaiming_uniform with a = √5), B = 0, so the
// first forward is the base's; or from --init-adapter, whose targets, rank and alpha then apply.
// Checkpoints are llama.cpp LoRA files: runs/<id>/adapters/step-N.gguf (+ step-N.optim.gguf),
// adapters/final.gguf. Everything else (data, optimizer, schedule, events, determinism) is the
// Trainer's; resuming a LoRA run is not supported yet.
#pragma once

#include <string>

#include "toy/recipes/run_config.h"
#include "toy/recipes/trainer.h"

namespace toy::recipes {

// Throws ConfigError (usage), toy::DataError / gguf::GgufError (bad input files) and
// std::runtime_error (I/O failures, a diverged loss), as train_run.
RunResult train_lora(const TrainRunConfig& c, const RunOutput& io, const std::string& resume_dir = "");

}  // namespace toy::recipes
