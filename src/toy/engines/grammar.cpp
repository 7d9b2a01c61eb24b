// engines/grammar.cpp — GBNF parsing, the token trie and the stack matcher (see grammar.h).
#include "toy/engines/grammar.h"

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <utility>

#include "toy/tokenizer/unicode.h"

namespace toy {
namespace {

using Element = Grammar::Element;
using Sequence = Grammar::Sequence;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// One UTF-8 byte sequence as a range per byte: [lo_0, hi_0] [lo_1, hi_1] ...
using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

std::string utf8(uint32_t cp) {
  std::string s;
  unicode::append_utf8(s, cp);
  return s;
}

// The code points [lo, hi] as UTF-8 byte-range sequences (the split of Go's and RE2's UTF-8
// compilers): first at the boundaries of encoded length, then where a continuation byte would
// not cover its full range, until first and last code point differ only within each byte's range.
void utf8_ranges(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates are not characters
    if (lo < 0xD800) utf8_ranges(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_ranges(0xE000, hi, out);
    return;
  }
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= max && hi > max) {
      utf8_ranges(lo, max, out);
      utf8_ranges(max + 1, hi, out);
      return;
    }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the bits of the last i continuation bytes
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      utf8_ranges(lo, lo | m, out);
      utf8_ranges((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      utf8_ranges(lo, (hi & ~m) - 1, out);
      utf8_ranges(hi & ~m, hi, out);
      return;
    }
  }
  const std::string a = utf8(lo), b = utf8(hi);
  ByteRanges r;
  for (size_t i = 0; i < a.size(); ++i) r.emplace_back(uint8_t(a[i]), uint8_t(b[i]));
  out.push_back(std::move(r));
}

Element bytes_element(uint8_t lo, uint8_t hi) {
  Element e;
  e.kind = Element::Bytes;
  for (unsigned b = lo; b <= hi; ++b) e.bytes.set(b);
  return e;
}

Element end_element() { return Element{}; }
Element rule_element(uint32_t rule) {
  Element e;
  e.kind = Element::Rule;
  e.rule = rule;
  return e;
}

}  // namespace

// Recursive descent over llama.cpp's GBNF: a rule per line (`name ::= alternatives`), newlines
// allowed after `|` and inside parentheses. Groups and repetitions become generated rules.
class GrammarParser {
 public:
  GrammarParser(std::string_view src, const GrammarLimits& limits) : src_(src), limits_(limits) {}

  std::shared_ptr<const Grammar> run() {
    auto g = std::make_shared<Grammar>();
    g_ = g.get();
    g_->limits_ = limits_;
    skip_space(true);
    if (at_end()) fail("the grammar is empty");
    while (!at_end()) parse_rule();
    for (size_t r = 0; r < g_->rules_.size(); ++r)
      if (!defined_[r]) fail_at(first_use_[r], "undefined rule '" + g_->names_[r] + "'");
    auto root = ids_.find("root");
    if (root == ids_.end()) fail_at(src_.size(), "no rule named 'root' (the start rule)");
    g_->root_ = root->second;
    check_left_recursion();
    return g;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') ++line, col = 0;
      ++col;
    }
    throw GrammarError("grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }
  bool at_end() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // Blanks and # comments; line ends too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t begin = pos_;
    while (name_char(peek())) ++pos_;
    if (pos_ == begin) fail("expected a rule name");
    return std::string(src_.substr(begin, pos_ - begin));
  }

  uint32_t rule_id(const std::string& name, size_t used_at) {
    auto [it, added] = ids_.emplace(name, uint32_t(g_->rules_.size()));
    if (added) new_rule(name, used_at);
    return it->second;
  }
  uint32_t new_rule(const std::string& name, size_t used_at) {
    if (g_->rules_.size() >= Grammar::kMaxRules)
      fail("more than " + std::to_string(Grammar::kMaxRules) + " rules (after expanding groups and repetitions)");
    g_->rules_.emplace_back();
    g_->names_.push_back(name);
    defined_.push_back(false);
    first_use_.push_back(used_at);
    return uint32_t(g_->rules_.size() - 1);
  }
  uint32_t generated_rule(const std::string& base) {
    const uint32_t r = new_rule(base + "-" + std::to_string(g_->rules_.size()), pos_);
    defined_[r] = true;
    return r;
  }

  void add(Sequence& seq, const Element& e) {
    if (++n_elements_ > Grammar::kMaxElements)
      fail("the grammar is too large: more than " + std::to_string(Grammar::kMaxElements) +
           " elements after expanding repetitions");
    seq.push_back(e);
  }

  void parse_rule() {
    const size_t at = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    const uint32_t r = rule_id(name, at);
    if (defined_[r]) fail_at(at, "rule '" + name + "' is defined twice");
    defined_[r] = true;
    g_->rules_[r] = parse_alternatives(name, /*nested=*/false);
    skip_space(false);
    if (!at_end() && peek() != '\n' && peek() != '\r')
      fail(std::string("unexpected '") + peek() + "' (a rule ends at the end of its line)");
    skip_space(true);
  }

  Grammar::Rule parse_alternatives(const std::string& name, bool nested) {
    Grammar::Rule alts;
    alts.push_back(parse_sequence(name, nested));
    for (;;) {
      // An alternative may begin on the next line (`| ...`): no rule starts with '|'.
      const size_t line_end = pos_;
      skip_space(true);
      if (peek() != '|') {
        pos_ = line_end;
        break;
      }
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(name, nested));
    }
    return alts;
  }

  Sequence parse_sequence(const std::string& name, bool nested) {
    Sequence seq;
    size_t last_start = 0;  // where the last item (what a postfix operator repeats) begins
    for (;;) {
      const char c = peek();
      const size_t start = seq.size();
      if (c == '"') {
        ++pos_;
        while (peek() != '"') {
          if (at_end() || peek() == '\n') fail("unterminated string literal");
          for (char b : parse_char_bytes()) add(seq, bytes_element(uint8_t(b), uint8_t(b)));
        }
        ++pos_;
        if (seq.size() == start) {  // "" matches the empty text: nothing to add, nothing to repeat
          skip_space(nested);
          continue;
        }
      } else if (c == '[') {
        ++pos_;
        add_class(seq, name, parse_class());
      } else if (c == '.') {
        ++pos_;
        add_class(seq, name, {{0, kMaxCodePoint}});
      } else if (c == '(') {
        if (++depth_ > kMaxNesting) fail("parentheses nested deeper than " + std::to_string(kMaxNesting));
        ++pos_;
        skip_space(true);
        const uint32_t r = generated_rule(name);
        Grammar::Rule alts = parse_alternatives(name, /*nested=*/true);
        g_->rules_[r] = std::move(alts);
        if (peek() != ')') fail("expected ')'");
        ++pos_;
        --depth_;
        add(seq, rule_element(r));
      } else if (name_char(c)) {
        const size_t at = pos_;
        const std::string ref = parse_name();
        // A rule name followed by ::= starts the next rule: this sequence ended at the line end.
        add(seq, rule_element(rule_id(ref, at)));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (seq.empty() || last_start >= seq.size()) fail(std::string("'") + c + "' repeats nothing");
        parse_repetition(seq, last_start, name);
        skip_space(nested);
        continue;
      } else {
        break;
      }
      last_start = start;
      skip_space(nested);
    }
    seq.push_back(end_element());
    return seq;
  }

  // * + ? {m} {m,} {m,n} after the item seq[from, end).
  void parse_repetition(Sequence& seq, size_t from, const std::string& name) {
    size_t lo = 0, hi = SIZE_MAX;  // SIZE_MAX: unbounded
    const char c = peek();
    ++pos_;
    if (c == '+') lo = 1;
    if (c == '?') hi = 1;
    if (c == '{') {
      skip_space(false);
      lo = parse_count();
      skip_space(false);
      hi = lo;
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        hi = peek() == '}' ? SIZE_MAX : parse_count();
        skip_space(false);
      }
      if (peek() != '}') fail("expected '}' to close the repetition");
      ++pos_;
      if (hi < lo)
        fail("repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "}: the maximum is below the minimum");
    }
    Sequence item(seq.begin() + long(from), seq.end());
    seq.resize(from);
    for (size_t i = 0; i < lo; ++i)
      for (const Element& e : item) add(seq, e);
    if (hi == SIZE_MAX) {  // rep ::= item rep |
      const uint32_t r = generated_rule(name);
      Sequence again;
      for (const Element& e : item) add(again, e);
      add(again, rule_element(r));
      again.push_back(end_element());
      g_->rules_[r] = {std::move(again), {end_element()}};
      add(seq, rule_element(r));
    } else if (hi > lo) {  // opt_k ::= item opt_(k-1) | ; opt_1 ::= item |
      uint32_t inner = 0;
      for (size_t k = 1; k <= hi - lo; ++k) {
        const uint32_t r = generated_rule(name);
        Sequence once;
        for (const Element& e : item) add(once, e);
        if (k > 1) add(once, rule_element(inner));
        once.push_back(end_element());
        g_->rules_[r] = {std::move(once), {end_element()}};
        inner = r;
      }
      add(seq, rule_element(inner));
    }
  }

  size_t parse_count() {
    const size_t begin = pos_;
    size_t n = 0;
    while (peek() >= '0' && peek() <= '9') {
      n = n * 10 + size_t(peek() - '0');
      if (n > Grammar::kMaxElements)
        fail("repetition count too large (at most " + std::to_string(Grammar::kMaxElements) + ")");
      ++pos_;
    }
    if (pos_ == begin) fail("expected a number in the repetition");
    return n;
  }

  // One character of a literal or class: an escape or a UTF-8 character of the grammar text.
  uint32_t parse_char() {
    if (peek() == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          return uint32_t(uint8_t(e));
        case 'x':
          return parse_hex(2);
        case 'u':
          return parse_hex(4);
        case 'U':
          return parse_hex(8);
        default:
          --pos_;
          fail(at_end() ? "unterminated escape" : std::string("unknown escape '\\") + e + "'");
      }
    }
    const uint8_t b0 = uint8_t(peek());
    const int n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || pos_ + size_t(n) > src_.size()) fail("the grammar is not valid UTF-8");
    uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const uint8_t b = uint8_t(src_[pos_ + size_t(i)]);
      if ((b & 0xC0) != 0x80) fail("the grammar is not valid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += size_t(n);
    return cp;
  }
  std::string parse_char_bytes() { return utf8(parse_char()); }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      const char c = peek();
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) fail("expected " + std::to_string(digits) + " hexadecimal digits in the escape");
      v = v * 16 + uint32_t(d);
    }
    if (v > kMaxCodePoint) fail("escape beyond U+10FFFF");
    return v;
  }

  // [abc] [a-z] [^"\\] : the code point ranges it matches (negation applied).
  std::vector<std::pair<uint32_t, uint32_t>> parse_class() {
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (peek() != ']') {
      if (at_end() || peek() == '\n') fail("unterminated character class");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']') {
        ++pos_;
        if (at_end()) fail("unterminated character class");
        hi = parse_char();
        if (hi < lo) fail("character range with its end before its start");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    std::sort(ranges.begin(), ranges.end());
    if (!negated) return ranges;
    std::vector<std::pair<uint32_t, uint32_t>> rest;
    uint32_t next = 0;  // the first code point not yet covered
    for (auto [lo, hi] : ranges) {
      if (lo > next) rest.emplace_back(next, lo - 1);
      next = std::max(next, hi + 1);
    }
    if (next <= kMaxCodePoint) rest.emplace_back(next, kMaxCodePoint);
    return rest;
  }

  // A class as bytes: one element when every character is one byte, else a rule whose
  // alternatives are the one-byte characters and each multi-byte UTF-8 range sequence.
  void add_class(Sequence& seq, const std::string& name, const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    std::vector<ByteRanges> sequences;
    for (auto [lo, hi] : ranges) utf8_ranges(lo, hi, sequences);
    Element ascii = bytes_element(1, 0);  // no bytes yet
    Grammar::Rule alts;
    for (const ByteRanges& s : sequences) {
      if (s.size() == 1) {
        ascii.bytes |= bytes_element(s[0].first, s[0].second).bytes;
        continue;
      }
      Sequence alt;
      for (auto [lo, hi] : s) add(alt, bytes_element(lo, hi));
      alt.push_back(end_element());
      alts.push_back(std::move(alt));
    }
    if (alts.empty()) return add(seq, ascii);  // an empty class is an element that matches nothing
    if (ascii.bytes.any()) alts.push_back({ascii, end_element()});
    const uint32_t r = generated_rule(name);
    g_->rules_[r] = std::move(alts);
    add(seq, rule_element(r));
  }

  // A rule that can reach itself before reading a byte would make the matcher loop: refused.
  void check_left_recursion() {
    const auto& rules = g_->rules_;
    // Which rules can match the empty text, by a worklist in time linear in the grammar's size
    // (a client's grammar may have 20,000 rules): an alternative is nullable once every element of
    // it is a reference to a nullable rule (a byte element never is).
    std::vector<bool> nullable(rules.size(), false);
    std::vector<size_t> pending;                           // per alternative: elements not known nullable
    std::vector<uint32_t> rule_of;                         // per alternative: its rule
    std::vector<std::vector<size_t>> users(rules.size());  // rule -> the alternatives that refer to it
    std::vector<size_t> ready;                             // alternatives found nullable
    for (size_t r = 0; r < rules.size(); ++r)
      for (const Sequence& alt : rules[r]) {
        size_t n = 0;
        for (const Element& e : alt) {
          if (e.kind == Element::End) break;
          ++n;
          if (e.kind == Element::Rule) users[e.rule].push_back(pending.size());
        }
        if (n == 0) ready.push_back(pending.size());
        pending.push_back(n);
        rule_of.push_back(uint32_t(r));
      }
    while (!ready.empty()) {
      const uint32_t r = rule_of[ready.back()];
      ready.pop_back();
      if (nullable[r]) continue;
      nullable[r] = true;
      for (size_t alt : users[r])
        if (--pending[alt] == 0) ready.push_back(alt);
    }
    std::vector<std::vector<uint32_t>> left(rules.size());  // rules reachable before any byte
    for (size_t r = 0; r < rules.size(); ++r)
      for (const Sequence& alt : rules[r])
        for (const Element& e : alt) {
          if (e.kind != Element::Rule) break;
          left[r].push_back(e.rule);
          if (!nullable[e.rule]) break;
        }
    // Iterative depth-first search for a cycle (0 new, 1 on the path, 2 done).
    std::vector<uint8_t> state(rules.size(), 0);
    for (size_t start = 0; start < rules.size(); ++start) {
      if (state[start]) continue;
      std::vector<std::pair<uint32_t, size_t>> path{{uint32_t(start), 0}};
      state[start] = 1;
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == left[r].size()) {
          state[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t s = left[r][next++];
        if (state[s] == 1) {
          std::string where = g_->names_[s];
          throw GrammarError("grammar: rule '" + where +
                             "' is left-recursive: it can reach itself before matching a character (write "
                             "`list ::= item (\",\" item)*` rather than `list ::= list \",\" item | item`; a "
                             "repetition of something that can match nothing is left-recursive too)");
        }
        if (state[s] == 0) {
          state[s] = 1;
          path.emplace_back(s, 0);
        }
      }
    }
  }

  std::string_view src_;
  size_t pos_ = 0;
  Grammar* g_ = nullptr;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  size_t n_elements_ = 0;
  static constexpr int kMaxNesting = 100;  // parentheses (the parser recurses into each)
  int depth_ = 0;
  GrammarLimits limits_;
};

std::shared_ptr<const Grammar> Grammar::parse(std::string_view gbnf, const GrammarLimits& limits) {
  std::shared_ptr<const Grammar> g = GrammarParser(gbnf, limits).run();
  GrammarMatcher::probe(g);
  return g;
}

// ---------------------------------------------------------------------------------------------

TokenTrie::TokenTrie(const Tokenizer& t) : n_vocab_(t.n_vocab()) {
  text_.resize(size_t(n_vocab_));
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n_vocab_; ++id) {
    if (t.is_eog(id)) {
      end_tokens_.push_back(id);
      continue;
    }
    text_[size_t(id)] = t.piece(id);
    if (!text_[size_t(id)].empty()) ids.push_back(id);
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return text_[size_t(a)] < text_[size_t(b)]; });
  // Inserted in sorted order, each node's children arrive in byte order: its last child is the
  // only one the next text can share.
  std::vector<std::vector<Edge>> children(1);
  std::vector<std::vector<int32_t>> ends(1);
  for (int32_t id : ids) {
    uint32_t node = 0;
    for (char c : text_[size_t(id)]) {
      const uint8_t b = uint8_t(c);
      if (children[node].empty() || children[node].back().byte != b) {
        children[node].push_back({b, uint32_t(children.size())});
        children.emplace_back();
        ends.emplace_back();
      }
      node = children[node].back().child;
    }
    ends[node].push_back(id);
  }
  nodes_.resize(children.size());
  for (size_t n = 0; n < children.size(); ++n) {
    nodes_[n] = {uint32_t(edges_.size()), uint32_t(children[n].size()), uint32_t(tokens_.size()),
                 uint32_t(ends[n].size())};
    edges_.insert(edges_.end(), children[n].begin(), children[n].end());
    tokens_.insert(tokens_.end(), ends[n].begin(), ends[n].end());
  }
}

// ---------------------------------------------------------------------------------------------

namespace {

// What a table entry costs, roughly: an interned stack (its node, its hash-map entry, row_of and
// mark), a row of successors, a list of successors.
constexpr size_t kStackBytes = 64, kRowBytes = sizeof(std::array<int32_t, 256>), kListBytes = 32;

// What expanding one position costs in units of work, against a unit: a stack advanced through
// its cached row, a trie node visited. (Measured: a position is hashed into the set of those seen
// and its stack interned; a state of 7200 stacks took 85 ns per position on a Zen 5.)
constexpr uint64_t kPositionUnits = 16;

// "ab\n" as a quoted string for a message, short.
std::string quoted_for_message(const std::string& text) {
  std::string s = "\"";
  for (char c : text.substr(0, 40)) {
    const uint8_t b = uint8_t(c);
    if (c == '"' || c == '\\') s += '\\';
    if (b < 0x20 || b >= 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      s += std::string("\\x") + hex[b >> 4] + hex[b & 15];
    } else {
      s += c;
    }
  }
  return s + (text.size() > 40 ? "...\"" : "\"");
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g, const TokenTrie& trie)
    : g_(std::move(g)), trie_(&trie), t_(std::make_shared<Tables>()) {
  size_t longest = 0;
  for (const std::string& s : trie_->text_) longest = std::max(longest, s.size());
  t_->scratch.resize(longest + 1);
  std::vector<Position> start;
  for (const Grammar::Sequence& alt : g_->rules()[g_->root()]) start.emplace_back(alt.data(), kComplete);
  expand(std::move(start), stacks_);
}

void GrammarMatcher::probe(const std::shared_ptr<const Grammar>& g) {
  static const TokenTrie kNoTokens;
  std::optional<GrammarMatcher> m;
  try {
    m.emplace(g, kNoTokens);
  } catch (const GrammarLimitError& e) {
    throw GrammarLimitError(std::string(e.what()) + " at its start");
  }
  // Then the widest state after each byte, for a few bytes: a grammar whose states widen there
  // would exceed the bounds in the first steps of a generation. Each byte's successors are one
  // call's worth (a byte beyond max_work is refused, as its step would be); the probe as a whole
  // stops, refusing nothing, after probe_work units.
  constexpr size_t kProbeBytes = 256;
  const uint64_t probe_work = 2 * g->limits().max_work;
  uint64_t total = 0;
  std::string text, tried;  // the widest state's text so far; that with the byte being tried
  try {
    std::vector<StackId> next, widest;
    for (size_t depth = 0; depth < kProbeBytes; ++depth) {
      std::bitset<256> accepted;
      for (StackId s : m->stacks_)
        if (s != kComplete) accepted |= m->t_->nodes[size_t(s)].top->bytes;
      int byte = -1;
      widest.clear();
      for (int b = 0; b < 256; ++b) {
        if (!accepted.test(size_t(b))) continue;
        if (total > probe_work) return;
        tried = text + char(b);
        m->work_ = 0;
        m->successors(m->stacks_, uint8_t(b), next);
        total += m->work_;
        if (next.size() > widest.size()) std::swap(widest, next), byte = b;
      }
      if (byte < 0) break;
      std::swap(m->stacks_, widest);
      text += char(byte);
    }
  } catch (const GrammarLimitError& e) {
    throw GrammarLimitError(std::string(e.what()) + " after the text " + quoted_for_message(tried));
  }
}

void GrammarMatcher::charge(uint64_t units) {
  const uint64_t max_work = g_->limits().max_work;
  if (units > max_work - work_)
    throw GrammarLimitError("grammar: matching needs more than " + std::to_string(max_work) +
                            " units of work for one step (the grammar is too ambiguous or too large)");
  const uint64_t before = work_;
  work_ += units;
  t_->stats.peak_work = std::max(t_->stats.peak_work, work_);
  constexpr unsigned kPollShift = 12;  // the flag is read every 4096 units
  if (cancel_ && (before >> kPollShift) != (work_ >> kPollShift) && cancel_->load(std::memory_order_relaxed))
    throw GrammarCancelled("grammar: cancelled");
}

void GrammarMatcher::grow(size_t bytes) {
  const size_t max_bytes = g_->limits().max_table_bytes;
  if (bytes > max_bytes - t_->stats.table_bytes)
    throw GrammarLimitError("grammar: matching needs more than " + std::to_string(max_bytes >> 20) +
                            " MiB of tables (the grammar is too ambiguous or too large)");
  t_->stats.table_bytes += bytes;
}

void GrammarMatcher::held(size_t stacks) {
  if (stacks > g_->limits().max_stacks)
    throw GrammarLimitError("grammar: more than " + std::to_string(g_->limits().max_stacks) +
                            " ways to parse the text at once (nested optional or repeated parts that can match the "
                            "same text, such as (\"a\"{0,60}){0,60}, multiply them)");
  t_->stats.peak_stacks = std::max(t_->stats.peak_stacks, stacks);
}

GrammarMatcher::StackId GrammarMatcher::intern(const Grammar::Element* top, StackId below) {
  auto it = t_->ids.find(StackNode{top, below});
  if (it != t_->ids.end()) return it->second;
  grow(kStackBytes);
  const StackId id = StackId(t_->nodes.size());
  t_->ids.emplace(StackNode{top, below}, id);
  t_->nodes.push_back({top, below});
  t_->row_of.push_back(-1);
  t_->mark.push_back(0);
  return id;
}

void GrammarMatcher::expand(std::vector<Position> work, std::vector<StackId>& out) {
  // A work list, not recursion: a client's grammar may nest rules, and an answer's stack may pop
  // many levels at once, deeper than a thread's stack would take. Each position is expanded once:
  // rules that match the empty text in several ways (`x ::= "" | ""`, `x x x ...`) reach the
  // same position by many paths.
  std::unordered_set<StackNode, StackHash> seen;
  out.clear();
  bool complete = false;
  while (!work.empty()) {
    const auto [p, b] = work.back();
    work.pop_back();
    if (!seen.insert({p, b}).second) continue;
    charge(kPositionUnits);
    switch (p->kind) {
      case Grammar::Element::Bytes:
        out.push_back(intern(p, b));
        held(out.size());
        break;
      case Grammar::Element::End:
        if (b == kComplete)
          complete = true;
        else
          work.emplace_back(t_->nodes[size_t(b)].top, t_->nodes[size_t(b)].below);  // return to the position below
        break;
      case Grammar::Element::Rule: {
        // The position to return to; none when the reference ends its sequence (a tail call), so
        // that `x ::= "a" x |` runs in constant stack depth.
        const Grammar::Element* next = p + 1;
        const StackId ret = next->kind == Grammar::Element::End ? b : intern(next, b);
        for (const Grammar::Sequence& alt : g_->rules()[p->rule]) work.emplace_back(alt.data(), ret);
        break;
      }
    }
  }
  if (complete) out.push_back(kComplete);
  std::sort(out.begin(), out.end());
  held(out.size());
}

const std::vector<GrammarMatcher::StackId>& GrammarMatcher::advance(StackId s, uint8_t byte) {
  Tables& t = *t_;
  charge(1);
  int32_t row = t.row_of[size_t(s)];
  if (row >= 0 && t.rows[size_t(row)][byte] >= 0) return t.results[size_t(t.rows[size_t(row)][byte])];
  std::vector<StackId> out;
  const StackNode n = t.nodes[size_t(s)];
  if (n.top->bytes.test(byte)) expand({{n.top + 1, n.below}}, out);  // may intern stacks: no references held
  if (row < 0) {
    grow(kRowBytes);
    row = int32_t(t.rows.size());
    t.rows.emplace_back().fill(-1);
    t.row_of[size_t(s)] = row;
  }
  int32_t result = 0;
  if (!out.empty()) {
    grow(kListBytes + out.size() * sizeof(StackId));
    result = int32_t(t.results.size());
    t.results.push_back(std::move(out));  // a deque: the references handed out stay valid
  }
  t.rows[size_t(row)][byte] = result;
  return t.results[size_t(result)];
}

void GrammarMatcher::successors(const std::vector<StackId>& stacks, uint8_t byte, std::vector<StackId>& out) {
  out.clear();
  if (++t_->epoch == 0) {  // wrapped around: no mark is current
    std::fill(t_->mark.begin(), t_->mark.end(), 0);
    t_->epoch = 1;
  }
  const uint32_t epoch = t_->epoch;
  bool complete = false;
  for (StackId s : stacks) {
    if (s == kComplete) continue;
    const std::vector<StackId>& a = advance(s, byte);  // may intern stacks (and grow mark): no reference into it held
    charge(a.size());
    for (StackId x : a) {
      if (x == kComplete) {
        complete = true;
      } else if (t_->mark[size_t(x)] != epoch) {
        t_->mark[size_t(x)] = epoch;
        out.push_back(x);
      }
    }
    held(out.size() + (complete ? 1 : 0));
  }
  if (complete) out.push_back(kComplete);
  std::sort(out.begin(), out.end());
}

void GrammarMatcher::walk(uint32_t node, const std::vector<StackId>& stacks, std::vector<uint64_t>& bits,
                          size_t depth) {
  charge(stacks.size());
  std::bitset<256> accepted;
  for (StackId s : stacks)
    if (s != kComplete) accepted |= t_->nodes[size_t(s)].top->bytes;
  const TokenTrie::Node& n = trie_->nodes_[node];
  for (uint32_t e = n.first_edge; e < n.first_edge + n.n_edges; ++e) {
    const TokenTrie::Edge edge = trie_->edges_[e];
    if (!accepted.test(edge.byte)) continue;
    // One stack (the usual case): its cached successors as they are; several: their union.
    const std::vector<StackId>* next = nullptr;
    if (stacks.size() == 1) {
      next = &advance(stacks[0], edge.byte);
    } else {
      successors(stacks, edge.byte, t_->scratch[depth]);
      next = &t_->scratch[depth];
    }
    const TokenTrie::Node& child = trie_->nodes_[edge.child];
    charge(1 + child.n_tokens / 8);  // the tokens ending here: a bit each
    for (uint32_t t = child.first_token; t < child.first_token + child.n_tokens; ++t) {
      const int32_t id = trie_->tokens_[t];
      bits[size_t(id) / 64] |= uint64_t(1) << (id % 64);
    }
    walk(edge.child, *next, bits, depth + 1);
  }
}

const std::vector<uint64_t>& GrammarMatcher::tokens_of(StackId s) {
  constexpr size_t kMaxCached = 1024;  // token sets kept (n_vocab / 8 bytes each)
  if (auto it = t_->token_sets.find(s); it != t_->token_sets.end()) return it->second;
  if (t_->token_sets.size() >= kMaxCached) t_->token_sets.clear();
  std::vector<uint64_t> bits((size_t(trie_->n_vocab()) + 63) / 64, 0);
  walk(0, {s}, bits, 0);
  return t_->token_sets[s] = std::move(bits);
}

void GrammarMatcher::allowed(std::vector<uint8_t>& mask) {
  work_ = 0;
  std::vector<uint64_t> bits((size_t(trie_->n_vocab()) + 63) / 64, 0);
  for (StackId s : stacks_) {
    if (s == kComplete) continue;
    const std::vector<uint64_t>& t = tokens_of(s);
    charge(1 + bits.size() / 64);  // the union: a unit per 64 words
    for (size_t w = 0; w < bits.size(); ++w) bits[w] |= t[w];
  }
  mask.assign(size_t(trie_->n_vocab()), 0);
  for (size_t id = 0; id < mask.size(); ++id) mask[id] = uint8_t((bits[id / 64] >> (id % 64)) & 1);
}

bool GrammarMatcher::can_end() const { return !stacks_.empty() && stacks_.front() == kComplete; }

bool GrammarMatcher::after(std::string_view text, std::vector<StackId>& out) {
  work_ = 0;
  out = stacks_;
  std::vector<StackId> next;
  for (char c : text) {
    successors(out, uint8_t(c), next);
    if (next.empty()) return false;
    std::swap(out, next);
  }
  return true;
}

bool GrammarMatcher::accepts(std::string_view text) {
  std::vector<StackId> out;
  return after(text, out);
}

bool GrammarMatcher::accept(std::string_view text) {
  std::vector<StackId> out;
  if (!after(text, out)) return false;
  stacks_ = std::move(out);
  return true;
}

}  // namespace toy
