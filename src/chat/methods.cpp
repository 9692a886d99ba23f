// Jinja tests, Python methods on str/dict/list values, and the template globals.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/text.h"

namespace ws::chat {
namespace {

// ---- tests ---------------------------------------------------------------------------

bool is_int_like(const Value& v) { return v.is_int(); }

bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const Value n = arg(a, 0, "num");
  if (!n.is_int() || !v.is_int()) throw ValueError{"divisibleby expects integers"};
  if (n.as_int() == 0) throw ValueError{"integer division or modulo by zero"};
  return v.as_int() % n.as_int() == 0;
}

bool compare_test(const std::string& op, const Value& v, const Value& other) {
  if (op == "eq") return values_equal(v, other);
  if (op == "ne") return !values_equal(v, other);
  if (v.is_undefined() || other.is_undefined()) throw ValueError{"cannot order an undefined value"};
  if (op == "lt") return values_less(v, other);
  if (op == "gt") return values_less(other, v);
  if (op == "le") return !values_less(other, v);
  return !values_less(v, other);  // ge
}

bool all_cased(const std::string& s, bool want_lower) {
  bool any = false;
  for (char32_t c : text::decode(s)) {
    std::string one;
    text::append_utf8(one, c);
    const bool lower = text::lower(one) == one, upper = text::upper(one) == one;
    if (lower && upper) continue;  // uncased
    any = true;
    if (want_lower ? !lower : !upper) return false;
  }
  return any;
}

// ---- str methods -----------------------------------------------------------------------

std::optional<std::string> opt_str(const CallArgs& a, size_t pos, const char* name) {
  Value v = arg(a, pos, name, Value(nullptr));
  if (v.is_none()) return std::nullopt;
  if (!v.is_string()) throw ValueError{std::string(name) + " must be None or a string, not " + v.type_name()};
  return v.as_string();
}

std::string need_str(const CallArgs& a, size_t pos, const char* name) {
  Value v = arg(a, pos, name);
  if (!v.is_string()) throw ValueError{std::string("argument '") + name + "' must be str, not " + v.type_name()};
  return v.as_string();
}

// Python's str.split / rsplit.
Value split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!sep) {
    std::u32string cps = text::decode(s);
    if (from_right) std::reverse(cps.begin(), cps.end());
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && text::is_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && text::is_space(cps[e - 1])) --e;
        std::u32string rest = cps.substr(i, e - i);
        if (from_right) std::reverse(rest.begin(), rest.end());
        parts.push_back(text::encode(rest));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !text::is_space(cps[j])) ++j;
      std::u32string word = cps.substr(i, j - i);
      if (from_right) std::reverse(word.begin(), word.end());
      parts.push_back(text::encode(word));
      i = j;
    }
    if (from_right) std::reverse(parts.begin(), parts.end());
  } else {
    if (sep->empty()) throw ValueError{"empty separator"};
    if (!from_right) {
      size_t pos = 0;
      for (size_t hit; (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) &&
                       (hit = s.find(*sep, pos)) != std::string::npos;) {
        parts.push_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      for (size_t hit; (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) && end >= sep->size() &&
                       (hit = s.rfind(*sep, end - sep->size())) != std::string::npos;) {
        parts.push_back(s.substr(hit + sep->size(), end - hit - sep->size()));
        end = hit;
      }
      parts.push_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<Value> out;
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::list(std::move(out));
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& x) {
    if (!x.is_string()) throw ValueError{"startswith/endswith arg must be str or a tuple of str, not " + x.type_name()};
    const std::string& p = x.as_string();
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (affix.is_list()) return std::any_of(affix.as_list()->items.begin(), affix.as_list()->items.end(), one);
  return one(affix);
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  return byte_pos == std::string::npos ? -1 : static_cast<int64_t>(text::length(std::string_view(s).substr(0, byte_pos)));
}

// str.format with {} / {0} / {name} fields (no format specs).
std::string format(const std::string& f, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
    if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
    if (f[i] != '{') { out += f[i]; continue; }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) throw ValueError{"Single '{' encountered in format string"};
    const std::string field = f.substr(i + 1, close - i - 1);
    Value v;
    if (field.empty()) v = arg(a, auto_idx++, "");
    else if (std::all_of(field.begin(), field.end(), ::isdigit)) v = arg(a, std::stoul(field), "");
    else v = arg(a, SIZE_MAX, field.c_str());
    if (v.is_undefined()) throw ValueError{"format: no value for field '{" + field + "}'"};
    out += to_str(v);
    i = close;
  }
  return out;
}

Value str_method(const std::string& s, const std::string& name, Interpreter& in, CallArgs& a) {
  if (name == "startswith" || name == "endswith") return Value(affix_match(s, arg(a, 0, "prefix"), name == "startswith"));
  if (name == "strip") return Value(text::strip(s, opt_str(a, 0, "chars"), true, true));
  if (name == "lstrip") return Value(text::strip(s, opt_str(a, 0, "chars"), true, false));
  if (name == "rstrip") return Value(text::strip(s, opt_str(a, 0, "chars"), false, true));
  if (name == "split" || name == "rsplit") {
    const Value m = arg(a, 1, "maxsplit", Value(-1));
    return split(s, opt_str(a, 0, "sep"), m.is_int() ? m.as_int() : -1, name == "rsplit");
  }
  if (name == "splitlines") {
    Value parts = split(s, std::string("\n"), -1, false);
    auto& items = parts.as_list()->items;
    if (!items.empty() && items.back().as_string().empty()) items.pop_back();
    for (auto& p : items)
      if (!p.as_string().empty() && p.as_string().back() == '\r') p = Value(p.as_string().substr(0, p.as_string().size() - 1));
    return parts;
  }
  if (name == "replace") {
    CallArgs fa;
    fa.positional = a.positional;
    fa.keyword = a.keyword;
    return in.filter("replace", Value(s), fa);
  }
  if (name == "upper") return Value(text::upper(s));
  if (name == "lower") return Value(text::lower(s));
  if (name == "title") return Value(text::title(s));
  if (name == "capitalize") return Value(text::capitalize(s));
  if (name == "find") return Value(cp_index(s, s.find(need_str(a, 0, "sub"))));
  if (name == "rfind") return Value(cp_index(s, s.rfind(need_str(a, 0, "sub"))));
  if (name == "index") {
    const size_t p = s.find(need_str(a, 0, "sub"));
    if (p == std::string::npos) throw ValueError{"substring not found"};
    return Value(cp_index(s, p));
  }
  if (name == "count") {
    const std::string sub = need_str(a, 0, "sub");
    if (sub.empty()) return Value(static_cast<int64_t>(text::length(s) + 1));
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& v : iterate(arg(a, 0, "iterable"))) {
      if (!v.is_string()) throw ValueError{"sequence item: expected str instance, " + v.type_name() + " found"};
      if (!first) out += s;
      first = false;
      out += v.as_string();
      in.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(format(s, a));
  auto all_of = [&](auto pred) {
    const std::u32string cps = text::decode(s);
    return Value(!cps.empty() && std::all_of(cps.begin(), cps.end(), pred));
  };
  if (name == "isdigit") return all_of([](char32_t c) { return c >= '0' && c <= '9'; });
  if (name == "isalpha") return all_of([](char32_t c) { return c >= 0x80 || std::isalpha(static_cast<int>(c)); });
  if (name == "isalnum") return all_of([](char32_t c) { return c >= 0x80 || std::isalnum(static_cast<int>(c)); });
  if (name == "isspace") return all_of([](char32_t c) { return text::is_space(c); });
  if (name == "islower") return Value(all_cased(s, true));
  if (name == "isupper") return Value(all_cased(s, false));
  throw ValueError{"'str' object has no attribute '" + name + "'"};
}

const std::vector<std::string>& str_methods() {
  static const std::vector<std::string> names = {
      "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "replace",
      "upper", "lower", "title", "capitalize", "find", "rfind", "index", "count", "join", "format",
      "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper"};
  return names;
}

Value dict_method(const Value& d, const std::string& name, CallArgs& a) {
  const DictObj& obj = *d.as_dict();
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : obj.items)
      out.push_back(name == "items" ? Value::list({k, v}, true) : name == "keys" ? k : v);
    return Value::list(std::move(out));
  }
  if (name == "get") {
    const Value* v = obj.find(arg(a, 0, "key"));
    return v ? *v : arg(a, 1, "default", Value(nullptr));
  }
  // copy
  auto c = std::make_shared<DictObj>(obj);
  return Value(std::move(c));
}

Value list_method(const Value& l, const std::string& name, CallArgs& a) {
  const auto& items = l.as_list()->items;
  const Value x = arg(a, 0, "value");
  if (name == "count")
    return Value(static_cast<int64_t>(std::count_if(items.begin(), items.end(), [&](const Value& v) { return values_equal(v, x); })));
  for (size_t i = 0; i < items.size(); ++i)  // index
    if (values_equal(items[i], x)) return Value(static_cast<int64_t>(i));
  throw ValueError{to_repr(x) + " is not in list"};
}

bool is_mutator(Kind k, const std::string& name) {
  static const std::vector<std::string> list_mut = {"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"};
  static const std::vector<std::string> dict_mut = {"pop", "popitem", "update", "setdefault", "clear"};
  const auto& names = k == Kind::list ? list_mut : dict_mut;
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "number") return v.is_number();
  if (name == "integer") return is_int_like(v);
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_callable();
  // Undefined defines __iter__, __len__ and __getitem__, so Jinja counts it as both.
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {
    if (!v.is_int()) throw ValueError{"'" + name + "' test expects an integer, got " + v.type_name()};
    const bool odd = (v.as_int() % 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "divisibleby") return t_divisibleby(in, v, a);
  if (name == "lower" || name == "upper") return v.is_string() && all_cased(v.as_string(), name == "lower");
  if (name == "in") return contains(arg(a, 0, "seq"), v);
  if (name == "sameas") {
    const Value o = arg(a, 0, "other");
    return (v.is_none() && o.is_none()) || (v.is_bool() && o.is_bool() && v.as_bool() == o.as_bool()) ||
           (v.kind() == o.kind() && (v.is_list() || v.is_dict()) && values_equal(v, o) &&
            (v.is_list() ? v.as_list() == o.as_list() : v.as_dict() == o.as_dict()));
  }
  static const std::unordered_map<std::string, std::string> cmp = {
      {"eq", "eq"}, {"equalto", "eq"}, {"==", "eq"}, {"ne", "ne"}, {"!=", "ne"}, {"lt", "lt"}, {"lessthan", "lt"},
      {"<", "lt"}, {"le", "le"}, {"<=", "le"}, {"gt", "gt"}, {"greaterthan", "gt"}, {">", "gt"}, {"ge", "ge"}, {">=", "ge"}};
  if (auto it = cmp.find(name); it != cmp.end()) return compare_test(it->second, v, arg(a, 0, "other"));
  if (name == "filter") return v.is_string() && has_filter(v.as_string());
  if (name == "test") return v.is_string() && has_test(v.as_string());
  throw ValueError{"no test named '" + name + "'"};
}

Value method_of(const Value& obj, const std::string& name) {
  const Kind k = obj.kind();
  if ((k == Kind::list || k == Kind::dict) && is_mutator(k, name)) {
    const std::string type = obj.type_name();
    return Value::function(type + "." + name, [type, name](Interpreter&, CallArgs&) -> Value {
      throw ValueError{"'" + type + "." + name + "' is not allowed: chat templates are rendered in an immutable "
                       "sandbox (as Hugging Face does); build a new value with + or use namespace()"};
    });
  }
  if (k == Kind::string) {
    const auto& names = str_methods();
    std::string s = obj.as_string();
    if (is_extra_str_method(name))
      return Value::function("str." + name, [s, name](Interpreter&, CallArgs& a) { return extra_str_method(s, name, a); });
    if (std::find(names.begin(), names.end(), name) == names.end()) return Value();
    return Value::function("str." + name, [s, name](Interpreter& in, CallArgs& a) { return str_method(s, name, in, a); });
  }
  if (k == Kind::dict && (name == "items" || name == "keys" || name == "values" || name == "get" || name == "copy"))
    return Value::function("dict." + name, [obj, name](Interpreter&, CallArgs& a) { return dict_method(obj, name, a); });
  if (k == Kind::list && (name == "index" || name == "count"))
    return Value::function("list." + name, [obj, name](Interpreter&, CallArgs& a) { return list_method(obj, name, a); });
  return Value();
}

namespace {

Value g_range(Interpreter&, CallArgs& a) {
  for (const auto& v : a.positional)
    if (!v.is_int() && !v.is_bool()) throw ValueError{"range() arguments must be integers, not " + v.type_name()};
  if (a.positional.empty() || a.positional.size() > 3) throw ValueError{"range expected 1 to 3 arguments"};
  auto iv = [&](size_t i) { return a.positional[i].is_bool() ? int64_t{a.positional[i].as_bool()} : a.positional[i].as_int(); };
  const int64_t start = a.positional.size() == 1 ? 0 : iv(0);
  const int64_t stop = a.positional.size() == 1 ? iv(0) : iv(1);
  const int64_t step = a.positional.size() == 3 ? iv(2) : 1;
  if (step == 0) throw ValueError{"range() arg 3 must not be zero"};
  const __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
  const __int128 count = span <= 0 ? 0 : (span + (step > 0 ? step : -__int128(step)) - 1) / (step > 0 ? step : -__int128(step));
  // Same cap as Jinja's sandbox (MAX_RANGE).
  if (count > 100000) throw ValueError{"range too big: the sandbox allows at most 100000 items"};
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0, x = start; i < static_cast<int64_t>(count); ++i, x += step) out.emplace_back(x);
  return Value::list(std::move(out));
}

Value g_namespace(Interpreter&, CallArgs& a) {
  auto ns = std::make_shared<NamespaceObj>();
  for (const auto& p : a.positional) {
    if (!p.is_dict()) throw ValueError{"namespace() positional arguments must be mappings"};
    for (const auto& [k, v] : p.as_dict()->items) ns->attrs.set(k, v);
  }
  for (const auto& [k, v] : a.keyword) ns->attrs.set(Value(k), v);
  return Value(std::move(ns));
}

Value g_dict(Interpreter&, CallArgs& a) {
  Value d = Value::dict();
  for (const auto& p : a.positional) {
    if (!p.is_dict()) throw ValueError{"dict() positional argument must be a mapping"};
    for (const auto& [k, v] : p.as_dict()->items) d.as_dict()->set(k, v);
  }
  for (const auto& [k, v] : a.keyword) d.as_dict()->set(Value(k), v);
  return d;
}

Value g_raise(Interpreter&, CallArgs& a) {
  throw TemplateError(TemplateErrorKind::raised, to_str(arg(a, 0, "message", Value(""))));
}

Value g_strftime_now(Interpreter& in, CallArgs& a) {
  const std::string fmt = to_str(arg(a, 0, "format", Value("")));
  if (fmt.size() > 256) throw ValueError{"strftime_now: format string too long"};
  std::tm tm{};
  if (in.options().now) {
    tm = *in.options().now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  char buf[1024];
  const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
  return Value(std::string(buf, n));
}

}  // namespace

void install_globals(Scope& scope) {
  scope.set("range", Value::function("range", g_range));
  scope.set("namespace", Value::function("namespace", g_namespace));
  scope.set("dict", Value::function("dict", g_dict));
  scope.set("raise_exception", Value::function("raise_exception", g_raise));
  scope.set("strftime_now", Value::function("strftime_now", g_strftime_now));
  scope.set("joiner", Value::function("joiner", [](Interpreter&, CallArgs& a) {
              auto used = std::make_shared<bool>(false);
              const std::string sep = to_str(arg(a, 0, "sep", Value(", ")));
              return Value::function("joiner", [used, sep](Interpreter&, CallArgs&) {
                const bool was = *used;
                *used = true;
                return Value(was ? sep : std::string());
              });
            }));
}

}  // namespace ws::chat
