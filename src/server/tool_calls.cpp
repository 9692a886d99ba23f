// Detecting a template's tool-call dialect and parsing replies (see tool_calls.h). Every
// format is a row of kFormats: the markers around a call and the reader of its body.
#include "server/tool_calls.h"

#include <algorithm>
#include <random>
#include <stdexcept>

#include "server/tool_values.h"

namespace ws::server {
namespace {

using Json = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;

// A call body reader: parses calls from s[pos, s.size()) and returns the position after
// what it read, or npos when the text is not (or not yet) a call.
using BodyReader = size_t (*)(std::string_view s, size_t pos, std::vector<ToolCall>& out);

struct FormatRow {
  ToolFormat format;
  const char* name;
  std::vector<const char*> detect;  // all must occur in the template's source
  const char* open;                 // "": the call is the whole reply (leading whitespace aside)
  const char* close;                // "": the body reader finds the end
  BodyReader body;
};

// {"name": N, "arguments" | "parameters": A[, "id": I]} -> a call.
bool call_from_object(const Json& o, std::vector<ToolCall>& out) {
  if (!o.is_object()) return false;
  const auto name = o.find("name");
  if (name == o.end() || !name->is_string()) return false;
  Json args = Json::object();
  for (const char* key : {"arguments", "parameters"})
    if (const auto a = o.find(key); a != o.end()) args = *a;
  ToolCall c;
  c.name = name->get<std::string>();
  if (args.is_string()) {  // already JSON text (the OpenAI wire shape)
    c.arguments = args.get<std::string>();
  } else {
    if (!args.is_object()) return false;
    c.arguments = args.dump();
  }
  if (const auto id = o.find("id"); id != o.end() && id->is_string()) c.id = id->get<std::string>();
  out.push_back(std::move(c));
  return true;
}

size_t read_json_call(std::string_view s, size_t pos, std::vector<ToolCall>& out) {
  Json v;
  const size_t end = read_json(s, pos, v);
  return end != npos && call_from_object(v, out) ? end : npos;
}

size_t read_json_calls(std::string_view s, size_t pos, std::vector<ToolCall>& out) {
  Json v;
  const size_t end = read_json(s, pos, v);
  if (end == npos || !v.is_array() || v.empty()) return npos;
  for (const Json& o : v)
    if (!call_from_object(o, out)) return npos;
  return end;
}

// llama-server's generic shape: {"tool_call": {...}} or {"tool_calls": [{...}, ...]}.
size_t read_generic(std::string_view s, size_t pos, std::vector<ToolCall>& out) {
  Json v;
  const size_t end = read_json(s, pos, v);
  if (end == npos || !v.is_object()) return npos;
  if (const auto c = v.find("tool_call"); c != v.end()) return call_from_object(*c, out) ? end : npos;
  if (const auto cs = v.find("tool_calls"); cs != v.end() && cs->is_array() && !cs->empty()) {
    for (const Json& o : *cs)
      if (!call_from_object(o, out)) return npos;
    return end;
  }
  return npos;
}

size_t skip_ws(std::string_view s, size_t pos) {
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\t' || s[pos] == '\r')) ++pos;
  return pos;
}

bool eat(std::string_view s, size_t& pos, std::string_view lit) {
  if (s.substr(pos, lit.size()) != lit) return false;
  pos += lit.size();
  return true;
}

// A function name: up to the first character that cannot be in one.
size_t read_name(std::string_view s, size_t pos, std::string& name) {
  size_t e = pos;
  while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_' || s[e] == '-' || s[e] == '.'))
    ++e;
  if (e == pos) return npos;
  name.assign(s.substr(pos, e - pos));
  return e;
}

// <function=NAME>\n<parameter=K>\nV\n</parameter>\n...</function>: V is JSON when it
// parses as such (Python's True/False/None included), else the raw text.
size_t read_xml_function(std::string_view s, size_t pos, std::vector<ToolCall>& out) {
  pos = skip_ws(s, pos);
  if (!eat(s, pos, "<function=")) return npos;
  const size_t gt = s.find('>', pos);
  if (gt == npos) return npos;
  ToolCall c;
  c.name.assign(s.substr(pos, gt - pos));
  pos = gt + 1;
  Json args = Json::object();
  for (;;) {
    pos = skip_ws(s, pos);
    if (eat(s, pos, "</function>")) break;
    if (!eat(s, pos, "<parameter=")) return npos;
    const size_t kgt = s.find('>', pos);
    const size_t vend = kgt == npos ? npos : s.find("</parameter>", kgt);
    if (vend == npos) return npos;
    std::string_view v = s.substr(kgt + 1, vend - kgt - 1);
    if (v.starts_with("\n")) v.remove_prefix(1);  // the template writes the value on lines of its own
    if (v.ends_with("\n")) v.remove_suffix(1);
    args[std::string(s.substr(pos, kgt - pos))] = loose_value(v);
    pos = vend + std::string_view("</parameter>").size();
  }
  c.arguments = args.dump();
  out.push_back(std::move(c));
  return pos;
}

// [name(k=v, ...), ...] (Python literals) or a JSON list of {"name", "arguments"}.
size_t read_lfm2(std::string_view s, size_t pos, std::vector<ToolCall>& out) {
  pos = skip_ws(s, pos);
  if (const size_t end = read_json_calls(s, pos, out); end != npos) return end;
  return read_python_calls(s, pos, out);
}

// NAME[CALL_ID]ID[ARGS]{...}
size_t read_mistral_v11(std::string_view s, size_t pos, std::vector<ToolCall>& out) {
  ToolCall c;
  pos = read_name(s, skip_ws(s, pos), c.name);
  if (pos == npos) return npos;
  if (eat(s, pos, "[CALL_ID]")) {
    const size_t a = s.find("[ARGS]", pos);
    if (a == npos) return npos;
    c.id.assign(s.substr(pos, a - pos));
    pos = a;
  }
  if (!eat(s, pos, "[ARGS]")) return npos;
  Json args;
  pos = read_json(s, pos, args);
  if (pos == npos || !(args.is_object() || args.is_string())) return npos;
  c.arguments = args.is_string() ? args.get<std::string>() : args.dump();
  out.push_back(std::move(c));
  return pos;
}

// call:NAME{...} with Gemma's value syntax (or {JSON} inside the braces, as the template
// writes arguments that came as a string).
size_t read_gemma4(std::string_view s, size_t pos, std::vector<ToolCall>& out) {
  ToolCall c;
  if (!eat(s, pos, "call:")) return npos;
  pos = read_name(s, pos, c.name);
  if (pos == npos || pos >= s.size() || s[pos] != '{') return npos;
  Json args;
  if (s.substr(pos, 2) == "{{" || s.substr(pos, 2) == "{\"") {
    const size_t inner = read_json(s, pos + 1, args);
    const size_t brace = inner == npos ? npos : skip_ws(s, inner);
    if (brace != npos && args.is_object() && brace < s.size() && s[brace] == '}') {
      pos = brace + 1;
    } else {
      pos = read_gemma_value(s, pos, args);
    }
  } else {
    pos = read_gemma_value(s, pos, args);
  }
  if (pos == npos || !args.is_object()) return npos;
  c.arguments = args.dump();
  out.push_back(std::move(c));
  return pos;
}

// Inside <｜tool▁calls▁begin｜>: <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>, repeated.
size_t read_deepseek(std::string_view s, size_t pos, std::vector<ToolCall>& out) {
  static constexpr std::string_view kBegin = "<｜tool▁call▁begin｜>", kSep = "<｜tool▁sep｜>", kEnd = "<｜tool▁call▁end｜>";
  const size_t before = out.size();
  for (;;) {
    size_t p = skip_ws(s, pos);
    if (!eat(s, p, kBegin)) break;
    const size_t sep = s.find(kSep, p);
    if (sep == npos) return npos;
    ToolCall c;
    p = sep + kSep.size();
    const size_t nl = s.find('\n', p);
    if (nl == npos) return npos;
    c.name.assign(s.substr(p, nl - p));
    p = skip_ws(s, nl);
    eat(s, p, "```json");
    Json args;
    p = read_json(s, p, args);
    if (p == npos || !args.is_object()) return npos;
    c.arguments = args.dump();
    p = skip_ws(s, p);
    eat(s, p, "```");
    p = skip_ws(s, p);
    if (!eat(s, p, kEnd)) return npos;
    out.push_back(std::move(c));
    pos = p;
  }
  return out.size() > before ? pos : npos;
}

const std::vector<FormatRow>& formats() {
  // Order matters for detection: the more specific markers first.
  static const std::vector<FormatRow> rows = {
      {ToolFormat::harmony, "harmony", {"<|channel|>", "<|message|>"}, "", "", nullptr},
      {ToolFormat::qwen_xml, "qwen_xml", {"<tool_call>", "<function="}, "<tool_call>", "</tool_call>", read_xml_function},
      {ToolFormat::hermes, "hermes", {"<tool_call>"}, "<tool_call>", "</tool_call>", read_json_call},
      {ToolFormat::mistral_v11, "mistral_v11", {"[TOOL_CALLS]", "[ARGS]"}, "[TOOL_CALLS]", "", read_mistral_v11},
      {ToolFormat::mistral_nemo, "mistral_nemo", {"[TOOL_CALLS]"}, "[TOOL_CALLS]", "", read_json_calls},
      {ToolFormat::lfm2, "lfm2", {"<|tool_call_start|>"}, "<|tool_call_start|>", "<|tool_call_end|>", read_lfm2},
      {ToolFormat::lfm2, "lfm2", {"List of tools:"}, "<|tool_call_start|>", "<|tool_call_end|>", read_lfm2},
      {ToolFormat::nemotron_v2, "nemotron_v2", {"<TOOLCALL>"}, "<TOOLCALL>", "</TOOLCALL>", read_json_calls},
      {ToolFormat::granite, "granite", {"<|tool_call|>"}, "<|tool_call|>", "", read_json_calls},
      {ToolFormat::gemma4, "gemma4", {"<|tool_call>"}, "<|tool_call>", "<tool_call|>", read_gemma4},
      {ToolFormat::deepseek_r1, "deepseek_r1", {"tool▁calls▁begin"}, "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
       read_deepseek},
      {ToolFormat::llama3_json, "llama3_json", {"<|start_header_id|>", "\"parameters\""}, "", "", read_json_call},
      {ToolFormat::generic, "generic", {}, "", "", read_generic},
  };
  return rows;
}

const FormatRow& row(ToolFormat f) {
  for (const FormatRow& r : formats())
    if (r.format == f) return r;
  return formats().back();
}

// How many trailing bytes of `s` are a proper prefix of `marker` (held back while streaming).
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - (marker.empty() ? 0 : 1)); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

std::string_view trim(std::string_view s, bool left, bool right) {
  const auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (left && !s.empty() && ws(s.front())) s.remove_prefix(1);
  while (right && !s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

// Content and calls of `text` (reasoning already split off).
void parse_calls(const FormatRow& f, std::string_view text, bool partial, ParsedReply& out) {
  std::string content;
  size_t pos = 0;
  const std::string_view open = f.open, close = f.close;
  while (pos <= text.size()) {
    size_t at = npos;
    if (!open.empty()) {
      at = text.find(open, pos);
    } else if (pos == 0) {  // whole-reply formats: a JSON object first thing
      const size_t first = skip_ws(text, 0);
      if (first == text.size() ? partial : text[first] == '{') at = first;
    }
    if (at == npos) {
      std::string_view rest = text.substr(pos);
      if (partial && !open.empty()) rest.remove_suffix(partial_suffix(rest, open));
      content += rest;
      break;
    }
    content += text.substr(pos, at - pos);
    const size_t body = at + open.size();
    size_t body_end = close.empty() ? text.size() : text.find(close, body);
    if (body_end == npos) {
      if (partial) break;   // the call is still being written
      body_end = text.size();  // the reply ended (at its end-of-generation token) before the close marker
    }
    std::vector<ToolCall> calls;
    const size_t used = f.body(text.substr(0, body_end), body, calls);
    if (used == npos) {
      if (!partial) content += text.substr(at);  // not a call after all: the text stays content
      break;
    }
    out.calls.insert(out.calls.end(), calls.begin(), calls.end());
    pos = close.empty() || body_end == text.size() ? used : body_end + close.size();
    if (pos >= text.size()) break;
  }
  // Trailing whitespace is held back while streaming too: the final reply trims it.
  out.content = trim(content, true, true);
}

// gpt-oss: messages <|channel|>HEADER<|message|>BODY ended by <|end|>, <|call|>, <|return|>
// (the last two are end-of-generation tokens, so usually the text just ends).
void parse_harmony(const ReplySyntax& syn, std::string_view text, bool partial, ParsedReply& out) {
  static constexpr std::string_view kChannel = "<|channel|>", kMessage = "<|message|>";
  size_t pos = 0;
  std::string reasoning, content;
  if (text.find(kChannel) == npos && !partial) {
    out.content = trim(text, true, true);
    return;
  }
  while (pos < text.size()) {
    const size_t ch = text.find(kChannel, pos);
    if (ch == npos) break;
    const size_t msg = text.find(kMessage, ch);
    if (msg == npos) break;  // header still being written
    // The recipient may sit in the role part (<|start|>assistant to=functions.x) or the header.
    const std::string_view header = text.substr(pos, msg - pos);
    const size_t body = msg + kMessage.size();
    size_t end = text.size();
    bool closed = false;
    for (std::string_view stop : {"<|end|>", "<|call|>", "<|return|>"})
      if (const size_t e = text.find(stop, body); e != npos && e < end) end = e, closed = true;
    std::string_view b = text.substr(body, end - body);
    const bool open_body = !closed && partial;
    const size_t to = header.find("to=functions.");
    if (to != npos) {
      if (open_body) break;
      ToolCall c;
      read_name(header, to + std::string_view("to=functions.").size(), c.name);
      Json args;
      if (read_json(b, 0, args) == npos || !args.is_object()) {
        content += b;
      } else {
        c.arguments = args.dump();
        out.calls.push_back(std::move(c));
      }
    } else {
      if (open_body) b.remove_suffix(std::max(partial_suffix(b, "<|end|>"), partial_suffix(b, "<|return|>")));
      const bool analysis = text.substr(ch + kChannel.size(), msg - ch - kChannel.size()).starts_with("analysis");
      if (analysis && !syn.reasoning.open.empty()) reasoning += b;
      else content += b;
    }
    if (!closed) break;
    pos = end;
    pos = text.find(kChannel, pos) == npos ? text.size() : pos;
  }
  out.reasoning = trim(reasoning, true, true);
  out.content = trim(content, true, true);
}

}  // namespace

const char* tool_format_name(ToolFormat f) { return f == ToolFormat::none ? "none" : row(f).name; }

ToolFormat detect_tool_format(std::string_view src) {
  // DeepSeek R1's template never reads `tools`, but writes calls from history.
  if (src.find("tools") == npos && src.find("tool_call") == npos) return ToolFormat::none;
  for (const FormatRow& r : formats()) {
    if (r.detect.empty()) continue;
    if (std::all_of(r.detect.begin(), r.detect.end(), [&](const char* m) { return src.find(m) != npos; }))
      return r.format;
  }
  return ToolFormat::generic;
}

ReasoningMarkers detect_reasoning(std::string_view src, ToolFormat tools) {
  if (tools == ToolFormat::harmony) return {"<|channel|>analysis", "<|end|>"};
  if (src.find("<|channel>thought") != npos) return {"<|channel>thought", "<channel|>"};  // Gemma 4
  if (src.find("<think>") != npos || src.find("</think>") != npos) return {"<think>", "</think>"};
  return {};
}

ReasoningFormat parse_reasoning_format(const std::string& s) {
  if (s == "none") return ReasoningFormat::none;
  if (s == "deepseek") return ReasoningFormat::deepseek;
  if (s == "auto") return ReasoningFormat::auto_;
  throw std::invalid_argument("--reasoning-format must be none, deepseek or auto, got '" + s + "'");
}

ParsedReply parse_reply(const ReplySyntax& syn, std::string_view text, bool partial) {
  ParsedReply out;
  if (syn.tools == ToolFormat::harmony) {
    parse_harmony(syn, text, partial, out);
  } else {
    std::string_view rest = text;
    const std::string_view open = syn.reasoning.open, close = syn.reasoning.close;
    if (!open.empty()) {
      bool inside = syn.starts_in_reasoning;
      const std::string_view lead = trim(rest, true, false);
      if (!inside && lead.starts_with(open)) {
        inside = true;
        rest = lead.substr(open.size());
      } else if (!inside && partial && open.starts_with(lead)) {
        return out;  // might be the opening marker still arriving
      }
      if (inside) {
        const size_t c = rest.find(close);
        std::string_view r = c == npos ? rest : rest.substr(0, c);
        if (c == npos && partial) r.remove_suffix(partial_suffix(r, close));
        out.reasoning = trim(r, true, true);
        rest = c == npos ? std::string_view() : rest.substr(c + close.size());
      }
    }
    if (syn.tools == ToolFormat::none) {
      out.content = trim(rest, true, true);
    } else {
      parse_calls(row(syn.tools), rest, partial, out);
    }
  }
  for (ToolCall& c : out.calls)
    if (c.id.empty()) c.id = new_tool_call_id(syn.tools);
  return out;
}

std::string new_tool_call_id(ToolFormat format) {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device rng;
  const bool mistral = format == ToolFormat::mistral_nemo || format == ToolFormat::mistral_v11;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[rng() % 62];
  return id;
}

}  // namespace ws::server
