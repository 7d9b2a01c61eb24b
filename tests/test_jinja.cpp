// test_jinja.cpp: the chat-template engine (src/toy/chat).
//   1. Fixtures: every case of every real template in fixtures/chat-templates renders exactly to the
//      prompt llama.cpp produced.
//   2. The Jinja engine itself: expected values are Jinja2's (Python) semantics.
//   3. Chat rendering: BOS stripping, today's date, tools, the system-role merge.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "toy/chat/chat_template.h"
#include "toy/chat/jinja.h"

namespace {

using json = nlohmann::ordered_json;
using toy::chat::ChatOptions;
using toy::chat::ChatTemplate;
using toy::chat::ParseOptions;
using toy::chat::Template;
using toy::chat::TemplateError;
namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// $TOY_FIXTURES, else ../shared/fixtures from the working directory, else next to the source tree.
fs::path chat_fixtures() {
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("TOY_FIXTURES")) roots.emplace_back(env);
  roots.emplace_back("../shared/fixtures");
#ifdef TOY_SOURCE_DIR
  roots.emplace_back(fs::path(TOY_SOURCE_DIR) / ".." / "shared" / "fixtures");
#endif
  for (const auto& root : roots)
    if (fs::is_directory(root / "chat-templates")) return root / "chat-templates";
  return {};
}

std::string render(std::string_view source, const json& context = json::object(), ParseOptions options = {}) {
  return Template::parse(source, options).render(context);
}

// The TemplateError that rendering `source` throws (fails the test when none is thrown).
TemplateError render_error(std::string_view source, const json& context = json::object()) {
  try {
    render(source, context);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no TemplateError from: " << source;
  return TemplateError("", 0, 0);
}

// ---- 1. fixtures ----

TEST(ChatFixtures, EveryCaseMatchesLlamaCpp) {
  const fs::path dir = chat_fixtures();
  if (dir.empty()) GTEST_SKIP() << "chat-template fixtures not found: set TOY_FIXTURES to the fixtures directory";
  int cases = 0, matched = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (!file.ends_with(".cases.json")) continue;
    const std::string name = file.substr(0, file.size() - std::string(".cases.json").size());
    const json spec = json::parse(read_file(entry.path()));
    const ChatTemplate tmpl(read_file(dir / (name + ".jinja")));
    for (size_t i = 0; i < spec["cases"].size(); ++i) {
      const json& c = spec["cases"][i];
      const ChatOptions options{.bos_token = spec["bos_token"],
                                .eos_token = spec["eos_token"],
                                .add_generation_prompt = c["add_generation_prompt"],
                                .today = "2026-11-30"};  // the day the references were rendered
      const std::string prompt = tmpl.apply(c["messages"], options);
      ++cases;
      if (prompt == c["prompt"].get<std::string>())
        ++matched;
      else
        ADD_FAILURE() << name << " case " << i << "\n got: " << json(prompt) << "\nwant: " << c["prompt"];
    }
  }
  EXPECT_GT(cases, 0) << "no *.cases.json in " << dir;
  std::printf("[ fixtures ] %d/%d chat-template cases match\n", matched, cases);
}

// ---- 2. the engine ----

TEST(Jinja, TextAndComments) {
  EXPECT_EQ(render("plain text"), "plain text");
  EXPECT_EQ(render("a{# a comment {{ x }} #}b"), "ab");
  EXPECT_EQ(render("{{ 'x' }}\n"), "x");  // keep_trailing_newline is off by default
  EXPECT_EQ(render("{{ 'x' }}\n", {}, {.keep_trailing_newline = true}), "x\n");
  EXPECT_EQ(render("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
}

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(render("a {{- ' b ' -}} c"), "a b c");
  EXPECT_EQ(render("a\n  {%- if true -%}\n  b\n{%- endif %}"), "ab");
  EXPECT_EQ(render("a {#- c -#} b"), "ab");
  // Jinja's defaults: block tags keep the newlines and indentation around them.
  EXPECT_EQ(render("{% if true %}\n  x\n{% endif %}\n"), "\n  x\n");
  // HF's chat settings: trim_blocks drops the newline after a tag, lstrip_blocks the indentation before.
  const ParseOptions hf{.trim_blocks = true, .lstrip_blocks = true};
  EXPECT_EQ(render("{% if true %}\n  x\n  {% endif %}\ny", {}, hf), "  x\ny");
  EXPECT_EQ(render("{# c #}\nx", {}, hf), "x");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}", {}, hf), "  x");
  EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}", {}, hf), "a\nb");  // trim_blocks leaves {{ }} alone
}

TEST(Jinja, Literals) {
  EXPECT_EQ(render("{{ 42 }} {{ -1.5 }} {{ 1_000 }} {{ 2.0 }} {{ 1e3 }}"), "42 -1.5 1000 2.0 1000.0");
  EXPECT_EQ(render("{{ true }} {{ False }} {{ none }} {{ None }}"), "True False None None");
  EXPECT_EQ(render(R"({{ 'it\'s' }} {{ "tab\there" }} {{ 'a' "b" }} {{ '\u00e9' }})"), "it's tab\there ab é");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }}"), "[1, 'a', None, True]");
  EXPECT_EQ(render("{{ {'a': 1, 'b': [2.5]} }}"), "{'a': 1, 'b': [2.5]}");
  EXPECT_EQ(render("{{ (1, 2) }} {{ [] }} {{ {} }}"), "[1, 2] [] {}");
  EXPECT_EQ(render("{{ \"it's\" }}|{{ [\"it's\"] }}"), "it's|[\"it's\"]");
}

TEST(Jinja, Arithmetic) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }}"), "7 9 1024 64");
  EXPECT_EQ(render("{{ 7 / 2 }} {{ 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }}"), "3.5 2.0 3 -4 1 2");
  EXPECT_EQ(render("{{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 10 / 4 * 2 }}"), "2.5 0.30000000000000004 5.0");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ x }} {{ 'ab' * 3 }} {{ [1] + [2, 3] }}"), "a1None ababab [1, 2, 3]");
  EXPECT_EQ(render("{{ -3 | abs }} {{ [1, 2, 3] | length - 1 }} {{ 'a' + ' b ' | trim }}"), "3 2 ab");
}

TEST(Jinja, LogicAndComparisons) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 'b' > 'a' }} {{ 1 == 1.0 }} {{ [1, 2] == [1, 2] }}"),
            "True False True True True");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' in undefined_thing }}"),
            "True False True False");
  EXPECT_EQ(render("{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ not 0 }} {{ none or [] }}"), "x b True []");
  EXPECT_EQ(render("{{ 'y' if 1 > 2 else 'n' }}|{{ 'y' if false }}|{{ 1 if true else 2 if true else 3 }}"), "n||1");
}

TEST(Jinja, AttributesItemsAndSlices) {
  const json ctx = {{"m", {{"role", "user"}, {"list", {1, 2, 3}}}}, {"s", "héllo"}};
  EXPECT_EQ(render("{{ m.role }} {{ m['role'] }} {{ m.list[-1] }} {{ m.list.0 }} {{ m['list'][1] }}", ctx),
            "user user 3 1 2");
  EXPECT_EQ(render("[{{ m.missing }}][{{ m.missing.deeper }}][{{ nothing.at.all }}][{{ m.list[10] }}]", ctx),
            "[][][][]");
  EXPECT_EQ(render("{{ [1, 2, 3, 4][::-1] }} {{ [1, 2, 3, 4, 5][1::2] }} {{ [1, 2, 3][5:] }}"),
            "[4, 3, 2, 1] [2, 4] []");
  EXPECT_EQ(render("{{ s[1:] }} {{ s[:-1] }} {{ s[1] }} {{ s | length }} {{ s[::-1] }}", ctx), "éllo héll é 5 olléh");
}

TEST(Jinja, Tests) {
  EXPECT_EQ(render("{{ x is defined }} {{ x is undefined }} {{ x is not defined }} {{ not x is defined }}"),
            "False True True True");
  EXPECT_EQ(render("{{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }}"),
            "True True True True True");
  EXPECT_EQ(
      render("{{ {} is mapping }} {{ [] is iterable }} {{ 'a' is sequence }} {{ 1 is iterable }} {{ [] is mapping }}"),
      "True True True False False");
  EXPECT_EQ(
      render("{{ true is boolean }} {{ false is false }} {{ 0 is false }} {{ true is true }} {{ 1 is sameas true }}"),
      "True True False True False");
  EXPECT_EQ(render("{{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }}"),
            "True True True False");
  EXPECT_EQ(render("{{ 2 is eq 2 }} {{ 'a' is in ['a'] }} {{ 3 is gt 2 }} {{ 'abc' is lower }} {{ 'ABC' is upper }}"),
            "True True True True True");
  EXPECT_EQ(render("{{ range is callable }} {{ 'y' if x is defined else 'n' }}"), "True n");
}

TEST(Jinja, StringFilters) {
  EXPECT_EQ(render("[{{ '  a  ' | trim }}] [{{ 'xxaxx' | trim('x') }}] {{ 'hello wORLD-x' | title }} {{ 'hELLO' | "
                   "capitalize }}"),
            "[a] [a] Hello World-X Hello");
  EXPECT_EQ(
      render(
          "{{ 'Ab' | upper }} {{ 'Ab' | lower }} {{ 'aXbX' | replace('X', '-') }} {{ 'aaa' | replace('a', 'b', 2) }}"),
      "AB ab a-b- bba");
  EXPECT_EQ(
      render("{{ 'abc' | reverse }} {{ 'abc' | count }} {{ 12 | string ~ 'x' }} {{ 'one two  three' | wordcount }}"),
      "cba 3 12x 3");
  EXPECT_EQ(render("{{ '<a href=\"x\">&' | e }} {{ '<b>' | safe }}"), "&lt;a href=&#34;x&#34;&gt;&amp; <b>");
  EXPECT_EQ(
      render("{{ 'a\\nb' | indent(2) }}|{{ 'a\\n\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}"),
      "a\n  b|  a\n\n  b|a\n  \n  b");
}

TEST(Jinja, NumberFilters) {
  EXPECT_EQ(render("{{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'abc' | int }} {{ 'abc' | int(7) }} {{ 3.9 | int }}"),
            "43 4 0 7 3");
  EXPECT_EQ(render("{{ '1.5' | float }} {{ 3 | float }} {{ 'x' | float }} {{ -2.5 | abs }}"), "1.5 3.0 0.0 2.5");
  EXPECT_EQ(render("{{ 2.5 | round }} {{ 3.5 | round }} {{ 3.14159 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | "
                   "round(method='floor') }}"),
            "2.0 4.0 3.14 3.0 2.0");
}

TEST(Jinja, ListFilters) {
  const json ctx = {{"users", {{{"name", "b"}, {"admin", true}}, {{"name", "a"}, {"admin", false}}, {{"name", "C"}}}}};
  EXPECT_EQ(render("{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }}"),
            "[1, 2, 3] ['A', 'b', 'c'] [3, 2, 1]");
  EXPECT_EQ(render("{{ users | sort(attribute='name') | map(attribute='name') | join(',') }}", ctx), "a,b,C");
  EXPECT_EQ(render("{{ [1, 2, 3] | join(', ') }} {{ [1, 2] | first }}{{ [1, 2] | last }} {{ [] | first }}|"),
            "1, 2, 3 12 |");
  EXPECT_EQ(
      render("{{ [1, 2, 3] | reverse | list }} {{ [1, 2, 2, 1, 3] | unique | list }} {{ ['a', 'A'] | unique | list }}"),
      "[3, 2, 1] [1, 2, 3] ['a']");
  EXPECT_EQ(render("{{ ['a', 'b'] | map('upper') | join }} {{ users | map(attribute='name') | list }}", ctx),
            "AB ['b', 'a', 'C']");
  EXPECT_EQ(render("{{ [1, 2, 3, 4] | select('even') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ [0, 1, ''] "
                   "| select | list }}"),
            "[2, 4] [2, 4] [1]");
  EXPECT_EQ(render("{{ users | selectattr('admin') | map(attribute='name') | list }} "
                   "{{ users | rejectattr('name', 'equalto', 'a') | map(attribute='name') | list }} "
                   "{{ users | selectattr('name', 'in', ['a', 'C']) | list | length }}",
                   ctx),
            "['b'] ['b', 'C'] 2");
  EXPECT_EQ(render("{{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ range(3) | list }} {{ 'ab' | list }}"),
            "[[1, 2], [3, 4], [5]] [0, 1, 2] ['a', 'b']");
  EXPECT_EQ(render("{{ x | default('d') }} [{{ '' | default('d') }}] {{ '' | default('d', true) }} {{ x | d('z') }} {{ "
                   "x | length }}"),
            "d [] d z 0");
}

TEST(Jinja, DictFiltersAndMethods) {
  const json ctx = {{"d", {{"b", 1}, {"a", 2}}}};
  EXPECT_EQ(render("{% for k, v in d | dictsort %}{{ k }}={{ v }};{% endfor %}", ctx), "a=2;b=1;");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", ctx), "b=1;a=2;");  // insertion order
  EXPECT_EQ(render("{% for k, v in d | items %}{{ k }}{% endfor %} {{ d.keys() | list }} {{ d.values() | list }}", ctx),
            "ba ['b', 'a'] [1, 2]");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }} {{ d | length }}", ctx),
            "2 dflt None 2");
}

TEST(Jinja, ToJson) {
  EXPECT_EQ(render("{{ {'a': [1, 'x', none, true], 'b': 1.5, 'c': {}} | tojson }}"),
            R"({"a": [1, "x", null, true], "b": 1.5, "c": {}})");
  EXPECT_EQ(render("{{ {'a': [1, 2], 'b': {'c': 'd'}} | tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {\n    \"c\": \"d\"\n  }\n}");
  EXPECT_EQ(render(R"({{ 'é"\n</x>' | tojson }})"), R"("é\"\n</x>")");  // ensure_ascii=False, no HTML escaping
  EXPECT_EQ(render("{{ 'é' | tojson(ensure_ascii=true) }}"), R"("\u00e9")");
  const json tool = json::parse(R"({"name": "f", "parameters": {"type": "object", "required": ["x"]}})");
  EXPECT_EQ(render("{{ t | tojson }}", {{"t", tool}}),
            R"({"name": "f", "parameters": {"type": "object", "required": ["x"]}})");
}

TEST(Jinja, StringMethods) {
  EXPECT_EQ(render("[{{ '  a b  '.strip() }}] [{{ 'xxhixx'.strip('x') }}] [{{ '  a '.lstrip() }}] [{{ "
                   "'a\\n\\n'.rstrip('\\n') }}]"),
            "[a b] [hi] [a ] [a]");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ "
                   "'x</t>y'.split('</t>')[-1] }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c'] y");
  EXPECT_EQ(render("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('x', 'lo')) }} {{ 'hello'.endswith('x') }}"),
            "True True False");
  EXPECT_EQ(render("{{ 'hello world'.title() }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'aB'.capitalize() }}"),
            "Hello World AB ab Ab");
  EXPECT_EQ(
      render("{{ 'aaa'.replace('a', 'b') }} {{ 'hello'.find('l') }} {{ 'x'.find('y') }} {{ '-'.join(['a', 'b']) }}"),
      "bbb 2 -1 a-b");
}

TEST(Jinja, Loops) {
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }}{{ loop.revindex }};{% endfor %}"),
            "10TrueFalse33;21FalseFalse32;32FalseTrue31;");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}"),
            "1,3,5,7,9");
  EXPECT_EQ(render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}"), "3 7 ");
  EXPECT_EQ(render("{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %} {% for c in 'ab' %}{{ c }}.{% endfor %}"),
            "xy a.b.");
  EXPECT_EQ(
      render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}"
             "{{ i }}{% endfor %}"),
      "013");
  EXPECT_EQ(render("{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
  EXPECT_EQ(render("{% for i in [1, 2, 3] %}{{ loop.previtem }}>{{ i }}>{{ loop.nextitem }} {% endfor %}"),
            ">1>2 1>2>3 2>3> ");
  EXPECT_EQ(
      render(
          "{% for i in [1, 2] %}{% for j in 'ab' %}{{ loop.index }}{{ j }}{% endfor %}{{ loop.index }} {% endfor %}"),
      "1a2b1 1a2b2 ");
  EXPECT_EQ(render("{% for m in messages[::-1] %}{{ m }}{% endfor %}", {{"messages", {1, 2, 3}}}), "321");
}

TEST(Jinja, SetAndScoping) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"),
            "21");                                                           // loops scope sets
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");  // ifs don't
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.found = true %}{{ ns.found }} {{ ns.other }}|"), "True |");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t = 3, 4 %}{{ t }}"), "12 [3, 4]");
  EXPECT_EQ(render("{% set s %}hello {{ 'w' }}{% endset %}{{ s | upper }} {% set u | upper %}abc{% endset %}{{ u }}"),
            "HELLO W ABC");
  EXPECT_EQ(render("{% set messages = messages[1:] %}{{ messages }}", {{"messages", {1, 2}}}), "[2]");
  EXPECT_EQ(render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(Jinja, Macros) {
  EXPECT_EQ(render("{% macro greet(name, greeting='Hi') %}{{ greeting }}, {{ name }}!{% endmacro %}"
                   "{{ greet('Bob') }} {{ greet('Al', greeting='Yo') }} {{ greet(name='Cy') }}"),
            "Hi, Bob! Yo, Al! Hi, Cy!");
  EXPECT_EQ(render("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold{% "
                   "endcall %}"),
            "<b>bold</b>");
  EXPECT_EQ(render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}"),
            "[1][2]");
  EXPECT_EQ(render("{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}"), "G");
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_EQ(render("{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}"), "[]");
}

TEST(Jinja, Globals) {
  EXPECT_EQ(render("{{ range(1, 10, 3) | list }} {{ range(3, 0, -1) | list }} {{ range(0) | list }}"),
            "[1, 4, 7] [3, 2, 1] []");
  EXPECT_EQ(render("{{ dict(a=1)['a'] }} {{ namespace({'k': 'v'}).k }}"), "1 v");
  std::tm day{};
  day.tm_year = 2026 - 1900, day.tm_mon = 10, day.tm_mday = 30, day.tm_wday = 1, day.tm_yday = 333;
  EXPECT_EQ(Template::parse("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %d, %Y') }}|{{ strftime_now('%A') }}")
                .render(json::object(), {.now = day}),
            "30 Nov 2026|November 30, 2026|Monday");
}

// ---- errors ----

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  try {
    Template::parse("line one\n{{ 1 + }}");
    FAIL() << "expected a syntax error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.column(), 8);
    EXPECT_NE(std::string(e.what()).find("line 2, column 8"), std::string::npos) << e.what();
  }
  try {
    Template::parse("{{ x | nosuch }}");
    FAIL() << "expected an unknown-filter error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.message(), "unknown filter 'nosuch'");
    EXPECT_EQ(e.line(), 1);
    EXPECT_EQ(e.column(), 8);
  }
  const char* bad[] = {"{% if x %}never closed",
                       "{{ x",
                       "{{ 'unterminated }}",
                       "{% endfor %}",
                       "{% for x in y %}{% endif %}",
                       "{{ x is nosuch }}",
                       "{% break %}",
                       "{% include 'other' %}",
                       "{{ 1 + }}",
                       "{{ [1, 2 }}",
                       "{# open",
                       "{% macro m(%}{% endmacro %}",
                       "{{ a[] }}",
                       "{{ x ? y }}",
                       "{% set %}",
                       "{% unknown %}",
                       "{{ f(a=1, 2) }}"};
  for (const char* src : bad) EXPECT_THROW(Template::parse(src), TemplateError) << src;
}

TEST(JinjaErrors, RuntimeErrorsNamePosition) {
  TemplateError e = render_error("ok\n  {{ 'a' + 1 }}");
  EXPECT_EQ(e.line(), 2);
  EXPECT_NE(e.message().find("unsupported operand"), std::string::npos) << e.what();
  EXPECT_EQ(render_error("{{ x + 1 }}").message(), "'x' is undefined");
  EXPECT_EQ(render_error("{{ 1 - m.count }}", {{"m", json::object()}}).message(), "'count' is undefined");
  EXPECT_EQ(render_error("{{ nosuch() }}").message(), "'nosuch' is undefined");
  EXPECT_NE(render_error("{{ 1 // 0 }}").message().find("by zero"), std::string::npos);
  EXPECT_NE(render_error("{{ 2 ** 64 }}").message().find("overflow"), std::string::npos);
  EXPECT_NE(render_error("{% for x in 5 %}{% endfor %}").message().find("not iterable"), std::string::npos);
  EXPECT_NE(render_error("{% set s = 'x' %}{% set s.a = 1 %}").message().find("not a namespace"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 < 'a' }}").message().find("not supported"), std::string::npos);
  EXPECT_NE(render_error("{{ [1] | map('nosuch') | list }}").message().find("unknown filter"), std::string::npos);
  EXPECT_NE(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").message().find("takes at most 1"),
            std::string::npos);
  EXPECT_THROW(Template::parse("{{ x }}").render(json::array({1})), TemplateError);  // context must be an object
}

TEST(JinjaErrors, RaiseException) {
  TemplateError e =
      render_error("{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}",
                   {{"messages", {{{"role", "system"}}}}});
  EXPECT_EQ(e.message(), "System role not supported");
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.column(), 41);  // where the raise_exception call starts
}

TEST(JinjaErrors, HostileTemplatesFailCleanly) {
  // Runaway recursion, deep nesting, huge loops and exploding strings are errors, not crashes or hangs.
  EXPECT_NE(render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").message().find("recursion"),
            std::string::npos);
  EXPECT_THROW(Template::parse("{{ " + std::string(20000, '(') + "1" + std::string(20000, ')') + " }}"), TemplateError);
  EXPECT_THROW(Template::parse("{{ [" + std::string(20000, '[') + "] }}"), TemplateError);
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_THROW(Template::parse(chain + " }}"), TemplateError);
  std::string nested_ifs;
  for (int i = 0; i < 5000; ++i) nested_ifs += "{% if true %}";
  EXPECT_THROW(Template::parse(nested_ifs), TemplateError);
  render_error("{{ 'x' * 10 ** 12 }}");
  // A list nested 100000 deep is built and freed without recursion; printing it is refused.
  EXPECT_NE(render_error("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}"
                         "{{ ns.l | length }}{{ ns.l }}")
                .message()
                .find("nested deeper"),
            std::string::npos);
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me is defined }}"), "True");  // a cycle
  // Deep expressions inside recursion: bounded by the evaluation depth before the native stack runs out.
  std::string sum = "f()";  // the call sits at the bottom of a 400-deep expression
  for (int i = 0; i < 400; ++i) sum += " ~ 1";
  EXPECT_EQ(render_error("{% macro f() %}{{ " + sum + " }}{% endmacro %}{{ f() }}").message(),
            "template evaluation nested too deeply");
  render_error("{{ range(100001) }}");  // Jinja's sandbox limit
}

// Each budget of a render stops a runaway template with its own message. Every case below can reach
// exactly one limit: the others are set out of its reach, so which one stops it does not depend on
// how fast the CPU is (a 64 MiB value budget met before a 0.3 s time limit on a fast CPU, #37).
namespace {
constexpr int64_t kNoLimit = int64_t(1) << 62;  // steps or bytes no render reaches
constexpr double kNoTimeLimit = 1e6;            // seconds (11 days)

// The message of the TemplateError that rendering `source` with `options` throws.
std::string limit_error(std::string_view source, const toy::chat::RenderOptions& options) {
  try {
    Template::parse(source).render({}, options);
  } catch (const TemplateError& e) {
    return e.message();
  }
  ADD_FAILURE() << "no TemplateError from: " << source;
  return "";
}

// 10^10 empty iterations; the inner range(100000) is made again each time (3 MB of values each).
const std::string kTenBillionSteps = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
}  // namespace

TEST(JinjaErrors, StepLimitStopsALongLoop) {
  EXPECT_EQ(limit_error(kTenBillionSteps, {.max_steps = 5000, .max_bytes = kNoLimit, .max_seconds = kNoTimeLimit}),
            "template exceeded 5000 loop iterations and macro calls");
}

TEST(JinjaErrors, ValueLimitStopsExplodingValues) {
  const toy::chat::RenderOptions values_only{.max_steps = kNoLimit, .max_seconds = kNoTimeLimit};  // 64 MiB
  // A string doubled 100 times (2^100 bytes): one value over 16 MiB is refused while all of them
  // made so far (twice the last) are under 64 MiB.
  EXPECT_EQ(limit_error("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
                        "{% endfor %}",
                        values_only),
            "string result exceeds 16 MiB");
  // Builtins are metered by the data they make or search: a 1 MB string searched 100000 times.
  EXPECT_NE(
      limit_error("{% set big = 'x' * 1000000 %}{% for i in range(100000) %}{% if 'y' in big %}{% endif %}{% endfor %}",
                  values_only)
          .find("more than 64 MiB of values"),
      std::string::npos);
  // Issue #22 item 10: each `ns.a + [ns.a]` copies the whole list, and every copy stays alive inside
  // the next; counted at 16 bytes an item against 1 GiB this held ~3 GB for 8 s. Counted at its
  // size in memory against the budget, it stops early. (No time is asserted: a timed unit test
  // fails on a loaded machine; the 1 MiB budget below shows the count is of real sizes.)
  const std::string copies =
      "{% set ns = namespace(a=[]) %}{% for i in range(100000) %}{% set ns.a = ns.a + [ns.a] %}{% endfor %}";
  EXPECT_NE(limit_error(copies, values_only).find("more than 64 MiB of values, the limit"), std::string::npos);
  EXPECT_NE(limit_error(copies, {.max_steps = kNoLimit, .max_bytes = 1 << 20, .max_seconds = kNoTimeLimit})
                .find("more than 1 MiB of values"),
            std::string::npos);
  // The 10^10 steps of the other tests: their values alone (3 MB an outer iteration) stop them.
  EXPECT_NE(limit_error(kTenBillionSteps, values_only).find("more than 64 MiB of values"), std::string::npos);
}

// Cheap steps, many of them: 10^10 iterations making 3·10^11 bytes of values, neither limit
// reachable, take longer than 0.3 s on any CPU.
TEST(JinjaErrors, TimeLimitStopsCheapSteps) {
  EXPECT_EQ(limit_error(kTenBillionSteps, {.max_steps = kNoLimit, .max_bytes = kNoLimit, .max_seconds = 0.3}),
            "template rendering took longer than 0.3 s, the limit (runaway template?)");
}

// ---- 3. chat rendering ----

const json kChat = json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                                   {"role": "assistant", "content": "A"}, {"role": "user", "content": "U2"}])");

TEST(ChatTemplate, StripsOneLeadingBos) {
  const ChatTemplate t("{{ bos_token }}{% for m in messages %}{{ m.content }}{{ bos_token }}{% endfor %}");
  ChatOptions o{.bos_token = "<s>", .today = "2026-11-30"};
  EXPECT_EQ(t.apply(kChat, o), "S<s>U<s>A<s>U2<s>");
  o.strip_leading_bos = false;
  EXPECT_EQ(t.apply(kChat, o), "<s>S<s>U<s>A<s>U2<s>");
}

TEST(ChatTemplate, ContextVariables) {
  const ChatTemplate t(
      "{{ add_generation_prompt }} {{ eos_token }} {{ enable_thinking }} {{ date_string }} "
      "{{ strftime_now('%Y-%m-%d') }} {{ tools is defined }} {{ extra | default('-') }}");
  ChatOptions o{.eos_token = "</s>", .today = "2026-11-30"};
  EXPECT_EQ(t.apply(kChat, o), "True </s> True 30 Nov 2026 2026-11-30 False -");
  o.add_generation_prompt = false;
  o.tools = json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  o.extra_context = {{"extra", "X"}, {"enable_thinking", false}};
  EXPECT_EQ(t.apply(kChat, o), "False </s> False 30 Nov 2026 2026-11-30 True X");
  o.today = "2026-13-01";
  EXPECT_THROW(t.apply(kChat, o), std::invalid_argument);
}

TEST(ChatTemplate, MergesSystemIntoUserWhenTheTemplateRejectsIt) {
  const ChatTemplate strict(
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}"
      "[{{ m.role }}:{{ m.content }}]{% endfor %}");
  EXPECT_FALSE(strict.supports_system_role());
  EXPECT_EQ(strict.apply(kChat, {}), "[user:S\nU][assistant:A][user:U2]");
  const ChatTemplate plain("{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}");
  EXPECT_TRUE(plain.supports_system_role());
  EXPECT_EQ(plain.apply(kChat, {}), "[system:S][user:U][assistant:A][user:U2]");
  // A system message with no user message after it becomes a user message of its own.
  EXPECT_EQ(
      strict.apply(json::parse(R"([{"role": "user", "content": "x"}, {"role": "system", "content": "late"}])"), {}),
      "[user:x][user:late]");
}

TEST(ChatTemplate, RaiseExceptionReachesTheCaller) {
  const ChatTemplate t("{% if messages | length > 1 %}{{ raise_exception('only one message') }}{% endif %}ok");
  EXPECT_EQ(t.apply(json::parse(R"([{"role": "user", "content": "x"}])"), {}), "ok");
  try {
    t.apply(kChat, {});
    FAIL() << "expected raise_exception";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.message(), "only one message");
  }
}

TEST(ChatTemplate, ChatmlFallback) {
  const json chat = json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}])");
  EXPECT_EQ(toy::chat::render_chat(toy::chat::chatml_template(), chat, {}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(toy::chat::render_chat(toy::chat::chatml_template(), chat, {.add_generation_prompt = false}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n");
}

}  // namespace
