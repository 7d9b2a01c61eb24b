// archs/lora.h — L3: LoRA adapters in llama.cpp's GGUF format, checked against a base model and
// applied to it at run time (primitives.h: a weight carries low-rank terms that linear() adds).
//
// The file (llama.cpp src/llama-adapter.cpp):
//   general.architecture = the base's, general.type = "adapter", adapter.type = "lora",
//   adapter.lora.alpha (f32; 0 or absent: the scale is the user's scale alone)
//   <base tensor name>.lora_a  ggml ne [n_in, r]   (toy shape [r, n_in])
//   <base tensor name>.lora_b  ggml ne [r, n_out]  (toy shape [n_out, r])
// and a weight W [n_out, n_in] becomes W + scale·(alpha/r)·B·A.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "toy/archs/model.h"

namespace toy {

struct LoraPair {
  Tensor A;  // [r, n_in]
  Tensor B;  // [n_out, r]
};

struct LoraAdapter {
  std::string path;                            // where it was read from (for messages)
  std::string arch;                            // general.architecture, e.g. "llama"
  float alpha = 0;                             // adapter.lora.alpha; 0: scale = the user's scale
  int64_t rank = 0;                            // r, the same for every pair
  std::map<std::string, LoraPair> pairs;       // base tensor name ("blk.0.attn_q.weight") -> A, B
  std::shared_ptr<const gguf::GgufFile> file;  // keeps the mapped tensors alive (null when built in memory)
  float scale() const { return alpha > 0 ? alpha / float(rank) : 1.0f; }  // alpha / r
};

// Reads and checks the format (keys, tensor names, pairs, ranks, shapes); tensors stay mapped.
// Throws gguf::GgufError naming the file and what is wrong.
LoraAdapter read_lora(const std::string& path);

// Writes `a` in llama.cpp's format (F32 or the tensors' own dtype), atomically.
void write_lora(const LoraAdapter& a, const std::string& path);

// One adapter with the user's scale (--lora: 1, --lora-scaled FILE S: S).
struct ScaledLora {
  std::shared_ptr<const LoraAdapter> adapter;
  float scale = 1;
};

// Attaches every adapter to `m`'s weights (several on one weight add up). Checks each against the
// base first (architecture, that every target is a 2-D weight of the model used as a projection,
// the shapes) and throws gguf::GgufError naming the adapter and the tensor; `m` is unchanged then.
// `dropout` (training) is shared by every adapted weight.
void apply_loras(Model& m, const std::vector<ScaledLora>& loras, std::shared_ptr<const LowRankDropout> dropout = {});

// W + Σ scale·B·A as an owned F32 tensor named as W, for a weight apply_loras() gave adapters;
// W itself (dequantized) for any other. What `toy export --lora` writes.
Tensor merged_weight(const Tensor& W);

// The base tensor names a target list selects, e.g. {"attn_q", "ffn_up"} -> every
// blk.ℓ.attn_q.weight, blk.ℓ.ffn_up.weight of `m`. Throws std::invalid_argument for a target that
// is not a per-layer projection of this model (naming the ones it has).
std::vector<std::string> lora_target_names(Model& m, const std::vector<std::string>& targets);

}  // namespace toy
