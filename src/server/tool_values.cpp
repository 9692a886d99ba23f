#include "server/tool_values.h"

#include <cctype>
#include <string>

#include "server/tool_calls.h"

namespace ws::server {
namespace {

using Json = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;
constexpr int kMaxDepth = 64;  // as request bodies: recursion stays far from the stack's end

size_t skip_ws(std::string_view s, size_t p) {
  while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
  return p;
}

// The end of the JSON value starting at p (strings and nesting respected), npos if cut off.
size_t json_extent(std::string_view s, size_t p) {
  if (p >= s.size()) return npos;
  if (s[p] == '{' || s[p] == '[' || s[p] == '"') {
    int depth = 0;
    bool in_string = false;
    for (size_t i = p; i < s.size(); ++i) {
      const char c = s[i];
      if (in_string) {
        if (c == '\\') ++i;
        else if (c == '"') {
          in_string = false;
          if (depth == 0) return i + 1;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        if (++depth > kMaxDepth) return npos;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return npos;
  }
  size_t e = p;
  while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '-' || s[e] == '+' || s[e] == '.'))
    ++e;
  // A scalar at the very end may still be growing; callers read scalars only inside containers.
  return e == p ? npos : e;
}

// A quoted string (quote ' or ") with the usual escapes.
size_t read_quoted(std::string_view s, size_t p, char quote, std::string& out) {
  if (p >= s.size() || s[p] != quote) return npos;
  for (size_t i = p + 1; i < s.size(); ++i) {
    const char c = s[i];
    if (c == quote) return i + 1;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= s.size()) return npos;
    switch (s[i]) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'u': {
        if (i + 4 >= s.size()) return npos;
        Json j = Json::parse("\"\\u" + std::string(s.substr(i + 1, 4)) + "\"", nullptr, false);
        if (j.is_discarded()) return npos;
        out += j.get<std::string>();
        i += 4;
        break;
      }
      default: out += s[i];
    }
  }
  return npos;
}

size_t read_word(std::string_view s, size_t p, Json& out) {
  size_t e = p;
  while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '-' || s[e] == '+' || s[e] == '.'))
    ++e;
  const std::string_view w = s.substr(p, e - p);
  if (w.empty() || e == s.size()) return npos;  // a word at the end may still grow
  if (w == "True" || w == "true") out = true;
  else if (w == "False" || w == "false") out = false;
  else if (w == "None" || w == "null") out = nullptr;
  else {
    Json n = Json::parse(w, nullptr, false);
    if (n.is_discarded() || !n.is_number()) return npos;
    out = std::move(n);
  }
  return e;
}

// Python literal or Gemma value; `gemma` switches the string and key syntax.
size_t read_value(std::string_view s, size_t p, Json& out, bool gemma, int depth) {
  static constexpr std::string_view kGemmaQuote = "<|\"|>";
  if (depth > kMaxDepth) return npos;
  p = skip_ws(s, p);
  if (p >= s.size()) return npos;
  if (gemma && s.substr(p, kGemmaQuote.size()) == kGemmaQuote) {
    const size_t e = s.find(kGemmaQuote, p + kGemmaQuote.size());
    if (e == npos) return npos;
    out = std::string(s.substr(p + kGemmaQuote.size(), e - p - kGemmaQuote.size()));
    return e + kGemmaQuote.size();
  }
  const char c = s[p];
  if (c == '"' || (c == '\'' && !gemma)) {
    std::string str;
    const size_t e = read_quoted(s, p, c, str);
    if (e != npos) out = std::move(str);
    return e;
  }
  if (c == '[' || (c == '(' && !gemma)) {
    const char end = c == '[' ? ']' : ')';
    out = Json::array();
    p = skip_ws(s, p + 1);
    while (p < s.size() && s[p] != end) {
      Json v;
      p = read_value(s, p, v, gemma, depth + 1);
      if (p == npos) return npos;
      out.push_back(std::move(v));
      p = skip_ws(s, p);
      if (p < s.size() && s[p] == ',') p = skip_ws(s, p + 1);
      else if (p < s.size() && s[p] != end) return npos;
    }
    return p < s.size() ? p + 1 : npos;
  }
  if (c == '{') {
    out = Json::object();
    p = skip_ws(s, p + 1);
    while (p < s.size() && s[p] != '}') {
      std::string key;
      Json k;
      if (gemma && (std::isalpha(static_cast<unsigned char>(s[p])) || s[p] == '_')) {
        size_t e = p;
        while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_' || s[e] == '-')) ++e;
        key.assign(s.substr(p, e - p));
        p = e;
      } else {
        p = read_value(s, p, k, gemma, depth + 1);
        if (p == npos || !k.is_string()) return npos;
        key = k.get<std::string>();
      }
      p = skip_ws(s, p);
      if (p >= s.size() || s[p] != ':') return npos;
      Json v;
      p = read_value(s, p + 1, v, gemma, depth + 1);
      if (p == npos) return npos;
      out[key] = std::move(v);
      p = skip_ws(s, p);
      if (p < s.size() && s[p] == ',') p = skip_ws(s, p + 1);
      else if (p < s.size() && s[p] != '}') return npos;
    }
    return p < s.size() ? p + 1 : npos;
  }
  return read_word(s, p, out);
}

}  // namespace

size_t read_json(std::string_view s, size_t pos, Json& out) {
  pos = skip_ws(s, pos);
  const size_t end = json_extent(s, pos);
  if (end == npos) return npos;
  Json v = Json::parse(s.substr(pos, end - pos), nullptr, false);
  if (v.is_discarded()) return npos;
  out = std::move(v);
  return end;
}

size_t read_python_value(std::string_view s, size_t pos, Json& out) { return read_value(s, pos, out, false, 0); }
size_t read_gemma_value(std::string_view s, size_t pos, Json& out) { return read_value(s, pos, out, true, 0); }

size_t read_python_calls(std::string_view s, size_t p, std::vector<ToolCall>& out) {
  p = skip_ws(s, p);
  const bool list = p < s.size() && s[p] == '[';
  if (list) p = skip_ws(s, p + 1);
  std::vector<ToolCall> calls;
  for (;;) {
    ToolCall c;
    size_t e = p;
    while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_' || s[e] == '-' || s[e] == '.'))
      ++e;
    if (e == p || e >= s.size() || s[e] != '(') return npos;
    c.name.assign(s.substr(p, e - p));
    p = skip_ws(s, e + 1);
    Json args = Json::object();
    while (p < s.size() && s[p] != ')') {
      size_t k = p;
      while (k < s.size() && (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_')) ++k;
      const std::string key(s.substr(p, k - p));
      k = skip_ws(s, k);
      if (key.empty() || k >= s.size() || s[k] != '=') return npos;
      Json v;
      p = read_python_value(s, k + 1, v);
      if (p == npos) return npos;
      args[key] = std::move(v);
      p = skip_ws(s, p);
      if (p < s.size() && s[p] == ',') p = skip_ws(s, p + 1);
      else if (p < s.size() && s[p] != ')') return npos;
    }
    if (p >= s.size()) return npos;
    c.arguments = args.dump();
    calls.push_back(std::move(c));
    p = skip_ws(s, p + 1);
    if (!list) break;
    if (p < s.size() && s[p] == ',') {
      p = skip_ws(s, p + 1);
      continue;
    }
    if (p < s.size() && s[p] == ']') {
      ++p;
      break;
    }
    return npos;
  }
  out.insert(out.end(), calls.begin(), calls.end());
  return p;
}

Json loose_value(std::string_view text) {
  const std::string padded = std::string(text) + " ";  // a scalar needs a delimiter to be whole
  Json v;
  if (size_t e = read_json(padded, 0, v); e != npos && skip_ws(padded, e) == padded.size()) return v;
  if (size_t e = read_python_value(padded, 0, v); e != npos && skip_ws(padded, e) == padded.size()) return v;
  return std::string(text);
}

}  // namespace ws::server
