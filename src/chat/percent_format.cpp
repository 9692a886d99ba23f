#include "chat/percent_format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "chat/text.h"

namespace ws::chat {
namespace {

struct Spec {
  bool left = false, plus = false, space = false, alt = false, zero = false;
  std::optional<int64_t> width, precision;
  char conv = 0;
};

// The first n code points of s (precision of %s counts characters, not bytes).
std::string take_code_points(const std::string& s, int64_t n) {
  const std::u32string cps = text::decode(s);
  if (static_cast<int64_t>(cps.size()) <= n) return s;
  return text::encode(std::u32string_view(cps).substr(0, static_cast<size_t>(n)));
}

// ascii(): repr with every non-ASCII code point escaped.
std::string ascii_of(const Value& v) {
  std::string out;
  for (char32_t c : text::decode(to_repr(v))) {
    char buf[16];
    if (c < 0x80) out.push_back(static_cast<char>(c));
    else {
      std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  return out;
}

// Pads `body` (sign and prefix kept apart so that zero padding goes between them).
std::string pad(const Spec& sp, const std::string& sign, const std::string& body, bool numeric) {
  const int64_t len = static_cast<int64_t>(sign.size() + text::length(body));
  const int64_t fill = sp.width && *sp.width > len ? *sp.width - len : 0;
  if (fill == 0) return sign + body;
  if (sp.left) return sign + body + std::string(fill, ' ');
  if (sp.zero && numeric) return sign + std::string(fill, '0') + body;
  return std::string(fill, ' ') + sign + body;
}

std::string sign_of(const Spec& sp, bool negative) {
  return negative ? "-" : sp.plus ? "+" : sp.space ? " " : "";
}

std::string format_int(const Spec& sp, const Value& v) {
  const char c = sp.conv;
  int64_t n = 0;
  if (v.is_int()) n = v.as_int();
  else if (v.is_bool()) n = v.as_bool();
  else if (v.is_float() && (c == 'd' || c == 'i' || c == 'u')) {
    if (!std::isfinite(v.as_float())) throw ValueError{"cannot convert float " + float_repr(v.as_float()) + " to integer"};
    n = static_cast<int64_t>(std::trunc(v.as_float()));
  } else if (c == 'd' || c == 'i' || c == 'u') {
    throw ValueError{std::string("%") + c + " format: a real number is required, not " + v.type_name()};
  } else {
    throw ValueError{std::string("%") + c + " format: an integer is required, not " + v.type_name()};
  }
  const bool negative = n < 0;
  const unsigned long long mag = negative ? 0ULL - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n);
  char buf[32];
  std::snprintf(buf, sizeof buf, c == 'o' ? "%llo" : c == 'x' ? "%llx" : c == 'X' ? "%llX" : "%llu", mag);
  std::string digits = buf;
  if (sp.precision && *sp.precision > static_cast<int64_t>(digits.size()))
    digits.insert(0, static_cast<size_t>(*sp.precision) - digits.size(), '0');
  std::string prefix;
  if (sp.alt && c == 'o') prefix = "0o";
  if (sp.alt && (c == 'x' || c == 'X')) prefix = std::string("0") + c;
  return pad(sp, sign_of(sp, negative) + prefix, digits, true);
}

std::string format_float(const Spec& sp, const Value& v) {
  if (!v.is_number()) throw ValueError{"must be real number, not " + v.type_name()};
  const double d = v.to_double();
  const bool upper = sp.conv == 'E' || sp.conv == 'F' || sp.conv == 'G';
  const std::string sign = sign_of(sp, std::signbit(d));
  if (!std::isfinite(d)) {
    // Python pads inf/nan with spaces even under the 0 flag.
    Spec no_zero = sp;
    no_zero.zero = false;
    const std::string word = std::isnan(d) ? (upper ? "NAN" : "nan") : (upper ? "INF" : "inf");
    return pad(no_zero, std::isnan(d) ? sign_of(sp, false) : sign, word, true);
  }
  const int precision = static_cast<int>(std::min<int64_t>(sp.precision.value_or(6), 1000));
  const std::string ff = std::string("%") + (sp.alt ? "#" : "") + ".*" + sp.conv;
  std::vector<char> buf(static_cast<size_t>(precision) + 400);
  std::snprintf(buf.data(), buf.size(), ff.c_str(), precision, std::fabs(d));
  return pad(sp, sign, buf.data(), true);
}

std::string format_char(const Spec& sp, const Value& v) {
  std::string s;
  if (v.is_int()) {
    if (v.as_int() < 0 || v.as_int() > 0x10FFFF) throw ValueError{"%c arg not in range(0x110000)"};
    text::append_utf8(s, static_cast<char32_t>(v.as_int()));
  } else if (v.is_string() && text::length(v.as_string()) == 1) {
    s = v.as_string();
  } else {
    throw ValueError{"%c requires an int or a unicode character, not " + v.type_name()};
  }
  return pad(sp, "", s, false);
}

std::string convert(const Spec& sp, const Value& v) {
  switch (sp.conv) {
    case 's': case 'r': case 'a': {
      std::string s = sp.conv == 's' ? to_str(v) : sp.conv == 'r' ? to_repr(v) : ascii_of(v);
      if (sp.precision) s = take_code_points(s, *sp.precision);
      return pad(sp, "", s, false);
    }
    case 'd': case 'i': case 'u': case 'o': case 'x': case 'X': return format_int(sp, v);
    case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': return format_float(sp, v);
    case 'c': return format_char(sp, v);
    default: return {};
  }
}

// Walks the format; `next_arg` hands out positional arguments in order.
class Formatter {
 public:
  Formatter(const std::string& fmt, const Value& args, size_t max_bytes) : fmt_(fmt), max_bytes_(max_bytes) {
    if (args.is_list() && args.as_list()->tuple) items_ = args.as_list()->items;
    else items_.push_back(args);
    if (args.is_dict()) mapping_ = &args;
  }

  std::string run() {
    std::string out;
    for (size_t i = 0; i < fmt_.size(); ++i) {
      if (fmt_[i] != '%') { out.push_back(fmt_[i]); continue; }
      ++i;
      if (i < fmt_.size() && fmt_[i] == '%') { out.push_back('%'); continue; }
      out += one_spec(i);
      if (out.size() > max_bytes_) throw ValueError{"formatted string exceeds the output limit"};
    }
    if (next_ < items_.size() && mapping_ == nullptr)
      throw ValueError{"not all arguments converted during string formatting"};
    return out;
  }

 private:
  const Value& next_arg() {
    if (next_ >= items_.size()) throw ValueError{"not enough arguments for format string"};
    return items_[next_++];
  }

  int64_t star() {
    const Value& v = next_arg();
    if (!v.is_int()) throw ValueError{"* wants int"};
    return std::clamp<int64_t>(v.as_int(), -(1 << 20), 1 << 20);  // as digits() caps a written width
  }

  int64_t digits(size_t& i) {
    int64_t n = 0;
    while (i < fmt_.size() && std::isdigit(static_cast<unsigned char>(fmt_[i])))
      n = std::min<int64_t>(n * 10 + (fmt_[i++] - '0'), 1 << 20);
    return n;
  }

  // Parses one conversion from fmt_[i] (just past the '%'); leaves i on its last char.
  std::string one_spec(size_t& i) {
    Spec sp;
    std::optional<Value> keyed;
    if (i < fmt_.size() && fmt_[i] == '(') {
      if (mapping_ == nullptr) throw ValueError{"format requires a mapping"};
      const size_t close = fmt_.find(')', i);
      if (close == std::string::npos) throw ValueError{"incomplete format key"};
      const Value* found = mapping_->as_dict()->find(fmt_.substr(i + 1, close - i - 1));
      if (found == nullptr) throw ValueError{"KeyError: " + text::repr(fmt_.substr(i + 1, close - i - 1))};
      keyed = *found;
      i = close + 1;
    }
    for (; i < fmt_.size(); ++i) {
      const char f = fmt_[i];
      if (f == '-') sp.left = true;
      else if (f == '+') sp.plus = true;
      else if (f == ' ') sp.space = true;
      else if (f == '#') sp.alt = true;
      else if (f == '0') sp.zero = true;
      else break;
    }
    if (i < fmt_.size() && fmt_[i] == '*') { ++i; sp.width = star(); }
    else if (i < fmt_.size() && std::isdigit(static_cast<unsigned char>(fmt_[i]))) sp.width = digits(i);
    if (sp.width && *sp.width < 0) { sp.left = true; sp.width = -*sp.width; }
    if (i < fmt_.size() && fmt_[i] == '.') {
      ++i;
      if (i < fmt_.size() && fmt_[i] == '*') { ++i; sp.precision = std::max<int64_t>(star(), 0); }
      else sp.precision = digits(i);
    }
    while (i < fmt_.size() && (fmt_[i] == 'h' || fmt_[i] == 'l' || fmt_[i] == 'L')) ++i;
    if (i >= fmt_.size()) throw ValueError{"incomplete format"};
    sp.conv = fmt_[i];
    if (std::string_view("sradiuoxXeEfFgGc").find(sp.conv) == std::string_view::npos) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "unsupported format character '%c' (0x%x) at index %zu", sp.conv,
                    static_cast<unsigned>(static_cast<unsigned char>(sp.conv)), i);
      throw ValueError{buf};
    }
    return convert(sp, keyed ? *keyed : next_arg());
  }

  const std::string& fmt_;
  size_t max_bytes_;
  std::vector<Value> items_;
  const Value* mapping_ = nullptr;
  size_t next_ = 0;
};

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args, size_t max_bytes) {
  return Formatter(fmt, args, max_bytes).run();
}

}  // namespace ws::chat
