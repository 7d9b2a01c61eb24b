// tests/test_grammar.cpp — GBNF grammars, JSON Schema compilation and the per-step token mask.
//
// The mask from the token trie is checked against the definition (every token's text tried on
// its own) on the full 32000-token LLaMA-2 vocabulary; texts drawn at random from the mask
// always parse as JSON of the schema's shape; malformed grammars and schemas get messages that
// say where and what.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "fixtures.h"
#include "toy/engines/grammar.h"
#include "toy/engines/json_schema.h"
#include "toy/io/gguf.h"

using namespace toy;
using ojson = nlohmann::ordered_json;

namespace {

// Whether `text` is a complete sentence of the grammar, matched byte by byte.
bool matches(const std::string& gbnf, const std::string& text) {
  static const TokenTrie no_tokens(*Tokenizer::byte_level());
  GrammarMatcher m(Grammar::parse(gbnf), no_tokens);
  return m.accept(text) && m.can_end();
}

std::string error_of(const std::string& gbnf) {
  try {
    Grammar::parse(gbnf);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "(no error)";
}

std::shared_ptr<const Tokenizer> llama_vocab() {
  static std::shared_ptr<const Tokenizer> t;
  if (!t) {
    const auto p = toy::test::fixture("real/llama-2-tiny-random.gguf");
    if (!p.empty()) t = Tokenizer::from_gguf(*gguf::GgufFile::open(p.string()));
  }
  return t;
}

}  // namespace

TEST(Grammar, GbnfSyntax) {
  const std::string g = R"(
    # a comment
    root ::= "id-" [0-9]+ suffix? ws   # trailing comment
    suffix ::= ("x" | "y"){2,3}
    ws ::= [ \t\n]*
  )";
  EXPECT_TRUE(matches(g, "id-7"));
  EXPECT_TRUE(matches(g, "id-042xyx \n"));
  EXPECT_FALSE(matches(g, "id-"));       // + needs one
  EXPECT_FALSE(matches(g, "id-1x"));     // {2,3} needs two
  EXPECT_FALSE(matches(g, "id-1xyxy"));  // at most three
  EXPECT_FALSE(matches(g, "ID-1"));
  // Alternatives over lines, escapes, negated classes, any character, repetition of a literal.
  const std::string h = "root ::= \"a\"\n  | \"\\x41\\u00e9\\\"\" \n | [^a-z\\n]{2} | \"<\" . \">\" | (\"ab\")*";
  EXPECT_TRUE(matches(h, "a"));
  EXPECT_TRUE(matches(h, "A\xC3\xA9\""));
  EXPECT_TRUE(matches(h, "Z\xE2\x9C\x93"));  // two characters, one of them three bytes
  EXPECT_FALSE(matches(h, "Za"));
  EXPECT_TRUE(matches(h, "<\xF0\x9F\x98\x80>"));  // . is one whole character, four bytes here
  EXPECT_FALSE(matches(h, "<ab>"));
  EXPECT_TRUE(matches(h, ""));
  EXPECT_TRUE(matches(h, "ababab"));
  EXPECT_FALSE(matches(h, "aba"));
  // Non-ASCII ranges are matched as whole UTF-8 characters: α..ω, not the bytes in between.
  const std::string greek = "root ::= [α-ω]+";
  EXPECT_TRUE(matches(greek, "αβω"));
  EXPECT_FALSE(matches(greek, "αΩ"));
  EXPECT_FALSE(matches(greek, "\xCE"));  // half a character is not complete
  // Surrogates are not characters; the largest code point is.
  EXPECT_FALSE(matches("root ::= .", "\xED\xA0\x80"));
  EXPECT_TRUE(matches("root ::= .", "\xF4\x8F\xBF\xBF"));
  // Right recursion keeps a constant stack: a long text is cheap.
  EXPECT_TRUE(matches("root ::= \"a\" root | \"b\"", std::string(20000, 'a') + "b"));
  // Nested parentheses across lines.
  EXPECT_TRUE(matches("root ::= (\n \"x\" (\n \"y\"\n |\n \"z\") )", "xz"));
}

TEST(Grammar, MalformedGrammarsSayWhereAndWhat) {
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("start ::= \"a\"").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= item\n").find("line 1, column 10: undefined rule 'item'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("line 2, column 1: rule 'root' is defined twice"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("unterminated string literal"), std::string::npos);
  EXPECT_NE(error_of("root ::= [a-").find("unterminated character class"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("end before its start"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape '\\q'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\xZZ\"").find("hexadecimal"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,1}").find("below the minimum"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{99999999}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{1000}{1000}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("root ::= * \"a\"").find("repeats nothing"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("root := \"a\"").find("expected '::='"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" ) x").find("unexpected ')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("rule 'root' is left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= \"y\"? root").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"?)*").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\xFF\"").find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(
      error_of("root ::= " + std::string(101, '(') + "\"a\"" + std::string(101, ')')).find("nested deeper than 100"),
      std::string::npos);
  // Deep but legal: nested groups at the limit, and a chain of 5000 rules, each reached before a
  // character (the matcher keeps no recursion on the thread's stack).
  EXPECT_TRUE(matches("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')'), "a"));
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 5000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " | \"\"\n";
  chain += "r5000 ::= \"z\"\n";
  EXPECT_TRUE(matches(chain, "z"));
  EXPECT_TRUE(matches(chain, ""));
}

TEST(Grammar, JsonSchemaCompilesToTheJsonItAllows) {
  auto g = [](const char* schema) { return json_schema_to_gbnf(ojson::parse(schema)); };
  const std::string obj = g(R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "string", "maxLength": 3}, "c": {"enum": ["x", 1, null]}}, "required": ["a"]})");
  EXPECT_TRUE(matches(obj, R"({"a": 1})"));
  EXPECT_TRUE(matches(obj, R"({"a":-20,"c":null})"));
  EXPECT_TRUE(matches(obj, R"({"a": 0, "b": "\"\u00e9x", "c": "x"})"));
  EXPECT_FALSE(matches(obj, R"({"b": "x"})"));             // a is required
  EXPECT_FALSE(matches(obj, R"({"a": 1, "b": "abcd"})"));  // maxLength
  EXPECT_FALSE(matches(obj, R"({"a": 1.5})"));             // an integer
  EXPECT_FALSE(matches(obj, R"({"a": 01})"));              // JSON has no leading zeros
  EXPECT_FALSE(matches(obj, R"({"a": 1, "c": "y"})"));     // enum
  EXPECT_FALSE(matches(obj, R"({"a": 1,})"));
  EXPECT_FALSE(matches(obj, R"({"a": 1, "d": 2})"));  // no unlisted properties
  const std::string all_optional = g(R"({"properties": {"p": {"type": "boolean"}, "q": {"type": "null"}}})");
  for (const char* ok : {"{}", R"({"q": null})", R"({"p": true, "q": null})", R"({"p": false})"})
    EXPECT_TRUE(matches(all_optional, ok)) << ok;
  EXPECT_FALSE(matches(all_optional, R"({"q": null, "p": true})"));  // the schema's order
  EXPECT_FALSE(matches(all_optional, R"({, "q": null})"));
  const std::string arr = g(R"({"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2})");
  EXPECT_TRUE(matches(arr, "[1.5e-3]"));
  EXPECT_TRUE(matches(arr, "[ 1 , -0.25 ]"));
  EXPECT_FALSE(matches(arr, "[]"));
  EXPECT_FALSE(matches(arr, "[1, 2, 3]"));
  const std::string rec = g(R"({"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array",
      "items": {"$ref": "#/$defs/node"}}}, "required": ["kids"]}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(matches(rec, R"({"kids": [{"kids": []}, {"kids": [{"kids": []}]}]})"));
  EXPECT_FALSE(matches(rec, R"({"kids": [{}]})"));
  const std::string any = g(R"({"anyOf": [{"type": "string"}, {"type": ["integer", "null"]}]})");
  for (const char* ok : {R"("s")", "7", "null"}) EXPECT_TRUE(matches(any, ok)) << ok;
  EXPECT_FALSE(matches(any, "true"));
  EXPECT_TRUE(matches(g("{}"), R"([{"x": [true, null, "\n"]}])"));

  auto schema_error = [](const char* schema) {
    try {
      json_schema_to_gbnf(ojson::parse(schema));
    } catch (const GrammarError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(schema_error(R"({"properties": {"age": {"type": "integer", "minimum": 0}}})"),
            "schema at /properties/age: 'minimum' is not supported");
  EXPECT_EQ(schema_error(R"({"type": "strin"})"), "schema at /: unknown type 'strin'");
  EXPECT_EQ(schema_error(R"({"$ref": "#/$defs/none"})"), "schema at /: '$ref' #/$defs/none points to nothing");
  EXPECT_EQ(schema_error(R"({"$ref": "http://x/y.json"})"),
            "schema at /: only references into the same schema (\"#/...\") are supported, got 'http://x/y.json'");
  EXPECT_EQ(schema_error(R"({"type": "array", "items": {"type": "string", "maxLength": -1}})"),
            "schema at /items: 'maxLength' must not be negative");
  EXPECT_EQ(schema_error(R"({"type": "array", "maxItems": 1000000})"),
            "schema at /: 'maxItems' above 2000 is not supported");
  EXPECT_EQ(schema_error("false"), "schema at /: the schema 'false' matches nothing");
  EXPECT_EQ(schema_error("[1]"), "schema at /: a schema must be an object or a boolean");
}

// The trie walk against the definition: a token is allowed iff its text can come next.
TEST(Grammar, TrieMaskEqualsTryingEveryToken) {
  auto vocab = llama_vocab();
  if (!vocab) GTEST_SKIP() << "fixture real/llama-2-tiny-random.gguf not found";
  const TokenTrie trie(*vocab);
  const auto schema = ojson::parse(R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
      "tags": {"type": "array", "items": {"enum": ["a", "b\"c"]}, "maxItems": 3}, "n": {"type": "number"}},
      "required": ["name", "tags", "n"]})");
  GrammarMatcher m(Grammar::parse(json_schema_to_gbnf(schema)), trie);
  std::mt19937 rng(7);
  std::vector<uint8_t> mask;
  std::string text;
  for (int step = 0; step < 30 && !m.finished(); ++step) {
    m.allowed(mask);
    std::vector<int32_t> ok;
    for (int32_t id = 0; id < trie.n_vocab(); ++id) {
      const bool defined = !trie.text(id).empty() && m.accepts(trie.text(id));
      ASSERT_EQ(mask[size_t(id)], defined) << "token " << id << " '" << trie.text(id) << "' after '" << text << "'";
      if (defined) ok.push_back(id);
    }
    if (ok.empty() || (m.can_end() && rng() % 2)) break;
    const int32_t id = ok[rng() % ok.size()];
    ASSERT_TRUE(m.accept(trie.text(id)));
    text += trie.text(id);
  }
  EXPECT_FALSE(text.empty());
}

// Random texts from the mask, uniform over the allowed tokens: every one that ends is valid JSON
// of the schema's shape. Also prints the mask's cost per token.
TEST(Grammar, RandomTokensUnderTheMaskAreValidJson) {
  auto vocab = llama_vocab();
  if (!vocab) GTEST_SKIP() << "fixture real/llama-2-tiny-random.gguf not found";
  const TokenTrie trie(*vocab);
  const auto schema = ojson::parse(R"({"type": "object", "properties": {
      "id": {"type": "integer"}, "label": {"type": "string", "maxLength": 12},
      "point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"], "additionalProperties": false},
      "kind": {"enum": ["cat", "dog", "a \"quoted\" one"]}, "flags": {"type": "array", "items": {"type": "boolean"},
      "maxItems": 4}}, "required": ["id", "label", "point", "kind", "flags"]})");
  // Each sample starts from a copy of one matcher, as the choices of a request do: they share
  // the cached token sets.
  const GrammarMatcher start(Grammar::parse(json_schema_to_gbnf(schema)), trie);
  std::mt19937 rng(11);
  std::vector<uint8_t> mask;
  int ended = 0;
  double ms[2] = {0, 0};
  size_t tokens[2] = {0, 0};
  for (int sample = 0; sample < 12; ++sample) {
    const int pass = sample < 6 ? 0 : 1;  // the second six find the token sets of most states cached
    const auto t0 = std::chrono::steady_clock::now();
    GrammarMatcher m = start;
    std::string text;
    for (int step = 0; step < 400 && !m.finished(); ++step) {
      m.allowed(mask);
      std::vector<int32_t> ok;
      for (int32_t id = 0; id < trie.n_vocab(); ++id)
        if (mask[size_t(id)]) ok.push_back(id);
      if (m.can_end() && (ok.empty() || rng() % 4 == 0)) break;
      ASSERT_FALSE(ok.empty()) << text;
      const int32_t id = ok[rng() % ok.size()];
      ASSERT_TRUE(m.accept(trie.text(id)));
      text += trie.text(id);
      ++tokens[pass];
    }
    ms[pass] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!m.can_end()) continue;  // ran out of steps inside a string: not a sentence yet
    ++ended;
    const auto j = ojson::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_TRUE(j["id"].is_number_integer()) << text;
    EXPECT_LE(j["label"].get<std::string>().size(), 12 * 4u) << text;
    EXPECT_TRUE(j["point"]["x"].is_number() && j["point"]["y"].is_number() && j["point"].size() == 2) << text;
    EXPECT_NE(std::string("cat dog a \"quoted\" one").find(j["kind"].get<std::string>()), std::string::npos) << text;
    EXPECT_LE(j["flags"].size(), 4u) << text;
  }
  const GrammarMatcher::Stats used = start.stats();
  std::printf(
      "grammar mask, 32000-token vocabulary: %.3f ms per token over the first %zu tokens, %.3f ms over the next %zu; "
      "at most %zu stacks in a state and %llu units of work in a step, %zu KiB of tables\n",
      ms[0] / double(tokens[0]), tokens[0], ms[1] / double(tokens[1]), tokens[1], used.peak_stacks,
      (unsigned long long)used.peak_work, used.table_bytes >> 10);
  EXPECT_GE(ended, 9);
}

// Nested optional parts that can match the same text make a state hold every way of parsing it:
// (("a"{0,60}){0,60}){0,60} has 60^3 stacks after one "a". The matcher's bounds refuse such a
// grammar when compiling it (its start is probed) or end the step that exceeds them, with the
// tables and the work of the request within their limits.
TEST(Grammar, AmbiguousGrammarsAreBounded) {
  using M = GrammarMatcher;
  const std::string nested = R"((("a"{0,60}){0,60}){0,60})";
  // Refused when compiled, naming the text the bound was met at: the work of the first step.
  const std::string at_a = error_of("root ::= " + nested);
  EXPECT_NE(at_a.find("units of work for one step (the grammar is too ambiguous"), std::string::npos) << at_a;
  EXPECT_NE(at_a.find("after the text \"a\""), std::string::npos) << at_a;
  const std::string at_start = error_of("root ::= (" + nested + "){0,60}");
  EXPECT_NE(at_start.find("at its start"), std::string::npos) << at_start;
  const std::string wider = error_of(R"(root ::= ("a"{0,1000}){0,1000})");
  EXPECT_NE(wider.find("too ambiguous"), std::string::npos) << wider;
  // Past the bytes the compile-time probe follows: the step that exceeds the bound throws, and
  // the state stays where it was.
  static const TokenTrie no_tokens;
  M late(Grammar::parse("root ::= [a-z]{300} " + nested), no_tokens);  // the probe follows 256 bytes
  ASSERT_TRUE(late.accept(std::string(300, 'q')));
  EXPECT_THROW(late.accept("a"), GrammarLimitError);
  EXPECT_THROW(late.accept("a"), GrammarLimitError);
  EXPECT_TRUE(late.can_end());  // after the 300 letters
  EXPECT_LE(late.stats().peak_stacks, GrammarLimits{}.max_stacks);
  EXPECT_LE(late.stats().table_bytes, GrammarLimits{}.max_table_bytes);
  EXPECT_LE(late.stats().peak_work, GrammarLimits{}.max_work);
  // A JSON Schema whose arrays are each of two overlapping kinds doubles the parses per "[".
  const auto doubling = ojson::parse(R"({"$defs": {"a": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/a"}},
      {"type": "array", "maxItems": 5, "items": {"$ref": "#/$defs/a"}}]}}, "$ref": "#/$defs/a"})");
  const std::string doubled = error_of(json_schema_to_gbnf(doubling));
  EXPECT_NE(doubled.find("ways to parse"), std::string::npos) << doubled;
  EXPECT_NE(doubled.find("after the text \"[[[[[[[["), std::string::npos) << doubled;
  // Many alternatives that share their first bytes are as many stacks: 16384 at most.
  auto alternatives = [](int n) {
    std::string g = "root ::= \"k0\"";
    for (int i = 1; i < n; ++i) g += " | \"k" + std::to_string(i) + "\"";
    return g;
  };
  EXPECT_TRUE(matches(alternatives(10000), "k9999"));
  const std::string wide = error_of(alternatives(17000));
  EXPECT_NE(wide.find("more than 16384 ways to parse"), std::string::npos) << wide;
  EXPECT_NE(wide.find("at its start"), std::string::npos) << wide;
  // Rules that match the empty text in two ways, in sequence: each position is expanded once,
  // not once per path (2^60 here).
  std::string twice = "root ::=";
  for (int i = 0; i < 60; ++i) twice += " x";
  M empties(Grammar::parse(twice + " \"b\"\nx ::= \"\" | \"\""), no_tokens);
  EXPECT_TRUE(empties.accept("b") && empties.can_end());
  EXPECT_LT(empties.stats().peak_work, 16000u);  // a few hundred positions, not 2^60 paths
  // Long bounded repetitions and deep recursion are one stack per state; the recursion's stacks
  // fill the tables until their bound.
  M flat(Grammar::parse(R"(root ::= "x"{0,1000} "y")"), no_tokens);
  EXPECT_TRUE(flat.accept(std::string(1000, 'x') + "y") && flat.can_end());
  EXPECT_LE(flat.stats().peak_stacks, 2u);
  M deep(Grammar::parse(R"g(root ::= "(" root ")" | "x")g"), no_tokens);
  EXPECT_TRUE(deep.accept(std::string(10000, '(') + "x" + std::string(10000, ')')) && deep.can_end());
  M deeper(Grammar::parse(R"g(root ::= "(" root ")" | "x")g"), no_tokens);
  EXPECT_THROW(deeper.accept(std::string(100000, '(')), GrammarLimitError);
  EXPECT_LE(deeper.stats().table_bytes, GrammarLimits{}.max_table_bytes);
  EXPECT_GT(deeper.stats().table_bytes, GrammarLimits{}.max_table_bytes / 2);
}

// The cancellation flag is polled inside a call: a step that does much work ends once it is set.
TEST(Grammar, CancellationEndsALongStep) {
  std::string chain = "root ::= \"a\" r0\n";
  for (int i = 0; i < 15000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " | \"\"\n";
  chain += "r15000 ::= \"z\"\n";
  static const TokenTrie no_tokens;
  GrammarMatcher m(Grammar::parse(chain), no_tokens);
  std::atomic<bool> cancelled{true};
  m.set_cancel(&cancelled);
  EXPECT_TRUE(m.accepts(""));  // no work: nothing to notice
  EXPECT_THROW(m.accept("a"), GrammarCancelled);
  cancelled = false;
  EXPECT_TRUE(m.accept("a") && m.can_end());
  EXPECT_TRUE(m.accept("z") && m.can_end());
}
