// The value model of the template interpreter: Python-like dynamic values
// (None, bool, int, float, str, list/tuple, ordered dict, callables, namespaces,
// and Jinja's Undefined), plus conversion from JSON and Python-compatible printing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "chat/error.h"

namespace ws::chat {

class Value;
class Interpreter;

enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, callable, ns };

// Jinja's Undefined: printable as "", falsy, iterable as empty; most other uses fail.
// `hint` says what was missing, for the error message when it is used.
struct Undefined {
  std::string hint;
};

struct ListObj {
  std::vector<Value> items;
  bool tuple = false;  // prints as (a, b); produced by dict.items(), loop unpacking, literals
};

// Python dicts keep insertion order; chat templates tojson messages, so order matters.
struct DictObj {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Builtin functions, bound methods and macros. The interpreter pointer lets macros
// render and lets builtins reach render options (clock, limits).
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

// namespace(): the one mutable object templates may assign attributes on.
struct NamespaceObj {
  DictObj attrs;
};

using ListPtr = std::shared_ptr<ListObj>;
using DictPtr = std::shared_ptr<DictObj>;
using CallablePtr = std::shared_ptr<Callable>;
using NamespacePtr = std::shared_ptr<NamespaceObj>;

class Value {
 public:
  using Data = std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, ListPtr,
                            DictPtr, CallablePtr, NamespacePtr>;

  Value() : data_(Undefined{}) {}
  Value(std::nullptr_t) : data_(nullptr) {}
  Value(bool b) : data_(b) {}
  Value(int i) : data_(int64_t{i}) {}
  Value(int64_t i) : data_(i) {}
  Value(double d) : data_(d) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(ListPtr l) : data_(std::move(l)) {}
  Value(DictPtr d) : data_(std::move(d)) {}
  Value(CallablePtr c) : data_(std::move(c)) {}
  Value(NamespacePtr n) : data_(std::move(n)) {}
  Value(Undefined u) : data_(std::move(u)) {}

  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value list(std::vector<Value> items = {}, bool tuple = false);
  static Value dict();
  static Value function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::undefined; }
  bool is_none() const { return kind() == Kind::none; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_float() const { return kind() == Kind::floating; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::string; }
  bool is_list() const { return kind() == Kind::list; }
  bool is_dict() const { return kind() == Kind::dict; }
  bool is_callable() const { return kind() == Kind::callable; }
  bool is_namespace() const { return kind() == Kind::ns; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const ListPtr& as_list() const { return std::get<ListPtr>(data_); }
  const DictPtr& as_dict() const { return std::get<DictPtr>(data_); }
  const CallablePtr& as_callable() const { return std::get<CallablePtr>(data_); }
  const NamespacePtr& as_namespace() const { return std::get<NamespacePtr>(data_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(data_).hint; }

  // Numeric value of int/bool/float (Python treats bool as int).
  double to_double() const;
  // Python truthiness (Undefined is falsy).
  bool truthy() const;
  // Python type name, for error messages ("NoneType", "str", "dict", ...).
  std::string type_name() const;

 private:
  Data data_;
};

// Python str(): what {{ value }} prints.
std::string to_str(const Value& v);
// Python repr(): how values print inside lists and dicts.
std::string to_repr(const Value& v);
// Python float repr ("1.0", "1e-05", "inf").
std::string float_repr(double d);

// Python ==; `1 == 1.0 == True`, Undefined equals only Undefined.
bool values_equal(const Value& a, const Value& b);
// Python <: numbers, strings, lists; throws ValueError for unorderable types.
bool values_less(const Value& a, const Value& b);

// json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys) with Python's
// default separators (", ", ": ") or (",", ": ") when indented. Throws ValueError for
// values JSON cannot hold (Undefined, callables).
std::string to_json_text(const Value& v, std::optional<int> indent, bool sort_keys = false);
// The rest of json.dumps' options, as Hugging Face's tojson passes them: ensure_ascii
// (non-ASCII as \uXXXX, astral code points as surrogate pairs) and explicit separators
// (item, key), which replace the defaults above.
struct JsonOptions {
  std::optional<int> indent;
  bool sort_keys = false;
  bool ensure_ascii = false;
  std::optional<std::pair<std::string, std::string>> separators;
};
std::string to_json_text(const Value& v, const JsonOptions& options);

// JSON -> Value; objects keep their order (ordered_json) or their sorted order (json).
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

// Iteration as Python's iter(): list items, dict keys, string characters (code points),
// Undefined -> empty. Throws ValueError for None/numbers.
std::vector<Value> iterate(const Value& v);
// len(): strings count code points. Throws ValueError when there is no length.
int64_t length_of(const Value& v);

}  // namespace ws::chat
