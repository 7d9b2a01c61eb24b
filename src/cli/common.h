// cli/common.h — what several commands share: loading a model with its tokenizer, id lists.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli.h"
#include "toy/archs/lora.h"
#include "toy/archs/model.h"
#include "toy/hub/hub.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::cli {

struct Loaded {
  std::shared_ptr<const gguf::GgufFile> file;
  std::unique_ptr<Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the file carries no vocabulary
};

// Opens the model the command was given (model_argument), loads it and, when present, its
// tokenizer. Bad files raise GgufError (exit 3).
Loaded load_model_and_tokenizer(const Args& a, size_t model_positional = 0);

// The model reference given as the MODEL positional or as -m/--model (not both: a UsageError),
// resolved to a file (resolve_model); the embedded default model when neither is given.
std::string model_argument(const Args& a, size_t model_positional = 0);
bool model_given(const Args& a, size_t model_positional = 0);

// A model reference -> a GGUF path, tried in this order:
//   1. an existing file;
//   2. `hf:ORG/REPO[:QUANT]`, or `ORG/REPO:QUANT`: the repository's GGUF file with that
//      quantization (Q4_K_M, q8_0, F16; the only GGUF when there is one and no QUANT), from the
//      Hugging Face cache, else fetched into it;
//   3. a name `toy list` prints (Ollama `name[:tag]`, `org/repo/file.gguf` of the HF cache or LM
//      Studio), or a unique prefix of one (`org/repo`, `llama3.2` for `llama3.2:latest`).
// Nothing found is an InputError with the closest names; several is an InputError listing them.
std::string resolve_model(const std::string& ref);

// The GGUF file of hub repository `repo` that `quant` selects ("": the only one), from the hub's
// file list; `ref` names the request in messages. None or several is an InputError.
std::string hub_file(const std::string& ref, const std::string& repo, const std::string& quant,
                     const hub::FetchOptions& o);

// "1,15043,3186" -> ids; throws UsageError naming the bad item.
std::vector<int32_t> parse_ids(const std::string& text);

// Applies --threads (0 = all cores).
void apply_threads(const Args& a);

// `--kv-type f32|f16`: the KV cache's dtype.
DType kv_type(const Args& a);

// Where the model runs: --device cpu|vulkan[:N], else $TOY_DEVICE, else the CPU — except that
// -ngl N > 0 without either picks vulkan:0, as llama.cpp's -ngl puts a model on its first GPU.
// A malformed name is a UsageError; -ngl 0 with a device is a UsageError (the two contradict).
Device chosen_device(const Args& a);
// Moves `m` to chosen_device(a), saying so on stderr when it is not the CPU. A device that cannot
// be had (no loader, no device N, too little memory) raises DeviceError (exit 5).
void place_model(const Args& a, Model& m);

// `text` made safe to print on a terminal: control characters (C0, DEL, C1; with `multiline`,
// '\n' and '\t' stay) are shown as \xNN or \uNNNN and invalid UTF-8 as U+FFFD, so that metadata in
// a file cannot move the cursor, change colours or retitle the window.
std::string for_terminal(std::string_view text, bool multiline = false);

// JSON for stdout; strings from files need not be valid UTF-8: invalid bytes become U+FFFD.
template <class Json>
std::string json_text(const Json& j, int indent = 2) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// `--lora FILE` and `--lora-scaled FILE SCALE` (each repeatable, llama.cpp's flags): the adapters
// read, checked against `m` and attached to it (applied at run time, not merged). Bad or
// mismatched adapters raise GgufError (exit 3), a bad scale UsageError.
void apply_lora_flags(const Args& a, Model& m);
// The adapters those flags name, read but not yet checked against a model: the --lora ones
// (scale 1), then the --lora-scaled ones, each in command-line order.
std::vector<ScaledLora> read_lora_flags(const Args& a);

// Common flag declarations.
Flag model_flag();  // -m, --model: the MODEL positional as llama.cpp spells it
Flag threads_flag();
Flag kv_type_flag();
Flag device_flag();      // --device
Flag gpu_layers_flag();  // -ngl, --n-gpu-layers
Flag lora_flag();
Flag lora_scaled_flag();

}  // namespace toy::cli
