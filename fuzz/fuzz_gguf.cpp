// fuzz/fuzz_gguf.cpp — libFuzzer target: any byte string is parsed or rejected cleanly, and what
// parses can be read: every metadata value (displayed, as JSON, through the typed getters), every
// tensor's bytes, and the tokenizer a model file carries (loaded and used).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "toy/io/gguf.h"
#include "toy/tokenizer/tokenizer.h"

namespace {

// What `toy describe` and the model loaders do with metadata.
void read_metadata(const toy::gguf::GgufFile& f) {
  using toy::gguf::ValueType;
  for (const auto& [key, v] : f.metadata()) {
    (void)v.to_display();
    (void)toy::gguf::to_json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    try {
      if (v.type == ValueType::STRING) (void)f.get_string(key);
      if (v.is_integer()) (void)f.get_int(key);
      if (v.is_integer() || v.is_float()) (void)f.get_float(key);
      if (v.type == ValueType::ARRAY && v.elem == ValueType::STRING) (void)f.get_strings(key);
      if (v.type == ValueType::ARRAY && v.elem != ValueType::STRING) (void)f.get_floats(key), (void)f.get_ints(key);
    } catch (const toy::gguf::GgufError&) {  // a getter refusing a value of the wrong kind is fine
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<toy::gguf::GgufFile> f;
  try {
    f = toy::gguf::GgufFile::parse("fuzz", data, size);
  } catch (const toy::gguf::GgufError&) {
    return 0;
  }
  for (const auto& t : f->tensors()) {
    const auto* p = static_cast<const uint8_t*>(f->tensor_data(t));
    volatile uint8_t sink = t.nbytes ? p[0] ^ p[t.nbytes - 1] : 0;  // both ends inside the buffer
    (void)sink;
    (void)f->tensor(t).numel();
  }
  read_metadata(*f);
  if (!f->has("tokenizer.ggml.model")) return 0;
  try {
    const auto tok = toy::Tokenizer::from_gguf(*f);
    const auto ids = tok->encode("Hello world! <s>\n\xe2\x96\x81", true, true);
    (void)tok->decode(ids);
  } catch (const toy::TokenizerError&) {  // a vocabulary that cannot be used is refused
  }
  return 0;
}
