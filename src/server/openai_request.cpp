#include "server/openai_request.h"

#include <cmath>
#include <initializer_list>
#include <random>
#include <string_view>

#include "server/api_error.h"
#include "server/structured_output.h"
#include "engine/media_prompt.h"
#include "server/image_url.h"

namespace ws::server {

namespace fields {

using json = Json;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

ApiError wrong_type(const std::string& field, const char* expected, const json& got) {
  return bad_request("'" + field + "' must be " + expected + ", got " + type_name(got), field, "invalid_type");
}

// The field's value if present and not null; nullptr when absent (null means absent, as in OpenAI's API).
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double get_number(const json& body, const char* name, double def, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_number()) throw wrong_type(name, "a number", *v);
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi))
    throw bad_request("'" + std::string(name) + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                          ", got " + v->dump(),
                      name, "invalid_value");
  return d;
}

int64_t get_int(const json& body, const char* name, int64_t def, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_number_integer()) throw wrong_type(name, "an integer", *v);
  const int64_t i = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v->get<int64_t>();
  if (i < lo || i > hi)
    throw bad_request("'" + std::string(name) + "' must be between " + std::to_string(lo) + " and " +
                          std::to_string(hi) + ", got " + v->dump(),
                      name, "invalid_value");
  return i;
}

bool get_bool(const json& body, const char* name, bool def) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_boolean()) throw wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

}  // namespace fields

namespace {

using json = Json;
using namespace fields;

// Deep enough for any request (tool schemas included), shallow enough for every
// recursive walk over the value (copies, templates, dumps) to stay far from the stack's end.
constexpr int kMaxJsonDepth = 64;

std::vector<std::string> get_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > 16) throw bad_request("'stop' holds at most 16 sequences", "stop", "invalid_value");
    for (const auto& s : *v) {
      if (!s.is_string()) throw wrong_type("stop", "a string or an array of strings", s);
      out.push_back(s.get<std::string>());
    }
  } else {
    throw wrong_type("stop", "a string or an array of strings", *v);
  }
  std::erase_if(out, [](const std::string& s) { return s.empty(); });  // an empty stop would match at once
  return out;
}

constexpr int64_t kMaxChoices = 16;
constexpr int64_t kMaxTopLogprobs = 20;  // OpenAI's limit for top_logprobs

// OpenAI's {"token id": bias} with bias in [-100, 100], or llama-server's [[id, bias], ...]
// where a bias of false bans the token. -100 bans (OpenAI: "should result in a ban"), so it
// becomes -inf. Ids are checked against the vocabulary in make_turn_request.
std::vector<std::pair<int32_t, float>> get_logit_bias(const json& body) {
  const json* v = field(body, "logit_bias");
  if (!v) return {};
  std::vector<std::pair<int32_t, float>> out;
  auto add = [&](const std::string& where, int64_t id, const json& bias) {
    float b;
    if (bias.is_boolean() && !bias.get<bool>()) b = -INFINITY;
    else if (!bias.is_number()) throw wrong_type(where, "a number", bias);
    else b = float(bias.get<double>());
    if (!(b >= -100 && b <= 100) && !std::isinf(b))
      throw bad_request("'" + where + "' must be between -100 and 100, got " + bias.dump(), "logit_bias", "invalid_value");
    if (id < 0 || id > INT32_MAX)
      throw bad_request("'logit_bias' token ids must be non-negative integers, got " + std::to_string(id), "logit_bias",
                        "invalid_value");
    out.emplace_back(int32_t(id), b <= -100 ? -INFINITY : b);
  };
  if (v->is_object()) {
    for (const auto& [key, bias] : v->items()) {
      int64_t id = -1;
      size_t used = 0;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != key.size())
        throw bad_request("'logit_bias' keys must be token ids (integers as strings), got \"" + key + "\"",
                          "logit_bias", "invalid_value");
      add("logit_bias." + key, id, bias);
    }
  } else if (v->is_array()) {
    for (size_t i = 0; i < v->size(); ++i) {
      const json& pair = (*v)[i];
      const std::string where = "logit_bias[" + std::to_string(i) + "]";
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer())
        throw wrong_type(where, "a [token id, bias] pair", pair);
      add(where, pair[0].get<int64_t>(), pair[1]);
    }
  } else {
    throw wrong_type("logit_bias", "an object mapping token ids to biases", *v);
  }
  return out;
}

// Fields that would change what comes back and are not implemented: a 400 naming each,
// never a reply that silently ignores them.
void refuse_unsupported(const json& body, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const json* v = field(body, name);
    if (!v) continue;
    const bool harmless = (v->is_boolean() && !v->get<bool>()) || (v->is_string() && v->get<std::string>().empty()) ||
                          (v->is_number_integer() && v->get<int64_t>() == 1 && std::string(name) == "best_of");
    if (!harmless) throw bad_request("'" + std::string(name) + "' is not supported", name, "unsupported_parameter");
  }
}

}  // namespace

GenerationOptions parse_generation(const json& body, const char* max_tokens_field, bool openai_lengths) {
  GenerationOptions g;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw wrong_type("model", "a string", *m);
    g.model = m->get<std::string>();
  }
  // OpenAI's routing hint: a proxy in front of the replicas hashes it to keep a
  // conversation where its cache is (deploy/). The server itself needs nothing from it.
  if (const json* k = field(body, "prompt_cache_key")) {
    if (!k->is_string()) throw wrong_type("prompt_cache_key", "a string", *k);
    if (k->get_ref<const std::string&>().size() > 1024)
      throw bad_request("'prompt_cache_key' is longer than 1024 bytes", "prompt_cache_key", "invalid_value");
  }
  // Each reply past the first holds its own fork of the state (KV included), hence a cap.
  if (openai_lengths) {
    g.n = int32_t(get_int(body, "n", 1, 1, kMaxChoices));
    g.max_tokens = int32_t(get_int(body, "max_tokens", -1, 1, INT32_MAX));
    // llama-server's name for the same limit (-1: none), as its OpenAI routes take it too.
    if (!field(body, "max_tokens") && field(body, "n_predict")) {
      const int64_t n_predict = get_int(body, "n_predict", -1, -1, INT32_MAX);
      if (n_predict == 0) throw bad_request("'n_predict' must be -1 (no limit) or at least 1", "n_predict", "invalid_value");
      g.max_tokens = int32_t(n_predict);
    }
  }
  if (max_tokens_field) g.max_tokens = int32_t(get_int(body, max_tokens_field, g.max_tokens, 1, INT32_MAX));
  SamplingParams& s = g.sampling;
  s.temperature = float(get_number(body, "temperature", s.temperature, 0, 2));
  s.top_p = float(get_number(body, "top_p", s.top_p, 0, 1));
  if (s.top_p <= 0) throw bad_request("'top_p' must be greater than 0", "top_p", "invalid_value");
  // llama.cpp's server extensions, accepted for clients written against it.
  s.top_k = int32_t(get_int(body, "top_k", s.top_k, 0, INT32_MAX));
  s.min_p = float(get_number(body, "min_p", s.min_p, 0, 1));
  s.repeat_penalty = float(get_number(body, "repeat_penalty", s.repeat_penalty, 0, 10));
  if (s.repeat_penalty <= 0)
    throw bad_request("'repeat_penalty' must be greater than 0 (1 turns it off)", "repeat_penalty", "invalid_value");
  // llama-server's -1 ("the whole context") is any window longer than the context.
  const int64_t last_n = get_int(body, "repeat_last_n", s.repeat_last_n, -1, INT32_MAX);
  s.repeat_last_n = last_n < 0 ? INT32_MAX : int32_t(last_n);
  s.presence_penalty = float(get_number(body, "presence_penalty", 0, -2, 2));
  s.frequency_penalty = float(get_number(body, "frequency_penalty", 0, -2, 2));
  s.logit_bias = get_logit_bias(body);
  g.ignore_eos = get_bool(body, "ignore_eos", false);
  // llama-server's seed -1 means "pick one", as an absent seed does.
  if (field(body, "seed") && get_int(body, "seed", 0, INT64_MIN, INT64_MAX) != -1) {
    s.seed = uint64_t(get_int(body, "seed", 0, INT64_MIN, INT64_MAX));
  } else {
    s.seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  }
  g.stop = get_stop(body);
  g.grammar = parse_structured_output(body);
  g.stream = get_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
    g.include_usage = get_bool(*so, "include_usage", false);
  }
  return g;
}

namespace {

// Content parts become one string (chat templates expect strings): text parts joined by
// newlines, each image_url part replaced by kMediaMarker at its spot, its bytes
// appended to `images` in order (the media prompt builder pairs marker i with image i).
json flatten_content(const json& content, const std::string& where, bool allow_local_files,
                     std::vector<std::vector<uint8_t>>& images) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) throw wrong_type(where, "a string or an array of content parts", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                                 ? part["type"].get<std::string>() : "";
    std::string piece;
    if (type == "text" && part.contains("text") && part["text"].is_string()) {
      piece = part["text"].get<std::string>();
    } else if (type == "image_url") {
      // OpenAI sends {"url": ...}; some clients send the URL string itself.
      const json* img = part.contains("image_url") ? &part["image_url"] : nullptr;
      const json* url = img && img->is_object() && img->contains("url") ? &(*img)["url"] : img;
      if (!url || !url->is_string())
        throw bad_request("'" + at + ".image_url.url' must be a string", at + ".image_url.url", "invalid_type");
      try {
        images.push_back(load_image_url(url->get<std::string>(), allow_local_files));
      } catch (const vision::ImageError& e) {
        throw bad_request("'" + at + ".image_url': " + e.what(), at + ".image_url", "invalid_image");
      }
      piece = kMediaMarker;
    } else {
      throw bad_request("'" + where + "': only text and image_url content parts are supported", where,
                        "invalid_value");
    }
    if (!text.empty()) text += "\n";
    text += piece;
  }
  return text;
}

// The fields a function needs in OpenAI's schema, shared by tool calls and tool
// definitions. Templates are written for that schema; other shapes would fail there (a 500)
// instead of telling the client what to fix.
void check_function(const json& holder, const std::string& where) {
  const json* fn = field(holder, "function");
  if (!fn) throw bad_request("'" + where + ".function' is required", where + ".function", "missing_required_parameter");
  if (!fn->is_object()) throw wrong_type(where + ".function", "an object", *fn);
  const json* name = field(*fn, "name");
  if (!name)
    throw bad_request("'" + where + ".function.name' is required", where + ".function.name",
                      "missing_required_parameter");
  if (!name->is_string()) throw wrong_type(where + ".function.name", "a string", *name);
}

void check_tool_calls(const json& calls, const std::string& where) {
  if (!calls.is_array()) throw wrong_type(where, "an array", calls);
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const json& call = calls[i];
    if (!call.is_object()) throw wrong_type(at, "an object", call);
    for (const char* key : {"id", "type"})
      if (const json* v = field(call, key); v && !v->is_string()) throw wrong_type(at + "." + key, "a string", *v);
    check_function(call, at);
    const json* args = field(call["function"], "arguments");
    if (args && !args->is_string() && !args->is_object())
      throw wrong_type(at + ".function.arguments", "a string (JSON text) or an object", *args);
  }
}

// OpenAI's rules for one message: a string role; content, except on an assistant message
// that calls tools; string name and tool_call_id.
void check_message(const json& m, const std::string& where) {
  if (!m.is_object()) throw wrong_type(where, "an object", m);
  if (!m.contains("role") || !m["role"].is_string())
    throw bad_request("'" + where + ".role' must be a string", where + ".role", "invalid_type");
  const json* calls = field(m, "tool_calls");
  if (calls) check_tool_calls(*calls, where + ".tool_calls");
  const bool calls_tools = (calls && !calls->empty()) || field(m, "function_call");
  if (!field(m, "content") && !(m["role"] == "assistant" && calls_tools))
    throw bad_request("'" + where + ".content' is required (only an assistant message with tool_calls may omit it)",
                      where + ".content", "missing_required_parameter");
  for (const char* key : {"name", "tool_call_id"})
    if (const json* v = field(m, key); v && !v->is_string()) throw wrong_type(where + "." + key, "a string", *v);
}

json parse_messages(const json& body, bool allow_local_files, std::vector<std::vector<uint8_t>>& images) {
  const json* msgs = field(body, "messages");
  if (!msgs) throw bad_request("'messages' is required", "messages", "missing_required_parameter");
  if (!msgs->is_array()) throw wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) throw bad_request("'messages' must not be empty", "messages", "invalid_value");
  json out = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    check_message(m, where);
    json copy = m;
    if (m.contains("content")) copy["content"] = flatten_content(m["content"], where + ".content", allow_local_files, images);
    out.push_back(std::move(copy));
  }
  return out;
}

// Whether arrays and objects in `text` nest at most `limit` deep, found by a scan that
// skips string contents. It runs before parsing: parsing and every later walk over the
// value (copies, dumps, templates) may recurse once per level, and 100,000 levels
// overflowed the stack in parse_body.
bool nesting_within(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace

json parse_body(const std::string& body) {
  if (!nesting_within(body, kMaxJsonDepth))
    throw bad_request("JSON nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels in the request body", "",
                      "invalid_json");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    throw bad_request(std::string("invalid JSON in the request body: ") + e.what(), "", "invalid_json");
  }
  if (!j.is_object()) throw bad_request("the request body must be a JSON object", "", "invalid_json");
  return j;
}

ChatRequest parse_chat_request(const json& body, bool allow_local_files) {
  ChatRequest r;
  r.messages = parse_messages(body, allow_local_files, r.images);
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) throw wrong_type("tools", "an array", *tools);
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!(*tools)[i].is_object()) throw wrong_type(at, "an object", (*tools)[i]);
      check_function((*tools)[i], at);
    }
    r.tools = *tools;
  }
  r.gen = parse_generation(body, "max_completion_tokens");
  // Chat's logprobs: a boolean, with top_logprobs alternatives (OpenAI: only with logprobs).
  const bool logprobs = get_bool(body, "logprobs", false);
  const int64_t top = get_int(body, "top_logprobs", -1, 0, kMaxTopLogprobs);
  if (top >= 0 && !logprobs)
    throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
  r.gen.logprobs = logprobs ? int32_t(std::max<int64_t>(top, 0)) : -1;
  return r;
}

CompletionRequest parse_completion_request(const json& body) {
  CompletionRequest r;
  const json* p = field(body, "prompt");
  if (!p) throw bad_request("'prompt' is required", "prompt", "missing_required_parameter");
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();  // a batch of one prompt
  } else if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else {
    throw wrong_type("prompt", "a string (or an array of exactly one string)", *p);
  }
  if (r.prompt.empty()) throw bad_request("'prompt' must not be empty", "prompt", "invalid_value");
  r.gen = parse_generation(body, nullptr);
  // Completions' logprobs: how many alternatives per token (0: the chosen token's only).
  r.gen.logprobs = int32_t(get_int(body, "logprobs", -1, 0, kMaxTopLogprobs));
  refuse_unsupported(body, {"echo", "suffix", "best_of"});
  return r;
}

}  // namespace ws::server
