// io/gguf.cpp — GGUF reader (validating, memory-mapped) and atomic writer.
#include "toy/io/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "toy/io/output_file.h"
#include "toy/io/progress.h"
#include "toy/tensor/quant.h"

namespace toy::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxNesting = 8;  // nested arrays deeper than this are rejected

// Bounds-checked little-endian cursor over the file image.
class Cursor {
 public:
  Cursor(const std::string& label, const uint8_t* p, size_t n) : label_(label), p_(p), n_(n) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw GgufError(label_ + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }
  template <class T>
  T read(const char* what) {
    if (left() < sizeof(T)) fail(std::string("truncated file while reading ") + what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::span<const uint8_t> bytes(size_t from, size_t to) const { return {p_ + from, to - from}; }
  std::string_view string(const char* what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > left())
      fail(std::string(what) + " length " + std::to_string(len) + " exceeds the " + std::to_string(left()) +
           " bytes left in the file");
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }

 private:
  const std::string& label_;
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

// Minimum bytes one value of a type occupies; bounds array counts before allocating.
uint64_t min_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
    case ValueType::STRING:
      return 8;
    case ValueType::ARRAY:
      return 12;
  }
  return 1;
}

bool valid_type(uint32_t t) { return t <= 12; }

Value read_value(Cursor& c, ValueType type, int depth, const std::string& key) {
  Value v;
  v.type = type;
  switch (type) {
    case ValueType::U8:
      v.u = c.read<uint8_t>("u8");
      break;
    case ValueType::I8:
      v.i = c.read<int8_t>("i8");
      break;
    case ValueType::U16:
      v.u = c.read<uint16_t>("u16");
      break;
    case ValueType::I16:
      v.i = c.read<int16_t>("i16");
      break;
    case ValueType::U32:
      v.u = c.read<uint32_t>("u32");
      break;
    case ValueType::I32:
      v.i = c.read<int32_t>("i32");
      break;
    case ValueType::U64:
      v.u = c.read<uint64_t>("u64");
      break;
    case ValueType::I64:
      v.i = c.read<int64_t>("i64");
      break;
    case ValueType::F32:
      v.f = c.read<float>("f32");
      break;
    case ValueType::F64:
      v.f = c.read<double>("f64");
      break;
    case ValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>("bool");
      if (b > 1) c.fail("metadata '" + key + "': bool value " + std::to_string(b));
      v.b = b != 0;
      break;
    }
    case ValueType::STRING:
      v.s = c.string("string value");
      break;
    case ValueType::ARRAY: {
      if (depth >= kMaxNesting) c.fail("metadata '" + key + "': arrays nested too deeply");
      const uint32_t et = c.read<uint32_t>("array type");
      if (!valid_type(et)) c.fail("metadata '" + key + "': invalid array element type " + std::to_string(et));
      v.elem = ValueType(et);
      const uint64_t n = c.read<uint64_t>("array length");
      if (n > c.left() / min_size(v.elem))
        c.fail("metadata '" + key + "': array of " + std::to_string(n) + " elements exceeds the file size");
      if (v.elem == ValueType::ARRAY) {
        v.items.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) v.items.push_back(read_value(c, v.elem, depth + 1, key));
        break;
      }
      // Scalars and strings stay in the file: check each one now, decode it again in at().
      const size_t start = c.pos();
      if (v.elem == ValueType::STRING) v.string_starts.reserve(size_t(n));
      for (uint64_t k = 0; k < n; ++k) {
        if (v.elem == ValueType::STRING) v.string_starts.push_back(c.pos() - start);
        read_value(c, v.elem, depth + 1, key);
      }
      v.packed = c.bytes(start, c.pos());
      v.packed_count = size_t(n);
      break;
    }
  }
  return v;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

// --- Value ------------------------------------------------------------------------------

std::string_view type_name(ValueType t) {
  static constexpr std::string_view names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? names[uint32_t(t)] : "?";
}

Value Value::of_u32(uint32_t x) {
  Value v;
  v.type = ValueType::U32;
  v.u = x;
  return v;
}
Value Value::of_i32(int32_t x) {
  Value v;
  v.type = ValueType::I32;
  v.i = x;
  return v;
}
Value Value::of_u64(uint64_t x) {
  Value v;
  v.type = ValueType::U64;
  v.u = x;
  return v;
}
Value Value::of_f32(float x) {
  Value v;
  v.type = ValueType::F32;
  v.f = x;
  return v;
}
Value Value::of_bool(bool x) {
  Value v;
  v.type = ValueType::BOOL;
  v.b = x;
  return v;
}
Value Value::of_string(std::string x) {
  Value v;
  v.type = ValueType::STRING;
  v.owned = std::make_shared<std::string>(std::move(x));
  v.s = *v.owned;
  return v;
}
Value Value::of_strings(const std::vector<std::string>& xs) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem = ValueType::STRING;
  for (const std::string& x : xs) v.push_back(of_string(x));
  return v;
}
Value Value::of_f32s(const std::vector<float>& xs) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem = ValueType::F32;
  for (float x : xs) v.push_back(of_f32(x));
  return v;
}
Value Value::of_i32s(const std::vector<int32_t>& xs) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem = ValueType::I32;
  for (int32_t x : xs) v.push_back(of_i32(x));
  return v;
}

Value Value::at(size_t k) const {
  if (!packed.data()) return items.at(k);
  if (k >= packed_count) throw std::out_of_range("gguf array index " + std::to_string(k));
  static const std::string label = "gguf array";
  const size_t from = elem == ValueType::STRING ? size_t(string_starts[k]) : k * size_t(min_size(elem));
  Cursor c(label, packed.data() + from, packed.size() - from);
  return read_value(c, elem, 1, label);
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::BOOL:
      return true;
    default:
      return false;
  }
}

int64_t Value::as_int() const {
  switch (type) {
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
    case ValueType::U64:
      return u > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max() : int64_t(u);
    case ValueType::BOOL:
      return b;
    default:
      return i;
  }
}

double Value::as_float() const { return is_float() ? f : double(as_int()); }

std::string Value::to_display(size_t max_items) const {
  switch (type) {
    case ValueType::STRING: {
      std::string t(s.substr(0, 80));
      for (char& ch : t)
        if (ch == '\n') ch = ' ';
      return "\"" + t + (s.size() > 80 ? "…" : "") + "\"";
    }
    case ValueType::BOOL:
      return b ? "true" : "false";
    case ValueType::F32:
    case ValueType::F64: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", f);
      return buf;
    }
    case ValueType::ARRAY: {
      std::string r = "[" + std::string(type_name(elem)) + " × " + std::to_string(size()) + "]";
      if (!empty()) {
        r += " ";
        for (size_t k = 0; k < size() && k < max_items; ++k) r += (k ? ", " : "") + at(k).to_display(2);
        if (size() > max_items) r += ", …";
      }
      return r;
    }
    default:
      return std::to_string(as_int());
  }
}

nlohmann::ordered_json to_json(const Value& v) {
  switch (v.type) {
    case ValueType::STRING:
      return std::string(v.s);
    case ValueType::BOOL:
      return v.b;
    case ValueType::F32:
    case ValueType::F64:
      return v.f;
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64:
      return v.i;
    case ValueType::ARRAY: {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      for (size_t k = 0; k < v.size(); ++k) a.push_back(to_json(v.at(k)));
      return a;
    }
    default:
      return v.u;
  }
}

// --- reader -----------------------------------------------------------------------------

GgufFile::~GgufFile() {
  if (map_) munmap(map_, size_);
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw GgufError(path + ": cannot open: " + errno_text());
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw GgufError(path + ": not a regular file");
  }
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = size_t(st.st_size);
  if (f->size_ > 0) {
    void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      throw GgufError(path + ": cannot map: " + errno_text());
    }
    // Weights stream through the TLB once per token: where the kernel can back the mapping with
    // 2 MiB pages (a file read into the page cache after this call), it reads faster. Advice
    // only: nothing changes where it cannot.
    madvise(m, f->size_, MADV_HUGEPAGE);
    f->map_ = m;
    f->base_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  f->parse_all();
  return f;
}

std::shared_ptr<GgufFile> GgufFile::parse(const std::string& label, const void* data, size_t size) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = label;
  f->base_ = static_cast<const uint8_t*>(data);
  f->size_ = size;
  f->parse_all();
  return f;
}

void GgufFile::parse_all() {
  Cursor c(path_, base_, size_);
  if (size_ < 4 || c.read<uint32_t>("magic") != kMagic) throw GgufError(path_ + ": not a GGUF file (bad magic)");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    throw GgufError(path_ + ": unsupported GGUF version " + std::to_string(version_) + " (toy reads 2 and 3)");
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each key/value pair takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info 8+4+8+4+8.
  if (n_kv > c.left() / 13) c.fail("metadata count " + std::to_string(n_kv) + " exceeds the file size");
  if (n_tensors > c.left() / 32) c.fail("tensor count " + std::to_string(n_tensors) + " exceeds the file size");

  kv_.reserve(size_t(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key(c.string("metadata key"));
    if (key.empty()) c.fail("empty metadata key");
    const uint32_t t = c.read<uint32_t>("metadata type");
    if (!valid_type(t)) c.fail("metadata '" + key + "': invalid value type " + std::to_string(t));
    Value v = read_value(c, ValueType(t), 0, key);
    if (kv_index_.count(key)) c.fail("duplicate metadata key '" + key + "'");
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    if (!a->is_integer() || a->as_int() <= 0 || a->as_int() > (1 << 20) || (a->as_int() & (a->as_int() - 1)))
      throw GgufError(path_ + ": general.alignment must be a power of two, got " + a->to_display());
    alignment_ = uint64_t(a->as_int());
  }

  tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo ti;
    ti.name = std::string(c.string("tensor name"));
    const uint32_t nd = c.read<uint32_t>("tensor dimension count");
    if (nd == 0 || nd > kMaxDims)
      c.fail("tensor '" + ti.name + "': " + std::to_string(nd) + " dimensions (1 to 4 allowed)");
    uint64_t ne[kMaxDims];
    uint64_t count = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      ne[d] = c.read<uint64_t>("tensor dimension");
      if (ne[d] == 0 || ne[d] > uint64_t(std::numeric_limits<int64_t>::max()) ||
          count > uint64_t(std::numeric_limits<int64_t>::max()) / ne[d])
        c.fail("tensor '" + ti.name + "': invalid dimension " + std::to_string(ne[d]));
      count *= ne[d];
    }
    const uint32_t dt = c.read<uint32_t>("tensor type");
    const auto di = dtype_info(dt);
    if (!di) c.fail("tensor '" + ti.name + "': unknown dtype id " + std::to_string(dt));
    ti.dtype = di->type;
    if (ne[0] % uint64_t(di->block_size) != 0)
      c.fail("tensor '" + ti.name + "': row length " + std::to_string(ne[0]) + " is not a multiple of the " +
             std::string(di->name) + " block size " + std::to_string(di->block_size));
    // Bounded by the file before multiplying: a size that wrapped around 2^64 would pass the bounds
    // check below while the shape promises far more data than the file holds.
    const uint64_t blocks = count / uint64_t(di->block_size);
    if (blocks > size_ / uint64_t(di->type_size))
      c.fail("tensor '" + ti.name + "': " + std::to_string(count) + " values of " + std::string(di->name) +
             " lie outside the file (more bytes than the file holds)");
    ti.nbytes = blocks * uint64_t(di->type_size);
    ti.offset = c.read<uint64_t>("tensor offset");
    if (ti.offset % alignment_ != 0) c.fail("tensor '" + ti.name + "': offset is not aligned");
    for (int d = int(nd) - 1; d >= 0; --d) ti.shape.push_back(int64_t(ne[d]));
    if (tensor_index_.count(ti.name)) c.fail("duplicate tensor name '" + ti.name + "'");
    tensor_index_[ti.name] = tensors_.size();
    tensors_.push_back(std::move(ti));
  }

  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty() && data_offset_ > size_) c.fail("data section starts past the end of the file");
  for (const TensorInfo& t : tensors_) {
    const uint64_t room = size_ - std::min<uint64_t>(data_offset_, size_);
    if (t.offset > room || t.nbytes > room - t.offset)
      throw GgufError(path_ + ": tensor '" + t.name + "' (" + std::to_string(t.nbytes) + " bytes at offset " +
                      std::to_string(t.offset) + ") lies outside the file");
  }
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {
[[noreturn]] void bad_key(const std::string& path, std::string_view key, const char* want, const Value* v) {
  if (!v) throw GgufError(path + ": missing metadata key '" + std::string(key) + "'");
  throw GgufError(path + ": metadata '" + std::string(key) + "' should be " + want + ", is " +
                  std::string(type_name(v->type)));
}
}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::STRING) bad_key(path_, key, "a string", v);
  return std::string(v->s);
}
int64_t GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v || !v->is_integer()) bad_key(path_, key, "an integer", v);
  return v->as_int();
}
double GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v || !(v->is_float() || v->is_integer())) bad_key(path_, key, "a number", v);
  return v->as_float();
}
bool GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::BOOL) bad_key(path_, key, "a bool", v);
  return v->b;
}
std::optional<std::string> GgufFile::opt_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}
std::optional<int64_t> GgufFile::opt_int(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_int(key);
}
std::optional<double> GgufFile::opt_float(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_float(key);
}
std::optional<bool> GgufFile::opt_bool(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}

std::vector<std::string_view> GgufFile::get_strings(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return {};
  if (v->type != ValueType::ARRAY || v->elem != ValueType::STRING) bad_key(path_, key, "an array of strings", v);
  std::vector<std::string_view> r;
  r.reserve(v->size());
  for (size_t k = 0; k < v->size(); ++k) r.push_back(v->at(k).s);
  return r;
}
std::vector<float> GgufFile::get_floats(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return {};
  if (v->type != ValueType::ARRAY || v->elem == ValueType::STRING || v->elem == ValueType::ARRAY)
    bad_key(path_, key, "an array of numbers", v);
  std::vector<float> r;
  r.reserve(v->size());
  for (size_t k = 0; k < v->size(); ++k) r.push_back(float(v->at(k).as_float()));
  return r;
}
std::vector<int32_t> GgufFile::get_ints(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return {};
  if (v->type != ValueType::ARRAY || !(v->empty() || v->at(0).is_integer()))
    bad_key(path_, key, "an array of integers", v);
  std::vector<int32_t> r;
  r.reserve(v->size());
  for (size_t k = 0; k < v->size(); ++k) r.push_back(int32_t(v->at(k).as_int()));
  return r;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(const TensorInfo& t) const {
  // The tensor keeps a reference to this file, so the mapping outlives every view of it.
  std::shared_ptr<void> keep = std::const_pointer_cast<GgufFile>(shared_from_this());
  Tensor out = Tensor::view_of(t.shape, t.dtype, tensor_data(t), keep);
  out.set_name(t.name);
  return out;
}

namespace {
bool half_finite(uint16_t h) { return (h & 0x7c00) != 0x7c00; }
template <class Block, class... Scale>
bool scales_finite(const void* p, uint64_t nbytes, Scale Block::*... scale) {
  const Block* b = static_cast<const Block*>(p);
  for (uint64_t i = 0; i < nbytes / sizeof(Block); ++i)
    if (!(half_finite(b[i].*scale) && ...)) return false;
  return true;
}
}  // namespace

bool GgufFile::finite(const TensorInfo& t) const {
  const void* p = tensor_data(t);
  const uint64_t nbytes = t.nbytes;
  switch (t.dtype) {
    case DType::F32: {
      const uint32_t* u = static_cast<const uint32_t*>(p);
      uint32_t bad = 0;
      for (uint64_t i = 0; i < nbytes / 4; ++i) bad |= uint32_t((u[i] & 0x7f800000u) == 0x7f800000u);
      return !bad;
    }
    case DType::F16:
    case DType::BF16: {  // exponent bits all ones: 5 of them in a half, 8 in a bfloat16
      const uint16_t exp = t.dtype == DType::F16 ? 0x7c00 : 0x7f80;
      const uint16_t* u = static_cast<const uint16_t*>(p);
      for (uint64_t i = 0; i < nbytes / 2; ++i)
        if ((u[i] & exp) == exp) return false;
      return true;
    }
    case DType::Q4_0:
      return scales_finite(p, nbytes, &BlockQ4_0::d);
    case DType::Q4_1:
      return scales_finite(p, nbytes, &BlockQ4_1::d, &BlockQ4_1::m);
    case DType::Q5_0:
      return scales_finite(p, nbytes, &BlockQ5_0::d);
    case DType::Q5_1:
      return scales_finite(p, nbytes, &BlockQ5_1::d, &BlockQ5_1::m);
    case DType::Q8_0:
      return scales_finite(p, nbytes, &BlockQ8_0::d);
    case DType::Q4_K:
      return scales_finite(p, nbytes, &BlockQ4_K::d, &BlockQ4_K::dmin);
    case DType::Q5_K:
      return scales_finite(p, nbytes, &BlockQ5_K::d, &BlockQ5_K::dmin);
    case DType::Q6_K:
      return scales_finite(p, nbytes, &BlockQ6_K::d);
    default:
      return true;
  }
}

// --- writer -----------------------------------------------------------------------------

void GgufWriter::set(std::string key, Value v) {
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(std::move(key), std::move(v));
}

void GgufWriter::add_tensor(std::string name, Shape shape, DType dtype, const void* data) {
  tensors_.push_back({std::move(name), std::move(shape), dtype, data});
}

void GgufWriter::add_tensor(const std::string& name, const Tensor& t) {
  kept_.push_back(t);
  add_tensor(name, t.shape(), t.dtype(), t.raw());
}

namespace {

struct Out {
  std::vector<uint8_t> buf;
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf.insert(buf.end(), p, p + sizeof(T));
  }
  void str(std::string_view s) {
    put<uint64_t>(s.size());
    buf.insert(buf.end(), s.begin(), s.end());
  }
  void value(const Value& v) {
    switch (v.type) {
      case ValueType::U8:
        put<uint8_t>(uint8_t(v.u));
        break;
      case ValueType::I8:
        put<int8_t>(int8_t(v.i));
        break;
      case ValueType::U16:
        put<uint16_t>(uint16_t(v.u));
        break;
      case ValueType::I16:
        put<int16_t>(int16_t(v.i));
        break;
      case ValueType::U32:
        put<uint32_t>(uint32_t(v.u));
        break;
      case ValueType::I32:
        put<int32_t>(int32_t(v.i));
        break;
      case ValueType::U64:
        put<uint64_t>(v.u);
        break;
      case ValueType::I64:
        put<int64_t>(v.i);
        break;
      case ValueType::F32:
        put<float>(float(v.f));
        break;
      case ValueType::F64:
        put<double>(v.f);
        break;
      case ValueType::BOOL:
        put<uint8_t>(v.b ? 1 : 0);
        break;
      case ValueType::STRING:
        str(v.s);
        break;
      case ValueType::ARRAY:
        put<uint32_t>(uint32_t(v.elem));
        put<uint64_t>(v.size());
        if (v.packed.data())
          buf.insert(buf.end(), v.packed.begin(), v.packed.end());  // already encoded
        else
          for (const Value& e : v.items) value(e);
        break;
    }
  }
};

}  // namespace

void GgufWriter::write(const std::string& path, Progress* bytes) const {
  uint64_t alignment = 32;
  for (const auto& [k, v] : kv_)
    if (k == "general.alignment" && v.is_integer()) alignment = uint64_t(v.as_int());

  Out h;
  h.put<uint32_t>(kMagic);
  h.put<uint32_t>(3);
  h.put<uint64_t>(tensors_.size());
  h.put<uint64_t>(kv_.size());
  for (const auto& [k, v] : kv_) {
    h.str(k);
    h.put<uint32_t>(uint32_t(v.type));
    h.value(v);
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets, sizes;
  for (const Pending& t : tensors_) {
    const DTypeInfo& di = info(t.dtype);
    if (t.shape.empty() || t.shape.back() % di.block_size != 0)
      throw std::runtime_error("gguf writer: tensor '" + t.name + "' has shape " + to_string(t.shape) +
                               " that does not fit " + std::string(di.name) + " blocks");
    h.str(t.name);
    h.put<uint32_t>(uint32_t(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) h.put<uint64_t>(uint64_t(*it));
    h.put<uint32_t>(uint32_t(t.dtype));
    h.put<uint64_t>(offset);
    offsets.push_back(offset);
    const uint64_t n = uint64_t(row_bytes(t.dtype, numel(t.shape)));
    sizes.push_back(n);
    offset = (offset + n + alignment - 1) / alignment * alignment;
  }
  h.buf.resize((h.buf.size() + alignment - 1) / alignment * alignment, 0);

  if (bytes) bytes->set_total(int64_t(h.buf.size() + offset));
  write_output_file(path, [&](std::FILE* f) {
    bool ok = std::fwrite(h.buf.data(), 1, h.buf.size(), f) == h.buf.size();
    static const uint8_t zeros[64] = {};
    constexpr uint64_t kPiece = 16 << 20;  // progress every 16 MiB within a large tensor
    uint64_t written = 0;
    for (size_t k = 0; ok && k < tensors_.size(); ++k) {
      const auto* data = static_cast<const uint8_t*>(tensors_[k].data);
      for (uint64_t at = 0; ok && at < sizes[k]; at += kPiece) {
        const size_t n = size_t(std::min(kPiece, sizes[k] - at));
        ok = std::fwrite(data + at, 1, n, f) == n;
        if (bytes) bytes->update(int64_t(h.buf.size() + offsets[k] + at + n));
      }
      written = offsets[k] + sizes[k];
      const uint64_t pad =
          (k + 1 < tensors_.size() ? offsets[k + 1] : (written + alignment - 1) / alignment * alignment) - written;
      for (uint64_t p = pad; ok && p > 0; p -= std::min<uint64_t>(p, 64))
        ok = std::fwrite(zeros, 1, size_t(std::min<uint64_t>(p, 64)), f) == std::min<uint64_t>(p, 64);
    }
    return ok;
  });
}

GgufWriter copy_of(const GgufFile& in) {
  GgufWriter w;
  for (const auto& [k, v] : in.metadata()) w.set(k, v);
  for (const TensorInfo& t : in.tensors()) w.add_tensor(t.name, t.shape, t.dtype, in.tensor_data(t));
  return w;
}

}  // namespace toy::gguf
