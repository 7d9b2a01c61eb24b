// engines/grammar.h — constrained decoding: a GBNF grammar, and the tokens that keep a text in it.
//
// Grammar::parse() reads llama.cpp's GBNF (`root ::= "yes" | "no"`, character classes, groups,
// * + ? {m,n} repetitions, # comments; docs/serve.md has the syntax) and compiles it to bytes:
// every character class becomes the UTF-8 byte sequences of its code points, so a grammar, a
// token's text and a partial UTF-8 character are all matched byte by byte.
//
// GrammarMatcher follows one generation. Its state is a set of stacks, as in llama.cpp's
// llama-grammar: each stack is a position in a rule (its top, always a byte element) above the
// positions to return to. A byte advances every stack whose top accepts it; the empty stack
// means the text is complete. Stacks are interned (one id per distinct stack), so a state is a
// small set of ids and work done for a stack is reused whenever it recurs.
//
// Bounds (GrammarLimits): a grammar may be ambiguous, and nested optional parts that can match
// the same text (`(("a"{0,60}){0,60}){0,60}`) make a state hold every way of parsing it: 7200
// stacks after one byte, more after each. So a state holds at most max_stacks stacks, a
// request's tables at most max_table_bytes, and each call (the start, allowed(), accept(),
// accepts()) does at most max_work units of work (a unit: one stack advanced by a byte, one trie
// node visited; a rule position expanded counts 16, grammar.cpp's kPositionUnits); beyond any of
// them the call throws GrammarLimitError. Grammar::parse() probes the grammar's first bytes along
// its widest states against the same bounds and refuses it when they are exceeded there. A
// request's work is then at most max_work per generated token. A cancellation flag
// (set_cancel) is polled inside the budget check, so a long step ends soon after it is set.
//
// allowed() gives the tokens that may come next. It does not scan the vocabulary's strings: the
// token texts are a byte trie (TokenTrie, built once per tokenizer) walked against each stack,
// descending only through bytes some stack accepts; a stack's token set is cached, so the steps
// inside a long string or a repeated structure cost a lookup.
#pragma once

#include <array>
#include <atomic>
#include <bitset>
#include <cstdint>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "toy/tokenizer/tokenizer.h"

namespace toy {

// A grammar that cannot be used: a syntax error (with line and column), an undefined rule, no
// `root`, left recursion, a repetition too large. The message says which.
struct GrammarError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Matching the grammar needs more than its GrammarLimits allow. At
// compile time (Grammar::parse) it is one more reason a grammar cannot be used.
struct GrammarLimitError : GrammarError {
  using GrammarError::GrammarError;
};
// The matcher's cancellation flag was set during a call (the client went away).
struct GrammarCancelled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What matching one grammar may take (see the top of this file). The defaults are the server's:
// a step within them takes well under a second.
struct GrammarLimits {
  size_t max_stacks = 16384;                  // in one state
  size_t max_table_bytes = size_t(64) << 20;  // a request's interned stacks and successors
  uint64_t max_work = uint64_t(1) << 25;      // units in one call
};

// A compiled grammar. Rules are alternatives of sequences of elements; an element matches one
// byte from a set, or a whole rule.
class Grammar {
 public:
  struct Element {
    enum Kind : uint8_t { Bytes, Rule, End } kind = End;  // End closes every sequence
    uint32_t rule = 0;                                    // Rule: which one
    std::bitset<256> bytes;                               // Bytes: the bytes it accepts
  };
  using Sequence = std::vector<Element>;  // ends with an End element
  using Rule = std::vector<Sequence>;     // the alternatives

  // Throws GrammarError (GrammarLimitError when the matcher's bounds are exceeded at its start or
  // along the first 256 bytes of its widest states). The start rule is `root`.
  static std::shared_ptr<const Grammar> parse(std::string_view gbnf, const GrammarLimits& limits = {});

  const std::vector<Rule>& rules() const { return rules_; }
  uint32_t root() const { return root_; }
  const GrammarLimits& limits() const { return limits_; }  // of every matcher of this grammar

  // Bounds on what a client may send: elements after expanding repetitions, and rules.
  static constexpr size_t kMaxElements = 200000, kMaxRules = 20000;

 private:
  friend class GrammarParser;
  std::vector<Rule> rules_;
  std::vector<std::string> names_;  // for error messages
  uint32_t root_ = 0;
  GrammarLimits limits_;
};

// The texts of a vocabulary's tokens as a byte trie. Tokens with no text (control tokens, those
// that end generation) are not in it.
class TokenTrie {
 public:
  explicit TokenTrie(const Tokenizer& t);
  TokenTrie() : nodes_(1) {}  // no tokens
  int32_t n_vocab() const { return n_vocab_; }
  const std::string& text(int32_t id) const { return text_[size_t(id)]; }  // "" for those not in the trie
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }   // those that end generation

 private:
  friend class GrammarMatcher;
  struct Node {
    uint32_t first_edge = 0, n_edges = 0;    // edges_[first_edge, + n_edges), sorted by byte
    uint32_t first_token = 0, n_tokens = 0;  // tokens_[...]: the tokens whose text ends here
  };
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  std::vector<Node> nodes_;  // nodes_[0]: the root (the empty text)
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
  std::vector<std::string> text_;  // [n_vocab]
  std::vector<int32_t> end_tokens_;
  int32_t n_vocab_ = 0;
};

// A copy starts where the original is and shares its tables (the interned stacks, the cached
// token sets), so the choices of one request each copy a fresh matcher and reuse each other's
// work. A matcher and its copies must not be used from two threads at once.
class GrammarMatcher {
 public:
  // Throws GrammarLimitError (the start state is beyond g's limits; not for a grammar that
  // Grammar::parse accepted).
  GrammarMatcher(std::shared_ptr<const Grammar> g, const TokenTrie& trie);

  // mask[id] = 1 for every token whose text keeps the output in the grammar, 0 otherwise
  // (mask.size() == n_vocab). End-of-generation tokens are not in the trie: see can_end().
  void allowed(std::vector<uint8_t>& mask);
  // The text so far is a complete sentence of the grammar (an end-of-generation token may come).
  bool can_end() const;
  // Nothing more can follow: the text is complete and no byte continues it.
  bool finished() const { return stacks_.size() == 1 && stacks_[0] == kComplete; }
  // Takes the bytes of a generated text; false (state unchanged) when they leave the grammar.
  bool accept(std::string_view text);
  // Whether accept(text) would succeed, without taking the text.
  bool accepts(std::string_view text);
  const TokenTrie& trie() const { return *trie_; }

  // Polled during each call: once *flag is true the call throws GrammarCancelled. The flag must
  // outlive the matcher (copies keep it).
  void set_cancel(const std::atomic<bool>* flag) { cancel_ = flag; }
  // What this matcher and its copies (a request) used so far, against the bounds.
  struct Stats {
    size_t peak_stacks = 0;  // the largest state (or union of successors) held, ≤ max_stacks
    uint64_t peak_work = 0;  // the most work of one call, ≤ max_work
    size_t table_bytes = 0;  // the tables' size, ≤ max_table_bytes
  };
  Stats stats() const { return t_->stats; }

 private:
  friend class Grammar;
  // Grammar::parse(): the start state, then along the widest successor state for a few bytes.
  static void probe(const std::shared_ptr<const Grammar>& g);
  using StackId = int32_t;  // an interned stack; kComplete is the empty one
  static constexpr StackId kComplete = -1;
  struct StackNode {
    const Grammar::Element* top;
    StackId below;
    bool operator==(const StackNode&) const = default;
  };
  struct StackHash {
    size_t operator()(const StackNode& n) const {
      return std::hash<const void*>()(n.top) * 31 + std::hash<StackId>()(n.below);
    }
  };

  using Position = std::pair<const Grammar::Element*, StackId>;  // a place in a rule, above a stack

  StackId intern(const Grammar::Element* top, StackId below);
  // Continues at each position until every stack has a byte element on top; out gets them,
  // sorted and unique.
  void expand(std::vector<Position> work, std::vector<StackId>& out);
  // out = the union of advance(s, byte) over `stacks`, sorted and unique.
  void successors(const std::vector<StackId>& stacks, uint8_t byte, std::vector<StackId>& out);
  void charge(uint64_t units);  // throws GrammarLimitError beyond max_work, GrammarCancelled
  void grow(size_t bytes);      // the tables grow by `bytes`: throws beyond max_table_bytes
  void held(size_t stacks);     // a state of `stacks` stacks: throws beyond max_stacks
  // The state after `text` in `out`; false when the text leaves the grammar.
  bool after(std::string_view text, std::vector<StackId>& out);
  // The stacks after `byte`, sorted and unique (cached).
  const std::vector<StackId>& advance(StackId s, uint8_t byte);
  // The set of tokens one stack accepts, as bits over the vocabulary (cached).
  const std::vector<uint64_t>& tokens_of(StackId s);
  void walk(uint32_t node, const std::vector<StackId>& stacks, std::vector<uint64_t>& bits, size_t depth);

  // What is learnt about the grammar against the vocabulary, shared by copies of a matcher.
  struct Tables {
    std::vector<StackNode> nodes;
    std::unordered_map<StackNode, StackId, StackHash> ids;  // (top, below) -> id
    // advance(): results[rows[row_of[stack]][byte]] (-1: not yet known; row -1: none yet).
    std::vector<int32_t> row_of;                                    // [stacks]
    std::vector<std::array<int32_t, 256>> rows;                     // [advanced stacks][byte]
    std::deque<std::vector<StackId>> results{{}};                   // results[0]: no stack (the byte is refused)
    std::unordered_map<StackId, std::vector<uint64_t>> token_sets;  // stack -> token bits
    std::vector<std::vector<StackId>> scratch;                      // per trie depth, for walk()
    std::vector<uint32_t> mark;  // [stacks]: the union successors() is building when == epoch
    uint32_t epoch = 0;
    Stats stats;
  };

  std::shared_ptr<const Grammar> g_;
  const TokenTrie* trie_;
  std::shared_ptr<Tables> t_;
  std::vector<StackId> stacks_;  // the state: sorted, unique
  const std::atomic<bool>* cancel_ = nullptr;
  uint64_t work_ = 0;  // in the call under way
};

}  // namespace toy
