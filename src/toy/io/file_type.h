// io/file_type.h — the dtype of each tensor when a model is written as one of llama.cpp's file
// types: one dtype for every matrix ("Q8_0", "Q6_K", …) or a K-quant mix ("Q4_K_M"), chosen
// by llama-quantize's rules (llama_tensor_get_type, no importance matrix).
//
// Used by `toy init`, `toy quantize` and checkpoints written with `toy train --save-dtype`; the
// fixtures' llama-quantize files check the rules (tests/test_quant.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "toy/tensor/dtype.h"
#include "toy/tensor/tensor.h"

namespace toy {
class Progress;
}

namespace toy::gguf {

struct FileType {
  std::string_view name;       // "Q4_K_M"
  DType base;                  // the dtype of most matrices: Q4_K
  bool mix;                    // the _M rules: Q6_K for some attn_v / ffn_down
  uint32_t general_file_type;  // llama_ftype, the value of general.file_type: 15
};

// The file types toy writes, by name (case-insensitive); nullopt for others.
std::optional<FileType> file_type(std::string_view name);
// Their names, for messages: "F32, F16, …".
std::string_view file_type_names();
// llama.cpp's name of any general.file_type value ("Q4_K_M" for 15), including those toy does
// not write; "" for an unknown value.
std::string file_type_name(int64_t general_file_type);

// The tensors llama-quantize never converts, whatever the file type (its
// tensor_allows_quantization): 1-D tensors (norms, biases), names not ending in "weight", norms,
// MoE routers (ffn_gate_inp), the taps of the Gated DeltaNet / Mamba convolution (ssm_conv1d) and
// learned positions (position_embd, token_types). toy's loader uses them as F32 whatever a file
// stores, since the operations that read them are not matrix products.
bool stays_f32(std::string_view name, size_t n_dims);

// The dtype of tensor `name` of `shape` (PyTorch order) in a model of n_layer blocks and n_expert
// experts (0: dense); `tied`: the model has no output.weight, token_embd serves as the output
// projection. As llama-quantize (node-llama-cpp 3.21.1's llama.cpp) decides it:
//  * stays_f32 tensors stay F32; F32, F16 and BF16 files have every other matrix in that dtype.
//  * In the block types, matrices get ft.base, except: output.weight (token_embd when tied) gets
//    Q6_K in every type but Q8_0; with the _M rules attn_v (and a fused attn_qkv) / ffn_down of
//    the layers use_more_bits picks get Q6_K; Q4_K (= Q4_K_S) gives attn_v / attn_qkv of the first
//    4 layers and ffn_down of the first eighth Q5_K. With 8 experts attn_k, attn_v and attn_qkv
//    get Q8_0, and Q4_K / Q4_K_M give attn_output Q5_K.
//  * Rows that do not split into 256-value super-blocks fall back as llama.cpp does: Q4_K to
//    Q5_0, Q5_K to Q5_1, Q6_K to Q8_0 (and the output to Q8_0); rows that still do not split
//    into blocks stay F32.
DType tensor_dtype(const FileType& ft, std::string_view name, const std::vector<int64_t>& shape, int n_layer, bool tied,
                   int n_expert = 0);

// Tensor `t` (its name() is the GGUF name; any dtype toy decodes) as a file of type `ft` stores it:
// `t` itself when it already has tensor_dtype(ft, …), else a new tensor of that dtype (quantized
// from `t`'s values, decoded to F32 first when `t` is not F32). Throws std::invalid_argument for a
// dtype toy cannot decode or write.
Tensor to_file_dtype(const FileType& ft, const Tensor& t, int n_layer, bool tied, int n_expert = 0);

class GgufFile;

// One tensor of quantize_file, for progress reports.
struct QuantizeStep {
  size_t index = 0, count = 0;  // `index` tensors of `count` converted
  std::string_view name;        // the tensor's GGUF name
  DType from, to;
};

// llama-quantize's job: writes `in` as file type `ft` to `out` (by write_output_file's rules):
// every key of `in` (general.file_type set to ft's, general.quantization_version 2 as llama.cpp
// writes it), every tensor as to_file_dtype() converts it, with n_layer from `<arch>.block_count`
// and n_expert from `<arch>.expert_count`, and a tied output when there is no output.weight.
// `converted` is called after each tensor is converted, then `bytes` (if given) follows the write
// (GgufWriter::write).
// Throws GgufError for a tensor toy cannot decode or one holding NaN or infinite values (before
// anything is written), std::runtime_error on I/O failure.
void quantize_file(const GgufFile& in, const FileType& ft, const std::string& out,
                   const std::function<void(const QuantizeStep&)>& converted = {}, Progress* bytes = nullptr);

}  // namespace toy::gguf
