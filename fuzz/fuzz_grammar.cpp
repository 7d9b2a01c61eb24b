// fuzz/fuzz_grammar.cpp — libFuzzer target: any GBNF text is compiled, or refused with
// GrammarError; an accepted grammar is then matched against a generation the input steers, and
// the matcher must keep within its bounds and agree with itself.
//
// Input layout: the grammar, a NUL byte, then the steering bytes. Each steering byte picks, among
// the tokens allowed() gives (Tokenizer::byte_level(): a token per byte, and "▁" for a space),
// the one to take; accept() of an allowed token must succeed, and accepts() of a refused one
// must fail. The grammar is compiled with bounds far below the
// server's (GrammarLimits), so that one input costs milliseconds; an input that exceeds them gets
// GrammarLimitError, and the statistics must show the bounds held (abort otherwise).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "toy/engines/grammar.h"
#include "toy/tokenizer/tokenizer.h"

namespace {

constexpr toy::GrammarLimits kLimits{.max_stacks = 512, .max_table_bytes = size_t(4) << 20, .max_work = 1 << 18};

const toy::TokenTrie& trie() {
  static const auto vocabulary = toy::Tokenizer::byte_level();
  static const toy::TokenTrie t(*vocabulary);
  return t;
}

void check_bounds(const toy::GrammarMatcher& m) {
  const toy::GrammarMatcher::Stats s = m.stats();
  if (s.peak_stacks > kLimits.max_stacks || s.peak_work > kLimits.max_work || s.table_bytes > kLimits.max_table_bytes)
    std::abort();
}

// Takes up to steer.size() tokens, each chosen by one steering byte among those allowed.
void generate(toy::GrammarMatcher& m, std::string_view steer) {
  std::vector<uint8_t> mask;
  for (const char c : steer) {
    m.allowed(mask);
    std::vector<int32_t> ok, refused;
    for (int32_t id = 0; id < int32_t(mask.size()); ++id)
      if (!m.trie().text(id).empty()) (mask[size_t(id)] ? ok : refused).push_back(id);
    if (!refused.empty() && m.accepts(m.trie().text(refused[uint8_t(c) % refused.size()]))) std::abort();
    if (ok.empty()) return;  // only the end may come (or nothing: a dead end the grammar allows)
    if (!m.accept(m.trie().text(ok[uint8_t(c) % ok.size()]))) std::abort();
  }
}

}  // namespace

// Before the first input, so that building the trie does not count against -timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)trie();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view gbnf = input.substr(0, nul);
  const std::string_view steer = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1, 64);
  std::shared_ptr<const toy::Grammar> g;
  try {
    g = toy::Grammar::parse(gbnf, kLimits);
  } catch (const toy::GrammarError&) {  // a bad grammar, or one beyond the bounds at its start
    return 0;
  }
  toy::GrammarMatcher m(g, trie());  // parse() probed the start: it must not throw
  try {
    generate(m, steer);
  } catch (const toy::GrammarLimitError&) {  // a later state beyond the bounds
  }
  check_bounds(m);
  return 0;
}
