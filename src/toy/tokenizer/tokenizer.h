// tokenizer/tokenizer.h — text <-> token ids, read from GGUF metadata, exact against llama.cpp.
//
// Supported `tokenizer.ggml.model` values (docs/tokenizer.md has the details):
//   llama  SentencePiece BPE with scores and <0xXX> byte fallback (llama.cpp llm_tokenizer_spm)
//   gpt2   byte-level BPE with merges, pre-tokenised by the regexes of `tokenizer.ggml.pre`
//          (PCRE2, Unicode mode) as in llama.cpp llm_tokenizer_bpe
//   bert   WordPiece with BERT normalisation (lowercase, strip accents, split punctuation)
// plus `bytes`, a built-in byte-level vocabulary for training without a tokenizer file.
//
// encode() and decode() follow llama_tokenize and llama_detokenize(remove_special = false,
// unparse_special = false): same ids, same BOS/EOS rules, same special-token handling. A
// Tokenizer is immutable after loading; every method may be called from several threads.
// Not here: chat templates (toy/chat) and sampling.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace toy {

namespace gguf {
class GgufFile;
class GgufWriter;
}  // namespace gguf

// A vocabulary that cannot be used (missing tokens, bad lengths, unknown model, ...), or an id
// outside [0, n_vocab) given to decode()/piece(). The message names the key or the id.
struct TokenizerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace tokenizer_detail {
struct Vocab;
}

class Tokenizer {
 public:
  // Reads the `tokenizer.ggml.*` keys. Throws TokenizerError.
  static std::shared_ptr<const Tokenizer> from_gguf(const gguf::GgufFile& f);

  // A vocabulary of raw bytes, laid out as an SPM "llama" vocabulary that llama.cpp loads:
  //   0 <unk>, 1 <s> (BOS), 2 </s> (EOS), 3..258 <0x00>..<0xFF>, 259 "▁" (a space).
  // Every byte of the text becomes one token (byte b -> id 3 + b) except ' ', which SentencePiece
  // writes as "▁" (id 259); no space prefix is added. write_gguf() stores exactly this table, so
  // from_gguf() on the written file gives the same ids (with model() "llama").
  static std::shared_ptr<const Tokenizer> byte_level();

  // Writes the `tokenizer.ggml.*` keys that from_gguf() reads (so checkpoints carry their tokenizer).
  void write_gguf(gguf::GgufWriter& w) const;

  // add_special: BOS/EOS (CLS/SEP for bert) as the vocabulary asks (add_bos_token, add_eos_token).
  // parse_special: control tokens written in the text ("<|im_start|>", "<s>") become their ids;
  // otherwise they are tokenized as text. User-defined tokens are always matched, as in llama.cpp.
  // Any bytes are accepted, invalid UTF-8 included.
  std::vector<int32_t> encode(std::string_view text, bool add_special = false, bool parse_special = false) const;

  // Concatenated pieces, like llama_detokenize(remove_special = false, unparse_special = false):
  // control tokens render as nothing, SPM drops the space it added in front of the first token,
  // and vocabularies that ask for it (gpt-2, llama-bpe, bert, ...) get llama.cpp's space clean-up
  // (" ," -> ","). The result holds raw bytes and need not be valid UTF-8.
  std::string decode(std::span<const int32_t> ids) const;

  // One token's bytes, like llama_token_to_piece(lstrip = 0): "▁" -> " " for SPM, <0xXX> -> the
  // byte, GPT-2 code points -> bytes. Control and unknown tokens give "" unless `special`.
  std::string piece(int32_t id, bool special = false) const;

  std::string_view token_text(int32_t id) const;  // the vocabulary string, e.g. "▁Hello", "<0x0A>"
  int32_t token_id(std::string_view text) const;  // inverse of token_text; -1 when not a token

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 when the vocabulary has none
  int32_t eos() const;  // -1 when the vocabulary has none
  bool add_bos() const;
  bool is_eog(int32_t id) const;   // ends generation: eos, eot, eom, <|im_end|>, <|eot_id|>, ...
  std::string_view model() const;  // "llama", "gpt2", "bert", "bytes"
  std::string_view pre() const;    // `tokenizer.ggml.pre` as read ("" when absent)

  ~Tokenizer();

 private:
  friend class StreamDecoder;
  explicit Tokenizer(std::unique_ptr<tokenizer_detail::Vocab> v);
  std::string_view piece_view(int32_t id, bool special) const;  // piece() without the copy
  std::unique_ptr<tokenizer_detail::Vocab> v_;
};

// Turns generated ids into text as they arrive: emits only complete UTF-8 characters, holding
// back a partial sequence (an emoji split over byte tokens) until the next push(). Bytes that can
// never become UTF-8 are emitted as U+FFFD. Pieces are rendered as piece(id), without decode()'s
// first-token space removal and clean-up, so a continuation keeps its leading space.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& t) : t_(t) {}
  std::string push(int32_t id);
  std::string flush();  // what is still held back, each incomplete sequence as U+FFFD

 private:
  std::string drain(bool at_end);
  const Tokenizer& t_;
  std::string pending_;
};

// A placeholder SentencePiece vocabulary of n_vocab pieces (<unk>, <s>, </s>, the 256 byte
// tokens, then filler pieces "▁t<i>") for a model with random weights (`toy init`, a model built
// from an algorithm card), so that toy and llama.cpp load the file and can run it.
void write_placeholder_vocab(gguf::GgufWriter& w, int64_t n_vocab);

}  // namespace toy
