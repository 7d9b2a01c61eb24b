// cards/card.cpp — the card format: GGUF -> card, the `toy-card` block both ways, card -> GGUF.
//
// The pseudocode is in render.cpp; what it says of an architecture comes from archs/.
#include "toy/cards/card.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "toy/cards/render.h"
#include "toy/io/file_type.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::card {

using gguf::Value;
using gguf::ValueType;

const Value* Card::find(std::string_view key) const {
  for (const auto& [k, v] : meta)
    if (k == key) return &v;
  return nullptr;
}

namespace {

// --- values as `type = literal` ----------------------------------------------------------

const std::map<std::string, ValueType>& type_names() {
  static const std::map<std::string, ValueType> m = {
      {"u8", ValueType::U8},   {"i8", ValueType::I8},   {"u16", ValueType::U16},   {"i16", ValueType::I16},
      {"u32", ValueType::U32}, {"i32", ValueType::I32}, {"u64", ValueType::U64},   {"i64", ValueType::I64},
      {"f32", ValueType::F32}, {"f64", ValueType::F64}, {"bool", ValueType::BOOL}, {"string", ValueType::STRING}};
  return m;
}

bool is_signed(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}

std::string scalar_literal(const Value& v) {
  switch (v.type) {
    case ValueType::STRING:
      return nlohmann::json(std::string(v.s)).dump();
    case ValueType::BOOL:
      return v.b ? "true" : "false";
    case ValueType::F32:
      return short_float(v.f, true);
    case ValueType::F64:
      return short_float(v.f, false);
    default:
      return is_signed(v.type) ? std::to_string(v.i) : std::to_string(v.u);
  }
}

std::string type_text(const Value& v) {
  return v.type == ValueType::ARRAY ? "[" + std::string(gguf::type_name(v.elem)) + "]"
                                    : std::string(gguf::type_name(v.type));
}

std::string literal(const Value& v) {
  if (v.type != ValueType::ARRAY) return scalar_literal(v);
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + scalar_literal(v.at(i));
  return s + "]";
}

// One scalar of type `t` from a JSON value (or the words inf/nan for floats).
Value scalar_from(const nlohmann::json& j, ValueType t, const std::string& text) {
  Value v;
  v.type = t;
  auto bad = [&] { return CardError("'" + text + "' is not a " + std::string(gguf::type_name(t))); };
  switch (t) {
    case ValueType::STRING:
      if (!j.is_string()) throw bad();
      return Value::of_string(j.get<std::string>());
    case ValueType::BOOL:
      if (!j.is_boolean()) throw bad();
      v.b = j.get<bool>();
      return v;
    case ValueType::F32:
    case ValueType::F64:
      if (!j.is_number()) throw bad();
      v.f = j.get<double>();
      if (t == ValueType::F32) v.f = double(float(v.f));
      return v;
    default: {
      if (!j.is_number_integer()) throw bad();
      const int bits = int(8 * (t == ValueType::U8 || t == ValueType::I8     ? 1
                                : t == ValueType::U16 || t == ValueType::I16 ? 2
                                : t == ValueType::U32 || t == ValueType::I32 ? 4
                                                                             : 8));
      if (is_signed(t)) {
        v.i = j.get<int64_t>();
        if (bits < 64 && (v.i < -(int64_t(1) << (bits - 1)) || v.i >= (int64_t(1) << (bits - 1)))) throw bad();
      } else {
        if (j.is_number_unsigned())
          v.u = j.get<uint64_t>();
        else if (j.get<int64_t>() < 0)
          throw bad();
        else
          v.u = uint64_t(j.get<int64_t>());
        if (bits < 64 && v.u >> bits) throw bad();
      }
      return v;
    }
  }
}

nlohmann::json parse_literal(const std::string& text, bool allow_float_words) {
  if (allow_float_words) {
    if (text == "inf" || text == "+inf") return nlohmann::json(INFINITY);  // NOLINT: json stores it as a number
    if (text == "-inf") return nlohmann::json(-INFINITY);
    if (text == "nan") return nlohmann::json(NAN);
  }
  return nlohmann::json::parse(text);  // throws nlohmann::json::parse_error
}

Value value_from(const std::string& type, const std::string& text) {
  const bool array = type.size() > 2 && type.front() == '[' && type.back() == ']';
  const std::string elem = array ? type.substr(1, type.size() - 2) : type;
  auto it = type_names().find(elem);
  if (it == type_names().end())
    throw CardError("unknown type '" + type + "' (u8 … i64, f32, f64, bool, string, or [type])");
  const bool fl = it->second == ValueType::F32 || it->second == ValueType::F64;
  nlohmann::json j;
  try {
    j = parse_literal(text, fl);
  } catch (const std::exception&) {
    throw CardError("cannot read the value '" + text + "'");
  }
  if (!array) return scalar_from(j, it->second, text);
  if (!j.is_array()) throw CardError("'" + text + "' is not an array");
  Value v;
  v.type = ValueType::ARRAY;
  v.elem = it->second;
  for (const auto& e : j) v.push_back(scalar_from(e, it->second, e.dump()));
  return v;
}

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

}  // namespace

Card from_gguf(const gguf::GgufFile& f) {
  Card c;
  c.arch = f.architecture();
  if (!find_architecture(c.arch))
    throw CardError(f.path() + ": no algorithm card for architecture '" + c.arch +
                    "' (cards cover: " + architecture_names() + ")");
  for (const auto& [k, v] : f.metadata()) {
    const bool keep = k == "general.architecture" || k == "general.name" || k.rfind(c.arch + ".", 0) == 0 ||
                      (k.rfind("tokenizer.ggml.", 0) == 0 && v.type != ValueType::ARRAY);
    if (keep) c.meta.emplace_back(k, v);
  }
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd && !embd->shape.empty())
    c.n_vocab = embd->shape[0];
  else if (auto n = f.opt_int(c.arch + ".vocab_size"))
    c.n_vocab = *n;
  else
    c.n_vocab = int64_t(f.get_strings("tokenizer.ggml.tokens").size());
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  if (const gguf::TensorInfo* rf = f.find_tensor("rope_freqs.weight")) c.rope_freqs = f.tensor(*rf).to_vector();
  if (auto ft = f.opt_int("general.file_type")) c.source_dtype = gguf::file_type_name(*ft);
  try {
    describe(c);  // validates the hyper-parameters now, with the file's name in the message
  } catch (const CardError& e) {
    throw CardError(f.path() + ": " + e.what());
  }
  return c;
}

std::string render(const Card& c) {
  const Description desc = describe(c);
  const ModelConfig& d = desc.config;
  const Value* name = c.find("general.name");
  std::string s = "# Algorithm card: " + (name ? std::string(name->s) : c.arch) + "\n\n";
  const std::string hf = *desc.variant.hf_class ? "Hugging Face `" + std::string(desc.variant.hf_class) + "`"
                                                : std::string("toy's own; no Hugging Face class");
  s += "The `" + c.arch + "` architecture (" + hf +
       ") with this file's hyper-parameters: " + std::to_string(d.n_layer) + " layers, d_model " +
       std::to_string(d.d_model) + ", " + std::to_string(d.n_head) + " query heads" +
       (d.n_kv_head != d.n_head ? " sharing " + std::to_string(d.n_kv_head) + " key/value heads" : "") + " of size " +
       std::to_string(d.d_head) + ", " + std::to_string(desc.parameter_count()) + " parameters" +
       (c.source_dtype.empty() ? "" : " (stored as " + c.source_dtype + ")") + ".\n\n";
  s += "Pseudocode in the style of Phuong & Hutter, *Formal Algorithms for Transformers* (arXiv:2207.09238), "
       "with two changes of convention: indices start at 0, and matrices are stored as in PyTorch and GGUF "
       "readers (a weight is [out, in], row t of an activation is token t, so a projection is X·Wᵀ).\n\n";
  s += "## Hyper-parameters\n\n"
       "The block below is the machine-readable part of this card: `toy describe CARD.md --json` reads it, and "
       "`toy init --card CARD.md -o model.gguf` builds a model (random weights, placeholder vocabulary) with the "
       "same tensors and metadata. One `key: type = value` per line; keys are GGUF metadata, `card.*` are facts GGUF "
       "keeps in tensors.\n\n```toy-card\n";
  size_t w = 0;
  for (const auto& [k, v] : c.meta) w = std::max(w, k.size() + type_text(v).size());
  auto line = [&](const std::string& k, const Value& v) {
    const std::string left = k + ": " + type_text(v);
    s += left + std::string(w + 3 > left.size() ? w + 3 - left.size() : 1, ' ') + "= " + literal(v) + "\n";
  };
  for (const auto& [k, v] : c.meta) line(k, v);
  line("card.n_vocab", Value::of_u32(uint32_t(c.n_vocab)));
  line("card.tied_output", Value::of_bool(c.tied_output));
  if (!c.rope_freqs.empty()) line("card.rope_freqs", Value::of_f32s(c.rope_freqs));
  if (!c.source_dtype.empty()) line("card.source_dtype", Value::of_string(c.source_dtype));
  s += "```\n\n";
  return s + render_algorithms(c, desc);
}

Card parse(std::string_view text, const std::string& label) {
  // The first fenced block whose info string is `toy-card`.
  size_t pos = 0, line_no = 0, start_line = 0;
  bool in_block = false, found = false;
  std::vector<std::pair<size_t, std::string>> lines;
  while (pos <= text.size() && !found) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string line = trim(text.substr(pos, end - pos));
    ++line_no;
    if (!in_block && (line == "```toy-card" || line == "``` toy-card")) {
      in_block = true;
      start_line = line_no;
    } else if (in_block && line.rfind("```", 0) == 0) {
      found = true;
    } else if (in_block) {
      lines.emplace_back(line_no, line);
    }
    pos = end + 1;
  }
  if (!in_block)
    throw CardError(label + ": no ```toy-card block (is this an algorithm card? see `toy describe MODEL --card`)");
  if (!found)
    throw CardError(label + ": the ```toy-card block opened on line " + std::to_string(start_line) + " is not closed");

  Card c;
  bool have_vocab = false, have_tied = false;
  for (const auto& [no, line] : lines) {
    if (line.empty() || line[0] == '#') continue;
    auto fail = [&, n = no](const std::string& why) { return CardError(label + ":" + std::to_string(n) + ": " + why); };
    const size_t colon = line.find(':'), eq = line.find('=');
    if (colon == std::string::npos || eq == std::string::npos || eq < colon)
      throw fail("expected 'key: type = value', got '" + line + "'");
    const std::string key = trim(std::string_view(line).substr(0, colon));
    const std::string type = trim(std::string_view(line).substr(colon + 1, eq - colon - 1));
    const std::string val = trim(std::string_view(line).substr(eq + 1));
    if (key.empty() || key.find_first_of(" \t\"") != std::string::npos) throw fail("bad key '" + key + "'");
    Value v;
    try {
      v = value_from(type, val);
    } catch (const CardError& e) {
      throw fail(key + ": " + e.what());
    }
    if (c.find(key) || (key == "card.n_vocab" && have_vocab)) throw fail("duplicate key " + key);
    if (key.rfind("card.", 0) == 0) {
      if (key == "card.n_vocab" && v.is_integer()) {
        c.n_vocab = v.as_int();
        have_vocab = true;
      } else if (key == "card.tied_output" && v.type == ValueType::BOOL) {
        c.tied_output = v.b;
        have_tied = true;
      } else if (key == "card.rope_freqs" && v.type == ValueType::ARRAY && v.elem == ValueType::F32)
        for (size_t k = 0; k < v.size(); ++k) c.rope_freqs.push_back(float(v.at(k).f));
      else if (key == "card.source_dtype" && v.type == ValueType::STRING)
        c.source_dtype = std::string(v.s);
      else
        throw fail("unknown or mistyped card key " + key +
                   " (card.n_vocab: u32, card.tied_output: bool, card.rope_freqs: [f32], card.source_dtype: string)");
      continue;
    }
    if (key == "general.architecture") {
      if (v.type != ValueType::STRING) throw fail("general.architecture must be a string");
      c.arch = std::string(v.s);
    }
    c.meta.emplace_back(key, std::move(v));
  }
  if (c.arch.empty()) throw CardError(label + ": the toy-card block has no general.architecture");
  if (!have_vocab || c.n_vocab <= 0 || c.n_vocab > (int64_t(1) << 24))
    throw CardError(label + ": card.n_vocab is missing or out of range");
  if (!have_tied) throw CardError(label + ": card.tied_output is missing");
  try {
    describe(c);
  } catch (const CardError& e) {
    throw CardError(label + ": " + e.what());
  }
  return c;
}

Card load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CardError(path + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  return parse(text, path);
}

bool is_card_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) return false;
  in.seekg(0);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  return text.find("```toy-card") != std::string::npos || text.find("``` toy-card") != std::string::npos;
}

Description describe(const Card& c) {
  const Architecture* a = find_architecture(c.arch);
  if (!a)
    throw CardError("no algorithm card for architecture '" + c.arch + "' (cards cover: " + architecture_names() + ")");
  std::vector<std::string> present;
  if (!c.rope_freqs.empty()) present.push_back("rope_freqs.weight");
  try {
    Description d = a->describe(c.meta, c.n_vocab, c.tied_output, present);
    if (!c.rope_freqs.empty() && int64_t(c.rope_freqs.size()) != int64_t(d.value("rope.dimension_count")) / 2)
      throw CardError("card.rope_freqs has " + std::to_string(c.rope_freqs.size()) + " factors, expected n_rot/2");
    return d;
  } catch (const std::invalid_argument& e) {
    throw CardError(e.what());
  } catch (const std::out_of_range& e) {
    throw CardError(std::string("card.rope_freqs: ") + e.what());
  }
}

std::vector<TensorSpec> tensors(const Card& c) {
  const Description d = describe(c);
  std::vector<TensorSpec> out;
  bool layers_done = false;
  for (const TensorSpec& t : d.tensors) {
    if (!t.per_layer) {
      out.push_back(t);
    } else if (!layers_done) {  // a layer's tensors are contiguous in the table: emit every layer's
      for (int64_t l = 0; l < d.config.n_layer; ++l)
        for (const TensorSpec& u : d.tensors)
          if (u.per_layer) {
            TensorSpec one = u;
            one.name = "blk." + std::to_string(l) + u.name.substr(std::string("blk.ℓ").size());
            one.per_layer = false;
            out.push_back(one);
          }
      layers_done = true;
    }
  }
  return out;
}

uint64_t parameter_count(const Card& c) { return describe(c).parameter_count(); }

nlohmann::ordered_json to_json(const Card& c) {
  nlohmann::ordered_json j;
  j["architecture"] = c.arch;
  const Value* name = c.find("general.name");
  j["name"] = name ? std::string(name->s) : "";
  j["parameters"] = parameter_count(c);
  nlohmann::ordered_json hp = nlohmann::ordered_json::object();
  for (const auto& [k, v] : c.meta)
    if (k.rfind(c.arch + ".", 0) == 0) hp[k.substr(c.arch.size() + 1)] = gguf::to_json(v);
  j["hyperparameters"] = hp;
  nlohmann::ordered_json tok{{"n_vocab", c.n_vocab}};
  for (const auto& [k, v] : c.meta)
    if (k.rfind("tokenizer.ggml.", 0) == 0) tok[k.substr(15)] = gguf::to_json(v);
  j["tokenizer"] = tok;
  j["tied_output"] = c.tied_output;
  if (!c.rope_freqs.empty()) j["rope_freqs"] = c.rope_freqs;
  if (!c.source_dtype.empty()) j["source_dtype"] = c.source_dtype;
  nlohmann::ordered_json ts = nlohmann::ordered_json::array();
  for (const TensorSpec& t : tensors(c)) ts.push_back({{"name", t.name}, {"shape", t.shape}});
  j["tensors"] = ts;
  return j;
}

void write_model(const Card& c, const std::string& path, uint64_t seed, Progress* bytes) {
  describe(c);  // validates
  std::unique_ptr<Model> model = find_architecture(c.arch)->random(c.meta, c.n_vocab, c.tied_output, seed);
  gguf::GgufWriter w;
  for (const auto& [k, v] : c.meta)
    if (k.rfind("tokenizer.", 0) != 0) w.set(k, v);
  w.set("general.file_type", Value::of_u32(0));  // all F32
  write_placeholder_vocab(w, c.n_vocab);
  for (const auto& [k, v] : c.meta) {  // the special token ids the card names, where the placeholder has them
    const bool id = k.rfind("tokenizer.ggml.", 0) == 0 && k.size() > 9 && k.compare(k.size() - 9, 9, "_token_id") == 0;
    if (id && v.is_integer() && v.as_int() >= 0 && v.as_int() < c.n_vocab) w.set(k, v);
  }
  // card.rope_freqs is the one tensor a card gives by value (GGUF lists it first).
  Tensor freqs;  // alive until the write
  if (!c.rope_freqs.empty()) {
    freqs = Tensor::from({int64_t(c.rope_freqs.size())}, c.rope_freqs);
    w.add_tensor("rope_freqs.weight", freqs);
  }
  model->for_each_param([&](Tensor& t) { w.add_tensor(t.name(), t); });
  w.write(path, bytes);
}

}  // namespace toy::card
