// tokenizer/wpm.cpp — WordPiece with BERT normalisation (llama.cpp llm_tokenizer_wpm_session).
//
// Normalise (drop controls, NFD + drop accents, lowercase), split on whitespace and around
// punctuation / ASCII symbols / CJK characters, then cut each word greedily into the longest
// vocabulary entries. GGUF stores BERT's vocabulary the way llama.cpp's converter writes it: a
// word-initial piece as "▁word", a "##" continuation as the bare piece. A word that cannot be
// cut completely becomes one <unk>, as in BERT.
#include <algorithm>

#include "toy/tokenizer/unicode.h"
#include "toy/tokenizer/vocab.h"

namespace toy::tokenizer_detail {
namespace {

bool is_chinese_char(uint32_t c) {  // the ranges of BERT's _is_chinese_char, kept verbatim
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
         (c >= 0x2B920 && c <= 0x2CEAF) ||  // HF's code has 0x2B920 where Unicode has 0x2B820
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::vector<std::string> preprocess(std::string_view text) {
  std::vector<std::string> words(1);
  for (uint32_t cp : unicode::codepoints(text)) {
    cp = unicode::nfd_first(cp);  // strip_accents: the base letter; the marks are dropped below
    if (unicode::is_whitespace(cp)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    const uint8_t f = unicode::flags(cp);
    if (cp == 0 || cp == unicode::kReplacement || (f & unicode::kControl) || (f & unicode::kMark)) continue;
    std::string s;
    unicode::append_utf8(s, unicode::to_lower(cp));
    if ((f & unicode::kPunctuation) || (cp < 0x7F && (f & unicode::kSymbol)) || is_chinese_char(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = s;  // a word of its own
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void wpm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  for (const std::string& word : preprocess(text)) {
    const std::string w = "\xE2\x96\x81" + word;  // "▁": the piece starts a word
    const size_t n = w.size(), mark = out.size();
    for (size_t i = 0; i < n;) {
      size_t j = std::min(n, i + v.max_token_len + 1);
      int32_t id = -1;
      for (; j > i; --j)
        if ((id = v.find(std::string_view(w).substr(i, j - i))) >= 0) break;
      if (id < 0) {  // no piece fits here: the whole word is unknown
        out.resize(mark);
        break;
      }
      out.push_back(id);
      i = j;
    }
    if (out.size() == mark && v.unk >= 0) out.push_back(v.unk);
  }
}

}  // namespace toy::tokenizer_detail
