// tokenizer/vocab.h — the loaded vocabulary and the three tokenization algorithms (internal).
//
// tokenizer.cpp reads GGUF metadata into a Vocab and handles what all models share (special
// tokens written in the text, BOS/EOS, pieces, decoding); spm.cpp, bpe.cpp and wpm.cpp turn one
// run of plain text into ids. Field and function names follow llama.cpp's llama-vocab.cpp so the
// two can be read side by side.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "toy/tokenizer/hash_tables.h"
#include "toy/tokenizer/pretokenizer.h"

namespace toy::tokenizer_detail {

// Token attributes: llama.cpp's llama_token_attr bits. A token may carry several (EOG detection
// adds kControl to a normal "<|im_end|>"; phi-3 adds kRstrip to its special tokens).
enum Attr : uint32_t {
  kUnknown = 1u << 0,      // token_type 2
  kUnused = 1u << 1,       // token_type 5
  kNormal = 1u << 2,       // token_type 1 (and every token when the file has no token_type)
  kControl = 1u << 3,      // token_type 3: <s>, <|im_start|>
  kUserDefined = 1u << 4,  // token_type 4: always matched as a whole in the text
  kByte = 1u << 5,         // token_type 6: <0x0A>
  kLstrip = 1u << 7,       // eat spaces left of the token when matched in the text
  kRstrip = 1u << 8,       // eat spaces right of it
};

enum class Algo { Spm, Bpe, Wpm };

struct Vocab {
  std::string model;  // "llama", "gpt2", "bert", "bytes"
  std::string pre;    // tokenizer.ggml.pre as read, e.g. "llama-bpe"
  Algo algo = Algo::Spm;

  std::vector<std::string> text;   // [n_vocab] vocabulary strings
  std::vector<float> score;        // [n_vocab] SPM merge priority (higher first); 0 when absent
  std::vector<uint32_t> attr;      // [n_vocab] Attr bits
  std::vector<std::string> piece;  // [n_vocab] rendered bytes, as llama_token_to_piece(special = true)
  TokenIndex index;                // text -> id
  size_t max_token_len = 0;        // longest vocabulary string in bytes (WordPiece search bound)

  int32_t bos = -1, eos = -1, unk = -1, sep = -1, eot = -1, eom = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM: a leading "▁" before text that follows BOS/special/start
  bool clean_spaces = false;      // decode(): llama.cpp's " ," -> "," clean-up
  bool ignore_merges = false;     // BPE: a pre-token that is itself a token is not merged (llama3)

  std::vector<int32_t> specials;  // control, user-defined and unknown ids, longest text first
  ByteTrie specials_always;       // the user-defined ones (index into specials): always matched
  ByteTrie specials_all;          // all of them: matched when parse_special
  std::vector<int32_t> eog;       // end-of-generation ids, sorted

  // SPM: byte b -> id of "<0xXX>" (or of the one-byte token), -1 when absent.
  // BPE: byte b -> id of the token spelling GPT-2's code point for b, -1 when absent.
  std::array<int32_t, 256> byte_token{};
  // SPM: pairs of adjacent characters that occur inside some token, (bytes of a) << 32 | bytes of b.
  // A merge can never join two characters that are not such a pair, so the text is tokenized in
  // independent chunks split there: same result, and small priority queues.
  U64Map<bool> spm_inner_pairs;
  MergeTable merges;                           // BPE
  std::unique_ptr<const PreTokenizer> pretok;  // BPE only

  // Kept as read, so write_gguf() reproduces the file's tokenizer.
  std::vector<int32_t> file_types;  // empty when the file has no token_type
  bool file_has_scores = false;
  std::vector<std::pair<std::string, int32_t>> file_special_ids;  // ("tokenizer.ggml.bos_token_id", 1), ...

  int32_t n_vocab() const { return int32_t(text.size()); }
  int32_t find(std::string_view s) const { return index.find(s); }
};

// Each appends the ids of one run of plain text (no special tokens in it) to `out`.
// spm_tokenize expects the text already escaped (' ' -> "▁", space prefix added).
void spm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out);
void spm_index_pairs(Vocab& v);  // fills spm_inner_pairs; after `text` is loaded
void wpm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

// Ids per distinct word (a BPE pre-token, an SPM chunk) for the length of one call: real text
// repeats its words a lot, and a word always gives the same ids. Keys view the caller's text.
struct WordCache {
  ViewMap<std::pair<uint32_t, uint32_t>> where;  // word -> [begin, end) in ids
  std::vector<int32_t> ids;

  template <class Tokenize>  // Tokenize(word, ids) appends the word's ids
  void append(std::string_view word, std::vector<int32_t>& out, Tokenize&& tokenize) {
    bool fresh;
    auto& range = where.find_or_insert(word, fresh);
    if (fresh) {
      const auto begin = uint32_t(ids.size());
      tokenize(word, ids);
      range = {begin, uint32_t(ids.size())};  // `range` is still valid: nothing was inserted since
    }
    out.insert(out.end(), ids.begin() + range.first, ids.begin() + range.second);
  }
};
void bpe_tokenize(const Vocab& v, std::string_view text, WordCache& cache, std::vector<int32_t>& out);

}  // namespace toy::tokenizer_detail
