// cli/common.h — what several commands share: loading a model with its tokenizer, id lists.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "toy/archs/model.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::cli {

struct Loaded {
  std::shared_ptr<const gguf::GgufFile> file;
  std::unique_ptr<Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the file carries no vocabulary
};

// Opens MODEL (or the embedded default when absent), loads the model and, when present, its
// tokenizer. Bad files raise GgufError (exit 3).
Loaded load_model_and_tokenizer(const Args& a, size_t model_positional = 0);

// "1,15043,3186" -> ids; throws UsageError naming the bad item.
std::vector<int32_t> parse_ids(const std::string& text);

// Applies --threads (0 = all cores).
void apply_threads(const Args& a);

// `--kv-type f32|f16`: the KV cache's dtype.
DType kv_type(const Args& a);

// Common flag declarations.
Flag threads_flag();
Flag kv_type_flag();

}  // namespace toy::cli
