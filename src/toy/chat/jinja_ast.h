// jinja_ast.h (internal to the engine): the tree a template parses into. jinja_parser.cpp builds it;
// jinja_eval.cpp defines what each node does: an expression evaluates to a Value, a statement appends
// text to the output. Nodes carry their source position so that errors can name it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "toy/chat/jinja.h"
#include "toy/chat/jinja_value.h"

namespace toy::chat::ast {

struct Pos {
  int line = 0, column = 0;
};

struct Context;  // the state of one render (jinja_eval.cpp)

// ---- expressions ----

struct Expr {
  Pos pos;
  virtual ~Expr() = default;
  Value evaluate(Context& c) const;  // eval(), with EvalError turned into TemplateError at `pos`

 protected:
  virtual Value eval(Context& c) const = 0;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Args {  // f(a, b, key=c)
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> named;
  CallArgs evaluate(Context& c) const;
};

struct Literal : Expr {
  Value value;
  Value eval(Context& c) const override;
};
struct ListExpr : Expr {  // [a, b] and tuples (a, b)
  std::vector<ExprPtr> items;
  Value eval(Context& c) const override;
};
struct DictExpr : Expr {  // {k: v}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  Value eval(Context& c) const override;
};
struct Name : Expr {
  std::string name;
  Value eval(Context& c) const override;
};
struct GetAttr : Expr {  // object.name
  ExprPtr object;
  std::string name;
  Value eval(Context& c) const override;
};
struct GetItem : Expr {  // object[key]
  ExprPtr object, key;
  Value eval(Context& c) const override;
};
struct Slice : Expr {  // object[start:stop:step], each part optional (null)
  ExprPtr object, start, stop, step;
  Value eval(Context& c) const override;
};
struct Unary : Expr {  // not x, -x, +x
  char op;             // '!', '-', '+'
  ExprPtr operand;
  Value eval(Context& c) const override;
};
struct Binary : Expr {  // and or + - * / // % ** ~
  std::string op;
  ExprPtr left, right;
  Value eval(Context& c) const override;
};
struct Compare : Expr {  // a < b <= c, chained as in Python; ops: == != < <= > >= in notin
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;
  Value eval(Context& c) const override;
};
struct Conditional : Expr {  // then if cond else otherwise (otherwise may be null: undefined)
  ExprPtr cond, then, otherwise;
  Value eval(Context& c) const override;
};
struct Call : Expr {  // callee(args); a method when callee is `obj.name` and obj is a str/list/dict
  ExprPtr callee;
  Args args;
  Value eval(Context& c) const override;
  Value invoke(Context& c, const Value* caller) const;  // caller: the body of a {% call %} block
};
struct Filter : Expr {  // input | name(args); input is null in {% filter %} and {% set x | f %}
  ExprPtr input;
  std::string name;
  Args args;
  Value eval(Context& c) const override;
  Value apply(Context& c, const Value& in) const;
};
struct Test : Expr {  // input is [not] name(args)
  ExprPtr input;
  std::string name;
  Args args;
  bool negated = false;
  Value eval(Context& c) const override;
};

// ---- statements ----

enum class Flow { Normal, Break, Continue };

struct Node {
  Pos pos;
  virtual ~Node() = default;
  Flow render(Context& c, std::string& out) const;  // run(), with EvalError turned into TemplateError

 protected:
  virtual Flow run(Context& c, std::string& out) const = 0;
};
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;
Flow render_body(const Body& body, Context& c, std::string& out);

struct Text : Node {
  std::string text;
  Flow run(Context& c, std::string& out) const override;
};
struct Output : Node {  // {{ expr }}
  ExprPtr expr;
  Flow run(Context& c, std::string& out) const override;
};
struct If : Node {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body otherwise;
  Flow run(Context& c, std::string& out) const override;
};
struct For : Node {  // for targets in iterable [if condition] ... [else ...]
  std::vector<std::string> targets;
  ExprPtr iterable, condition;
  Body body, otherwise;
  Flow run(Context& c, std::string& out) const override;
};
struct Set : Node {  // set a = v; set a, b = v; set ns.attr = v; set a [| filters] %}body{% endset
  std::vector<std::string> targets;
  std::string attr;  // non-empty: assign targets[0].attr
  ExprPtr value;     // null: the block form
  Body body;
  std::vector<std::unique_ptr<Filter>> filters;
  Flow run(Context& c, std::string& out) const override;
};
struct Macro : Node {  // macro name(a, b=default) ... endmacro; also the body of a call block
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
  Flow run(Context& c, std::string& out) const override;
  Value make_function(Context& c) const;
};
struct CallBlock : Node {  // call(params) macro(args) ... endcall
  std::unique_ptr<Call> call;
  Macro caller;
  Flow run(Context& c, std::string& out) const override;
};
struct FilterBlock : Node {  // filter f | g ... endfilter
  std::vector<std::unique_ptr<Filter>> filters;
  Body body;
  Flow run(Context& c, std::string& out) const override;
};
struct Block : Node {  // a body rendered in place: {% generation %}
  Body body;
  Flow run(Context& c, std::string& out) const override;
};
struct LoopControl : Node {  // break, continue
  Flow flow;
  Flow run(Context& c, std::string& out) const override;
};

}  // namespace toy::chat::ast

namespace toy::chat {
struct Template::Impl {
  ast::Body body;
};
}  // namespace toy::chat
