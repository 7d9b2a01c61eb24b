// jinja_eval.cpp: what each tree node does (jinja_ast.h), and Template::render.
//
// Scoping follows Jinja: the template has one top-level scope; a for loop and a macro call open a child
// scope whose `set`s vanish when it ends (which is why templates use namespace() to carry state out of a
// loop); if-blocks open none. Macros see the scope they were defined in.
#include <chrono>
#include <cstdio>
#include <unordered_map>

#include "toy/chat/jinja_ast.h"
#include "toy/chat/jinja_builtins.h"

namespace toy::chat::ast {

constexpr int kMaxCallDepth = 100;               // nested macro calls; runaway recursion stops here
constexpr int kMaxEvalDepth = 2000;              // nodes being evaluated at once (macro calls times tree depth)
constexpr size_t kMaxOutput = size_t(16) << 20;  // bytes of text one block may produce

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};

struct Context {
  std::shared_ptr<Frame> frame;  // the innermost scope
  int call_depth = 0;
  int eval_depth = 0;
  int64_t steps = 0, max_steps = 0;  // loop iterations and macro calls: so far, allowed
  int64_t bytes = 0, max_bytes = 0;  // see charge()
  std::chrono::steady_clock::time_point deadline;
  double max_seconds = 0;

  Value lookup(const std::string& name) const {
    for (const Frame* f = frame.get(); f; f = f->parent.get()) {
      auto it = f->vars.find(name);
      if (it != f->vars.end()) return it->second;
    }
    return Value();
  }
  void set(const std::string& name, Value v) { frame->vars[name] = std::move(v); }
  void step() {
    if (++steps > max_steps)
      throw EvalError("template exceeded " + std::to_string(max_steps) + " loop iterations and macro calls");
    if (steps % 256 == 0) check_time();
  }
  void check_time() const {
    if (std::chrono::steady_clock::now() > deadline) {
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", max_seconds);
      throw EvalError(std::string("template rendering took longer than ") + limit +
                      " s, the limit (runaway template?)");
    }
  }
  // Bounds the data builtins and operators make or search (each is linear in it) at its size in
  // memory: a string its bytes, a list sizeof(Value) per item, a dict an entry per item plus its
  // key. Charged for every value made, a copy that nests another (`a + [a]`) counts the items it
  // copies, so the bytes alive at any time are at most the total charged; with the step and time
  // limits this bounds a render's time and memory.
  const Value& charge(const Value& v) {
    if (v.is_string()) {
      bytes += int64_t(v.as_string().size());
    } else if (v.is_list()) {
      bytes += int64_t(sizeof(Value) * v.as_list().size());
    } else if (v.is_dict()) {
      for (const auto& [key, _] : v.as_dict().entries)
        bytes += int64_t(sizeof(std::pair<std::string, Value>) + key.size());
    }
    if (bytes > max_bytes)
      throw EvalError("template made or scanned more than " + std::to_string(max_bytes >> 20) +
                      " MiB of values, the limit (runaway template?)");
    if (v.is_list() || v.is_dict()) check_time();
    return v;
  }
};

// Counts one node being evaluated, bounding the native stack a template can use.
struct EvalDepth {
  int& depth;
  explicit EvalDepth(Context& c) : depth(c.eval_depth) {
    if (++depth > kMaxEvalDepth) {
      --depth;
      throw EvalError("template evaluation nested too deeply");
    }
  }
  ~EvalDepth() { --depth; }
};

// A child scope of `parent` for the lifetime of this object.
struct Scope {
  Context& c;
  std::shared_ptr<Frame> saved;
  Scope(Context& ctx, std::shared_ptr<Frame> parent) : c(ctx), saved(ctx.frame) {
    c.frame = std::make_shared<Frame>();
    c.frame->parent = std::move(parent);
  }
  ~Scope() { c.frame = std::move(saved); }
};

namespace {

void append(std::string& out, std::string_view text) {
  if (out.size() + text.size() > kMaxOutput) throw EvalError("template output exceeds 16 MiB");
  out += text;
}

// Binds loop or set targets: one name takes the value, several unpack a sequence.
void assign(Context& c, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) return c.set(targets[0], v);
  List parts = v.elements();
  if (parts.size() != targets.size())
    throw EvalError("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) +
                    " names");
  for (size_t i = 0; i < parts.size(); ++i) c.set(targets[i], parts[i]);
}

// "'x' is undefined" for an operand that names what is missing.
std::string undefined_error(const Expr& e) {
  if (const auto* n = dynamic_cast<const Name*>(&e)) return "'" + n->name + "' is undefined";
  if (const auto* a = dynamic_cast<const GetAttr*>(&e)) return "'" + a->name + "' is undefined";
  return "an operand is undefined";
}

// The `loop` variable of iteration i (0-based) over `items`.
Value loop_info(size_t i, const List& items, const Value& cycle) {
  const int64_t n = int64_t(items.size()), k = int64_t(i);
  std::vector<std::pair<std::string, Value>> e;
  e.reserve(12);
  e.emplace_back("index", k + 1), e.emplace_back("index0", k);
  e.emplace_back("revindex", n - k), e.emplace_back("revindex0", n - k - 1);
  e.emplace_back("first", k == 0), e.emplace_back("last", k == n - 1), e.emplace_back("length", n);
  e.emplace_back("previtem", i > 0 ? items[i - 1] : Value());
  e.emplace_back("nextitem", k < n - 1 ? items[i + 1] : Value());
  e.emplace_back("depth", 1), e.emplace_back("depth0", 0), e.emplace_back("cycle", cycle);
  return Value::dict(Dict{std::move(e)});
}

}  // namespace

// ---- expressions ----

Value Expr::evaluate(Context& c) const {
  try {
    EvalDepth depth(c);
    return eval(c);
  } catch (const EvalError& e) {
    throw TemplateError(e.what(), pos.line, pos.column);
  }
}

CallArgs Args::evaluate(Context& c) const {
  CallArgs a;
  for (const auto& e : positional) a.positional.push_back(e->evaluate(c));
  for (const auto& [name, e] : named) a.named.emplace_back(name, e->evaluate(c));
  return a;
}

Value Literal::eval(Context&) const { return value; }

Value ListExpr::eval(Context& c) const {
  List out;
  for (const auto& e : items) out.push_back(e->evaluate(c));
  return Value::list(std::move(out));
}

Value DictExpr::eval(Context& c) const {
  Dict d;
  for (const auto& [k, v] : items) {
    Value key = k->evaluate(c);
    if (!key.is_string()) throw EvalError("dict keys must be strings, got " + key.type_name());
    d.set(key.as_string(), v->evaluate(c));
  }
  return Value::dict(std::move(d));
}

Value Name::eval(Context& c) const { return c.lookup(name); }

Value GetAttr::eval(Context& c) const { return object->evaluate(c).attr(name); }

Value GetItem::eval(Context& c) const {
  Value obj = object->evaluate(c);
  return obj.item(key->evaluate(c));
}

Value Slice::eval(Context& c) const {
  Value obj = object->evaluate(c);
  auto bound = [&](const ExprPtr& e) -> std::optional<int64_t> {
    if (!e) return std::nullopt;
    Value v = e->evaluate(c);
    return v.is_none() ? std::nullopt : std::optional<int64_t>(v.as_int());
  };
  auto start_v = bound(start), stop_v = bound(stop), step_v = bound(step);
  return obj.is_undefined() ? Value() : c.charge(obj.slice(start_v, stop_v, step_v));
}

Value Unary::eval(Context& c) const {
  Value v = operand->evaluate(c);
  if (op == '!') return !v.truthy();
  if (!v.is_number()) throw EvalError(std::string("bad operand type for unary ") + op + ": '" + v.type_name() + "'");
  if (op == '+') return v.is_float() ? v : Value(v.as_int());  // +True is 1
  if (v.is_float()) return -v.as_double();
  if (v.as_int() == INT64_MIN) throw EvalError("integer overflow in unary '-'");
  return -v.as_int();
}

Value Binary::eval(Context& c) const {
  Value l = left->evaluate(c);
  if (op == "and") return l.truthy() ? right->evaluate(c) : l;
  if (op == "or") return l.truthy() ? l : right->evaluate(c);
  Value r = right->evaluate(c);
  if (op != "~" && l.is_undefined()) throw EvalError(undefined_error(*left));
  if (op != "~" && r.is_undefined()) throw EvalError(undefined_error(*right));
  return c.charge(binary_op(op, l, r));
}

Value Compare::eval(Context& c) const {
  Value l = first->evaluate(c);
  for (const auto& [op, e] : rest) {
    Value r = e->evaluate(c);
    c.charge(op == "in" || op == "notin" ? r : l);
    bool ok;
    if (op == "==")
      ok = l == r;
    else if (op == "!=")
      ok = !(l == r);
    else if (op == "in")
      ok = contains(r, l);
    else if (op == "notin")
      ok = !contains(r, l);
    else {
      int cmp = Value::compare(l, r);
      ok = op == "<" ? cmp < 0 : op == "<=" ? cmp <= 0 : op == ">" ? cmp > 0 : cmp >= 0;
    }
    if (!ok) return false;
    l = std::move(r);
  }
  return true;
}

Value Conditional::eval(Context& c) const {
  if (cond->evaluate(c).truthy()) return then->evaluate(c);
  return otherwise ? otherwise->evaluate(c) : Value();
}

Value Call::eval(Context& c) const { return invoke(c, nullptr); }

Value Call::invoke(Context& c, const Value* caller) const {
  // obj.name(...): a Python method of a str/list/dict, else a function stored under that name.
  const auto* method = dynamic_cast<const GetAttr*>(callee.get());
  Value self = method ? method->object->evaluate(c) : Value();
  CallArgs a = args.evaluate(c);
  if (caller) a.named.emplace_back("caller", *caller);
  if (method && (self.is_string() || self.is_list() || self.is_dict())) {
    if (self.is_string()) c.charge(self);  // str methods scan the string
    if (auto result = call_method(self, method->name, a)) return c.charge(*result);
  }
  Value fn = method ? self.attr(method->name) : callee->evaluate(c);
  if (fn.is_undefined()) {
    if (method) throw EvalError("'" + self.type_name() + "' object has no method '" + method->name + "'");
    const auto* name = dynamic_cast<const Name*>(callee.get());
    throw EvalError(name ? "'" + name->name + "' is undefined" : "called an undefined value");
  }
  return c.charge(fn.as_function()(a));
}

Value Filter::eval(Context& c) const { return apply(c, input->evaluate(c)); }

Value Filter::apply(Context& c, const Value& in) const {
  if (in.is_string()) c.charge(in);
  return c.charge(apply_filter(name, in, args.evaluate(c)));
}

Value Test::eval(Context& c) const {
  Value in = input->evaluate(c);
  CallArgs a = args.evaluate(c);
  for (const Value& arg : a.positional) c.charge(arg);  // `x is in big_list` searches it
  if (in.is_string()) c.charge(in);                     // `s is lower` scans it
  return apply_test(name, in, a) != negated;
}

// ---- statements ----

Flow Node::render(Context& c, std::string& out) const {
  try {
    EvalDepth depth(c);
    return run(c, out);
  } catch (const EvalError& e) {
    throw TemplateError(e.what(), pos.line, pos.column);
  }
}

Flow render_body(const Body& body, Context& c, std::string& out) {
  for (const auto& node : body) {
    Flow f = node->render(c, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Flow Text::run(Context&, std::string& out) const {
  append(out, text);
  return Flow::Normal;
}

Flow Output::run(Context& c, std::string& out) const {
  append(out, expr->evaluate(c).str());
  return Flow::Normal;
}

Flow If::run(Context& c, std::string& out) const {
  for (const auto& [cond, body] : branches)
    if (cond->evaluate(c).truthy()) return render_body(body, c, out);
  return render_body(otherwise, c, out);
}

Flow For::run(Context& c, std::string& out) const {
  List items = c.charge(iterable->evaluate(c)).elements();
  Scope scope(c, c.frame);
  if (condition) {  // `for x in xs if cond`: filtered before loop.length is known
    List kept;
    for (const Value& item : items) {
      c.step();
      assign(c, targets, item);
      if (condition->evaluate(c).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return render_body(otherwise, c, out);  // a break here belongs to an outer loop
  auto index = std::make_shared<size_t>(0);
  const Value cycle = Value::function([index](const CallArgs& a) {  // loop.cycle('odd', 'even')
    if (a.positional.empty()) throw EvalError("no items for cycling given");
    return a.positional[*index % a.positional.size()];
  });
  for (size_t i = 0; i < items.size(); ++i) {
    c.step();
    assign(c, targets, items[i]);
    *index = i;
    c.set("loop", loop_info(i, items, cycle));
    if (render_body(body, c, out) == Flow::Break) break;
  }
  return Flow::Normal;
}

Flow Set::run(Context& c, std::string&) const {
  Value v;
  if (value) {
    v = value->evaluate(c);
  } else {
    std::string text;
    render_body(body, c, text);
    v = std::move(text);
    for (const auto& f : filters) v = f->apply(c, v);
  }
  if (attr.empty()) {
    assign(c, targets, v);
  } else {
    Value ns = c.lookup(targets[0]);
    if (!ns.is_namespace())
      throw EvalError("cannot set attribute '" + attr + "' of '" + targets[0] + "', which is not a namespace");
    ns.as_namespace().set(attr, std::move(v));
  }
  return Flow::Normal;
}

Flow Macro::run(Context& c, std::string&) const {
  c.set(name, make_function(c));
  return Flow::Normal;
}

Value Macro::make_function(Context& c) const {
  // The defining scope is held weakly: it holds this function, and a strong reference would leak both.
  std::weak_ptr<Frame> closure = c.frame;
  Context* ctx = &c;
  return Value::function([this, closure, ctx](const CallArgs& a) -> Value {
    Context& c = *ctx;
    if (a.positional.size() > params.size())
      throw EvalError("macro '" + name + "' takes at most " + std::to_string(params.size()) + " argument(s), got " +
                      std::to_string(a.positional.size()));
    for (const auto& named : a.named) {
      const std::string& key = named.first;  // not a structured binding: clang 14 cannot capture one
      bool known =
          key == "caller" || std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == key; });
      if (!known) throw EvalError("macro '" + name + "' got an unexpected argument '" + key + "'");
    }
    if (c.call_depth >= kMaxCallDepth) throw EvalError("macro calls nested deeper than 100 (runaway recursion?)");
    c.step();
    auto parent = closure.lock();
    if (!parent) throw EvalError("macro '" + name + "' called after its scope ended");
    struct Depth {
      int& d;
      ~Depth() { --d; }
    } depth{++c.call_depth};
    Scope scope(c, parent);
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& param = params[i].first;  // not a structured binding: clang 14 cannot capture one
      const auto& fallback = params[i].second;
      bool given = i < a.positional.size() ||
                   std::any_of(a.named.begin(), a.named.end(), [&](const auto& kv) { return kv.first == param; });
      c.set(param, given ? a.get(i, param) : fallback ? fallback->evaluate(c) : Value());
    }
    Value caller = a.get(SIZE_MAX, "caller");
    if (!caller.is_undefined()) c.set("caller", caller);
    std::string out;
    render_body(body, c, out);
    return out;
  });
}

Flow CallBlock::run(Context& c, std::string& out) const {
  Value fn = caller.make_function(c);
  append(out, call->invoke(c, &fn).str());
  return Flow::Normal;
}

Flow FilterBlock::run(Context& c, std::string& out) const {
  std::string text;
  render_body(body, c, text);
  Value v = std::move(text);
  for (const auto& f : filters) v = f->apply(c, v);
  append(out, v.str());
  return Flow::Normal;
}

Flow Block::run(Context& c, std::string& out) const { return render_body(body, c, out); }

Flow LoopControl::run(Context&, std::string&) const { return flow; }

}  // namespace toy::chat::ast

namespace toy::chat {

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!context.is_object() && !context.is_null())
    throw TemplateError("the template context must be a JSON object", 0, 0);
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  std::vector<Value> namespaces;
  struct BreakCycles {  // runs after `c` is gone: empty every namespace the template made
    std::vector<Value>& made;
    ~BreakCycles() {
      for (Value& ns : made) ns.as_namespace().entries.clear();
    }
  } break_cycles{namespaces};
  ast::Context c;
  c.max_steps = options.max_steps;
  c.max_bytes = options.max_bytes;
  c.max_seconds = options.max_seconds;
  c.deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                      std::chrono::duration<double>(options.max_seconds));
  c.frame = std::make_shared<ast::Frame>();
  for (auto& [name, fn] : global_functions(now, &namespaces).entries) c.set(name, std::move(fn));
  try {
    for (const auto& [key, v] : context.items()) c.set(key, Value::from_json(v));
  } catch (const EvalError& e) {
    throw TemplateError(e.what(), 0, 0);
  }
  std::string out;
  ast::render_body(impl_->body, c, out);
  return out;
}

}  // namespace toy::chat
