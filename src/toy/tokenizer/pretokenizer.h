// tokenizer/pretokenizer.h — splitting text into words before byte-level BPE (internal).
//
// Each `tokenizer.ggml.pre` value names a list of regexes, copied from llama.cpp's
// llm_tokenizer_bpe (llama-vocab.cpp). They run in sequence, as llama.cpp's unicode_regex_split
// does: every regex splits each current piece into its matches and the unmatched text between
// them, which stays a piece of its own. Regexes are compiled once with PCRE2 in Unicode mode
// (PCRE2_UTF | PCRE2_UCP, JIT) — docs/dependencies.md says why PCRE2. Text that is not valid
// UTF-8 is accepted (PCRE2_MATCH_INVALID_UTF): invalid bytes match nothing, so they end up in
// the unmatched pieces and reach BPE as bytes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace toy::tokenizer_detail {

// What a pre-tokenizer name implies besides its regexes (llama.cpp llama_vocab::impl::load).
struct PreSpec {
  std::vector<std::string> regexes;
  bool clean_spaces = true;    // decode() applies the " ," -> "," clean-up
  bool ignore_merges = false;  // a word that is a token is emitted whole (llama3)
  bool add_bos = false;        // default of tokenizer.ggml.add_bos_token
};

// The spec for `pre` ("" means llama.cpp's "default", used when the key is absent);
// throws TokenizerError for a name llama.cpp would not load either or that toy does not support.
const PreSpec& pre_spec(const std::string& pre);

class PreTokenizer {
 public:
  explicit PreTokenizer(const PreSpec& spec);  // compiles the regexes; throws TokenizerError
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Replaces `words` with the pieces of `text` (views into it), in order; they cover it exactly.
  void split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace toy::tokenizer_detail
