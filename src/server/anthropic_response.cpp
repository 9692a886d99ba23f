// Anthropic Messages replies: the message object, its usage and stop reason, the error
// envelope, and the named SSE events of a streamed message.
#include <algorithm>

#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace ws::server {

using Json = nlohmann::ordered_json;

Json anthropic_error_json(const ApiError& e) {
  const int s = e.status();
  const char* type = s == 401   ? "authentication_error"
                     : s == 403 ? "permission_error"
                     : s == 404 ? "not_found_error"
                     : s == 413 ? "request_too_large"
                     : s == 429 ? "rate_limit_error"
                     : s == 503 || s == 529 ? "overloaded_error"
                     : s >= 500 ? "api_error"
                                : "invalid_request_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

StopInfo anthropic_stop(const Completion& c, bool called, const std::vector<std::string>& stop, const Tokenizer& tok,
                        bool special) {
  // As llama-server: a reply cut by the token limit is max_tokens even if a call came before.
  if (c.finish_reason == "length") return {"max_tokens", std::nullopt};
  if (called) return {"tool_use", std::nullopt};
  const auto& samples = c.turn.samples;
  const bool eog = samples.empty() ? c.turn.stop_reason == "eog" : samples.at(size_t(c.index)).stop_reason == "eog";
  if (eog || stop.empty()) return {"end_turn", std::nullopt};
  // The emitted text stops right before the stop string: decode the tokens again (as the
  // generator decoded them) and see which stop string follows it. The shortest wins, as
  // it completed first.
  const std::vector<Token>& gen = samples.empty() ? c.turn.generated : samples.at(size_t(c.index)).generated;
  StreamDecoder dec(tok, special);
  std::string full;
  for (Token t : gen) full += dec.push(t);
  full += dec.flush();
  std::optional<std::string> found;
  if (full.size() < c.text.size()) return {"end_turn", std::nullopt};
  for (const std::string& s : stop)
    if (full.compare(c.text.size(), s.size(), s) == 0 && (!found || s.size() < found->size())) found = s;
  if (!found) return {"end_turn", std::nullopt};
  return {"stop_sequence", found};
}

Json anthropic_usage_json(const TurnResult& t) {
  return {{"input_tokens", t.prompt_tokens - t.reused},
          {"cache_read_input_tokens", t.reused},
          {"output_tokens", int64_t(t.generated.size())}};
}

namespace {

Json tool_use_block(const ToolCall& c) {
  // The arguments come from the parser (or a grammar) as JSON text of an object; anything
  // else would break the client's input parsing, so it becomes {} as llama-server does.
  Json input = Json::parse(c.arguments, nullptr, false);
  if (!input.is_object()) input = Json::object();
  return {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", std::move(input)}};
}

}  // namespace

Json anthropic_message_json(const std::string& id, const std::string& model, const ParsedReply& r, const StopInfo& stop,
                            const TurnResult& turn) {
  Json content = Json::array();
  // No signature can be made for a local model's thinking; clients require the field.
  if (!r.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", r.reasoning}, {"signature", ""}});
  if (!r.content.empty()) content.push_back({{"type", "text"}, {"text", r.content}});
  for (const ToolCall& c : r.calls) content.push_back(tool_use_block(c));
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", std::move(content)},
          {"stop_reason", stop.reason},
          {"stop_sequence", stop.sequence ? Json(*stop.sequence) : Json(nullptr)},
          {"usage", anthropic_usage_json(turn)}};
}

std::string SseEvent::wire() const { return "event: " + name + "\ndata: " + dump_json(data) + "\n\n"; }

SseEvent message_start_event(const std::string& id, const std::string& model, int32_t prompt_tokens) {
  // How much of the prompt the cache holds is known once the turn has run: message_delta
  // then carries the final input_tokens and cache_read_input_tokens (Anthropic's usage in
  // message_delta is cumulative and replaces these).
  Json usage = {{"input_tokens", prompt_tokens}, {"cache_read_input_tokens", 0}, {"output_tokens", 0}};
  Json message = {{"id", id},           {"type", "message"},        {"role", "assistant"},
                  {"model", model},     {"content", Json::array()}, {"stop_reason", nullptr},
                  {"stop_sequence", nullptr}, {"usage", std::move(usage)}};
  return {"message_start", {{"type", "message_start"}, {"message", std::move(message)}}};
}

std::vector<SseEvent> message_end_events(const StopInfo& stop, const TurnResult& turn) {
  Json delta = {{"stop_reason", stop.reason}, {"stop_sequence", stop.sequence ? Json(*stop.sequence) : Json(nullptr)}};
  Json message_delta = {{"type", "message_delta"}, {"delta", std::move(delta)}, {"usage", anthropic_usage_json(turn)}};
  return {{"message_delta", std::move(message_delta)},
          {"message_stop", {{"type", "message_stop"}}}};
}

SseEvent AnthropicBlocks::delta_event(Json delta) const {
  return {"content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}}};
}

void AnthropicBlocks::open(Kind kind, Json block, std::vector<SseEvent>& out) {
  auto closed = close();
  out.insert(out.end(), closed.begin(), closed.end());
  open_ = kind;
  ++index_;
  Json start = {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}};
  out.push_back({"content_block_start", std::move(start)});
}

std::vector<SseEvent> AnthropicBlocks::close() {
  std::vector<SseEvent> out;
  if (open_ == Kind::none) return out;
  // Anthropic ends a thinking block with its signature; a local model has none to give.
  if (open_ == Kind::thinking) out.push_back(delta_event({{"type", "signature_delta"}, {"signature", ""}}));
  out.push_back({"content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}});
  open_ = Kind::none;
  return out;
}

std::vector<SseEvent> AnthropicBlocks::push(const Json& d) {
  std::vector<SseEvent> out;
  if (const auto it = d.find("reasoning_content"); it != d.end() && it->is_string()) {
    if (open_ != Kind::thinking) open(Kind::thinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
    out.push_back(delta_event({{"type", "thinking_delta"}, {"thinking", *it}}));
  }
  if (const auto it = d.find("content"); it != d.end() && it->is_string()) {
    if (open_ != Kind::text) open(Kind::text, {{"type", "text"}, {"text", ""}}, out);
    out.push_back(delta_event({{"type", "text_delta"}, {"text", *it}}));
  }
  if (const auto it = d.find("tool_calls"); it != d.end() && it->is_array()) {
    for (const Json& call : *it) {
      // ReplyStreamer sends a call's id and name first, then its arguments whole.
      if (call.contains("id")) {
        called_ = true;
        Json block = {{"type", "tool_use"}, {"id", call["id"]}, {"name", call["function"]["name"]}};
        block["input"] = Json::object();
        open(Kind::tool, std::move(block), out);
      }
      const Json args = call.contains("function") ? call["function"].value("arguments", Json("")) : Json("");
      if (open_ == Kind::tool && args.is_string() && !args.get<std::string>().empty())
        out.push_back(delta_event({{"type", "input_json_delta"}, {"partial_json", args}}));
    }
  }
  return out;
}

}  // namespace ws::server
