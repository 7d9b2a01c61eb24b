// io/gguf.h — GGUF files: a validating, zero-copy reader and an atomic writer.
//
// Format (v2/v3, little-endian): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv;
// n_kv × (string key, u32 type, value); n_tensors × (string name, u32 n_dims, u64 ne[n_dims],
// u32 dtype, u64 offset); padding to `general.alignment` (default 32); the data section.
// Strings are u64 length + bytes. Dimensions are listed innermost first (ne[0] contiguous);
// the reader reverses them once, so every shape toy shows is in PyTorch order.
//
// The reader maps the file and validates every count, length and offset against the file size
// before using it; a bad file raises GgufError whose message names the file and the problem.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "toy/tensor/tensor.h"

namespace toy {
class Progress;
}

namespace toy::gguf {

struct GgufError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view type_name(ValueType t);  // "u32", "string", "array"

// One metadata value. Scalars live in one of u/i/f/b; strings view the mapped file (reader)
// or own their text (values built in code); arrays hold elements of one type (possibly arrays).
struct Value {
  ValueType type = ValueType::U32;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string_view s;
  std::shared_ptr<std::string> owned;  // backing text for strings built in code
  ValueType elem = ValueType::U8;      // element type when type == ARRAY

  // The elements of an ARRAY. An array of scalars or strings read from a file stays packed in
  // the mapping and an element is decoded when asked, so a 49k-piece vocabulary costs almost
  // no heap (as Values it would take ~15 MB); arrays built in code and nested arrays hold Values.
  size_t size() const { return packed.data() ? packed_count : items.size(); }
  bool empty() const { return size() == 0; }
  Value at(size_t k) const;
  void push_back(Value e) { items.push_back(std::move(e)); }

  std::vector<Value> items;         // built in code, or nested arrays
  std::span<const uint8_t> packed;  // read from a file: the encoded elements
  size_t packed_count = 0;
  std::vector<uint64_t> string_starts;  // packed strings: where each one's length prefix is

  static Value of_u32(uint32_t v);
  static Value of_i32(int32_t v);
  static Value of_u64(uint64_t v);
  static Value of_f32(float v);
  static Value of_bool(bool v);
  static Value of_string(std::string v);
  static Value of_strings(const std::vector<std::string>& v);
  static Value of_f32s(const std::vector<float>& v);
  static Value of_i32s(const std::vector<int32_t>& v);

  bool is_integer() const;
  bool is_float() const { return type == ValueType::F32 || type == ValueType::F64; }
  int64_t as_int() const;                              // any integer type (and bool)
  double as_float() const;                             // any numeric type
  std::string to_display(size_t max_items = 8) const;  // for `toy describe`
};

// The value as JSON (strings, bools, numbers of their own signedness, nested arrays).
nlohmann::ordered_json to_json(const Value& v);

struct TensorInfo {
  std::string name;
  Shape shape;  // PyTorch order (outermost first)
  DType dtype;
  uint64_t offset;  // bytes from the start of the data section
  uint64_t nbytes;
};

class GgufFile : public std::enable_shared_from_this<GgufFile> {
 public:
  // Maps and validates `path`. Throws GgufError.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // Parses an in-memory image (used by the fuzz target and the corruption tests).
  static std::shared_ptr<GgufFile> parse(const std::string& label, const void* data, size_t size);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  size_t file_size() const { return size_; }

  // Metadata, in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters: throw GgufError naming the key when missing or of the wrong type.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::optional<std::string> opt_string(std::string_view key) const;
  std::optional<int64_t> opt_int(std::string_view key) const;
  std::optional<double> opt_float(std::string_view key) const;
  std::optional<bool> opt_bool(std::string_view key) const;
  // Array getters (element types converted when numeric); missing key -> empty vector.
  std::vector<std::string_view> get_strings(std::string_view key) const;
  std::vector<float> get_floats(std::string_view key) const;
  std::vector<int32_t> get_ints(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const void* tensor_data(const TensorInfo& t) const { return base_ + data_offset_ + t.offset; }
  // A read-only tensor viewing the mapped bytes (zero copy); keeps the file mapped.
  Tensor tensor(const TensorInfo& t) const;
  // Whether t's stored numbers are finite: every value of a float tensor, every scale of a
  // block-quantized one (the quantized digits themselves cannot be NaN). Weights holding a NaN or an
  // infinity compute garbage: models, adapters and quantize's sources are refused as bad files.
  bool finite(const TensorInfo& t) const;

  std::string architecture() const { return opt_string("general.architecture").value_or(""); }

  ~GgufFile();

 private:
  GgufFile() = default;
  void parse_all();
  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // munmap on destruction when mapped
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Writes a GGUF v3 file. Metadata keys keep insertion order; tensors are laid out in the
// order added, each aligned to `general.alignment` (32 unless set). The file is written to
// `<path>.tmp.<pid>`, flushed, and renamed over `path`, so readers never see a partial file.
class GgufWriter {
 public:
  void set(std::string key, Value v);
  // `shape` in PyTorch order; `data` must hold row_bytes(dtype, numel(shape)) bytes and stay
  // alive until write() returns.
  void add_tensor(std::string name, Shape shape, DType dtype, const void* data);
  // The writer keeps `t` (a shared handle) alive until it is destroyed.
  void add_tensor(const std::string& name, const Tensor& t);
  // Writes by write_output_file's rules (io/output_file.h); throws std::runtime_error on I/O failure.
  // `bytes`, if given, gets the file's size as its total and the bytes written as they go (the
  // write of a large F32 model is most of `toy init`'s time).
  void write(const std::string& path, Progress* bytes = nullptr) const;

 private:
  struct Pending {
    std::string name;
    Shape shape;
    DType dtype;
    const void* data;
  };
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Pending> tensors_;
  std::vector<Tensor> kept_;  // the tensors added by handle, whose bytes `tensors_` points at
};

// Copies every key and tensor of `in` into a writer (for round trips and re-saving).
GgufWriter copy_of(const GgufFile& in);

}  // namespace toy::gguf
