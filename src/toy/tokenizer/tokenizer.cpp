// tokenizer/tokenizer.cpp — loading a vocabulary from GGUF, and what all models share:
// special tokens written in the text, BOS/EOS, pieces, decoding, streaming and saving.
//
// The rules follow llama.cpp's llama_vocab::impl (load, tokenizer_st_partition, tokenize,
// token_to_piece, detokenize); each function says where toy deliberately differs.
#include "toy/tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>

#include "toy/io/gguf.h"
#include "toy/tokenizer/unicode.h"
#include "toy/tokenizer/vocab.h"

namespace toy {

using namespace tokenizer_detail;
using gguf::Value;
using gguf::ValueType;

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁", SentencePiece's visible space

// What the tokenizer.ggml.* keys say, before interpretation (from a file or built in code).
struct Metadata {
  std::string label;  // file path, for messages
  std::string model, pre, name;
  std::vector<std::string> tokens;
  std::vector<float> scores;   // empty when absent
  std::vector<int32_t> types;  // empty when absent
  std::vector<std::string> merges;
  std::vector<std::pair<std::string, int64_t>> special_ids;  // every tokenizer.ggml.*_token_id
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// ---- reading ----------------------------------------------------------------------------------

const Value* array_of(const gguf::GgufFile& f, const std::string& key, bool strings) {
  const Value* v = f.find(key);
  if (!v) return nullptr;
  const bool ok = v->type == ValueType::ARRAY &&
                  (strings ? v->elem == ValueType::STRING
                           : v->elem != ValueType::STRING && v->elem != ValueType::ARRAY && v->elem != ValueType::BOOL);
  if (!ok)
    throw TokenizerError(f.path() + ": " + key + " must be an array of " + (strings ? "strings" : "numbers") +
                         ", not " + std::string(gguf::type_name(v->type)));
  return v;
}

Metadata read_metadata(const gguf::GgufFile& f) {
  Metadata m;
  m.label = f.path();
  m.model = f.opt_string("tokenizer.ggml.model").value_or("");
  if (m.model.empty()) throw TokenizerError(f.path() + ": no tokenizer.ggml.model (the file has no tokenizer)");
  m.pre = f.opt_string("tokenizer.ggml.pre").value_or("");
  m.name = f.opt_string("general.name").value_or("");

  const Value* tokens = array_of(f, "tokenizer.ggml.tokens", true);
  if (!tokens || tokens->empty()) throw TokenizerError(f.path() + ": no tokenizer.ggml.tokens (empty vocabulary)");
  m.tokens.reserve(tokens->size());
  for (size_t k = 0; k < tokens->size(); ++k) m.tokens.emplace_back(tokens->at(k).s);

  if (const Value* s = array_of(f, "tokenizer.ggml.scores", false))
    for (size_t k = 0; k < s->size(); ++k) m.scores.push_back(float(s->at(k).as_float()));
  if (const Value* t = array_of(f, "tokenizer.ggml.token_type", false))
    for (size_t k = 0; k < t->size(); ++k) {
      const Value x = t->at(k);
      if (!x.is_integer()) throw TokenizerError(f.path() + ": tokenizer.ggml.token_type must hold integers");
      if (x.as_int() < 0 || x.as_int() > 6)
        throw TokenizerError(f.path() + ": tokenizer.ggml.token_type[" + std::to_string(k) +
                             "] = " + std::to_string(x.as_int()) +
                             " is not a token type (0 undefined, 1 normal, 2 unknown, 3 control, 4 user-defined, 5 "
                             "unused, 6 byte)");
      m.types.push_back(int32_t(x.as_int()));
    }
  if (const Value* g = array_of(f, "tokenizer.ggml.merges", true))
    for (size_t k = 0; k < g->size(); ++k) m.merges.emplace_back(g->at(k).s);

  for (const auto& [key, v] : f.metadata()) {
    if (key.rfind("tokenizer.ggml.", 0) != 0 || !key.ends_with("_token_id")) continue;
    if (!v.is_integer()) throw TokenizerError(f.path() + ": " + key + " must be an integer");
    m.special_ids.emplace_back(key, v.as_int());
  }
  m.add_bos = f.opt_bool("tokenizer.ggml.add_bos_token");
  m.add_eos = f.opt_bool("tokenizer.ggml.add_eos_token");
  m.add_space_prefix = f.opt_bool("tokenizer.ggml.add_space_prefix");
  return m;
}

// ---- building ---------------------------------------------------------------------------------

uint32_t attr_of_type(int32_t type) {
  switch (type) {
    case 1:
      return kNormal;
    case 2:
      return kUnknown;
    case 3:
      return kControl;
    case 4:
      return kUserDefined;
    case 5:
      return kUnused;
    case 6:
      return kByte;
    default:
      return 0;  // 0, undefined: renders as nothing (read_metadata refuses the rest)
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The bytes a token stands for (llama_token_to_piece with special = true).
std::string render_piece(const Vocab& v, int32_t id) {
  const std::string& t = v.text[size_t(id)];
  const uint32_t a = v.attr[size_t(id)];
  if (a & (kUnknown | kControl | kUserDefined)) return t;
  if (a & kNormal) {
    std::string r;
    if (v.algo == Algo::Bpe) {  // GPT-2 code points back to bytes; other characters stay as they are
      for (uint32_t cp : unicode::codepoints(t)) {
        const int b = unicode::byte_from_codepoint(cp);
        if (b >= 0)
          r += char(b);
        else
          unicode::append_utf8(r, cp);
      }
    } else {  // "▁" back to a space
      for (size_t i = 0; i < t.size();) {
        if (std::string_view(t).substr(i, kSpace.size()) == kSpace) {
          r += ' ';
          i += kSpace.size();
        } else {
          r += t[i++];
        }
      }
    }
    return r;
  }
  if (a & kByte) return std::string(1, char(hex_digit(t[3]) * 16 + hex_digit(t[4])));
  return "";  // unused or undefined
}

// End-of-generation and related tokens are found by their text, as llama.cpp does (its
// load() lists these names); a token found this way is made a control token.
void detect_eog(Vocab& v, const std::vector<std::pair<std::string, int64_t>>& ids_from_keys) {
  const auto key_id = [&](std::string_view key) -> int32_t {
    for (const auto& [k, id] : ids_from_keys)
      if (k == key && id >= 0 && id < v.n_vocab()) return int32_t(id);
    return -1;
  };
  const auto find_named = [&](int32_t& id, std::initializer_list<std::string_view> names) {
    if (id >= 0) return;
    for (std::string_view n : names)
      if (const int32_t t = v.find(n); t >= 0 && (id < 0 || t < id)) id = t;
    if (id >= 0) v.attr[size_t(id)] |= kControl;
  };
  find_named(v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                     "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"});
  find_named(v.eom, {"<|eom_id|>"});
  // Fill-in-the-middle tokens: control tokens; pad / repo / file separator also end generation.
  int32_t fim_pre = key_id("tokenizer.ggml.fim_pre_token_id"), fim_suf = key_id("tokenizer.ggml.fim_suf_token_id");
  int32_t fim_mid = key_id("tokenizer.ggml.fim_mid_token_id"), fim_pad = key_id("tokenizer.ggml.fim_pad_token_id");
  int32_t fim_rep = key_id("tokenizer.ggml.fim_rep_token_id"), fim_sep = key_id("tokenizer.ggml.fim_sep_token_id");
  find_named(fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                       "<|code_prefix|>", "<|prefix|>"});
  find_named(fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                       "<|code_suffix|>", "<|suffix|>"});
  find_named(fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                       "<|code_middle|>", "<|middle|>"});
  find_named(fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  find_named(fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  find_named(fim_sep, {"<|file_sep|>"});

  for (int32_t id : {fim_pad, fim_rep, fim_sep, v.eos, v.eot, v.eom})
    if (id >= 0) v.eog.push_back(id);
  for (std::string_view n : {"<|eot_id|>",
                             "<|im_end|>",
                             "<|end|>",
                             "<|return|>",
                             "<|call|>",
                             "<|flush|>",
                             "<|calls|>",
                             "<end_of_turn>",
                             "<|endoftext|>",
                             "</s>",
                             "<|eom_id|>",
                             "<EOT>",
                             "_<EOT>",
                             "[EOT]",
                             "[EOS]",
                             "<|end_of_text|>",
                             "<end_of_utterance>",
                             "<eos>",
                             "<turn|>",
                             "<|tool_response>",
                             "<｜end▁of▁sentence｜>",
                             "[e~["}) {
    if (const int32_t id = v.find(n); id >= 0) {
      v.eog.push_back(id);
      v.attr[size_t(id)] |= kControl;
    }
  }
  std::sort(v.eog.begin(), v.eog.end());
  v.eog.erase(std::unique(v.eog.begin(), v.eog.end()), v.eog.end());
}

void load_merges(Vocab& v, const Metadata& m) {
  v.merges.reserve(m.merges.size());
  for (size_t i = 0; i < m.merges.size(); ++i) {
    const std::string& s = m.merges[i];
    const size_t sp = s.find(' ', 1);  // from 1: the left part may itself be a space
    const auto bad = [&](const std::string& why) {
      return TokenizerError(m.label + ": tokenizer.ggml.merges[" + std::to_string(i) + "] = '" + s + "' " + why);
    };
    if (sp == std::string::npos) throw bad("is not two tokens separated by a space");
    const std::string_view a = std::string_view(s).substr(0, sp), b = std::string_view(s).substr(sp + 1);
    const int32_t ia = v.find(a), ib = v.find(b), ir = v.find(std::string(a) + std::string(b));
    if (ia < 0 || ib < 0 || ir < 0) throw bad("refers to a token that is not in the vocabulary");
    v.merges.insert(pair_key(ia, ib), Merge{int32_t(i), ir});  // a repeated pair keeps its first rank
  }
}

// An error about the vocabulary being built, prefixed with its file.
struct Fail {
  const std::string& label;
  TokenizerError operator()(const std::string& what) const { return TokenizerError(label + ": " + what); }
};

// Algorithm and the defaults llama.cpp's load() gives each model; keys read later override them.
const PreSpec* set_model_defaults(Vocab& v, const Metadata& m, const Fail& fail) {
  v.model = m.model;
  v.pre = m.pre;
  if (m.model == "llama" || m.model == "bytes") {
    v.algo = Algo::Spm;
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
    return nullptr;
  }
  if (m.model == "gpt2") {
    const PreSpec& spec = pre_spec(m.pre);
    v.algo = Algo::Bpe;
    v.bos = 11, v.eos = 11;
    v.add_bos = spec.add_bos;
    v.clean_spaces = spec.clean_spaces;
    v.ignore_merges = spec.ignore_merges;
    return &spec;
  }
  if (m.model == "bert") {
    v.algo = Algo::Wpm;
    v.bos = 101, v.unk = 100, v.sep = 102;  // [CLS] [UNK] [SEP]
    v.add_bos = true;
    v.clean_spaces = true;
    return nullptr;
  }
  throw fail("unsupported tokenizer.ggml.model '" + m.model + "' (toy supports llama, gpt2 and bert)");
}

void load_tokens(Vocab& v, Metadata& m, const Fail& fail) {
  const size_t n = m.tokens.size();
  if (n >= size_t(INT32_MAX)) throw fail("too many tokens");
  if (!m.scores.empty() && m.scores.size() != n)
    throw fail("tokenizer.ggml.scores has " + std::to_string(m.scores.size()) + " entries for " + std::to_string(n) +
               " tokens");
  if (!m.types.empty() && m.types.size() != n)
    throw fail("tokenizer.ggml.token_type has " + std::to_string(m.types.size()) + " entries for " + std::to_string(n) +
               " tokens");
  v.text = std::move(m.tokens);
  v.score = m.scores.empty() ? std::vector<float>(n, 0.0f) : m.scores;
  v.attr.resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& t = v.text[i];
    if (t.empty()) t = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp: keeps ids unique and visible
    if (!unicode::is_valid_utf8(t)) throw fail("token " + std::to_string(i) + " is not valid UTF-8");
    v.attr[i] = m.types.empty() ? kNormal : attr_of_type(m.types[i]);
    const bool hex =
        t.size() == 6 && t.starts_with("<0x") && hex_digit(t[3]) >= 0 && hex_digit(t[4]) >= 0 && t[5] == '>';
    if ((v.attr[i] & kByte) && v.algo == Algo::Wpm)  // llama.cpp aborts on a WordPiece byte token
      throw fail("token " + std::to_string(i) + " '" + t +
                 "' is a byte token (token_type 6), which a bert vocabulary has not: is tokenizer.ggml.model = "
                 "'bert' right for this SentencePiece vocabulary?");
    if ((v.attr[i] & kByte) && !hex) throw fail("byte token " + std::to_string(i) + " is '" + t + "', expected <0xXX>");
    v.max_token_len = std::max(v.max_token_len, t.size());
  }
  if (const int32_t dup = v.index.build(v.text); dup >= 0)
    throw fail("duplicate token '" + v.text[size_t(dup)] + "' (ids " + std::to_string(v.find(v.text[size_t(dup)])) +
               " and " + std::to_string(dup) + ")");
  for (int32_t* id : {&v.bos, &v.eos, &v.unk, &v.sep})
    if (*id >= v.n_vocab()) *id = -1;  // a default outside a small vocabulary: none
}

// BOS and EOS are inserted into sequences, so a bad one is an error; for the other roles
// llama.cpp ignores an id outside the vocabulary, and so does toy.
void set_special_ids(Vocab& v, const Metadata& m, const Fail& fail) {
  for (const auto& [key, id] : m.special_ids) {
    int32_t* field = key == "tokenizer.ggml.bos_token_id"         ? &v.bos
                     : key == "tokenizer.ggml.eos_token_id"       ? &v.eos
                     : key == "tokenizer.ggml.eot_token_id"       ? &v.eot
                     : key == "tokenizer.ggml.eom_token_id"       ? &v.eom
                     : key == "tokenizer.ggml.unknown_token_id"   ? &v.unk
                     : key == "tokenizer.ggml.seperator_token_id" ? &v.sep  // sic: llama.cpp's key
                                                                  : nullptr;
    const bool in_range = id >= 0 && id < v.n_vocab();
    if (!in_range && (field == &v.bos || field == &v.eos))
      throw fail(key + " = " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(v.n_vocab()) +
                 " tokens");
    if (field && in_range) *field = int32_t(id);
  }
  if (m.add_bos) v.add_bos = *m.add_bos;
  if (m.add_eos) v.add_eos = *m.add_eos;
  if (m.add_space_prefix && v.algo == Algo::Spm) v.add_space_prefix = *m.add_space_prefix;
  if (v.add_bos && v.bos < 0) throw fail("tokenizer.ggml.add_bos_token is true but there is no BOS token");
  if (v.add_eos && v.eos < 0) throw fail("tokenizer.ggml.add_eos_token is true but there is no EOS token");
  if (v.algo == Algo::Wpm && v.sep < 0) throw fail("a bert vocabulary needs a separator ([SEP]) token");
}

// The tokens matched as a whole in the text, longest first ("<|im_start|>" must win over a
// shorter token inside it), and the tries that find them.
void index_specials(Vocab& v, const std::string& general_name) {
  for (int32_t i = 0; i < v.n_vocab(); ++i)
    if (v.attr[size_t(i)] & (kControl | kUserDefined | kUnknown)) v.specials.push_back(i);
  std::string name = general_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    // phi-3 strips spaces after its special tokens (llama.cpp decides this by model name).
    for (int32_t id : v.specials) v.attr[size_t(id)] |= kRstrip;
    if (const int32_t id = v.find("</s>"); id >= 0) v.attr[size_t(id)] |= kRstrip;
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"})
      if (const int32_t id = v.find(t); id >= 0) v.attr[size_t(id)] &= ~kRstrip;
  }
  std::stable_sort(v.specials.begin(), v.specials.end(),
                   [&](int32_t a, int32_t b) { return v.text[size_t(a)].size() > v.text[size_t(b)].size(); });
  for (size_t k = 0; k < v.specials.size(); ++k) {
    const int32_t id = v.specials[k];
    v.specials_all.insert(v.text[size_t(id)], int32_t(k));
    if (!(v.attr[size_t(id)] & (kControl | kUnknown))) v.specials_always.insert(v.text[size_t(id)], int32_t(k));
  }
}

void index_bytes(Vocab& v) {
  for (int b = 0; b < 256; ++b) {
    if (v.algo == Algo::Bpe) {
      std::string s;
      unicode::append_utf8(s, unicode::byte_to_codepoint(uint8_t(b)));
      v.byte_token[size_t(b)] = v.find(s);
    } else {  // llama.cpp byte_to_token: "<0xXX>", else the byte as a one-character token
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      const int32_t id = v.find(hex);
      v.byte_token[size_t(b)] = id >= 0 ? id : v.find(std::string(1, char(b)));
    }
  }
}

std::unique_ptr<Vocab> build(Metadata m) {
  auto vp = std::make_unique<Vocab>();
  Vocab& v = *vp;
  const Fail fail{m.label};
  const PreSpec* spec = set_model_defaults(v, m, fail);
  load_tokens(v, m, fail);
  set_special_ids(v, m, fail);
  detect_eog(v, m.special_ids);
  index_specials(v, m.name);
  index_bytes(v);
  if (v.algo == Algo::Spm) spm_index_pairs(v);
  if (v.algo == Algo::Bpe) {
    if (m.merges.empty()) throw fail("a gpt2 vocabulary needs tokenizer.ggml.merges");
    load_merges(v, m);
    v.pretok = std::make_unique<PreTokenizer>(*spec);
  }
  v.piece.resize(v.text.size());
  for (int32_t i = 0; i < v.n_vocab(); ++i) v.piece[size_t(i)] = render_piece(v, i);

  v.file_types = std::move(m.types);
  v.file_has_scores = !m.scores.empty();
  for (const auto& [key, id] : m.special_ids)
    if (id >= 0 && id < v.n_vocab()) v.file_special_ids.emplace_back(key, int32_t(id));
  return vp;
}

// ---- encoding ---------------------------------------------------------------------------------

struct Fragment {
  int32_t token;          // >= 0: a special token found in the text
  std::string_view text;  // otherwise: plain text still to tokenize
};

bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// llama.cpp's tokenizer_st_partition: for each special token, longest first, split every plain
// fragment at its occurrences. User-defined tokens are always split out (as HF tokenizers do);
// control and unknown tokens only when parse_special.
std::vector<Fragment> partition(const Vocab& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, text});
  // Which special tokens occur at all, in one pass over the text: a vocabulary can have
  // thousands (deepseek-llm), and a long text should not be searched once for each.
  std::vector<uint8_t> present(v.specials.size());
  (parse_special ? v.specials_all : v.specials_always).scan(text, [&](int32_t k) { present[size_t(k)] = 1; });

  std::vector<Fragment> next;
  for (size_t k = 0; k < v.specials.size(); ++k) {
    if (!present[k]) continue;
    const int32_t id = v.specials[k];
    const std::string& tok = v.text[size_t(id)];
    const uint32_t a = v.attr[size_t(id)];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t at; (at = rest.find(tok)) != std::string_view::npos;) {
        std::string_view left = rest.substr(0, at);
        if (a & kLstrip)
          while (!left.empty() && ascii_space(left.back())) left.remove_suffix(1);
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({id, {}});
        rest.remove_prefix(at + tok.size());
        if (a & kRstrip)
          while (!rest.empty() && ascii_space(rest.front())) rest.remove_prefix(1);
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    frags.swap(next);
  }
  return frags;
}

// SentencePiece's normalisation as llama.cpp applies it: spaces become "▁", and a "▁" is put
// in front of text that starts the input or follows a special token.
std::string escape_spm(std::string_view text, bool prefix) {
  std::string s;
  s.reserve(text.size() + 16);
  if (prefix) s += kSpace;
  for (char c : text) {
    if (c == ' ')
      s += kSpace;
    else
      s += c;
  }
  return s;
}

// llama.cpp detokenize's clean_spaces passes, transcribed index for index so that odd inputs
// give the same bytes: " ?" " !" " ." " ," lose the space; " ' " loses both; " 's" " 'm" " 're"
// " 've" lose the space.
void clean_spaces(std::string& text) {
  const auto pass = [&](auto&& step) {
    const size_t n = text.size();
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; ++i) step(i, total, n);
    text.resize(total);
  };
  pass([&](size_t& i, size_t& total, size_t) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  });
  pass([&](size_t& i, size_t& total, size_t n) {
    const char x = text[i];
    if (x == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  });
  pass([&](size_t& i, size_t& total, size_t n) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm')
        --total;
      else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  });
}

}  // namespace

// ---- Tokenizer --------------------------------------------------------------------------------

Tokenizer::Tokenizer(std::unique_ptr<Vocab> v) : v_(std::move(v)) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& f) {
  try {
    return std::shared_ptr<const Tokenizer>(new Tokenizer(build(read_metadata(f))));
  } catch (const gguf::GgufError& e) {  // a key of the wrong type
    throw TokenizerError(e.what());
  }
}

std::shared_ptr<const Tokenizer> Tokenizer::byte_level() {
  Metadata m;
  m.label = "byte-level vocabulary";
  m.model = "bytes";
  m.tokens = {"<unk>", "<s>", "</s>"};
  m.types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    m.tokens.emplace_back(hex);
    m.types.push_back(6);
  }
  m.tokens.emplace_back(kSpace);  // SentencePiece turns ' ' into "▁" before looking up tokens
  m.types.push_back(1);
  m.scores.assign(m.tokens.size(), 0.0f);
  m.special_ids = {
      {"tokenizer.ggml.unknown_token_id", 0}, {"tokenizer.ggml.bos_token_id", 1}, {"tokenizer.ggml.eos_token_id", 2}};
  m.add_bos = true;
  m.add_eos = false;
  m.add_space_prefix = false;
  return std::shared_ptr<const Tokenizer>(new Tokenizer(build(std::move(m))));
}

void Tokenizer::write_gguf(gguf::GgufWriter& w) const {
  const Vocab& v = *v_;
  w.set("tokenizer.ggml.model", Value::of_string(v.model == "bytes" ? "llama" : v.model));
  if (!v.pre.empty()) w.set("tokenizer.ggml.pre", Value::of_string(v.pre));
  w.set("tokenizer.ggml.tokens", Value::of_strings(v.text));
  if (v.file_has_scores) w.set("tokenizer.ggml.scores", Value::of_f32s(v.score));
  if (!v.file_types.empty()) w.set("tokenizer.ggml.token_type", Value::of_i32s(v.file_types));
  if (v.merges.size()) {  // in rank order; repeated pairs of the file were dropped on loading
    std::vector<std::pair<int32_t, uint64_t>> by_rank;
    by_rank.reserve(v.merges.size());
    v.merges.for_each([&](uint64_t key, const Merge& m) { by_rank.emplace_back(m.rank, key); });
    std::sort(by_rank.begin(), by_rank.end());
    std::vector<std::string> merges;
    merges.reserve(by_rank.size());
    for (const auto& [rank, key] : by_rank) merges.push_back(v.text[key >> 32] + " " + v.text[key & 0xFFFFFFFFu]);
    w.set("tokenizer.ggml.merges", Value::of_strings(merges));
  }
  for (const auto& [key, id] : v.file_special_ids) w.set(key, Value::of_u32(uint32_t(id)));
  w.set("tokenizer.ggml.add_bos_token", Value::of_bool(v.add_bos));
  w.set("tokenizer.ggml.add_eos_token", Value::of_bool(v.add_eos));
  if (v.algo == Algo::Spm) w.set("tokenizer.ggml.add_space_prefix", Value::of_bool(v.add_space_prefix));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Vocab& v = *v_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  const std::vector<Fragment> frags = partition(v, text, parse_special);
  switch (v.algo) {
    case Algo::Spm: {
      if (add_special && v.add_bos) out.push_back(v.bos);
      bool after_special = true;  // the start of the text counts as "after a special token"
      for (const Fragment& f : frags) {
        if (f.token >= 0) {
          out.push_back(f.token);
          after_special = true;
        } else {
          spm_tokenize(v, escape_spm(f.text, v.add_space_prefix && after_special), out);
          after_special = false;
        }
      }
      if (add_special && v.add_eos) out.push_back(v.eos);
      break;
    }
    case Algo::Bpe: {
      if (add_special && v.add_bos) out.push_back(v.bos);
      WordCache cache;
      for (const Fragment& f : frags) {
        if (f.token >= 0)
          out.push_back(f.token);
        else
          bpe_tokenize(v, f.text, cache, out);
      }
      if (add_special && v.add_eos) out.push_back(v.eos);
      break;
    }
    case Algo::Wpm: {  // BERT: [CLS] text [SEP]
      if (add_special && v.add_bos) out.push_back(v.bos);
      for (const Fragment& f : frags) {
        if (f.token >= 0)
          out.push_back(f.token);
        else
          wpm_tokenize(v, f.text, out);
      }
      if (add_special) out.push_back(v.sep);
      break;
    }
  }
  return out;
}

std::string_view Tokenizer::piece_view(int32_t id, bool special) const {
  const Vocab& v = *v_;
  if (id < 0 || id >= v.n_vocab())
    throw TokenizerError("token id " + std::to_string(id) + " is outside the vocabulary of " +
                         std::to_string(v.n_vocab()));
  if (!special && (v.attr[size_t(id)] & (kUnknown | kControl))) return {};
  return v.piece[size_t(id)];
}

std::string Tokenizer::piece(int32_t id, bool special) const { return std::string(piece_view(id, special)); }

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  bool strip_space = v_->add_space_prefix;  // SPM: drop the space encode() put in front
  for (int32_t id : ids) {
    std::string_view p = piece_view(id, /*special=*/false);
    if (strip_space && !p.empty() && p[0] == ' ') p.remove_prefix(1);
    strip_space = false;
    out += p;
  }
  if (v_->clean_spaces) clean_spaces(out);
  return out;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= v_->n_vocab())
    throw TokenizerError("token id " + std::to_string(id) + " is outside the vocabulary of " +
                         std::to_string(v_->n_vocab()));
  return v_->text[size_t(id)];
}

int32_t Tokenizer::token_id(std::string_view text) const { return v_->find(text); }
int32_t Tokenizer::n_vocab() const { return v_->n_vocab(); }
int32_t Tokenizer::bos() const { return v_->bos; }
int32_t Tokenizer::eos() const { return v_->eos; }
bool Tokenizer::add_bos() const { return v_->add_bos; }
bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(v_->eog.begin(), v_->eog.end(), id); }
std::string_view Tokenizer::model() const { return v_->model; }
std::string_view Tokenizer::pre() const { return v_->pre; }

// ---- StreamDecoder ----------------------------------------------------------------------------

std::string StreamDecoder::push(int32_t id) {
  pending_ += t_.piece_view(id, /*special=*/false);
  return drain(/*at_end=*/false);
}

std::string StreamDecoder::flush() { return drain(/*at_end=*/true); }

std::string StreamDecoder::drain(bool at_end) {
  static constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const std::string_view rest = std::string_view(pending_).substr(i);
    const int n = unicode::utf8_check(rest);
    if (n > 0) {
      out.append(rest.substr(0, size_t(n)));
      i += size_t(n);
      continue;
    }
    if (n == 0 && !at_end) break;  // an incomplete character: wait for the next piece
    // One U+FFFD per maximal ill-formed subpart (the Unicode "best practice"): the longest
    // prefix that could still have started a valid character.
    size_t bad = 1;
    while (bad < rest.size() && unicode::utf8_check(rest.substr(0, bad + 1)) == 0) ++bad;
    out += kReplacementUtf8;
    i += bad;
  }
  pending_.erase(0, i);
  return out;
}

void write_placeholder_vocab(gguf::GgufWriter& w, int64_t n_vocab) {
  using gguf::Value;
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    scores.push_back(0);
    types.push_back(6);  // byte
  }
  for (int64_t i = int64_t(tokens.size()); i < n_vocab; ++i) {
    tokens.push_back("\xe2\x96\x81t" + std::to_string(i));  // "▁t<i>"
    scores.push_back(-float(i));
    types.push_back(1);  // normal
  }
  tokens.resize(size_t(n_vocab)), scores.resize(size_t(n_vocab)), types.resize(size_t(n_vocab));
  w.set("tokenizer.ggml.model", Value::of_string("llama"));
  w.set("tokenizer.ggml.pre", Value::of_string("default"));
  w.set("tokenizer.ggml.tokens", Value::of_strings(tokens));
  w.set("tokenizer.ggml.scores", Value::of_f32s(scores));
  w.set("tokenizer.ggml.token_type", Value::of_i32s(types));
  w.set("tokenizer.ggml.bos_token_id", Value::of_u32(1));
  w.set("tokenizer.ggml.eos_token_id", Value::of_u32(2));
  w.set("tokenizer.ggml.unknown_token_id", Value::of_u32(0));
  w.set("tokenizer.ggml.add_bos_token", Value::of_bool(true));
}

}  // namespace toy
