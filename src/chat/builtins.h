// Jinja's builtin filters, tests, globals, and the Python methods templates call on
// str / dict / list values. Each throws ValueError with a message on misuse.
#pragma once

#include <optional>
#include <string>

#include "chat/interpreter.h"
#include "chat/value.h"

namespace ws::chat {

Value apply_filter(Interpreter& in, const std::string& name, const Value& base, CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);
// Whether `name` is a filter / a test (Jinja's `is filter` and `is test`).
bool has_filter(const std::string& name);
bool has_test(const std::string& name);
// tojson, format, truncate, slice (extra_builtins.cpp); nullopt when `name` is none of them.
bool is_extra_filter(const std::string& name);
std::optional<Value> apply_extra_filter(Interpreter& in, const std::string& name, const Value& base, CallArgs& args);
// str.center/ljust/rjust/zfill/removeprefix/removesuffix/partition/rpartition.
bool is_extra_str_method(const std::string& name);
Value extra_str_method(const std::string& s, const std::string& name, const CallArgs& args);
// A bound method (callable) or Undefined when `obj` has no such method.
Value method_of(const Value& obj, const std::string& name);
// range, namespace, dict, raise_exception, strftime_now, joiner, cycler.
void install_globals(Scope& scope);

// Argument access for builtins: positional `pos`, else keyword `name`, else `def`.
Value arg(const CallArgs& a, size_t pos, const char* name, Value def = Value());
bool has_arg(const CallArgs& a, size_t pos, const char* name);

// Python slicing (negative indices, steps) of a list or (code points of) a string.
Value slice_value(const Value& v, const Value& start, const Value& stop, const Value& step);

}  // namespace ws::chat
