// fuzz/make_seeds.cpp — writes the seed corpora that scripts/fuzz.sh starts from.
//
//   toy_fuzz_seeds OUT_DIR [TOKENIZER_INP...]
//
// OUT_DIR/gguf: small valid GGUF files (a few KB each, under fuzz_gguf's -max_len) written by
// GgufWriter, so the seeds follow the writer as the format evolves: every metadata value type,
// arrays of scalars, strings and arrays, one tensor of every dtype, and tokenizer vocabularies
// of each kind (llama/SPM, gpt2/BPE, bert/WPM) for Tokenizer::from_gguf.
// OUT_DIR/tokenizer: the test texts of llama.cpp's vocabulary fixtures (*.inp, texts separated by
// "\n__ggml_vocab_test__\n"), each prefixed with fuzz_tokenizer's control byte.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "toy/io/gguf.h"

namespace {

namespace fs = std::filesystem;
using toy::DType;
using toy::gguf::GgufWriter;
using toy::gguf::Value;
using toy::gguf::ValueType;

Value scalar(ValueType type, uint64_t u, int64_t i, double f) {
  Value v;
  v.type = type, v.u = u, v.i = i, v.f = f;
  return v;
}

Value array_of(ValueType elem, std::vector<Value> items) {
  Value v;
  v.type = ValueType::ARRAY, v.elem = elem, v.items = std::move(items);
  return v;
}

// Every value type once, and arrays of scalars, of strings and of arrays.
void write_metadata_seed(const fs::path& path) {
  GgufWriter w;
  w.set("general.architecture", Value::of_string("llama"));
  w.set("general.name", Value::of_string("fuzz seed \xe2\x96\x81 \n"));
  w.set("general.alignment", Value::of_u32(32));
  w.set("seed.u8", scalar(ValueType::U8, 200, 0, 0));
  w.set("seed.i8", scalar(ValueType::I8, 0, -100, 0));
  w.set("seed.u16", scalar(ValueType::U16, 60000, 0, 0));
  w.set("seed.i16", scalar(ValueType::I16, 0, -30000, 0));
  w.set("seed.u32", Value::of_u32(4000000000u));
  w.set("seed.i32", Value::of_i32(-2000000000));
  w.set("seed.u64", Value::of_u64(UINT64_MAX));
  w.set("seed.i64", scalar(ValueType::I64, 0, INT64_MIN, 0));
  w.set("seed.f32", Value::of_f32(1e-5f));
  w.set("seed.f64", scalar(ValueType::F64, 0, 0, 10000.0));
  w.set("seed.bool", Value::of_bool(true));
  w.set("llama.context_length", Value::of_u32(2048));
  w.set("llama.rope.freq_base", Value::of_f32(10000.0f));
  w.set("seed.f32s", Value::of_f32s({0.5f, -1.0f, 3.25f}));
  w.set("seed.i32s", Value::of_i32s({1, -2, 3}));
  w.set("seed.strings", Value::of_strings({"a", "", "\xc3\xa9t\xc3\xa9"}));
  w.set("seed.u8s", array_of(ValueType::U8, {scalar(ValueType::U8, 1, 0, 0), scalar(ValueType::U8, 255, 0, 0)}));
  w.set("seed.bools", array_of(ValueType::BOOL, {Value::of_bool(true), Value::of_bool(false)}));
  w.set("seed.nested", array_of(ValueType::ARRAY, {Value::of_i32s({1, 2}), Value::of_strings({"x"})}));
  w.set("seed.empty", array_of(ValueType::U32, {}));
  w.write(path.string());
}

// One tensor of every dtype GGUF knows, one block each (patterned bytes, any value is valid).
void write_dtypes_seed(const fs::path& path) {
  GgufWriter w;
  w.set("general.architecture", Value::of_string("llama"));
  std::vector<std::vector<uint8_t>> blobs;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto info = toy::dtype_info(id);
    if (!info) continue;
    const int64_t n = info->block_size * (info->quantized ? 1 : 4);
    std::vector<uint8_t>& bytes = blobs.emplace_back(size_t(toy::row_bytes(info->type, n)));
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = uint8_t(k * 37 + id);
    w.add_tensor("t." + std::string(info->name), {1, n}, info->type, bytes.data());
  }
  w.write(path.string());
}

// A model-shaped file: a few small F32 tensors with the names a llama checkpoint uses.
void write_model_seed(const fs::path& path) {
  GgufWriter w;
  w.set("general.architecture", Value::of_string("llama"));
  w.set("llama.embedding_length", Value::of_u32(8));
  w.set("llama.block_count", Value::of_u32(1));
  w.set("llama.attention.head_count", Value::of_u32(2));
  w.set("general.alignment", Value::of_u32(64));
  static const std::vector<float> emb(4 * 8, 0.25f), norm(8, 1.0f), wq(8 * 8, -0.5f);
  w.add_tensor("token_embd.weight", {4, 8}, DType::F32, emb.data());
  w.add_tensor("blk.0.attn_norm.weight", {8}, DType::F32, norm.data());
  w.add_tensor("blk.0.attn_q.weight", {8, 8}, DType::F32, wq.data());
  w.write(path.string());
}

// A vocabulary of the given tokenizer.ggml.model: control tokens, bytes, a few words and merges.
void write_vocab_seed(const fs::path& path, const std::string& model) {
  GgufWriter w;
  w.set("general.architecture", Value::of_string("llama"));
  w.set("tokenizer.ggml.model", Value::of_string(model));
  std::vector<std::string> tokens;
  std::vector<int32_t> types;  // 1 normal, 2 unknown, 3 control, 6 byte
  if (model == "bert") {
    tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##lo", "world", "!", "a", "##b"};
    types = {3, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1};
    w.set("tokenizer.ggml.bos_token_id", Value::of_u32(2));
    w.set("tokenizer.ggml.seperator_token_id", Value::of_u32(3));
    w.set("tokenizer.ggml.unknown_token_id", Value::of_u32(1));
  } else if (model == "gpt2") {
    tokens = {"<|endoftext|>", "h", "e", "l", "o", "\xc4\xa0", "w", "r", "d", "he", "ll", "hell", "hello", "\xc4\xa0w"};
    types = {3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    w.set("tokenizer.ggml.pre", Value::of_string("llama-bpe"));
    w.set("tokenizer.ggml.merges", Value::of_strings({"h e", "l l", "he ll", "hell o", "\xc4\xa0 w"}));
    w.set("tokenizer.ggml.eos_token_id", Value::of_u32(0));
  } else {  // llama (SPM): <unk> <s> </s>, a few byte tokens, pieces with scores
    tokens = {"<unk>", "<s>", "</s>",        "<0x0A>", "<0xE2>", "\xe2\x96\x81", "\xe2\x96\x81hello",
              "wor",   "ld",  "<|im_start|>"};
    types = {2, 3, 3, 6, 6, 1, 1, 1, 1, 3};
    w.set("tokenizer.ggml.scores", Value::of_f32s({0, 0, 0, 0, 0, -1, -2, -3, -4, 0}));
    w.set("tokenizer.ggml.bos_token_id", Value::of_u32(1));
    w.set("tokenizer.ggml.eos_token_id", Value::of_u32(2));
    w.set("tokenizer.ggml.add_bos_token", Value::of_bool(true));
  }
  w.set("tokenizer.ggml.tokens", Value::of_strings(tokens));
  w.set("tokenizer.ggml.token_type", Value::of_i32s(types));
  w.set("tokenizer.chat_template", Value::of_string("{% for m in messages %}{{ m.content }}{% endfor %}"));
  w.write(path.string());
}

// The texts of a llama.cpp vocabulary test input, one seed file each.
void split_tokenizer_inputs(const fs::path& inp, const fs::path& out_dir) {
  std::ifstream in(inp, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str(), sep = "\n__ggml_vocab_test__\n";
  size_t from = 0, k = 0;
  while (from < all.size()) {
    size_t to = all.find(sep, from);
    if (to == std::string::npos) to = all.size();
    // Control byte: bit 0 add_special, bit 1 parse_special, bits 2-3 the vocabulary.
    const char control = char(k % 16);
    std::ofstream(out_dir / (inp.stem().string() + "." + std::to_string(k)), std::ios::binary)
        << control << all.substr(from, to - from);
    from = to + sep.size(), ++k;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: toy_fuzz_seeds OUT_DIR [TOKENIZER_INP...]\n";
    return 2;
  }
  const fs::path out = argv[1];
  fs::create_directories(out / "gguf");
  fs::create_directories(out / "tokenizer");
  write_metadata_seed(out / "gguf" / "metadata.gguf");
  write_dtypes_seed(out / "gguf" / "dtypes.gguf");
  write_model_seed(out / "gguf" / "model.gguf");
  for (const char* model : {"llama", "gpt2", "bert"})
    write_vocab_seed(out / "gguf" / ("vocab-" + std::string(model) + ".gguf"), model);
  for (int k = 2; k < argc; ++k) split_tokenizer_inputs(argv[k], out / "tokenizer");
  return 0;
}
