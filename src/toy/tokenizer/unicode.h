// tokenizer/unicode.h — UTF-8 handling and the small amount of Unicode data the tokenizers need.
//
// Scope: byte-exact UTF-8 decoding/validation, the GPT-2 byte <-> code point table used by
// byte-level BPE, and the WordPiece normalisation data (category flags, lowercase, first code
// point of NFD) generated from Python's unicodedata by scripts/gen_unicode_tables.py.
// Not here: regular expressions (PCRE2 does all BPE pre-tokenisation, see pretokenizer.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace toy::unicode {

inline constexpr uint32_t kReplacement = 0xFFFD;  // U+FFFD, for bytes that are not UTF-8

// Checks the sequence at the start of `s` strictly (no overlongs, surrogates or > U+10FFFF):
// returns its length when complete and valid, 0 when `s` ends inside a sequence that is valid so
// far (more bytes may complete it), -1 when it can never become valid. `s` must not be empty.
int utf8_check(std::string_view s);

bool is_valid_utf8(std::string_view s);

// Code points of `s`; each byte that does not start a valid sequence becomes U+FFFD
// (llama.cpp's unicode_cpts_from_utf8 does the same).
std::vector<uint32_t> codepoints(std::string_view s);

void append_utf8(std::string& out, uint32_t cp);

// GPT-2's reversible byte -> code point map (bytes_to_unicode in openai/gpt-2 encoder.py):
// printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in order.
uint32_t byte_to_codepoint(uint8_t b);
int byte_from_codepoint(uint32_t cp);  // inverse; -1 when `cp` is not in the table

// WordPiece normalisation (llama.cpp's llm_tokenizer_wpm_session::preprocess).
enum CpFlag : uint8_t { kControl = 1, kMark = 2, kPunctuation = 4, kSymbol = 8 };
uint8_t flags(uint32_t cp);       // general category: C* (assigned), M*, P*, S*; 0 otherwise
bool is_whitespace(uint32_t cp);  // the Unicode White_Space property
uint32_t to_lower(uint32_t cp);   // first code point of Python's str.lower()
uint32_t nfd_first(uint32_t cp);  // first code point of the NFD decomposition ("é" -> "e")

// Generated data (unicode_tables.cpp), sorted by code point.
namespace tables {
struct FlagRun {
  uint32_t first;
  uint8_t flags;
};  // flags hold until the next run's first
struct CpMap {
  uint32_t from, to;
};
struct CpRangeMap {
  uint32_t first, last, to;
};
extern const FlagRun kFlagRuns[];
extern const size_t kFlagRunsSize;
extern const CpMap kLower[];
extern const size_t kLowerSize;
extern const CpRangeMap kNfd[];
extern const size_t kNfdSize;
}  // namespace tables

}  // namespace toy::unicode
