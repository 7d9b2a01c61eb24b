// archs/registry.cpp — every architecture toy can load: one line each.
#include "toy/archs/gemma2.h"
#include "toy/archs/gpt2.h"
#include "toy/archs/llama.h"
#include "toy/archs/olmoe.h"

namespace toy {

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> all = {
      {"llama", load_llama},   {"qwen2", load_qwen2}, {"qwen3", load_qwen3},
      {"gemma2", load_gemma2}, {"olmoe", load_olmoe}, {"gpt2", load_gpt2},
  };
  return all;
}

}  // namespace toy
