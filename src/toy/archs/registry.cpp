// archs/registry.cpp — the architectures toy ships. Adding one: its file archs/<name>.cpp ending
// in `namespace archs { Architecture <name>() { return architecture<Name>(); } }`, and its name
// in the two lines below.
#include "toy/archs/arch.h"

namespace toy {

namespace archs {
Architecture llama(), qwen2(), qwen3(), gemma2(), olmoe(), gpt2(), qwen35(), qwen3next(), dragon();
}

std::vector<Architecture>& builtin_architectures() {
  static std::vector<Architecture> all = {archs::llama(),  archs::qwen2(),     archs::qwen3(),
                                          archs::gemma2(), archs::olmoe(),     archs::gpt2(),
                                          archs::qwen35(), archs::qwen3next(), archs::dragon()};
  return all;
}

}  // namespace toy
