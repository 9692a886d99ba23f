// Statement execution: output, control flow, assignments, macros and scopes.
#include "chat/interpreter.h"

#include "chat/builtins.h"

namespace ws::chat {

const Value* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

namespace {

ScopePtr child_of(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

}  // namespace

std::string Interpreter::render(const StmtList& body, const Value& context) {
  auto globals = std::make_shared<Scope>();
  install_globals(*globals);
  auto ctx = child_of(globals);
  if (context.is_dict())
    for (const auto& [k, v] : context.as_dict()->items) ctx->set(to_str(k), v);
  auto root = child_of(ctx);
  std::string out;
  exec_list(body, root, out);
  return out;
}

void Interpreter::charge_iterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > opt_.max_loop_iterations)
    throw ValueError{"loop iteration limit exceeded (" + std::to_string(opt_.max_loop_iterations) +
                     " iterations per render)"};
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > opt_.max_output_bytes)
    throw ValueError{"output size limit exceeded (" + std::to_string(opt_.max_output_bytes) + " bytes)"};
}

void Interpreter::emit(std::string& out, const std::string& s) {
  check_size(out.size() + s.size());
  out += s;
}

Interpreter::Flow Interpreter::exec_list(const StmtList& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

std::string Interpreter::render_body(const StmtList& body, const ScopePtr& scope) {
  std::string out;
  exec_list(body, scope, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  try {
    DepthGuard guard(*this);
    switch (s.kind) {
      case StmtKind::text: emit(out, s.text); break;
      case StmtKind::output: emit(out, to_str(eval(*s.expr, scope))); break;
      case StmtKind::if_: return exec_if(s, scope, out);
      case StmtKind::for_: return exec_for(s, scope, out);
      case StmtKind::set: exec_set(s, scope); break;
      case StmtKind::set_block: exec_set_block(s, scope); break;
      case StmtKind::macro: exec_macro(s, scope); break;
      case StmtKind::call_block: exec_call_block(s, scope, out); break;
      case StmtKind::generation: emit(out, render_body(s.body, child_of(scope))); break;
      case StmtKind::filter_block: {
        Value v = apply_filters(s.filters, Value(render_body(s.body, child_of(scope))), scope);
        emit(out, to_str(v));
        break;
      }
      case StmtKind::with: {
        auto inner = child_of(scope);
        for (const auto& [name, expr] : s.params) inner->set(name, eval(*expr, scope));
        return exec_list(s.body, inner, out);
      }
      case StmtKind::break_: return Flow::break_;
      case StmtKind::continue_: return Flow::continue_;
    }
  } catch (const ValueError& e) {
    throw TemplateError(TemplateErrorKind::runtime, e.message, s.line, s.column);
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec_if(const Stmt& s, const ScopePtr& scope, std::string& out) {
  for (const auto& [cond, body] : s.branches)
    if (eval(*cond, scope).truthy()) return exec_list(body, scope, out);
  return exec_list(s.else_body, scope, out);
}

void Interpreter::assign_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
  if (targets.size() == 1) {
    scope.set(targets[0], v);
    return;
  }
  if (!v.is_list() && !v.is_string())
    throw ValueError{"cannot unpack non-iterable " + v.type_name() + " object"};
  const std::vector<Value> items = iterate(v);
  if (items.size() != targets.size())
    throw ValueError{(items.size() < targets.size() ? "not enough values to unpack (expected "
                                                    : "too many values to unpack (expected ") +
                     std::to_string(targets.size()) + ", got " + std::to_string(items.size()) + ")"};
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
}

namespace {

// Jinja's `loop` is one object updated in place on every iteration; so is this dict.
struct LoopState {
  Value object = Value::dict();
  std::shared_ptr<int64_t> index = std::make_shared<int64_t>(0);

  LoopState() {
    auto& d = *object.as_dict();
    for (const char* key : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth",
                            "depth0", "previtem", "nextitem"})
      d.items.emplace_back(Value(key), Value());
    std::shared_ptr<int64_t> at = index;
    d.items.emplace_back(Value("cycle"), Value::function("loop.cycle", [at](Interpreter&, CallArgs& a) -> Value {
                           if (a.positional.empty()) throw ValueError{"loop.cycle() needs at least one argument"};
                           return a.positional[static_cast<size_t>(*at) % a.positional.size()];
                         }));
  }

  void update(const std::vector<Value>& items, size_t i) {
    const auto n = static_cast<int64_t>(items.size());
    const auto k = static_cast<int64_t>(i);
    *index = k;
    auto& d = object.as_dict()->items;
    d[0].second = Value(k + 1);
    d[1].second = Value(k);
    d[2].second = Value(n - k);
    d[3].second = Value(n - k - 1);
    d[4].second = Value(k == 0);
    d[5].second = Value(k == n - 1);
    d[6].second = Value(n);
    d[7].second = Value(1);
    d[8].second = Value(0);
    d[9].second = k > 0 ? items[i - 1] : Value::undefined("there is no previous item");
    d[10].second = k + 1 < n ? items[i + 1] : Value::undefined("there is no next item");
  }
};

}  // namespace

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  if (s.recursive) throw ValueError{"recursive for loops are not supported"};
  std::vector<Value> items = iterate(eval(*s.expr, scope));
  // One scope per loop: assignments inside the body do not leak out of the loop.
  auto inner = child_of(scope);
  if (s.cond) {
    std::vector<Value> kept;
    for (auto& item : items) {
      charge_iterations(1);
      assign_targets(s.targets, item, *inner);
      if (eval(*s.cond, inner).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_list(s.else_body, child_of(scope), out);
  LoopState loop;
  inner->set("loop", loop.object);
  for (size_t i = 0; i < items.size(); ++i) {
    charge_iterations(1);
    assign_targets(s.targets, items[i], *inner);
    loop.update(items, i);
    if (exec_list(s.body, inner, out) == Flow::break_) break;
  }
  return Flow::normal;
}

void Interpreter::exec_set(const Stmt& s, const ScopePtr& scope) {
  Value v = eval(*s.expr, scope);
  if (!s.ns_attr) {
    assign_targets(s.targets, v, *scope);
    return;
  }
  const Value* target = scope->lookup(s.targets[0]);
  if (!target || !target->is_namespace())
    throw ValueError{"cannot assign attribute '" + s.targets[1] + "' on '" + s.targets[0] +
                     "': it is not a namespace() object"};
  target->as_namespace()->attrs.set(Value(s.targets[1]), std::move(v));
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value v, const ScopePtr& scope) {
  for (const auto& f : filters) {
    CallArgs args = eval_args(*f, 1, scope);
    v = apply_filter(*this, f->name, v, args);
  }
  return v;
}

void Interpreter::exec_set_block(const Stmt& s, const ScopePtr& scope) {
  Value v = apply_filters(s.filters, Value(render_body(s.body, child_of(scope))), scope);
  assign_targets(s.targets, v, *scope);
}

void Interpreter::exec_macro(const Stmt& s, const ScopePtr& scope) {
  const Stmt* node = &s;
  std::weak_ptr<Scope> defined_in = scope;
  scope->set(s.text, Value::function(s.text, [node, defined_in](Interpreter& in, CallArgs& args) {
               return in.call_macro(*node, defined_in.lock(), args, Value());
             }));
}

Value Interpreter::call_macro(const Stmt& m, const ScopePtr& defined_in, CallArgs& args, const Value& caller) {
  if (!defined_in) throw ValueError{"macro '" + m.text + "' was called after the block defining it ended"};
  if (macro_depth_ >= opt_.max_macro_depth)
    throw ValueError{"macro recursion too deep (limit " + std::to_string(opt_.max_macro_depth) + ")"};
  struct Depth {
    int& d;
    ~Depth() { --d; }
  } depth{++macro_depth_};
  auto sc = child_of(defined_in);
  std::vector<bool> bound(m.params.size(), false);
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < m.params.size()) {
      sc->set(m.params[i].first, args.positional[i]);
      bound[i] = true;
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  Value kwargs = Value::dict();
  Value caller_value = caller;
  for (auto& [name, v] : args.keyword) {
    size_t i = 0;
    while (i < m.params.size() && m.params[i].first != name) ++i;
    if (i < m.params.size()) {
      if (bound[i]) throw ValueError{"macro '" + m.text + "' got multiple values for argument '" + name + "'"};
      sc->set(name, v);
      bound[i] = true;
    } else if (name == "caller") {
      caller_value = v;
    } else {
      kwargs.as_dict()->set(Value(name), v);
    }
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (bound[i]) continue;
    const auto& [name, def] = m.params[i];
    sc->set(name, def ? eval(*def, sc) : Value::undefined("'" + name + "' is undefined (missing macro argument)"));
  }
  sc->set("varargs", Value::list(std::move(varargs), true));
  sc->set("kwargs", kwargs);
  if (!caller_value.is_undefined()) sc->set("caller", caller_value);
  return Value(render_body(m.body, sc));
}

void Interpreter::exec_call_block(const Stmt& s, const ScopePtr& scope, std::string& out) {
  const Stmt* node = &s;
  std::weak_ptr<Scope> weak = scope;
  Value caller = Value::function("caller", [node, weak](Interpreter& in, CallArgs& args) {
    ScopePtr parent = weak.lock();
    if (!parent) throw ValueError{"caller() used after its call block ended"};
    auto sc = child_of(parent);
    for (size_t i = 0; i < node->params.size(); ++i) {
      const auto& [name, def] = node->params[i];
      if (i < args.positional.size()) sc->set(name, args.positional[i]);
      else sc->set(name, def ? in.eval(*def, sc) : Value::undefined("'" + name + "' is undefined"));
    }
    return Value(in.render_body(node->body, sc));
  });
  const Expr& call = *s.expr;
  Value callee = eval(*call.args[0], scope);
  CallArgs args = eval_args(call, 1, scope);
  args.keyword.emplace_back("caller", caller);
  emit(out, to_str(this->call(callee, args)));
}

}  // namespace ws::chat
