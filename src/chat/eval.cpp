// Expression evaluation with Python / Jinja2 semantics: operators, attribute and item
// access (Undefined where Jinja returns it, errors where Jinja raises), calls.
#include <algorithm>
#include <cmath>
#include <optional>
#include <limits>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/percent_format.h"
#include "chat/text.h"

namespace ws::chat {

namespace {

[[noreturn]] void fail_undefined(const Value& v) {
  throw ValueError{v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint()};
}

// Jinja's wording in "X has no attribute" messages.
std::string object_desc(const Value& v) {
  if (v.is_none()) return "None";
  return "'" + v.type_name() + " object'";
}

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(object_desc(obj) + " has no attribute '" + name + "'");
}

int64_t int_of(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }

Value checked_int(__int128 r) {
  if (r > std::numeric_limits<int64_t>::max() || r < std::numeric_limits<int64_t>::min())
    throw ValueError{"integer overflow (results beyond 64 bits are not supported)"};
  return Value(static_cast<int64_t>(r));
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw ValueError{"unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'"};
}

Value repeat(const Value& seq, int64_t n, const Interpreter& in) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    in.check_size(s.size() * static_cast<size_t>(n));
    std::string out;
    out.reserve(s.size() * n);
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const auto& items = seq.as_list()->items;
  in.check_size(items.size() * static_cast<size_t>(n) * sizeof(Value));
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.as_list()->tuple);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  const bool ints = !a.is_float() && !b.is_float();
  if (op == "+") return ints ? checked_int(__int128(int_of(a)) + int_of(b)) : Value(a.to_double() + b.to_double());
  if (op == "-") return ints ? checked_int(__int128(int_of(a)) - int_of(b)) : Value(a.to_double() - b.to_double());
  if (op == "*") return ints ? checked_int(__int128(int_of(a)) * int_of(b)) : Value(a.to_double() * b.to_double());
  if (op == "/") {
    if (b.to_double() == 0.0) throw ValueError{"division by zero"};
    return Value(a.to_double() / b.to_double());
  }
  if (op == "//" || op == "%") {
    if (b.to_double() == 0.0) throw ValueError{op == "//" ? "integer division or modulo by zero" : "modulo by zero"};
    if (ints) {
      const int64_t x = int_of(a), y = int_of(b);
      if (x == std::numeric_limits<int64_t>::min() && y == -1) throw ValueError{"integer overflow"};
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;  // Python floors
      return op == "//" ? Value(q) : Value(r);
    }
    const double x = a.to_double(), y = b.to_double();
    const double q = std::floor(x / y);
    return op == "//" ? Value(q) : Value(x - q * y);
  }
  // "**"
  if (ints && int_of(b) >= 0) {
    __int128 r = 1;
    const int64_t base = int_of(a);
    for (int64_t e = int_of(b); e > 0; --e) {
      r *= base;
      if (r > std::numeric_limits<int64_t>::max() || r < std::numeric_limits<int64_t>::min())
        throw ValueError{"integer overflow (results beyond 64 bits are not supported)"};
      if (r == 0 || r == 1) break;
    }
    return Value(static_cast<int64_t>(r));
  }
  return Value(std::pow(a.to_double(), b.to_double()));
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b, const Interpreter& in) {
  if (op == "~") {
    std::string s = to_str(a);
    const std::string t = to_str(b);
    in.check_size(s.size() + t.size());
    return Value(s + t);
  }
  if (a.is_undefined()) fail_undefined(a);
  // Before the check of b: Python formats str % Undefined as str(Undefined), i.e. "".
  if (op == "%" && a.is_string()) return Value(percent_format(a.as_string(), b, in.options().max_output_bytes));
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      in.check_size(a.as_string().size() + b.as_string().size());
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.as_list()->tuple == b.as_list()->tuple) {
      std::vector<Value> items = a.as_list()->items;
      in.check_size((items.size() + b.as_list()->items.size()) * sizeof(Value));
      items.insert(items.end(), b.as_list()->items.begin(), b.as_list()->items.end());
      return Value::list(std::move(items), a.as_list()->tuple);
    }
    if (a.is_string() || a.is_list())
      throw ValueError{"can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name()};
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, int_of(b), in);
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, int_of(a), in);
  }
  unsupported(op, a, b);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::undefined: return false;  // Undefined iterates as empty
    case Kind::string:
      if (!item.is_string())
        throw ValueError{"'in <string>' requires string as left operand, not " + item.type_name()};
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::list:
      for (const auto& v : container.as_list()->items)
        if (values_equal(v, item)) return true;
      return false;
    case Kind::dict: return container.as_dict()->find(item) != nullptr;
    case Kind::ns: return item.is_string() && container.as_namespace()->attrs.find(item.as_string());
    default: throw ValueError{"argument of type '" + container.type_name() + "' is not iterable"};
  }
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::undefined: fail_undefined(obj);
    case Kind::dict: {
      // Python's getattr finds dict methods before keys (x.items is the method).
      Value m = method_of(obj, name);
      if (!m.is_undefined()) return m;
      const Value* v = obj.as_dict()->find(name);
      return v ? *v : no_attribute(obj, name);
    }
    case Kind::ns: {
      const Value* v = obj.as_namespace()->attrs.find(name);
      return v ? *v : no_attribute(obj, name);
    }
    default: {
      Value m = method_of(obj, name);
      return m.is_undefined() ? no_attribute(obj, name) : m;
    }
  }
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::undefined: fail_undefined(obj);
    case Kind::dict: {
      const Value* v = obj.as_dict()->find(key);
      if (v) return *v;
      break;
    }
    case Kind::list:
    case Kind::string:
      if (key.is_int() || key.is_bool()) {
        const bool is_str = obj.is_string();
        const std::u32string cps = is_str ? text::decode(obj.as_string()) : std::u32string();
        const auto n = static_cast<int64_t>(is_str ? cps.size() : obj.as_list()->items.size());
        int64_t i = int_of(key);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined(object_desc(obj) + " has no element " + to_str(key));
        if (!is_str) return obj.as_list()->items[static_cast<size_t>(i)];
        std::string ch;
        text::append_utf8(ch, cps[static_cast<size_t>(i)]);
        return Value(std::move(ch));
      }
      break;
    case Kind::ns:
      if (key.is_string()) return get_attr(obj, key.as_string());
      break;
    default: break;
  }
  // Jinja falls back to attribute lookup for string keys (d['items'] -> the method).
  if (key.is_string()) {
    Value m = obj.is_namespace() ? Value() : method_of(obj, key.as_string());
    if (!m.is_undefined()) return m;
    return no_attribute(obj, key.as_string());
  }
  return Value::undefined(object_desc(obj) + " has no element " + to_repr(key));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) {
    DepthGuard guard(*this);
    return callee.as_callable()->fn(*this, args);
  }
  if (callee.is_undefined()) fail_undefined(callee);
  throw ValueError{"'" + callee.type_name() + "' object is not callable"};
}

Value Interpreter::filter(const std::string& name, const Value& base, CallArgs& args) {
  return apply_filter(*this, name, base, args);
}

bool Interpreter::test(const std::string& name, const Value& v, CallArgs& args) {
  return apply_test(*this, name, v, args);
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], scope));
  for (const auto& [name, expr] : e.kwargs) args.keyword.emplace_back(name, eval(*expr, scope));
  return args;
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  try {
    DepthGuard guard(*this);
    return eval_inner(e, scope);
  } catch (const ValueError& err) {
    throw TemplateError(TemplateErrorKind::runtime, err.message, e.line, e.column);
  }
}

Value Interpreter::eval_inner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::literal: return e.value;
    case ExprKind::name: {
      const Value* v = scope->lookup(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::list:
    case ExprKind::tuple: {
      std::vector<Value> items;
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return Value::list(std::move(items), e.kind == ExprKind::tuple);
    }
    case ExprKind::dict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2)
        d.as_dict()->set(eval(*e.args[i], scope), eval(*e.args[i + 1], scope));
      return d;
    }
    case ExprKind::get_attr: return get_attr(eval(*e.args[0], scope), e.name);
    case ExprKind::get_item: return eval_item(e, scope);
    case ExprKind::slice: throw ValueError{"a slice is only valid inside [ ]"};
    case ExprKind::call: return eval_call(e, scope);
    case ExprKind::filter: return eval_filter(e, eval(*e.args[0], scope), scope);
    case ExprKind::test: return eval_test(e, scope);
    case ExprKind::unary: {
      Value v = eval(*e.args[0], scope);
      if (e.name == "not") return Value(!v.truthy());
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) throw ValueError{"bad operand type for unary " + e.name + ": '" + v.type_name() + "'"};
      if (e.name == "+") return v.is_bool() ? Value(int_of(v)) : v;
      return v.is_float() ? Value(-v.as_float()) : checked_int(-__int128(int_of(v)));
    }
    case ExprKind::binary: return eval_binary(e, scope);
    case ExprKind::compare: return eval_compare(e, scope);
    case ExprKind::cond:
      if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
  }
  return Value();
}

Value Interpreter::eval_binary(const Expr& e, const ScopePtr& scope) {
  Value a = eval(*e.args[0], scope);
  // and/or return one of their operands, as in Python.
  if (e.name == "and") return a.truthy() ? eval(*e.args[1], scope) : a;
  if (e.name == "or") return a.truthy() ? a : eval(*e.args[1], scope);
  return binary_op(e.name, a, eval(*e.args[1], scope), *this);
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.args[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1], scope);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") r = values_equal(left, right);
    else if (op == "!=") r = !values_equal(left, right);
    else if (op == "in") r = contains(right, left);
    else if (op == "not in") r = !contains(right, left);
    else {
      if (left.is_undefined()) fail_undefined(left);
      if (right.is_undefined()) fail_undefined(right);
      if (op == "<") r = values_less(left, right);
      else if (op == ">") r = values_less(right, left);
      else if (op == "<=") r = values_less(left, right) || values_equal(left, right);
      else r = values_less(right, left) || values_equal(left, right);
    }
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval_item(const Expr& e, const ScopePtr& scope) {
  Value obj = eval(*e.args[0], scope);
  const Expr& idx = *e.args[1];
  if (idx.kind != ExprKind::slice) return get_item(obj, eval(idx, scope));
  if (obj.is_undefined()) fail_undefined(obj);
  Value parts[3];
  for (int k = 0; k < 3; ++k)
    parts[k] = idx.args[k] ? eval(*idx.args[k], scope) : Value(nullptr);
  if (!obj.is_list() && !obj.is_string()) return no_attribute(obj, "__getitem__");
  return slice_value(obj, parts[0], parts[1], parts[2]);
}

Value Interpreter::eval_call(const Expr& e, const ScopePtr& scope) {
  Value callee = eval(*e.args[0], scope);
  CallArgs args = eval_args(e, 1, scope);
  return call(callee, args);
}

Value Interpreter::eval_filter(const Expr& e, const Value& base, const ScopePtr& scope) {
  CallArgs args = eval_args(e, 1, scope);
  return apply_filter(*this, e.name, base, args);
}

Value Interpreter::eval_test(const Expr& e, const ScopePtr& scope) {
  Value v = eval(*e.args[0], scope);
  CallArgs args = eval_args(e, 1, scope);
  const bool r = apply_test(*this, e.name, v, args);
  return Value(e.negated ? !r : r);
}

}  // namespace ws::chat

namespace ws::chat {

Value slice_value(const Value& v, const Value& start_v, const Value& stop_v, const Value& step_v) {
  auto as_index = [](const Value& x, const char* what) -> std::optional<int64_t> {
    if (x.is_none() || x.is_undefined()) return std::nullopt;
    if (x.is_int()) return x.as_int();
    if (x.is_bool()) return int64_t{x.as_bool()};
    throw ValueError{std::string("slice ") + what + " must be an integer or None, not " + x.type_name()};
  };
  const bool is_str = v.is_string();
  const std::u32string cps = is_str ? text::decode(v.as_string()) : std::u32string();
  const auto n = static_cast<int64_t>(is_str ? cps.size() : v.as_list()->items.size());
  const int64_t step = as_index(step_v, "step").value_or(1);
  if (step == 0) throw ValueError{"slice step cannot be zero"};
  auto adjust = [&](std::optional<int64_t> i, int64_t def) {
    if (!i) return def;
    int64_t x = *i < 0 ? *i + n : *i;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = adjust(as_index(start_v, "start"), step > 0 ? 0 : n - 1);
  const int64_t stop = adjust(as_index(stop_v, "stop"), step > 0 ? n : -1);
  std::u32string out_cps;
  std::vector<Value> out_items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (is_str) out_cps.push_back(cps[static_cast<size_t>(i)]);
    else out_items.push_back(v.as_list()->items[static_cast<size_t>(i)]);
  }
  if (is_str) return Value(text::encode(out_cps));
  return Value::list(std::move(out_items), v.as_list()->tuple);
}

}  // namespace ws::chat
