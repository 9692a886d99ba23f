// Jinja2 filters and Python str methods beyond the core set in filters.cpp/methods.cpp:
// tojson (with all of Hugging Face's options), format (printf-style), truncate, slice;
// str.center/ljust/rjust/zfill, removeprefix, removesuffix, partition, rpartition; the
// names of the tests (for `is test`). Templates for llama-server rely on Jinja2's full
// builtin set, so each follows Jinja 3.1 / Python 3 exactly (messages included).
#include <algorithm>

#include "chat/builtins.h"
#include "chat/percent_format.h"
#include "chat/text.h"

namespace ws::chat {
namespace {

int64_t int_param(const CallArgs& a, size_t pos, const char* name, int64_t def) {
  const Value v = arg(a, pos, name, Value(def));
  if (v.is_bool()) return v.as_bool();
  if (!v.is_int()) throw ValueError{std::string(name) + " must be an integer, not " + v.type_name()};
  return v.as_int();
}

std::string substr_cp(const std::u32string& cps, int64_t from, int64_t count) {
  from = std::clamp<int64_t>(from, 0, static_cast<int64_t>(cps.size()));
  count = std::clamp<int64_t>(count, 0, static_cast<int64_t>(cps.size()) - from);
  return text::encode(std::u32string_view(cps).substr(static_cast<size_t>(from), static_cast<size_t>(count)));
}

// do_format: `value % args`, or `value % kwargs` (never both).
Value f_format(Interpreter& in, const Value& v, const CallArgs& a) {
  const size_t limit = in.options().max_output_bytes;
  if (!a.positional.empty() && !a.keyword.empty())
    throw ValueError{"can't handle positional and keyword arguments at the same time"};
  if (a.keyword.empty()) return Value(percent_format(to_str(v), Value::list(a.positional, true), limit));
  Value kwargs = Value::dict();
  for (const auto& [k, val] : a.keyword) kwargs.as_dict()->set(Value(k), val);
  return Value(percent_format(to_str(v), kwargs, limit));
}

// do_truncate with the default policy leeway of 5.
Value f_truncate(const Value& v, const CallArgs& a) {
  const std::u32string s = text::decode(to_str(v));
  const int64_t length = int_param(a, 0, "length", 255);
  const bool killwords = arg(a, 1, "killwords", Value(false)).truthy();
  const std::u32string end = text::decode(to_str(arg(a, 2, "end", Value("..."))));
  const Value leeway_v = arg(a, 3, "leeway", Value(nullptr));
  const int64_t leeway = leeway_v.is_none() ? 5 : int_param(a, 3, "leeway", 5);
  const auto end_len = static_cast<int64_t>(end.size());
  if (length < end_len) throw ValueError{"expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length)};
  if (leeway < 0) throw ValueError{"expected leeway >= 0, got " + std::to_string(leeway)};
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value(text::encode(s));
  std::string head = substr_cp(s, 0, length - end_len);
  if (!killwords) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head.resize(space);
  }
  return Value(head + text::encode(end));
}

// do_slice: `slices` lists of near-equal length, the first ones one longer.
Value f_slice(Interpreter& in, const Value& v, const CallArgs& a) {
  const std::vector<Value> seq = iterate(v);
  const int64_t slices = int_param(a, 0, "slices", 1);
  if (slices <= 0) throw ValueError{"slice: slices must be positive"};
  in.charge_iterations(slices);
  const Value fill = arg(a, 1, "fill_with", Value(nullptr));
  const auto length = static_cast<int64_t>(seq.size());
  const int64_t per = length / slices, extra = length % slices;
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t n = 0; n < slices; ++n) {
    const int64_t start = offset + n * per;
    if (n < extra) ++offset;
    const int64_t stop = offset + (n + 1) * per;
    std::vector<Value> part(seq.begin() + start, seq.begin() + stop);
    if (!fill.is_none() && n >= extra) part.push_back(fill);
    out.push_back(Value::list(std::move(part)));
  }
  return Value::list(std::move(out));
}

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), arguments in that order.
Value f_tojson(const Value& v, const CallArgs& a) {
  const Value indent = arg(a, 1, "indent", Value(nullptr));
  std::optional<int> ind;
  if (indent.is_int()) ind = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64));
  else if (!indent.is_none()) throw ValueError{"tojson: indent must be an integer"};
  JsonOptions options{ind, arg(a, 3, "sort_keys", Value(false)).truthy(), arg(a, 0, "ensure_ascii", Value(false)).truthy(),
                      std::nullopt};
  const Value seps = arg(a, 2, "separators", Value(nullptr));
  if (!seps.is_none()) {
    const std::vector<Value> pair = seps.is_list() ? seps.as_list()->items : std::vector<Value>{};
    if (pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
      throw ValueError{"tojson: separators must be an (item_separator, key_separator) pair of strings"};
    options.separators = {pair[0].as_string(), pair[1].as_string()};
  }
  return Value(to_json_text(v, options));
}

char32_t fill_char(const CallArgs& a) {
  const Value f = arg(a, 1, "fillchar", Value(" "));
  const std::u32string cps = f.is_string() ? text::decode(f.as_string()) : std::u32string();
  if (cps.size() != 1) throw ValueError{"The fill character must be exactly one character long"};
  return cps[0];
}

// str.center / ljust / rjust / zfill; `left` is the share of the padding put before s.
Value justify(const std::string& s, const std::string& name, const CallArgs& a) {
  const int64_t width = std::min<int64_t>(int_param(a, 0, "width", 0), 1 << 20);
  const std::u32string cps = text::decode(s);
  const int64_t total = width - static_cast<int64_t>(cps.size());
  if (total <= 0) return Value(s);
  if (name == "zfill") {
    const bool sign = !cps.empty() && (cps[0] == '+' || cps[0] == '-');
    return Value(s.substr(0, sign) + std::string(static_cast<size_t>(total), '0') + s.substr(sign));
  }
  const char32_t fc = fill_char(a);
  int64_t left = total;                                               // rjust
  if (name == "ljust") left = 0;
  if (name == "center") left = total / 2 + (total & width & 1);       // CPython's formula
  const std::u32string out = std::u32string(static_cast<size_t>(left), fc) + cps +
                             std::u32string(static_cast<size_t>(total - left), fc);
  return Value(text::encode(out));
}

Value partition(const std::string& s, const std::string& name, const CallArgs& a) {
  const Value sep_v = arg(a, 0, "sep");
  if (!sep_v.is_string()) throw ValueError{"must be str, not " + sep_v.type_name()};
  const std::string& sep = sep_v.as_string();
  if (sep.empty()) throw ValueError{"empty separator"};
  const size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
  if (p == std::string::npos)
    return name == "partition" ? Value::list({Value(s), Value(""), Value("")}, true)
                               : Value::list({Value(""), Value(""), Value(s)}, true);
  return Value::list({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))}, true);
}

Value affix_remove(const std::string& s, const std::string& name, const CallArgs& a) {
  const Value x = arg(a, 0, name == "removeprefix" ? "prefix" : "suffix");
  if (!x.is_string()) throw ValueError{name + "() argument must be str, not " + x.type_name()};
  const std::string& affix = x.as_string();
  if (name == "removeprefix") return Value(s.rfind(affix, 0) == 0 ? s.substr(affix.size()) : s);
  const bool ends = s.size() >= affix.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0;
  return Value(ends ? s.substr(0, s.size() - affix.size()) : s);
}

}  // namespace

bool is_extra_filter(const std::string& name) {
  return name == "format" || name == "truncate" || name == "slice" || name == "tojson";
}

std::optional<Value> apply_extra_filter(Interpreter& in, const std::string& name, const Value& base, CallArgs& args) {
  if (name == "format") return f_format(in, base, args);
  if (name == "truncate") return f_truncate(base, args);
  if (name == "slice") return f_slice(in, base, args);
  if (name == "tojson") return f_tojson(base, args);
  return std::nullopt;
}

bool has_test(const std::string& name) {
  static const std::vector<std::string> names = {
      "defined", "undefined", "none", "string", "mapping", "number", "integer", "float", "boolean", "true",
      "false", "callable", "iterable", "sequence", "escaped", "odd", "even", "divisibleby", "lower", "upper",
      "in", "sameas", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt",
      "greaterthan", ">", "ge", ">=", "filter", "test"};
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool is_extra_str_method(const std::string& name) {
  static const char* const names[] = {"center", "ljust", "rjust", "zfill", "removeprefix",
                                      "removesuffix", "partition", "rpartition"};
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Value extra_str_method(const std::string& s, const std::string& name, const CallArgs& args) {
  if (name == "partition" || name == "rpartition") return partition(s, name, args);
  if (name == "removeprefix" || name == "removesuffix") return affix_remove(s, name, args);
  return justify(s, name, args);
}

}  // namespace ws::chat
