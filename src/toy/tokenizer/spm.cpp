// tokenizer/spm.cpp — SentencePiece BPE over scores (llama.cpp llm_tokenizer_spm_session).
//
// Start from one symbol per UTF-8 character; repeatedly merge the adjacent pair whose
// concatenation is the vocabulary token with the highest score (ties: leftmost first) until no
// adjacent pair forms a token. Symbols that are not tokens fall back to <0xXX> byte tokens.
// A priority queue over candidate pairs makes this O(n log n); stale entries (a side already
// merged elsewhere) are recognised by their length and skipped.
//
// llama.cpp runs the queue over the whole text at once. A merge only ever joins characters
// that are adjacent inside some token, so toy cuts the text between any two characters that
// are not (in practice: at every word) and runs the queue per chunk. Merges in different chunks
// never interact, so the ids are the same; the queues stay small, and a chunk seen before
// (a repeated word) is not tokenized again.
#include <queue>

#include "toy/tokenizer/unicode.h"
#include "toy/tokenizer/vocab.h"

namespace toy::tokenizer_detail {
namespace {

struct Symbol {
  const char* text;
  size_t n;        // bytes; 0 once merged into the symbol on its left
  int prev, next;  // neighbours in the linked list, -1 at the ends
};

struct Bigram {
  float score;
  int left, right;
  size_t size;                             // bytes of left + right when queued
  bool operator<(const Bigram& o) const {  // std::priority_queue pops the largest
    return score < o.score || (score == o.score && left > o.left);
  }
};

// The symbols SentencePiece starts from: UTF-8 characters, and each byte that is not part of
// one on its own. (llama.cpp cuts by the lead byte alone, so "\xE2" followed by "▁" swallows
// part of the "▁"; the two differ only on invalid UTF-8, where this way every byte survives.)
size_t char_len(std::string_view s, size_t at) {
  const int n = unicode::utf8_check(s.substr(at));
  return n > 0 ? size_t(n) : 1;
}

uint64_t char_bits(std::string_view s, size_t at, size_t n) {
  uint64_t b = 0;
  for (size_t k = 0; k < n; ++k) b |= uint64_t(uint8_t(s[at + k])) << (8 * k);
  return b;
}

void tokenize_chunk(const Vocab& v, std::string_view text, std::vector<Symbol>& sym, std::vector<int32_t>& out) {
  sym.clear();
  for (size_t offs = 0; offs < text.size();) {
    const size_t n = char_len(text, offs);
    const int index = int(sym.size());
    sym.push_back({text.data() + offs, n, index - 1, offs + n == text.size() ? -1 : index + 1});
    offs += n;
  }

  std::priority_queue<Bigram> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view s(sym[size_t(left)].text, sym[size_t(left)].n + sym[size_t(right)].n);
    const int32_t id = v.find(s);
    if (id >= 0) queue.push({v.score[size_t(id)], left, right, s.size()});
  };
  for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[size_t(b.left)];
    Symbol& r = sym[size_t(b.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;  // merge the right symbol into the left one
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[size_t(i)].next) {
    const std::string_view s(sym[size_t(i)].text, sym[size_t(i)].n);
    if (const int32_t id = v.find(s); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Byte fallback. A vocabulary without byte tokens gets <unk> (llama.cpp would throw here).
    for (char c : s) {
      const int32_t id = v.byte_token[uint8_t(c)];
      if (id >= 0)
        out.push_back(id);
      else if (v.unk >= 0)
        out.push_back(v.unk);
    }
  }
}

}  // namespace

void spm_index_pairs(Vocab& v) {
  for (const std::string& t : v.text) {
    size_t prev_at = 0, prev_n = 0;
    for (size_t at = 0; at < t.size(); at += char_len(t, at)) {
      const size_t n = char_len(t, at);
      if (at > 0) v.spm_inner_pairs.insert(char_bits(t, prev_at, prev_n) << 32 | char_bits(t, at, n), true);
      prev_at = at, prev_n = n;
    }
  }
}

void spm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> sym;
  WordCache cache;  // chunks are mostly words, and words repeat
  const auto chunk = [&](std::string_view c, std::vector<int32_t>& ids) { tokenize_chunk(v, c, sym, ids); };
  size_t begin = 0, prev_at = 0, prev_n = 0;
  for (size_t at = 0; at < text.size(); at += char_len(text, at)) {
    const size_t n = char_len(text, at);
    if (at > 0 && !v.spm_inner_pairs.find(char_bits(text, prev_at, prev_n) << 32 | char_bits(text, at, n))) {
      cache.append(text.substr(begin, at - begin), out, chunk);
      begin = at;
    }
    prev_at = at, prev_n = n;
  }
  if (begin < text.size()) cache.append(text.substr(begin), out, chunk);
}

}  // namespace toy::tokenizer_detail
