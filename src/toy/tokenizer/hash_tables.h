// tokenizer/hash_tables.h — the two lookups on the tokenizers' hot paths (internal).
//
// TokenIndex (token text -> id) is probed for every candidate pair in SentencePiece and every
// merge while loading; U64Map for every pair in BPE ((left id, right id) -> merge) and every
// character pair in SentencePiece; ViewMap for every word (the per-call word cache); ByteTrie
// (on U64Map) for every byte when looking for special tokens in a text. The tables use open
// addressing with linear probing over one flat array and are never erased from: a probe touches
// one cache line, where std::unordered_map chases a pointer per node.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace toy::tokenizer_detail {

inline uint64_t mix64(uint64_t h) {  // MurmurHash3's finaliser: every input bit reaches every output bit
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}

inline uint64_t hash_bytes(std::string_view s) {  // FNV-1a, then mixed: token strings are short
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return mix64(h);
}

inline size_t table_capacity(size_t n) {  // a power of two, at most half full
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  return cap;
}

// Token text -> id over a vocabulary that outlives the index.
class TokenIndex {
 public:
  // Indexes text[0..n); returns -1, or the id of a token equal to an earlier one.
  int32_t build(const std::vector<std::string>& text) {
    text_ = &text;
    slots_.assign(table_capacity(text.size()), 0);
    mask_ = slots_.size() - 1;
    for (size_t id = 0; id < text.size(); ++id) {
      const uint64_t h = hash_bytes(text[id]);
      size_t i = h & mask_;
      for (; slots_[i]; i = (i + 1) & mask_)
        if (tag(slots_[i]) == (h >> 32) && text[id_of(slots_[i])] == text[id]) return int32_t(id);
      slots_[i] = (h >> 32) << 32 | (id + 1);
    }
    return -1;
  }
  int32_t find(std::string_view s) const {
    const uint64_t h = hash_bytes(s);
    for (size_t i = h & mask_; slots_[i]; i = (i + 1) & mask_)
      if (tag(slots_[i]) == (h >> 32) && (*text_)[id_of(slots_[i])] == s) return int32_t(id_of(slots_[i]));
    return -1;
  }

 private:
  static uint64_t tag(uint64_t slot) { return slot >> 32; }
  static size_t id_of(uint64_t slot) { return size_t(slot & 0xFFFFFFFFu) - 1; }
  std::vector<uint64_t> slots_;  // 0: empty; else (high 32 bits of the hash) << 32 | (id + 1)
  size_t mask_ = 0;
  const std::vector<std::string>* text_ = nullptr;
};

// 64-bit key -> Value; the first insertion of a key wins (as llama.cpp's bpe_ranks.emplace).
template <class Value>
class U64Map {
 public:
  void reserve(size_t n) {
    slots_.assign(table_capacity(n), Slot{kEmpty, {}});
    mask_ = slots_.size() - 1;
    size_ = 0;
  }
  void insert(uint64_t k, Value v) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = mix64(k) & mask_;
    for (; slots_[i].key != kEmpty; i = (i + 1) & mask_)
      if (slots_[i].key == k) return;
    slots_[i] = {k, v};
    ++size_;
  }
  const Value* find(uint64_t k) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = mix64(k) & mask_; slots_[i].key != kEmpty; i = (i + 1) & mask_)
      if (slots_[i].key == k) return &slots_[i].value;
    return nullptr;
  }
  size_t size() const { return size_; }
  template <class F>
  void for_each(F&& f) const {  // f(key, value), in table order
    for (const Slot& s : slots_)
      if (s.key != kEmpty) f(s.key, s.value);
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // never a key here: ids are < 2^31, characters < 2^32
  struct Slot {
    uint64_t key;
    Value value;
  };
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    reserve(std::max<size_t>(16, old.size()));  // table_capacity doubles it
    for (const Slot& s : old)
      if (s.key != kEmpty) insert(s.key, s.value);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

// string_view -> Value, growing; the keys view text that outlives the map.
template <class Value>
class ViewMap {
 public:
  // The value stored for `key`; a value-initialised one is inserted first when there is none.
  Value& find_or_insert(std::string_view key, bool& inserted) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const uint64_t h = hash_bytes(key) | 1;  // 0 marks an empty slot
    size_t i = h & mask_;
    for (; slots_[i].hash; i = (i + 1) & mask_)
      if (slots_[i].hash == h && slots_[i].key == key) {
        inserted = false;
        return slots_[i].value;
      }
    slots_[i] = {h, key, Value{}};
    ++size_;
    inserted = true;
    return slots_[i].value;
  }

 private:
  struct Slot {
    uint64_t hash;
    std::string_view key;
    Value value;
  };
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(table_capacity(std::max<size_t>(16, old.size())), Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (!s.hash) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].hash) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

// A set of strings as a byte trie, to find which of them occur in a text in one pass.
class ByteTrie {
 public:
  void insert(std::string_view s, int32_t value) {
    if (token_.empty()) token_.push_back(-1);  // the root
    int32_t node = 0;
    for (unsigned char c : s) {
      const uint64_t edge = uint64_t(node) << 8 | c;
      if (const int32_t* child = edges_.find(edge)) {
        node = *child;
      } else {
        edges_.insert(edge, int32_t(token_.size()));
        node = int32_t(token_.size());
        token_.push_back(-1);
      }
    }
    token_[size_t(node)] = value;
  }
  // Calls f(value) for every inserted string that occurs in `text` (once per occurrence).
  template <class F>
  void scan(std::string_view text, F&& f) const {
    if (token_.empty()) return;
    for (size_t i = 0; i < text.size(); ++i) {
      int32_t node = 0;
      for (size_t j = i; j < text.size(); ++j) {
        const int32_t* child = edges_.find(uint64_t(node) << 8 | static_cast<unsigned char>(text[j]));
        if (!child) break;
        node = *child;
        if (token_[size_t(node)] >= 0) f(token_[size_t(node)]);
      }
    }
  }

 private:
  U64Map<int32_t> edges_;       // (node << 8 | byte) -> child node
  std::vector<int32_t> token_;  // node -> value of the string ending there, or -1
};

struct Merge {
  int32_t rank;    // index in tokenizer.ggml.merges: lower merges first
  int32_t result;  // id of the merged token
};
using MergeTable = U64Map<Merge>;  // (left id, right id) -> merge

inline uint64_t pair_key(int32_t left, int32_t right) { return uint64_t(uint32_t(left)) << 32 | uint32_t(right); }

}  // namespace toy::tokenizer_detail
