// tokenizer/pretokenizer.cpp — the pre-tokenizer table and the PCRE2 splitting loop.
#include "toy/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>

#include "toy/tokenizer/tokenizer.h"

namespace toy::tokenizer_detail {
namespace {

// The regexes, as llama.cpp writes them (llm_tokenizer_bpe's constructor). Non-ASCII characters
// are spelled \x{...} so that no editor or Unicode normalisation can change them.

// GPT-2's pattern. llama.cpp lists it without the final "|\s+" but runs it through a hand-written
// matcher (unicode_regex_split_custom_gpt2) that has that branch; with it PCRE2 splits the same way.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3's pattern. The original has "(?i:'s|'t|...)"; llama.cpp spells the case-insensitive
// contractions out, which also keeps Unicode case folding ("'ſ" would match (?i:'s)) out of it.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: Llama 3's pattern with single digits.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek: CJK runs ("[一-龥ࠀ-一가-퟿]+" in llama.cpp).
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// DeepSeek LLM: an optional space and a run of cased letters (llama.cpp's "\s?[A-Za-zµÀ-Ö...]+").
constexpr const char* kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";

// DeepSeek LLM: ASCII and full-width punctuation ("\s?[!-/:-~！-／：-～‘-‟　-。]+").
constexpr const char* kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

struct Entry {
  std::vector<std::string> names;
  PreSpec spec;
};

// llama.cpp groups pre-tokenizer names into types; each entry is one type with the names toy
// accepts for it. clean_spaces / ignore_merges / add_bos as llama.cpp sets them per name.
const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      // No key (gpt-neox and other old conversions) or "default".
      {{"", "default"}, {.regexes = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {.regexes = {kLlama3}, .ignore_merges = true, .add_bos = true}},
      {{"dbrx", "smaug-bpe"}, {.regexes = {kLlama3}}},
      {{"deepseek-llm"},
       {.regexes = {"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"},
        .clean_spaces = false}},
      {{"deepseek-coder"},
       {.regexes = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}, .clean_spaces = false}},
      {{"falcon"}, {.regexes = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}}},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat"},
       {.regexes = {kGpt2}}},
      {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b"}, {.regexes = {R"(\p{N})", kGpt2}}},
      {{"smollm", "command-r"}, {.regexes = {R"(\p{N})", kGpt2}, .clean_spaces = false}},
      {{"qwen2", "deepseek-r1-qwen"}, {.regexes = {kQwen2}, .clean_spaces = false}},
      {{"stablelm2", "megrez"}, {.regexes = {kQwen2}}},
  };
  return t;
}

}  // namespace

const PreSpec& pre_spec(const std::string& pre) {
  static const std::map<std::string, const PreSpec*> by_name = [] {
    std::map<std::string, const PreSpec*> m;
    for (const Entry& e : table())
      for (const std::string& n : e.names) m[n] = &e.spec;
    return m;
  }();
  auto it = by_name.find(pre);
  if (it == by_name.end()) {
    std::string known;
    for (const auto& [name, spec] : by_name)
      if (!name.empty()) known += (known.empty() ? "" : ", ") + name;
    throw TokenizerError("unknown pre-tokenizer tokenizer.ggml.pre = '" + pre + "' (supported: " + known + ")");
  }
  return *it->second;
}

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const PreSpec& spec) {
  // UCP: \s, \p{..} and friends use Unicode properties. DOLLAR_ENDONLY: "$" means the end of the
  // piece, as in ECMAScript (llama.cpp uses std::regex), not "before a final newline".
  constexpr uint32_t kOptions = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  for (const std::string& pattern : spec.regexes) {
    auto r = std::make_unique<Regex>();
    int err = 0;
    PCRE2_SIZE at = 0;
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), kOptions, &err, &at, nullptr);
    if (!r->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw TokenizerError("pre-tokenizer regex does not compile at offset " + std::to_string(at) + ": " +
                           reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
    regexes_.push_back(std::move(r));
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  words.clear();
  if (text.empty()) return;
  words.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& r : regexes_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(r->code, nullptr), &pcre2_match_data_free);
    next.clear();
    for (std::string_view piece : words) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t pos = 0;
      while (pos < piece.size()) {
        // A negative result is "no further match" (or a resource limit): the rest stays one piece.
        if (pcre2_match(r->code, subject, piece.size(), pos, 0, md.get(), nullptr) < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        if (ov[1] <= ov[0]) break;  // none of the patterns matches empty text; stop rather than loop
        if (ov[0] > pos) next.push_back(piece.substr(pos, ov[0] - pos));  // unmatched text between matches
        next.push_back(piece.substr(ov[0], ov[1] - ov[0]));
        pos = ov[1];
      }
      if (pos < piece.size()) next.push_back(piece.substr(pos));
    }
    words.swap(next);
  }
}

}  // namespace toy::tokenizer_detail
