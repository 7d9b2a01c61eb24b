// jinja_parser.cpp: template source -> tokens -> tree (jinja_ast.h). The lexer applies all whitespace
// control, so the parser only sees text and tag contents. The grammar and operator precedence follow
// Jinja2's parser.py; the comments name its functions.
#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "toy/chat/jinja_ast.h"
#include "toy/chat/jinja_builtins.h"

namespace toy::chat {

TemplateError::TemplateError(const std::string& message, int line, int column)
    : std::runtime_error(
          line > 0 ? "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message : message),
      message_(message),
      line_(line),
      column_(column) {}

namespace {

using namespace ast;

// Nested blocks, brackets and operator chains: the depth of the tree, which bounds the recursion of the
// parser, the evaluator and the tree's destructor. Deeper templates are refused.
constexpr int kMaxNesting = 512;

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // Text, Name, String (decoded), Op
  Pos pos;
  int64_t int_value = 0;
  double float_value = 0;
};

bool is_space(char c) { return std::strchr(" \t\n\r\f\v", c) && c; }
bool is_ident_start(char c) { return std::isalpha(uint8_t(c)) || c == '_'; }
bool is_ident(char c) { return std::isalnum(uint8_t(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(std::string_view src, const ParseOptions& o) : s_(src), o_(o) {
    if (!o.keep_trailing_newline && s_.ends_with('\n')) s_.remove_suffix(s_.ends_with("\r\n") ? 2 : 1);
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (i_ < s_.size()) {
      size_t open = find_open(i_);
      std::string text(s_.substr(i_, open == std::string_view::npos ? std::string_view::npos : open - i_));
      if (open == std::string_view::npos) {
        emit_text(std::move(text), i_);
        break;
      }
      const char kind = s_[open + 1];  // '{', '%' or '#'
      const char mod = open + 2 < s_.size() ? s_[open + 2] : 0;
      if (mod == '-') {
        text.erase(std::find_if_not(text.rbegin(), text.rend(), is_space).base(), text.end());
      } else if (kind != '{' && mod != '+' && o_.lstrip_blocks) {
        size_t j = open;  // lstrip_blocks: drop spaces/tabs between the line start and the tag
        while (j > 0 && (s_[j - 1] == ' ' || s_[j - 1] == '\t')) --j;
        if (j == 0 || s_[j - 1] == '\n') text.resize(text.size() - std::min(text.size(), open - j));
      }
      emit_text(std::move(text), i_);
      i_ = open + 2 + (mod == '-' || mod == '+');
      if (kind == '#') {
        size_t close = s_.find("#}", i_);
        if (close == std::string_view::npos) fail(open, "unclosed comment");
        i_ = close + 2;
        after_tag(close > 0 && s_[close - 1] == '-', o_.trim_blocks);
      } else if (kind == '%' && lex_raw(open)) {
        continue;
      } else {
        push(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, open);
        lex_tag(kind, open);
      }
    }
    push(Tok::Eof, s_.size());
    return std::move(out_);
  }

 private:
  std::string_view s_;
  ParseOptions o_;
  size_t i_ = 0;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  bool strip_next_ = false;  // the last tag ended with '-': strip whitespace from the next text

  Pos pos_at(size_t offset) const {
    size_t line = size_t(std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - line_starts_.begin());
    return {int(line), int(offset - line_starts_[line - 1] + 1)};
  }
  [[noreturn]] void fail(size_t offset, const std::string& msg) const {
    Pos p = pos_at(offset);
    throw TemplateError(msg, p.line, p.column);
  }
  Token& push(Tok type, size_t offset, std::string text = {}) {
    out_.push_back({type, std::move(text), pos_at(offset)});
    return out_.back();
  }

  size_t find_open(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string_view::npos; i = s_.find('{', i + 1))
      if (i + 1 < s_.size() && s_[i + 1] && std::strchr("{%#", s_[i + 1])) return i;
    return std::string_view::npos;
  }

  void emit_text(std::string text, size_t offset) {
    if (strip_next_) text.erase(text.begin(), std::find_if_not(text.begin(), text.end(), is_space));
    strip_next_ = false;
    if (!text.empty()) push(Tok::Text, offset, std::move(text));
  }

  // After a tag: '-' strips the following whitespace; trim_blocks drops one newline.
  void after_tag(bool strip, bool trim) {
    strip_next_ = strip;
    if (trim && s_.substr(i_).starts_with("\n"))
      i_ += 1;
    else if (trim && s_.substr(i_).starts_with("\r\n"))
      i_ += 2;
  }

  // Matches `ws* word ws* [-+]? %}` at i; returns the offset after it and whether it had '-'.
  std::optional<std::pair<size_t, bool>> match_tag_rest(size_t i, std::string_view word) const {
    while (i < s_.size() && is_space(s_[i])) ++i;
    if (!s_.substr(i).starts_with(word) || (i + word.size() < s_.size() && is_ident(s_[i + word.size()])))
      return std::nullopt;
    i += word.size();
    while (i < s_.size() && is_space(s_[i])) ++i;
    bool strip = i < s_.size() && s_[i] == '-';
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    if (!s_.substr(i).starts_with("%}")) return std::nullopt;
    return std::pair{i + 2, strip};
  }

  // {% raw %}...{% endraw %}: the content is text, tags inside it are not interpreted.
  bool lex_raw(size_t open) {
    auto begin = match_tag_rest(i_, "raw");
    if (!begin) return false;
    for (size_t at = s_.find("{%", begin->first); at != std::string_view::npos; at = s_.find("{%", at + 2)) {
      size_t j = at + 2 + (at + 2 < s_.size() && (s_[at + 2] == '-' || s_[at + 2] == '+'));
      auto end = match_tag_rest(j, "endraw");
      if (!end) continue;
      std::string text(s_.substr(begin->first, at - begin->first));
      if (begin->second) text.erase(text.begin(), std::find_if_not(text.begin(), text.end(), is_space));
      if (s_[at + 2] == '-') text.erase(std::find_if_not(text.rbegin(), text.rend(), is_space).base(), text.end());
      if (!text.empty()) push(Tok::Text, begin->first, std::move(text));
      i_ = end->first;
      after_tag(end->second, o_.trim_blocks);
      return true;
    }
    fail(open, "missing '{% endraw %}'");
  }

  // The tokens of one {{ }} or {% %} tag, up to its end marker outside any brackets.
  void lex_tag(char kind, size_t open) {
    const std::string_view end = kind == '{' ? "}}" : "%}";
    int depth = 0;
    while (true) {
      while (i_ < s_.size() && is_space(s_[i_])) ++i_;
      if (i_ >= s_.size()) fail(open, kind == '{' ? "unclosed '{{'" : "unclosed '{%'");
      std::string_view rest = s_.substr(i_);
      if (depth == 0) {
        bool minus = rest[0] == '-' && rest.substr(1).starts_with(end);
        bool plus = kind == '%' && rest[0] == '+' && rest.substr(1).starts_with(end);
        if (minus || plus || rest.starts_with(end)) {
          push(kind == '{' ? Tok::VarEnd : Tok::BlockEnd, i_);
          i_ += 2 + (minus || plus);
          after_tag(minus, kind == '%' && !plus && o_.trim_blocks);
          return;
        }
      }
      const size_t start = i_;
      char c = rest[0];
      if (is_ident_start(c)) {
        while (i_ < s_.size() && is_ident(s_[i_])) ++i_;
        push(Tok::Name, start, std::string(s_.substr(start, i_ - start)));
      } else if (std::isdigit(uint8_t(c))) {
        lex_number(start);
      } else if (c == '\'' || c == '"') {
        lex_string(start);
      } else {
        static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                    ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
        auto op = std::find_if(std::begin(ops), std::end(ops), [&](const char* o) { return rest.starts_with(o); });
        if (op == std::end(ops)) fail(start, std::string("unexpected character '") + c + "'");
        i_ += std::strlen(*op);
        if (std::strchr("([{", c)) ++depth;
        if (std::strchr(")]}", c) && depth > 0) --depth;
        push(Tok::Op, start, *op);
      }
    }
  }

  void lex_number(size_t start) {
    auto digits = [&] {
      while (i_ < s_.size() && (std::isdigit(uint8_t(s_[i_])) || s_[i_] == '_')) ++i_;
    };
    digits();
    // After '.', only an integer (messages.0.content); otherwise fraction and exponent make a float.
    bool after_dot = !out_.empty() && out_.back().type == Tok::Op && out_.back().text == ".";
    bool is_float = false;
    if (!after_dot && i_ + 1 < s_.size() && s_[i_] == '.' && std::isdigit(uint8_t(s_[i_ + 1]))) {
      ++i_, digits(), is_float = true;
    }
    if (!after_dot && i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      size_t j = i_ + 1 + (i_ + 1 < s_.size() && (s_[i_ + 1] == '+' || s_[i_ + 1] == '-'));
      if (j < s_.size() && std::isdigit(uint8_t(s_[j]))) i_ = j, digits(), is_float = true;
    }
    std::string text(s_.substr(start, i_ - start));
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Token& t = push(is_float ? Tok::Float : Tok::Int, start, text);
    try {
      if (is_float)
        t.float_value = std::stod(text);
      else
        t.int_value = std::stoll(text);
    } catch (const std::exception&) {
      fail(start, "number out of range: " + text);
    }
  }

  // A string literal with Python's escapes (\n \t \\ \' \" \xNN \uNNNN \UNNNNNNNN and friends).
  void lex_string(size_t start) {
    const char quote = s_[i_++];
    std::string value;
    while (true) {
      if (i_ >= s_.size()) fail(start, "unterminated string");
      char c = s_[i_++];
      if (c == quote) break;
      if (c != '\\' || i_ >= s_.size()) {
        value += c;
        continue;
      }
      char e = s_[i_++];
      const char* simple = std::strchr("n\nt\tr\rb\bf\fv\va\a0\0", e);
      if (e == '\\' || e == '\'' || e == '"')
        value += e;
      else if (e == '\n')
        continue;  // line continuation
      else if (simple && e != '0')
        value += simple[1];
      else if (e == 'x' || e == 'u' || e == 'U') {
        size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        std::string hex(s_.substr(i_, n));
        if (hex.size() != n || !std::all_of(hex.begin(), hex.end(), [](char h) { return std::isxdigit(uint8_t(h)); }))
          fail(i_ - 2, "bad \\" + std::string(1, e) + " escape");
        const unsigned long cp = std::stoul(hex, nullptr, 16);
        if (cp > 0x10FFFF) fail(i_ - 2, "bad \\U escape");
        append_utf8(value, uint32_t(cp));
        i_ += n;
      } else if (e >= '0' && e <= '7') {  // octal, up to three digits
        uint32_t v = uint32_t(e - '0');
        for (int k = 0; k < 2 && i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '7'; ++k)
          v = v * 8 + uint32_t(s_[i_++] - '0');
        append_utf8(value, v);
      } else {
        value += '\\', value += e;  // unknown escapes stay as written, as in Python
      }
    }
    push(Tok::String, start, std::move(value));
  }
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse_template() { return parse_body({}, nullptr); }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // break/continue are only valid inside a for loop (not across a macro)

  // One level deeper in the tree; the depth goes back when the Nest that covers the level ends.
  void deeper() {
    if (++depth_ > kMaxNesting) fail("template nested too deeply");
  }
  struct Nest {
    Parser& p;
    int saved;
    explicit Nest(Parser& parser) : p(parser), saved(parser.depth_) { p.deeper(); }
    ~Nest() { p.depth_ = saved; }
  };

  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  Token next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool at_op(std::string_view op, size_t k = 0) const { return peek(k).type == Tok::Op && peek(k).text == op; }
  bool at_name(std::string_view name, size_t k = 0) const { return peek(k).type == Tok::Name && peek(k).text == name; }
  bool accept_op(std::string_view op) { return at_op(op) && (next(), true); }
  bool accept_name(std::string_view name) { return at_name(name) && (next(), true); }

  [[noreturn]] void fail(const std::string& msg, const Token* at = nullptr) const {
    const Token& t = at ? *at : peek();
    throw TemplateError(msg, t.pos.line, t.pos.column);
  }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::Eof:
        return "end of template";
      case Tok::Text:
        return "text";
      case Tok::VarEnd:
        return "'}}'";
      case Tok::BlockEnd:
        return "'%}'";
      case Tok::String:
        return "string";
      default:
        return "'" + t.text + "'";
    }
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) fail("expected '" + std::string(op) + "', got " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().type != Tok::Name) fail("expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect(Tok type) {
    if (peek().type != type)
      fail(std::string("expected ") + (type == Tok::BlockEnd ? "'%}'" : "'}}'") + ", got " + describe(peek()));
    next();
  }
  template <class N>
  std::unique_ptr<N> make(const Token& at) {
    auto n = std::make_unique<N>();
    n->pos = at.pos;
    return n;
  }

  // ---- statements ----

  // Text, {{ }} and {% %} up to a block tag named in `ends`, whose name is stored in *end (the tag's
  // "%}" is left for the caller). With no `ends`, up to the end of the template.
  Body parse_body(std::initializer_list<std::string_view> ends, std::string* end) {
    Nest nest(*this);
    Body body;
    const Token start = peek();
    while (true) {
      const Token& t = peek();
      if (t.type == Tok::Eof) {
        if (ends.size() == 0) return body;
        fail("missing '{% " + std::string(*ends.begin()) + " %}' for the block opened here", &start);
      }
      if (t.type == Tok::Text) {
        auto n = make<Text>(t);
        n->text = next().text;
        body.push_back(std::move(n));
      } else if (t.type == Tok::VarBegin) {
        auto n = make<Output>(next());
        n->expr = parse_tuple();
        expect(Tok::VarEnd);
        body.push_back(std::move(n));
      } else if (t.type == Tok::BlockBegin) {
        const Token& name = peek(1);
        if (name.type == Tok::Name && std::find(ends.begin(), ends.end(), name.text) != ends.end()) {
          i_ += 2;
          *end = name.text;
          return body;
        }
        next();
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  NodePtr parse_statement() {
    const Token tag = peek();
    if (tag.type != Tok::Name) fail("expected a tag name, got " + describe(tag));
    const std::string& kw = tag.text;
    next();
    std::string end;
    if (kw == "if") {
      auto n = make<If>(tag);
      std::string branch = "if";
      while (branch == "if" || branch == "elif") {
        ExprPtr cond = parse_expression();
        expect(Tok::BlockEnd);
        n->branches.emplace_back(std::move(cond), parse_body({"elif", "else", "endif"}, &branch));
      }
      if (branch == "else") expect(Tok::BlockEnd), n->otherwise = parse_body({"endif"}, &branch);
      expect(Tok::BlockEnd);
      return n;
    }
    if (kw == "for") {
      auto n = make<For>(tag);
      n->targets = parse_targets();
      if (!accept_name("in")) fail("expected 'in', got " + describe(peek()));
      n->iterable = parse_tuple(/*with_condexpr=*/false);
      if (accept_name("if")) n->condition = parse_expression();
      if (at_name("recursive")) fail("recursive loops are not supported");
      expect(Tok::BlockEnd);
      ++loop_depth_;
      n->body = parse_body({"else", "endfor"}, &end);
      --loop_depth_;
      if (end == "else") expect(Tok::BlockEnd), n->otherwise = parse_body({"endfor"}, &end);
      expect(Tok::BlockEnd);
      return n;
    }
    if (kw == "set") {
      auto n = make<Set>(tag);
      n->targets = parse_targets();
      if (n->targets.size() == 1 && accept_op(".")) n->attr = expect_name();
      if (accept_op("=")) {
        n->value = parse_tuple();
        expect(Tok::BlockEnd);
        return n;
      }
      if (n->targets.size() != 1 || !n->attr.empty()) fail("a block set takes a single name");
      while (accept_op("|")) n->filters.push_back(parse_filter(nullptr));
      expect(Tok::BlockEnd);
      n->body = parse_body({"endset"}, &end);
      expect(Tok::BlockEnd);
      return n;
    }
    if (kw == "macro") {
      auto n = make<Macro>(tag);
      n->name = expect_name();
      parse_params(*n);
      expect(Tok::BlockEnd);
      n->body = parse_macro_body("endmacro");
      return n;
    }
    if (kw == "call") {
      auto n = make<CallBlock>(tag);
      n->caller.pos = tag.pos;
      n->caller.name = "caller";
      if (at_op("(")) parse_params(n->caller);
      ExprPtr call = parse_expression();
      if (!dynamic_cast<Call*>(call.get())) fail("expected a macro call", &tag);
      n->call.reset(static_cast<Call*>(call.release()));
      expect(Tok::BlockEnd);
      n->caller.body = parse_macro_body("endcall");
      return n;
    }
    if (kw == "filter") {
      auto n = make<FilterBlock>(tag);
      do n->filters.push_back(parse_filter(nullptr));
      while (accept_op("|"));
      expect(Tok::BlockEnd);
      n->body = parse_body({"endfilter"}, &end);
      expect(Tok::BlockEnd);
      return n;
    }
    if (kw == "generation") {
      auto n = make<Block>(tag);
      expect(Tok::BlockEnd);
      n->body = parse_body({"endgeneration"}, &end);
      expect(Tok::BlockEnd);
      return n;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) fail("'" + kw + "' outside of a loop", &tag);
      auto n = make<LoopControl>(tag);
      n->flow = kw == "break" ? Flow::Break : Flow::Continue;
      expect(Tok::BlockEnd);
      return n;
    }
    if (kw == "extends" || kw == "include" || kw == "import" || kw == "from" || kw == "block")
      fail("'{% " + kw + " %}' is not supported (templates are self-contained)", &tag);
    fail("unexpected '" + kw + "'", &tag);
  }

  void parse_params(Macro& m) {
    expect_op("(");
    while (!accept_op(")")) {
      if (!m.params.empty()) expect_op(",");
      if (accept_op(")")) break;
      std::string name = expect_name();
      m.params.emplace_back(name, accept_op("=") ? parse_expression() : nullptr);
    }
  }

  Body parse_macro_body(std::string_view end_tag) {
    std::string end;
    int saved = loop_depth_;
    loop_depth_ = 0;
    Body body = parse_body({end_tag}, &end);
    loop_depth_ = saved;
    expect(Tok::BlockEnd);
    return body;
  }

  // Assignment targets: `x`, `a, b` or `(a, b)`.
  std::vector<std::string> parse_targets() {
    bool paren = accept_op("(");
    std::vector<std::string> names{expect_name()};
    while (accept_op(",")) {
      if (peek().type != Tok::Name) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  // ---- expressions, lowest precedence first ----

  // parse_tuple: `a, b` without parentheses builds a tuple (a list here).
  ExprPtr parse_tuple(bool with_condexpr = true) {
    const Token start = peek();
    ExprPtr first = with_condexpr ? parse_expression() : parse_or();
    if (!at_op(",")) return first;
    auto list = make<ListExpr>(start);
    list->items.push_back(std::move(first));
    while (accept_op(",")) {
      if (peek().type == Tok::BlockEnd || peek().type == Tok::VarEnd || at_op(")")) break;
      list->items.push_back(with_condexpr ? parse_expression() : parse_or());
    }
    return list;
  }

  // parse_condexpr: `a if cond else b`; without else the result is undefined.
  ExprPtr parse_expression() {
    Nest nest(*this);
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      auto n = make<Conditional>(next());
      n->then = std::move(expr);
      n->cond = parse_or();
      if (accept_name("else")) n->otherwise = parse_expression();
      expr = std::move(n);
    }
    return expr;
  }

  // Left-associative binary operators, loosest first: Jinja's parse_or, parse_and, (parse_not and
  // parse_compare sit here), parse_math1, parse_concat, parse_math2, parse_pow.
  static constexpr std::string_view kLevels[][4] = {{"or"}, {"and"}, {}, {"+", "-"}, {"~"}, {"*", "/", "//", "%"},
                                                    {"**"}};
  static constexpr int kNotLevel = 2, kUnaryLevel = 7;

  ExprPtr parse_binary(int level) {
    if (level == kNotLevel) return parse_not();
    if (level == kUnaryLevel) return parse_unary();
    Nest nest(*this);
    ExprPtr left = parse_binary(level + 1);
    const auto& ops = kLevels[level];
    while ((peek().type == Tok::Op || peek().type == Tok::Name) &&
           std::find(std::begin(ops), std::end(ops), peek().text) != std::end(ops)) {
      deeper();  // a chain a + b + c nests to the left
      auto n = make<Binary>(peek());
      n->op = next().text;
      n->left = std::move(left);
      n->right = parse_binary(level + 1);
      left = std::move(n);
    }
    return left;
  }
  ExprPtr parse_or() { return parse_binary(0); }

  ExprPtr parse_not() {
    if (!at_name("not")) return parse_compare();
    Nest nest(*this);
    auto n = make<Unary>(next());
    n->op = '!';
    n->operand = parse_not();
    return n;
  }

  // a == b, a < b <= c, x in y, x not in y
  ExprPtr parse_compare() {
    Nest nest(*this);
    const Token start = peek();
    ExprPtr first = parse_binary(kNotLevel + 1);
    std::unique_ptr<Compare> cmp;
    while (true) {
      std::string op;
      if (at_op("==") || at_op("!=") || at_op("<") || at_op("<=") || at_op(">") || at_op(">="))
        op = next().text;
      else if (accept_name("in"))
        op = "in";
      else if (at_name("not") && at_name("in", 1))
        i_ += 2, op = "notin";
      else
        break;
      if (!cmp) cmp = make<Compare>(start), cmp->first = std::move(first);
      deeper();
      cmp->rest.emplace_back(op, parse_binary(kNotLevel + 1));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  // parse_unary: a sign applies before filters, so `-x | abs` is abs(-x).
  ExprPtr parse_unary(bool with_filter = true) {
    Nest nest(*this);
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      auto n = make<Unary>(peek());
      n->op = next().text[0];
      n->operand = parse_unary(false);
      node = std::move(n);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    return with_filter ? parse_filter_expr(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
    const Token t = next();
    if (t.type == Tok::Name) {
      static const std::pair<const char*, Value> constants[] = {{"true", true},          {"True", true},
                                                                {"false", false},        {"False", false},
                                                                {"none", Value::none()}, {"None", Value::none()}};
      for (const auto& [name, value] : constants) {
        if (t.text == name) {
          auto n = make<Literal>(t);
          n->value = value;
          return n;
        }
      }
      auto n = make<Name>(t);
      n->name = t.text;
      return n;
    }
    if (t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float) {
      auto n = make<Literal>(t);
      if (t.type == Tok::Int)
        n->value = t.int_value;
      else if (t.type == Tok::Float)
        n->value = t.float_value;
      else {
        std::string s = t.text;
        while (peek().type == Tok::String) s += next().text;  // adjacent literals concatenate
        n->value = std::move(s);
      }
      return n;
    }
    if (t.type == Tok::Op && t.text == "(") {
      if (accept_op(")")) return make<ListExpr>(t);  // ()
      ExprPtr inner = parse_tuple();
      expect_op(")");
      return inner;
    }
    if (t.type == Tok::Op && t.text == "[") {
      auto n = make<ListExpr>(t);
      while (!accept_op("]")) {
        if (!n->items.empty()) expect_op(",");
        if (accept_op("]")) break;
        n->items.push_back(parse_expression());
      }
      return n;
    }
    if (t.type == Tok::Op && t.text == "{") {
      auto n = make<DictExpr>(t);
      while (!accept_op("}")) {
        if (!n->items.empty()) expect_op(",");
        if (accept_op("}")) break;
        ExprPtr key = parse_expression();
        expect_op(":");
        n->items.emplace_back(std::move(key), parse_expression());
      }
      return n;
    }
    fail("unexpected " + describe(t), &t);
  }

  // parse_postfix: .name, .0, [key], [a:b:c] and calls.
  ExprPtr parse_postfix(ExprPtr node) {
    Nest nest(*this);
    while (true) {
      deeper();
      if (at_op(".")) {
        Token dot = next();
        if (peek().type == Tok::Int) {
          auto n = make<GetItem>(dot);
          n->object = std::move(node);
          auto key = make<Literal>(peek());
          key->value = next().int_value;
          n->key = std::move(key);
          node = std::move(n);
        } else {
          auto n = make<GetAttr>(dot);
          n->object = std::move(node);
          n->name = expect_name();
          node = std::move(n);
        }
      } else if (at_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    const Token open = next();
    ExprPtr parts[3];
    int colons = 0;
    while (!at_op("]")) {
      if (accept_op(":")) {
        if (++colons > 2) fail("too many ':' in a slice");
      } else if (!parts[colons]) {
        parts[colons] = parse_expression();
      } else {
        fail("expected ']', got " + describe(peek()));
      }
    }
    next();
    if (colons == 0) {
      if (!parts[0]) fail("empty subscript", &open);
      auto n = make<GetItem>(open);
      n->object = std::move(object), n->key = std::move(parts[0]);
      return n;
    }
    auto n = make<Slice>(open);
    n->object = std::move(object);
    n->start = std::move(parts[0]), n->stop = std::move(parts[1]), n->step = std::move(parts[2]);
    return n;
  }

  Args parse_args() {
    Args args;
    expect_op("(");
    while (!accept_op(")")) {
      if (!args.positional.empty() || !args.named.empty()) expect_op(",");
      if (accept_op(")")) break;
      if (at_op("*") || at_op("**")) fail("*args and **kwargs are not supported");
      if (peek().type == Tok::Name && at_op("=", 1)) {
        std::string name = next().text;
        next();
        args.named.emplace_back(name, parse_expression());
      } else {
        if (!args.named.empty()) fail("positional argument after a keyword argument");
        args.positional.push_back(parse_expression());
      }
    }
    return args;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto n = make<Call>(peek());
    n->pos = callee->pos;  // errors point at what is called
    n->callee = std::move(callee);
    n->args = parse_args();
    return n;
  }

  // parse_filter_expr: `| filter`, `is test` and calls, left to right.
  ExprPtr parse_filter_expr(ExprPtr node) {
    Nest nest(*this);
    while (true) {
      deeper();
      if (accept_op("|"))
        node = parse_filter(std::move(node));
      else if (at_name("is"))
        node = parse_test(std::move(node));
      else if (at_op("("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  std::unique_ptr<Filter> parse_filter(ExprPtr input) {
    const Token name = peek();
    auto n = make<Filter>(name);
    n->input = std::move(input);
    n->name = expect_name();
    while (accept_op(".")) n->name += "." + expect_name();
    if (!is_filter(n->name)) fail("unknown filter '" + n->name + "'", &name);
    if (at_op("(")) n->args = parse_args();
    return n;
  }

  ExprPtr parse_test(ExprPtr input) {
    auto n = make<Test>(next());
    n->input = std::move(input);
    n->negated = accept_name("not");
    const Token name = peek();
    n->name = expect_name();
    if (!is_test(n->name)) fail("unknown test '" + n->name + "'", &name);
    const Token& arg = peek();
    bool bare_arg = (arg.type == Tok::Name && arg.text != "else" && arg.text != "or" && arg.text != "and") ||
                    arg.type == Tok::String || arg.type == Tok::Int || arg.type == Tok::Float || at_op("[") ||
                    at_op("{");
    if (at_op("("))
      n->args = parse_args();
    else if (bare_arg)
      n->args.positional.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
    return n;
  }
};

}  // namespace

Template Template::parse(std::string_view source, const ParseOptions& options) {
  auto impl = std::make_shared<Impl>();
  impl->body = Parser(Lexer(source, options).run()).parse_template();
  return Template(std::move(impl));
}

}  // namespace toy::chat
