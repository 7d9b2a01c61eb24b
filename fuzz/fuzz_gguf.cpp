// fuzz/fuzz_gguf.cpp — libFuzzer target: any byte string is parsed or rejected cleanly.
#include <cstddef>
#include <cstdint>

#include "toy/io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = toy::gguf::GgufFile::parse("fuzz", data, size);
    for (const auto& t : f->tensors()) {
      const auto* p = static_cast<const uint8_t*>(f->tensor_data(t));
      volatile uint8_t sink = t.nbytes ? p[t.nbytes - 1] : 0;  // must be inside the buffer
      (void)sink;
    }
    for (const auto& [k, v] : f->metadata()) (void)v.to_display();
  } catch (const toy::gguf::GgufError&) {}
  return 0;
}
