// archs/registry.cpp — every architecture toy can load: one line each.
#include "toy/archs/llama.h"

namespace toy {

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> all = {
      {"llama", load_llama},
      {"qwen2", load_qwen2},
      {"qwen3", load_qwen3},
  };
  return all;
}

}  // namespace toy
