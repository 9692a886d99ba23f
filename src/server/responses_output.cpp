#include "server/responses_output.h"

#include <ctime>

#include "server/openai_response.h"
#include "server/responses_api.h"

namespace ws::server {
namespace {

// The texts of the message items, joined: what OpenAI's SDKs call output_text (sent too,
// so a plain HTTP client has it; the SDKs compute the same from the items).
std::string joined_text(const Json& output) {
  std::string s;
  for (const Json& item : output)
    if (item["type"] == "message")
      for (const Json& part : item["content"])
        if (part["type"] == "output_text") s += part["text"].get<std::string>();
  return s;
}

Json output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
}

}  // namespace

ResponseHead make_response_head(const std::string& model, Json echo) {
  return {responses_id("resp"), int64_t(std::time(nullptr)), model, std::move(echo)};
}

Json responses_usage(const TurnResult& turn, bool reasoned) {
  const Json u = usage_json(turn);  // chat's counts, renamed
  Json r = {{"input_tokens", u["prompt_tokens"]},
            {"input_tokens_details", {{"cached_tokens", u["prompt_tokens_details"]["cached_tokens"]}}},
            {"output_tokens", u["completion_tokens"]}};
  // Known exactly only when the reply had no reasoning at all.
  if (!reasoned) r["output_tokens_details"] = {{"reasoning_tokens", 0}};
  r["total_tokens"] = u["total_tokens"];
  return r;
}

Json response_object(const ResponseHead& h, const std::string& status, const Json& output, const TurnResult* turn) {
  const Json& e = h.echo;
  Json r = {{"id", h.id}, {"object", "response"}, {"created_at", h.created_at}, {"status", status}};
  if (status != "in_progress") r["completed_at"] = int64_t(std::time(nullptr));
  r["background"] = false;
  r["error"] = nullptr;
  r["incomplete_details"] = status == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr);
  for (const char* k : {"instructions", "max_output_tokens"}) r[k] = e.value(k, Json());
  r["model"] = h.model;
  r["output"] = output;
  bool reasoned = false;
  for (const Json& item : output) reasoned = reasoned || item["type"] == "reasoning";
  // Not while in progress: the SDKs keep a response.created snapshot's own output_text
  // instead of computing it from the items they accumulate.
  if (status != "in_progress") r["output_text"] = joined_text(output);
  for (const char* k : {"parallel_tool_calls", "previous_response_id", "reasoning", "store", "temperature", "text",
                        "tool_choice", "tools", "top_p", "truncation"})
    r[k] = e.value(k, Json());
  r["usage"] = turn ? responses_usage(*turn, reasoned) : Json(nullptr);
  r["user"] = e.value("user", Json());
  r["metadata"] = e.value("metadata", Json::object());
  return r;
}

Json output_items(const ParsedReply& r, bool truncated) {
  Json out = Json::array();
  if (!r.reasoning.empty()) out.push_back(reasoning_item(responses_id("rs"), r.reasoning, "completed"));
  if (!r.content.empty()) out.push_back(message_item(responses_id("msg"), r.content, "completed"));
  for (const ToolCall& c : r.calls) out.push_back(function_call_item(responses_id("fc"), c, "completed"));
  // A call is only ever parsed whole, so what the limit cut short is the text before it.
  if (truncated && !out.empty() && out.back()["type"] != "function_call") out.back()["status"] = "incomplete";
  return out;
}

Json ResponseEvents::event(const char* type, Json fields) {
  Json e = {{"type", type}, {"sequence_number", seq_++}};
  for (auto& [k, v] : fields.items()) e[k] = std::move(v);
  return e;
}

std::vector<Json> ResponseEvents::start() {
  const Json r = response_object(head_, "in_progress", Json::array(), nullptr);
  return {event("response.created", {{"response", r}}), event("response.in_progress", {{"response", r}})};
}

void ResponseEvents::open(Open kind, std::vector<Json>& out) {
  if (open_ == kind) return;
  close("completed", out);
  open_ = kind;
  open_text_.clear();
  const int64_t index = int64_t(output_.size());
  if (kind == Open::reasoning) {
    open_id_ = responses_id("rs");
    out.push_back(event("response.output_item.added",
                        {{"output_index", index}, {"item", reasoning_item(open_id_, "", "in_progress")}}));
    return;
  }
  open_id_ = responses_id("msg");
  out.push_back(event("response.output_item.added",
                      {{"output_index", index}, {"item", message_item(open_id_, "", "in_progress")}}));
  out.push_back(event("response.content_part.added", {{"item_id", open_id_}, {"output_index", index},
                                                      {"content_index", 0}, {"part", output_text_part("")}}));
}

void ResponseEvents::close(const std::string& status, std::vector<Json>& out) {
  const int64_t index = int64_t(output_.size());
  const Json place = {{"item_id", open_id_}, {"output_index", index}, {"content_index", 0}};
  Json item;
  if (open_ == Open::reasoning) {
    Json done = place;
    done["text"] = open_text_;
    out.push_back(event("response.reasoning_text.done", std::move(done)));
    item = reasoning_item(open_id_, open_text_, status);
  } else if (open_ == Open::message) {
    Json done = place;
    done["text"] = open_text_;
    done["logprobs"] = Json::array();
    out.push_back(event("response.output_text.done", std::move(done)));
    Json part = place;
    part["part"] = output_text_part(open_text_);
    out.push_back(event("response.content_part.done", std::move(part)));
    item = message_item(open_id_, open_text_, status);
  } else {
    return;
  }
  out.push_back(event("response.output_item.done", {{"output_index", index}, {"item", item}}));
  output_.push_back(std::move(item));
  open_ = Open::none;
}

// ReplyStreamer sends a call as two deltas: id and name, then the whole arguments.
void ResponseEvents::call(const Json& d, std::vector<Json>& out) {
  const Json& tc = d["tool_calls"][0];
  const int64_t index = int64_t(output_.size());
  if (tc.contains("id")) {
    close("completed", out);
    call_ = ToolCall{tc["id"].get<std::string>(), tc["function"]["name"].get<std::string>(), ""};
    call_item_ = responses_id("fc");
    out.push_back(event("response.output_item.added",
                        {{"output_index", index}, {"item", function_call_item(call_item_, call_, "in_progress")}}));
    return;
  }
  call_.arguments = tc["function"]["arguments"].get<std::string>();
  out.push_back(event("response.function_call_arguments.delta",
                      {{"item_id", call_item_}, {"output_index", index}, {"delta", call_.arguments}}));
  out.push_back(event("response.function_call_arguments.done", {{"item_id", call_item_}, {"output_index", index},
                                                                {"name", call_.name}, {"arguments", call_.arguments}}));
  Json item = function_call_item(call_item_, call_, "completed");
  out.push_back(event("response.output_item.done", {{"output_index", index}, {"item", item}}));
  output_.push_back(std::move(item));
}

std::vector<Json> ResponseEvents::push(const Json& d) {
  std::vector<Json> out;
  if (d.contains("tool_calls")) {
    call(d, out);
    return out;
  }
  const bool thinking = d.contains("reasoning_content");
  const std::string text = (thinking ? d["reasoning_content"] : d["content"]).get<std::string>();
  if (text.empty()) return out;
  open(thinking ? Open::reasoning : Open::message, out);
  open_text_ += text;
  const char* type = thinking ? "response.reasoning_text.delta" : "response.output_text.delta";
  Json fields = {{"item_id", open_id_}, {"output_index", int64_t(output_.size())}, {"content_index", 0}, {"delta", text}};
  if (!thinking) fields["logprobs"] = Json::array();
  out.push_back(event(type, std::move(fields)));
  return out;
}

std::vector<Json> ResponseEvents::finish(const Completion& c) {
  std::vector<Json> out;
  const bool truncated = c.finish_reason == "length";
  close(truncated ? "incomplete" : "completed", out);
  const char* status = truncated ? "incomplete" : "completed";
  const Json r = response_object(head_, status, output_, &c.turn);
  out.push_back(event(truncated ? "response.incomplete" : "response.completed", {{"response", r}}));
  return out;
}

Json ResponseEvents::error(const std::string& message) {
  return event("error", {{"code", "server_error"}, {"message", message}, {"param", nullptr}});
}

}  // namespace ws::server
