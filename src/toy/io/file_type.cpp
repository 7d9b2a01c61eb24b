// io/file_type.cpp — llama-quantize's per-tensor dtype rules for the file types toy writes.
//
// The rules are those of llama.cpp's llama_tensor_get_type for dense models without an
// importance matrix; the MoE, Falcon and 70B special cases are left out (toy writes none).
#include "toy/io/file_type.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>

#include "toy/io/gguf.h"
#include "toy/tensor/quant.h"

namespace toy::gguf {
namespace {

const std::vector<FileType>& file_types() {
  static const std::vector<FileType> t = {
      {"F32", DType::F32, false, 0},     {"F16", DType::F16, false, 1},     {"BF16", DType::BF16, false, 32},
      {"Q8_0", DType::Q8_0, false, 7},   {"Q4_0", DType::Q4_0, false, 2},   {"Q4_1", DType::Q4_1, false, 3},
      {"Q5_0", DType::Q5_0, false, 8},   {"Q5_1", DType::Q5_1, false, 9},   {"Q6_K", DType::Q6_K, false, 18},
      {"Q5_K", DType::Q5_K, false, 16},  {"Q4_K", DType::Q4_K, false, 14},  // general.file_type: the _S types
      {"Q5_K_M", DType::Q5_K, true, 17}, {"Q4_K_M", DType::Q4_K, true, 15},
  };
  return t;
}

bool equal_nocase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// llama.cpp's choice of the layers that get more bits: the first and last eighth, and every
// third layer in between.
bool use_more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// The dtype llama.cpp uses when the rows do not split into super-blocks.
DType fallback(DType t) {
  switch (t) {
    case DType::Q4_K:
      return DType::Q5_0;
    case DType::Q5_K:
      return DType::Q5_1;
    case DType::Q6_K:
      return DType::Q8_0;
    default:
      return t;
  }
}

}  // namespace

std::optional<FileType> file_type(std::string_view name) {
  for (const FileType& t : file_types())
    if (equal_nocase(t.name, name)) return t;
  return std::nullopt;
}

std::string_view file_type_names() {
  static const std::string names = [] {
    std::string s;
    for (const FileType& t : file_types()) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
  }();
  return names;
}

std::string file_type_name(int64_t t) {
  static const std::map<int64_t, const char*> names = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},      {3, "Q4_1"},    {7, "Q8_0"},     {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"},   {12, "Q3_K_M"}, {13, "Q3_K_L"},  {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},   {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
      {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},  {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},
      {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},    {30, "IQ4_XS"}, {31, "IQ1_M"},   {32, "BF16"},
      {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4_MOE"}};
  auto it = names.find(t);
  return it == names.end() ? "" : it->second;
}

bool stays_f32(std::string_view name, size_t n_dims) {
  return n_dims < 2 || !name.ends_with("weight") || contains(name, "_norm.weight") ||
         contains(name, "ffn_gate_inp.weight") || contains(name, "ssm_conv1d") || name == "position_embd.weight" ||
         name == "token_types.weight";
}

DType tensor_dtype(const FileType& ft, std::string_view name, const std::vector<int64_t>& shape, int n_layer, bool tied,
                   int n_expert) {
  if (stays_f32(name, shape.size())) return DType::F32;
  const int64_t row = shape.back();
  DType t = ft.base;
  if (info(ft.base).quantized) {  // llama-quantize applies its rules only to block types
    int layer = -1;
    std::sscanf(std::string(name).c_str(), "blk.%d.", &layer);
    const bool q4_k_s = ft.base == DType::Q4_K && !ft.mix;
    // llama.cpp counts the "attn_v-like" tensors (attn_v, and a fused attn_qkv: a Gated DeltaNet
    // layer's) for use_more_bits; every layer of toy's architectures has exactly one, so their
    // index is the layer's. Models of 8 experts get 8-bit attention keys and values.
    const bool attn_v = contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight");
    const bool ffn_down = contains(name, "ffn_down");
    if (name == "output.weight" || (tied && name == "token_embd.weight"))
      t = row % QK_K != 0 || ft.base == DType::Q8_0 ? DType::Q8_0 : DType::Q6_K;  // every type but Q8_0
    else if (attn_v || ffn_down) {
      if (ft.mix && use_more_bits(layer, n_layer))
        t = DType::Q6_K;
      else if (q4_k_s && (ffn_down ? layer < n_layer / 8 : layer < 4))
        t = DType::Q5_K;
      if (attn_v && n_expert == 8) t = DType::Q8_0;
    } else if (contains(name, "attn_k.weight") && n_expert == 8)
      t = DType::Q8_0;
    else if (contains(name, "attn_output.weight") && n_expert == 8 && ft.base == DType::Q4_K)
      t = DType::Q5_K;  // Q4_K_S and Q4_K_M
  }
  if (row % info(t).block_size != 0) t = fallback(t);
  return row % info(t).block_size == 0 ? t : DType::F32;
}

Tensor to_file_dtype(const FileType& ft, const Tensor& t, int n_layer, bool tied, int n_expert) {
  const DType d = t.dtype();
  if (d == DType::I8 || d == DType::I16 || d == DType::I32 || d == DType::I64) return t;  // ids, not weights
  const DType target = tensor_dtype(ft, t.name(), t.shape(), n_layer, tied, n_expert);
  if (d == target) return t;
  if (!dtype_supported(d)) throw std::invalid_argument(t.name() + ": toy cannot decode " + std::string(info(d).name));
  if (!can_quantize(target))
    throw std::invalid_argument(t.name() + ": toy cannot write " + std::string(info(target).name));
  const Tensor values = t.dtype() == DType::F32 ? t : t.clone();  // F32 (decodes F16, BF16 and blocks)
  Tensor q = Tensor::empty(t.shape(), target);
  quantize(target, values.data(), q.raw_mut(), t.numel());
  q.set_name(t.name());
  return q;
}

void quantize_file(const GgufFile& in, const FileType& ft, const std::string& out,
                   const std::function<void(const QuantizeStep&)>& converted, Progress* bytes) {
  const std::string arch = in.architecture();
  const int n_layer = int(in.opt_int(arch + ".block_count").value_or(0));
  const bool tied = in.find_tensor("output.weight") == nullptr;
  const int n_expert = int(in.opt_int(arch + ".expert_count").value_or(0));
  GgufWriter w;
  for (const auto& [key, value] : in.metadata()) w.set(key, value);
  w.set("general.file_type", Value::of_u32(ft.general_file_type));
  std::vector<Tensor> written;  // keeps converted tensors (and views of `in`) alive until the write
  written.reserve(in.tensors().size());
  bool quantized = false;
  for (const TensorInfo& info_in : in.tensors()) {
    if (!in.finite(info_in))
      throw GgufError(in.path() + ": tensor '" + info_in.name + "' holds NaN or infinite values");
    Tensor t = in.tensor(info_in).set_name(info_in.name);
    const DType to = tensor_dtype(ft, t.name(), t.shape(), n_layer, tied, n_expert);
    try {
      written.push_back(to_file_dtype(ft, t, n_layer, tied, n_expert));
    } catch (const std::invalid_argument& e) {
      throw GgufError(in.path() + ": " + e.what());
    }
    if (converted) converted({written.size(), in.tensors().size(), info_in.name, t.dtype(), to});
    quantized = quantized || info(written.back().dtype()).quantized;
    w.add_tensor(info_in.name, written.back());
  }
  if (quantized) w.set("general.quantization_version", Value::of_u32(2));  // GGML_QNT_VERSION
  w.write(out, bytes);
}

}  // namespace toy::gguf
