// serve/embeddings.h — an input's embedding: the model's final hidden states pooled into one vector.
//
// As llama-server computes it (`--embeddings --pooling P`, tools/server): the input is fed alone,
// from position 0, with causal attention; its hidden states after the output norm (llama.cpp's
// t_embd, Ctx::hidden_states here) are pooled over its tokens — their mean, the first token's
// (cls) or the last token's — and the pooled vector scaled to unit L2 norm (llama.cpp's
// common_embd_normalize with its default, the Euclidean norm).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "toy/archs/model.h"

namespace toy::serve {

enum class Pooling { Mean, Cls, Last };

// "mean", "cls", "last" <-> Pooling; nullopt for another name.
std::optional<Pooling> pooling_named(std::string_view name);
const char* pooling_name(Pooling p);
// GGUF `<arch>.pooling_type`, llama.cpp's enum: 1 mean, 2 cls, 3 last; nullopt for the others
// (0 none, 4 rank: no single vector per input).
std::optional<Pooling> pooling_from_gguf(int64_t type);

// The embedding of `ids` (each in the vocabulary, at most the model's context): [d_model], unit
// L2 norm (all zeros only if the pooled vector is).
std::vector<float> embed(const Model& model, std::span<const int32_t> ids, Pooling pooling);

// The vector's float32 bytes (little-endian, as OpenAI's encoding_format "base64" sends them) in
// base64.
std::string base64_floats(std::span<const float> v);

}  // namespace toy::serve
