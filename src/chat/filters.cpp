// Jinja2's builtin filters (the ones chat templates use, and the common rest),
// with Hugging Face's tojson (json.dumps, ensure_ascii=False).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/text.h"

namespace ws::chat {

Value arg(const CallArgs& a, size_t pos, const char* name, Value def) {
  if (pos < a.positional.size()) return a.positional[pos];
  for (const auto& [k, v] : a.keyword)
    if (k == name) return v;
  return def;
}

bool has_arg(const CallArgs& a, size_t pos, const char* name) {
  if (pos < a.positional.size()) return true;
  for (const auto& kv : a.keyword)
    if (kv.first == name) return true;
  return false;
}

namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);

std::string str_arg(const CallArgs& a, size_t pos, const char* name, const std::string& def) {
  Value v = arg(a, pos, name, Value(def));
  return to_str(v);
}

int64_t int_arg(const CallArgs& a, size_t pos, const char* name, int64_t def) {
  Value v = arg(a, pos, name, Value(def));
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  if (v.is_float()) return static_cast<int64_t>(v.as_float());
  throw ValueError{std::string("argument '") + name + "' must be an integer, not " + v.type_name()};
}

// Jinja's make_attrgetter: "a.b.0" looks up item by item (subscript semantics); an
// integer attribute is one subscript (map(attribute=-1) takes each item's last element).
Value lookup_path(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_int()) return in.get_item(item, attribute);
  const std::string path = to_str(attribute);
  Value cur = item;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = in.get_item(cur, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort key for case-insensitive comparisons (Jinja's ignore_case).
Value fold(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value(text::lower(v.as_string())) : v;
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  const bool boolean = arg(a, 1, "boolean", Value(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return arg(a, 0, "default_value", Value(""));
  return v;
}

Value f_length(Interpreter&, const Value& v, CallArgs&) { return Value(length_of(v)); }

Value f_list(Interpreter&, const Value& v, CallArgs&) { return Value::list(iterate(v)); }

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  const std::string sep = str_arg(a, 0, "d", "");
  const Value attr = arg(a, 1, "attribute", Value(nullptr));
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attr.is_none() ? item : lookup_path(in, item, attr));
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  const Value chars = arg(a, 0, "chars", Value(nullptr));
  return Value(text::strip(to_str(v), chars.is_none() ? std::nullopt : std::optional(to_str(chars)), true, true));
}

Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value(text::upper(to_str(v))); }
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value(text::lower(to_str(v))); }
Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return Value(text::capitalize(to_str(v))); }

// Jinja's title: capitalise each run that follows a space, '-', '(', '{', '[' or '<'.
Value f_title(Interpreter&, const Value& v, CallArgs&) {
  std::string out, word;
  auto flush = [&] {
    out += text::capitalize(word);
    word.clear();
  };
  for (char32_t c : text::decode(to_str(v))) {
    if (text::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<') {
      flush();
      text::append_utf8(out, c);
    } else {
      text::append_utf8(word, c);
    }
  }
  flush();
  return Value(std::move(out));
}

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  const std::string s = to_str(v), from = str_arg(a, 0, "old", ""), to = str_arg(a, 1, "new", "");
  const Value count_v = arg(a, 2, "count", Value(nullptr));
  int64_t count = count_v.is_none() ? -1 : int_arg(a, 2, "count", -1);
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    for (char32_t c : text::decode(s)) {
      if (count != 0) out += to, --count;
      text::append_utf8(out, c);
      in.check_size(out.size());
    }
    if (count != 0) out += to;
    return Value(std::move(out));
  }
  size_t pos = 0;
  for (size_t hit; count != 0 && (hit = s.find(from, pos)) != std::string::npos; --count) {
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    in.check_size(out.size());
  }
  out.append(s, pos);
  return Value(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs&) {
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs&) {
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list();
  if (!v.is_dict()) throw ValueError{"Can only get item pairs from a mapping."};
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.as_dict()->items) pairs.push_back(Value::list({k, val}, true));
  return Value::list(std::move(pairs));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  if (v.is_undefined()) throw ValueError{v.undefined_hint()};
  if (!v.is_dict()) throw ValueError{"dictsort: expected a mapping, got " + v.type_name()};
  const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
  const std::string by = str_arg(a, 1, "by", "key");
  const bool reverse = arg(a, 2, "reverse", Value(false)).truthy();
  if (by != "key" && by != "value") throw ValueError{"You can only sort by either 'key' or 'value'"};
  const size_t idx = by == "key" ? 0 : 1;
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.as_dict()->items) pairs.push_back(Value::list({k, val}, true));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    const Value kx = fold(x.as_list()->items[idx], cs), ky = fold(y.as_list()->items[idx], cs);
    return reverse ? values_less(ky, kx) : values_less(kx, ky);
  });
  return Value::list(std::move(pairs));
}

// select / reject / selectattr / rejectattr share this.
Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep_if) {
  size_t next = 0;
  Value attr;
  if (by_attr) attr = arg(a, next++, "attribute", Value(""));
  const bool has_test = next < a.positional.size();
  const std::string test = has_test ? to_str(a.positional[next]) : "";
  CallArgs test_args;
  for (size_t i = next + 1; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    const Value probe = by_attr ? lookup_path(in, item, attr) : item;
    bool ok;
    if (has_test) {
      CallArgs copy = test_args;
      ok = in.test(test, probe, copy);
    } else {
      ok = probe.truthy();
    }
    if (ok == keep_if) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  const Value attribute = arg(a, 99, "attribute", Value(nullptr));
  if (!attribute.is_none()) {
    const Value def = arg(a, 99, "default", Value());
    for (const Value& item : iterate(v)) {
      Value r = lookup_path(in, item, attribute);
      out.push_back(r.is_undefined() && !def.is_undefined() ? def : r);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) throw ValueError{"map: expected a filter name or attribute="};
  const std::string name = to_str(a.positional[0]);
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(in.filter(name, item, copy));
  }
  return Value::list(std::move(out));
}

Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value(to_str(v)); }

// Python int(str): optional sign, digits, underscores between digits, surrounding spaces.
std::optional<int64_t> parse_int(const std::string& raw, int base) {
  std::string s = text::strip(raw, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  const long long v = std::strtoll(s.c_str(), &end, base);
  if (errno == ERANGE || *end != '\0' || end == s.c_str()) return std::nullopt;
  return v;
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  const Value def = arg(a, 0, "default", Value(0));
  const int base = static_cast<int>(int_arg(a, 1, "base", 10));
  switch (v.kind()) {
    case Kind::integer: return v;
    case Kind::boolean: return Value(int64_t{v.as_bool()});
    case Kind::floating:
      if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) > 9.2e18) return def;
      return Value(static_cast<int64_t>(v.as_float()));
    case Kind::string: {
      if (auto i = parse_int(v.as_string(), base)) return Value(*i);
      char* end = nullptr;
      const std::string s = text::strip(v.as_string(), std::nullopt, true, true);
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(static_cast<int64_t>(d));
      return def;
    }
    default: return def;
  }
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  const Value def = arg(a, 0, "default", Value(0.0));
  if (v.is_number()) return Value(v.to_double());
  if (v.is_string()) {
    const std::string s = text::strip(v.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(d);
  }
  return def;
}

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) throw ValueError{"integer overflow"};
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is_bool()) return Value(int64_t{v.as_bool()});
  throw ValueError{"bad operand type for abs(): '" + v.type_name() + "'"};
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t precision = std::clamp<int64_t>(int_arg(a, 0, "precision", 0), -300, 300);
  const std::string method = str_arg(a, 1, "method", "common");
  if (method == "common") {
    // Python's round(): ints stay ints; floats round their exact binary value half to even,
    // which is what glibc's printf does.
    if (v.is_int() || v.is_bool()) return precision >= 0 ? Value(v.is_bool() ? int64_t{v.as_bool()} : v.as_int()) : Value(v.to_double());
    const double x = v.to_double();
    if (precision < 0 || !std::isfinite(x)) {
      const double scale = std::pow(10.0, static_cast<double>(-precision));
      return Value(std::nearbyint(x / scale) * scale);
    }
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(precision, 100)), x);
    return Value(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return Value(std::ceil(v.to_double() * scale) / scale);
  if (method == "floor") return Value(std::floor(v.to_double() * scale) / scale);
  throw ValueError{"method must be common, ceil or floor"};
}

Value f_indent(Interpreter&, const Value& v, CallArgs& a) {
  const Value w = arg(a, 0, "width", Value(4));
  const std::string pad = w.is_string() ? w.as_string() : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                                                            w.is_int() ? w.as_int() : 4, 0, 1024)), ' ');
  const bool first = arg(a, 1, "first", Value(false)).truthy();
  const bool blank = arg(a, 2, "blank", Value(false)).truthy();
  // Jinja appends "\n" and then uses splitlines(), so a trailing newline survives.
  const std::string s = to_str(v) + "\n";
  std::vector<std::string> lines;
  for (size_t start = 0; start < s.size();) {
    const size_t nl = s.find('\n', start);
    lines.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  if (first) out = pad + out;
  return Value(std::move(out));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
  const Value attr = arg(a, 1, "attribute", Value(nullptr));
  std::vector<Value> out, seen;
  for (const Value& item : iterate(v)) {
    const Value key = fold(attr.is_none() ? item : lookup_path(in, item, attr), cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  const bool reverse = arg(a, 0, "reverse", Value(false)).truthy();
  const bool cs = arg(a, 1, "case_sensitive", Value(false)).truthy();
  const Value attr = arg(a, 2, "attribute", Value(nullptr));
  std::vector<Value> items = iterate(v);
  auto key = [&](const Value& x) { return fold(attr.is_none() ? x : lookup_path(in, x, attr), cs); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? values_less(key(y), key(x)) : values_less(key(x), key(y));
  });
  return Value::list(std::move(items));
}

Value f_reverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string cps = text::decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value(text::encode(cps));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : text::decode(to_str(v))) {
    const bool word_char = c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : !text::is_space(c));
    if (word_char && !in_word) ++n;
    in_word = word_char;
  }
  return Value(n);
}

Value f_batch(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t size = int_arg(a, 0, "linecount", 1);
  if (size <= 0) throw ValueError{"batch: linecount must be positive"};
  const bool fill = has_arg(a, 1, "fill_with");
  const Value filler = arg(a, 1, "fill_with", Value(nullptr));
  std::vector<Value> out, cur;
  for (const Value& item : iterate(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == size) out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    while (fill && static_cast<int64_t>(cur.size()) < size) cur.push_back(filler);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  const Value attr = arg(a, 0, "attribute", Value(nullptr));
  Value total = arg(a, 1, "start", Value(0));
  for (const Value& item : iterate(v))
    total = binary_op("+", total, attr.is_none() ? item : lookup_path(in, item, attr), in);
  return total;
}

Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
  const Value attr = arg(a, 1, "attribute", Value(nullptr));
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  auto key = [&](const Value& x) { return fold(attr.is_none() ? x : lookup_path(in, x, attr), cs); };
  Value best = items[0];
  for (size_t i = 1; i < items.size(); ++i)
    if (want_max ? values_less(key(best), key(items[i])) : values_less(key(items[i]), key(best))) best = items[i];
  return best;
}

Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }
Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }

Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value(std::move(out));
}

Value f_attr(Interpreter& in, const Value& v, CallArgs& a) { return in.get_attr(v, str_arg(a, 0, "name", "")); }

Value f_center(Interpreter&, const Value& v, CallArgs& a) {
  const std::string s = to_str(v);
  const int64_t width = std::min<int64_t>(int_arg(a, 0, "width", 80), 1 << 20);
  const auto len = static_cast<int64_t>(text::length(s));
  if (width <= len) return Value(s);
  const int64_t total = width - len, left = total / 2 + (total & width & 1);
  return Value(std::string(left, ' ') + s + std::string(total - left, ' '));
}

const std::unordered_map<std::string, FilterFn>& filter_table() {
  static const std::unordered_map<std::string, FilterFn> filters = {
      {"default", f_default}, {"d", f_default}, {"length", f_length}, {"count", f_length},
      {"list", f_list}, {"join", f_join}, {"trim", f_trim},
      {"upper", f_upper}, {"lower", f_lower}, {"title", f_title}, {"capitalize", f_capitalize},
      {"replace", f_replace}, {"first", f_first}, {"last", f_last}, {"items", f_items},
      {"dictsort", f_dictsort}, {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr}, {"map", f_map}, {"string", f_string}, {"safe", f_string},
      {"int", f_int}, {"float", f_float}, {"abs", f_abs}, {"round", f_round}, {"indent", f_indent},
      {"unique", f_unique}, {"sort", f_sort}, {"reverse", f_reverse}, {"wordcount", f_wordcount},
      {"batch", f_batch}, {"sum", f_sum}, {"min", f_min}, {"max", f_max}, {"escape", f_escape},
      {"e", f_escape}, {"forceescape", f_escape}, {"attr", f_attr}, {"center", f_center},
  };
  return filters;
}

}  // namespace

bool has_filter(const std::string& name) { return filter_table().count(name) != 0 || is_extra_filter(name); }

Value apply_filter(Interpreter& in, const std::string& name, const Value& base, CallArgs& args) {
  const auto& filters = filter_table();
  const auto it = filters.find(name);
  if (it == filters.end()) {
    if (std::optional<Value> v = apply_extra_filter(in, name, base, args)) return std::move(*v);
    throw ValueError{"no filter named '" + name + "'"};
  }
  return it->second(in, base, args);
}

}  // namespace ws::chat
