#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <tuple>

#include "chat/text.h"

namespace ws::chat {

const Value* DictObj::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (values_equal(k, key)) return &v;
  return nullptr;
}

const Value* DictObj::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

void DictObj::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (values_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::list(std::vector<Value> items, bool tuple) {
  auto l = std::make_shared<ListObj>();
  l->items = std::move(items);
  l->tuple = tuple;
  return Value(std::move(l));
}

Value Value::dict() { return Value(std::make_shared<DictObj>()); }

Value Value::function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
}

double Value::to_double() const {
  switch (kind()) {
    case Kind::boolean: return as_bool() ? 1.0 : 0.0;
    case Kind::integer: return static_cast<double>(as_int());
    case Kind::floating: return as_float();
    default: throw ValueError{"expected a number, got " + type_name()};
  }
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return as_bool();
    case Kind::integer: return as_int() != 0;
    case Kind::floating: return as_float() != 0.0;
    case Kind::string: return !as_string().empty();
    case Kind::list: return !as_list()->items.empty();
    case Kind::dict: return !as_dict()->items.empty();
    default: return true;
  }
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::list: return as_list()->tuple ? "tuple" : "list";
    case Kind::dict: return "dict";
    case Kind::callable: return "function";
    case Kind::ns: return "Namespace";
  }
  return "object";
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest round-trip digits, as Python's repr uses.
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = false;
  if (!sci.empty() && sci[0] == '-') neg = true, sci.erase(0, 1);
  const size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(epos + 1));
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (static_cast<int>(digits.size()) <= exp + 1) {
        out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

namespace {

void repr_into(std::string& out, const Value& v, bool top);

void repr_seq(std::string& out, const ListObj& l) {
  out += l.tuple ? "(" : "[";
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (i) out += ", ";
    repr_into(out, l.items[i], false);
  }
  if (l.tuple && l.items.size() == 1) out += ",";
  out += l.tuple ? ")" : "]";
}

void repr_dict(std::string& out, const DictObj& d) {
  out += "{";
  bool first = true;
  for (const auto& [k, v] : d.items) {
    if (!first) out += ", ";
    first = false;
    repr_into(out, k, false);
    out += ": ";
    repr_into(out, v, false);
  }
  out += "}";
}

void repr_into(std::string& out, const Value& v, bool top) {
  switch (v.kind()) {
    case Kind::undefined: out += top ? "" : "Undefined"; break;
    case Kind::none: out += "None"; break;
    case Kind::boolean: out += v.as_bool() ? "True" : "False"; break;
    case Kind::integer: out += std::to_string(v.as_int()); break;
    case Kind::floating: out += float_repr(v.as_float()); break;
    case Kind::string: out += top ? v.as_string() : text::repr(v.as_string()); break;
    case Kind::list: repr_seq(out, *v.as_list()); break;
    case Kind::dict: repr_dict(out, *v.as_dict()); break;
    case Kind::callable: out += "<function " + v.as_callable()->name + ">"; break;
    case Kind::ns:
      out += "<Namespace ";
      repr_dict(out, v.as_namespace()->attrs);
      out += ">";
      break;
  }
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  out.push_back('"');
  if (ensure_ascii) {  // json.dumps escapes each non-ASCII code point; bytes below stay as they are
    auto flush_u16 = [&](unsigned u) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out.push_back(hex[(u >> shift) & 0xF]);
    };
    for (char32_t cp : text::decode(s)) {
      if (cp < 0x80) {
        std::string one(1, static_cast<char>(cp));
        std::string esc;
        json_string(esc, one, false);
        out.append(esc, 1, esc.size() - 2);
      } else if (cp < 0x10000) {
        flush_u16(static_cast<unsigned>(cp));
      } else {
        flush_u16(0xD800 + ((static_cast<unsigned>(cp) - 0x10000) >> 10));
        flush_u16(0xDC00 + ((static_cast<unsigned>(cp) - 0x10000) & 0x3FF));
      }
    }
    out.push_back('"');
    return;
  }
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 0xF]);
        } else if (c < 0x80 || !ensure_ascii) {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Kind::string: return k.as_string();
    case Kind::integer: return std::to_string(k.as_int());
    case Kind::floating: return float_repr(k.as_float());
    case Kind::boolean: return k.as_bool() ? "true" : "false";
    case Kind::none: return "null";
    default: throw ValueError{"keys must be str, int, float, bool or None, not " + k.type_name()};
  }
}

struct JsonWriter {
  std::optional<int> indent;
  bool sort_keys;
  std::string out;
  bool ensure_ascii = false;
  // Python's defaults: ", " between items (plain "," when indenting) and ": " after keys.
  std::string item_sep = indent ? "," : ", ";
  std::string key_sep = ": ";

  void newline(int depth) {
    out.push_back('\n');
    out.append(static_cast<size_t>(*indent) * depth, ' ');
  }

  void write(const Value& v, int depth) {
    if (depth > 512) throw ValueError{"tojson: value nested too deeply"};
    switch (v.kind()) {
      case Kind::none: out += "null"; return;
      case Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
      case Kind::integer: out += std::to_string(v.as_int()); return;
      case Kind::floating: {
        const double d = v.as_float();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
        return;
      }
      case Kind::string: json_string(out, v.as_string(), ensure_ascii); return;
      case Kind::list: write_list(v.as_list()->items, depth); return;
      case Kind::dict: write_dict(*v.as_dict(), depth); return;
      default: throw ValueError{"Object of type " + v.type_name() + " is not JSON serializable"};
    }
  }

  void write_list(const std::vector<Value>& items, int depth) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      if (indent) newline(depth + 1);
      write(items[i], depth + 1);
    }
    if (indent) newline(depth);
    out.push_back(']');
  }

  void write_dict(const DictObj& d, int depth) {
    if (d.items.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    for (const auto& [k, v] : d.items) entries.emplace_back(json_key(k), &v);
    if (sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.first < b.first; });
    out.push_back('{');
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += item_sep;
      if (indent) newline(depth + 1);
      json_string(out, entries[i].first, ensure_ascii);
      out += key_sep;
      write(*entries[i].second, depth + 1);
    }
    if (indent) newline(depth);
    out.push_back('}');
  }
};

template <typename J>
Value convert_json(const J& j, int depth) {
  if (depth > 512) throw ValueError{"JSON input nested too deeply"};
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value(nullptr);
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert_json(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto d = std::make_shared<DictObj>();
      for (auto it = j.begin(); it != j.end(); ++it)
        d->items.emplace_back(Value(it.key()), convert_json(it.value(), depth + 1));
      return Value(std::move(d));
    }
    default: return Value(nullptr);  // binary / discarded: nothing a template can use
  }
}

}  // namespace

std::string to_str(const Value& v) {
  std::string out;
  repr_into(out, v, true);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  repr_into(out, v, false);
  return out;
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    const int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    const int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x == y;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string: return a.as_string() == b.as_string();
    case Kind::list: {
      const auto& x = a.as_list()->items;
      const auto& y = b.as_list()->items;
      if (x.size() != y.size() || a.as_list()->tuple != b.as_list()->tuple) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case Kind::dict: {
      const auto& x = *a.as_dict();
      const auto& y = *b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Kind::callable: return a.as_callable() == b.as_callable();
    case Kind::ns: return a.as_namespace() == b.as_namespace();
    default: return false;
  }
}

bool values_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() < b.to_double();
    return (a.is_bool() ? a.as_bool() : a.as_int()) < (b.is_bool() ? b.as_bool() : b.as_int());
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order == code point order
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_list()->items;
    const auto& y = b.as_list()->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_less(x[i], y[i])) return true;
      if (values_less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  throw ValueError{"'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'"};
}

std::string to_json_text(const Value& v, std::optional<int> indent, bool sort_keys) {
  return to_json_text(v, JsonOptions{indent, sort_keys, false, std::nullopt});
}

std::string to_json_text(const Value& v, const JsonOptions& options) {
  JsonWriter w{options.indent, options.sort_keys, {}};
  w.ensure_ascii = options.ensure_ascii;
  if (options.separators) std::tie(w.item_sep, w.key_sep) = *options.separators;
  w.write(v, 0);
  return std::move(w.out);
}

Value from_json(const nlohmann::ordered_json& j) { return convert_json(j, 0); }
Value from_json(const nlohmann::json& j) { return convert_json(j, 0); }

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return {};
    case Kind::list: return v.as_list()->items;
    case Kind::dict: {
      std::vector<Value> keys;
      for (const auto& kv : v.as_dict()->items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::string: {
      std::vector<Value> chars;
      for (char32_t c : text::decode(v.as_string())) {
        std::string s;
        text::append_utf8(s, c);
        chars.emplace_back(std::move(s));
      }
      return chars;
    }
    default: throw ValueError{"'" + v.type_name() + "' object is not iterable"};
  }
}

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return 0;
    case Kind::string: return static_cast<int64_t>(text::length(v.as_string()));
    case Kind::list: return static_cast<int64_t>(v.as_list()->items.size());
    case Kind::dict: return static_cast<int64_t>(v.as_dict()->items.size());
    case Kind::ns: return static_cast<int64_t>(v.as_namespace()->attrs.items.size());
    default: throw ValueError{"object of type '" + v.type_name() + "' has no len()"};
  }
}

}  // namespace ws::chat
