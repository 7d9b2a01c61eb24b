// examples/generate.cpp — the smallest complete program: load a GGUF model, generate greedily.
//
//   build/examples/example_generate model.gguf "Once upon a time"
#include <cstdio>

#include "toy/archs/model.h"
#include "toy/engines/generate.h"
#include "toy/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [PROMPT]\n", argv[0]);
    return 2;
  }
  try {
    auto file = toy::gguf::GgufFile::open(argv[1]);  // memory-mapped, validated
    auto model = toy::load_model(file);              // weights are views of the mapping
    auto tokenizer = toy::Tokenizer::from_gguf(*file);
    auto prompt = tokenizer->encode(argc > 2 ? argv[2] : "Once upon a time", /*add_special=*/true);

    toy::DecodeEngine engine(*model, 512);  // owns the KV cache
    toy::Sampler greedy({.temperature = 0});
    toy::StreamDecoder text(*tokenizer);  // emits whole UTF-8 characters only
    toy::generate(engine, greedy, prompt, 48,
                  {.is_eog = [&](int32_t id) { return tokenizer->is_eog(id); },
                   .on_token =
                       [&](int32_t id) {
                         std::fputs(text.push(id).c_str(), stdout);
                         std::fflush(stdout);
                         return true;
                       }});
    std::puts(text.flush().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
