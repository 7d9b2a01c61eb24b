// io/file_type.h — the dtype of each tensor when a model is written as one of llama.cpp's file
// types: one dtype for every matrix ("Q8_0", "Q6_K", …) or a K-quant mix ("Q4_K_M"), chosen
// by llama-quantize's rules (llama_tensor_get_type, no importance matrix).
//
// Used by `toy init`; the fixtures' llama-quantize files check the rules (tests/test_quant.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "toy/tensor/dtype.h"

namespace toy::gguf {

struct FileType {
  std::string_view name;       // "Q4_K_M"
  DType base;                  // the dtype of most matrices: Q4_K
  bool mix;                    // the _M rules: Q6_K for the output and for some attn_v / ffn_down
  uint32_t general_file_type;  // llama_ftype, the value of general.file_type: 15
};

// The file types toy writes, by name (case-insensitive); nullopt for others.
std::optional<FileType> file_type(std::string_view name);
// Their names, for messages: "F32, F16, …".
std::string_view file_type_names();
// llama.cpp's name of any general.file_type value ("Q4_K_M" for 15), including those toy does
// not write; "" for an unknown value.
std::string file_type_name(int64_t general_file_type);

// The dtype of tensor `name` of `shape` (PyTorch order) in a model of n_layer blocks; `tied`:
// the model has no output.weight, token_embd serves as the output projection.
//  * 1-D tensors (norms, biases) stay F32.
//  * Matrices get ft.base; with the _M rules, output.weight (token_embd when tied) gets Q6_K
//    and attn_v / ffn_down of the layers use_more_bits picks get Q6_K (attn_qkv: one step up).
//  * Rows that do not split into 256-value super-blocks fall back as llama.cpp does: Q4_K to
//    Q5_0, Q5_K to Q5_1, Q6_K to Q8_0 (and the output to Q8_0); rows that still do not split
//    into blocks stay F32.
DType tensor_dtype(const FileType& ft, std::string_view name, const std::vector<int64_t>& shape, int n_layer,
                   bool tied);

}  // namespace toy::gguf
