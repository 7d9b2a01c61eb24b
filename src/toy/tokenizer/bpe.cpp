// tokenizer/bpe.cpp — byte-level BPE with ranked merges (llama.cpp llm_tokenizer_bpe_session).
//
// The pre-tokenizer splits the text into words; each word starts as one symbol per byte (the
// token spelling GPT-2's code point for that byte) and the adjacent pair with the lowest merge
// rank is merged until no pair has a merge. Symbols carry token ids, so a merge lookup is one
// hash of two ints. Words repeat a lot in real text, so each distinct word is merged once per
// encode() call (WordCache).
#include <queue>

#include "toy/tokenizer/unicode.h"
#include "toy/tokenizer/vocab.h"

namespace toy::tokenizer_detail {
namespace {

constexpr int32_t kMerged = -2;  // id of a symbol absorbed by its left neighbour

struct Symbol {
  int32_t id;  // -1: the byte has no token (incomplete vocabulary)
  int prev, next;
};

struct Bigram {
  int32_t rank;
  int left, right;
  int32_t left_id, right_id;               // ids when queued; a changed id means the entry is stale
  bool operator<(const Bigram& o) const {  // std::priority_queue pops the largest: lowest rank, leftmost
    return rank > o.rank || (rank == o.rank && left > o.left);
  }
};

void bpe_word(const Vocab& v, std::string_view word, std::vector<int32_t>& out) {
  if (v.ignore_merges) {  // llama3: a pre-token that is a token is taken whole
    std::string encoded;
    for (char c : word) unicode::append_utf8(encoded, unicode::byte_to_codepoint(uint8_t(c)));
    if (const int32_t id = v.find(encoded); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> sym(word.size());
  for (size_t i = 0; i < word.size(); ++i)
    sym[i] = {v.byte_token[uint8_t(word[i])], int(i) - 1, i + 1 == word.size() ? -1 : int(i) + 1};

  std::priority_queue<Bigram> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t a = sym[size_t(left)].id, b = sym[size_t(right)].id;
    if (a < 0 || b < 0) return;
    if (const Merge* m = v.merges.find(pair_key(a, b))) queue.push({m->rank, left, right, a, b});
  };
  for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = sym[size_t(bg.left)];
    Symbol& r = sym[size_t(bg.right)];
    if (l.id != bg.left_id || r.id != bg.right_id || l.next != bg.right) continue;
    l.id = v.merges.find(pair_key(l.id, r.id))->result;
    r.id = kMerged;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }
  // A byte without a token is dropped, as llama.cpp does (it finds no token for its text either).
  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[size_t(i)].next)
    if (sym[size_t(i)].id >= 0) out.push_back(sym[size_t(i)].id);
}

}  // namespace

void bpe_tokenize(const Vocab& v, std::string_view text, WordCache& cache, std::vector<int32_t>& out) {
  std::vector<std::string_view> words;
  v.pretok->split(text, words);
  for (std::string_view w : words)
    cache.append(w, out, [&](std::string_view word, std::vector<int32_t>& ids) { bpe_word(v, word, ids); });
}

}  // namespace toy::tokenizer_detail
