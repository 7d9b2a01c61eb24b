// cards/card.h — algorithm cards: a model file's architecture as formal pseudocode, and back.
//
// A card is Markdown. Its prose follows Phuong & Hutter, "Formal Algorithms for Transformers"
// (arXiv:2207.09238): inputs, outputs, hyper-parameters, parameters with shapes, and numbered
// steps for the embedding, positions, each block (attention variant, norms, FFN or experts) and
// the unembedding, with this file's numbers substituted. Its machine-readable part is one fenced
// block with the info string `toy-card`, one `key: type = value` per line:
//
//   ```toy-card
//   general.architecture: string = "llama"
//   llama.embedding_length: u32 = 128
//   llama.attention.layer_norm_rms_epsilon: f32 = 1e-05
//   card.n_vocab: u32 = 512
//   card.tied_output: bool = true
//   ```
//
// Keys are the file's GGUF metadata (general.architecture, general.name, every `<arch>.*` key,
// the scalar `tokenizer.ggml.*` keys) plus `card.*` facts that GGUF keeps in tensors (vocabulary
// size, tied output, Llama-3 rope frequency factors). Types are GGUF's (u8 … f64, bool, string,
// [elem] for arrays); floats are written with the fewest digits that read back to the same value,
// so a card reproduces its file's metadata exactly. The prose is never parsed.
//
// What the card says about the architecture (its variant, keys and tensors) is read from the
// architecture's own description (archs/arch.h), so every registered architecture has a card.
// Not here: weights (a model built from a card has random weights), the tokenizer's vocabulary
// (a placeholder of the right size), and the forward pass itself (archs/).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "toy/archs/model.h"
#include "toy/io/gguf.h"

namespace toy::card {

struct CardError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Card {
  std::string arch;                                       // general.architecture, e.g. "llama"
  std::vector<std::pair<std::string, gguf::Value>> meta;  // GGUF keys, in file order
  int64_t n_vocab = 0;                                    // e.g. 512
  bool tied_output = true;                                // logits use token_embd (no output.weight)
  std::vector<float> rope_freqs;                          // rope_freqs.weight (Llama 3), empty when absent
  std::string source_dtype;                               // informational, e.g. "Q4_K_M"

  const gguf::Value* find(std::string_view key) const;
};

// Reads a model file's card. Throws CardError for an architecture without a card, or a file
// missing a required hyper-parameter.
Card from_gguf(const gguf::GgufFile& f);

// The whole card as Markdown.
std::string render(const Card& c);

// Parses the `toy-card` block of a Markdown text. Throws CardError naming `label` and the line.
Card parse(std::string_view markdown, const std::string& label);
Card load(const std::string& path);          // parse() of a file; CardError when unreadable
bool is_card_file(const std::string& path);  // a text file holding a ```toy-card block

// The model the card describes, from its architecture's description. Throws CardError for an
// architecture toy does not have or hyper-parameters it rejects.
Description describe(const Card& c);
// Every tensor of the card's model (per-layer ones once per layer), in file order.
std::vector<TensorSpec> tensors(const Card& c);
uint64_t parameter_count(const Card& c);

// The model configuration as JSON, in the shape `toy describe MODEL --json` prints for a GGUF
// file (architecture, name, parameters, hyperparameters, tokenizer, tensors).
nlohmann::ordered_json to_json(const Card& c);

// Writes a GGUF model with the card's metadata and tensor names/shapes: the architecture's random
// weights (deterministic in `seed`; F32) and a placeholder vocabulary of n_vocab tokens
// (tokenizer/placeholder_vocab). Atomic (GgufWriter); `bytes` follows the write.
void write_model(const Card& c, const std::string& path, uint64_t seed = 42, Progress* bytes = nullptr);

}  // namespace toy::card
