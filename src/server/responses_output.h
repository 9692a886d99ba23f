// Responses API replies: the response object, and the typed Server-Sent Events that build
// it up while the reply streams (response.created ... response.completed), each with its
// sequence_number, as OpenAI sends them and its clients accumulate them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace ws::server {

// What the events and the final object of one response share.
struct ResponseHead {
  std::string id;  // resp_...
  int64_t created_at = 0;
  std::string model;
  Json echo = Json::object();  // request fields the object repeats (ResponsesRequest::echo)
};
ResponseHead make_response_head(const std::string& model, Json echo);

// usage: input/output/total tokens; input_tokens_details.cached_tokens = prompt tokens
// reused from the prefix cache.
Json responses_usage(const TurnResult& turn, bool reasoned);

// The response object. `status`: in_progress, completed or incomplete (the reply hit
// max_output_tokens); `turn` null while in progress (usage null).
Json response_object(const ResponseHead& h, const std::string& status, const Json& output, const TurnResult* turn);

// Output items of a whole reply: reasoning, then the message, then each function call;
// `truncated`: the last one is "incomplete".
Json output_items(const ParsedReply& r, bool truncated);

// Turns a reply's deltas (ReplyStreamer's reasoning_content / content / tool_calls
// objects) into Responses events; each event is a JSON object whose "type" is its SSE name.
class ResponseEvents {
 public:
  explicit ResponseEvents(ResponseHead head) : head_(std::move(head)) {}
  std::vector<Json> start();                    // response.created, response.in_progress
  std::vector<Json> push(const Json& delta);
  // Closes what is open; response.completed, or response.incomplete at the length limit.
  std::vector<Json> finish(const Completion& c);
  Json error(const std::string& message);       // an "error" event

 private:
  enum class Open { none, reasoning, message };
  Json event(const char* type, Json fields);
  void open(Open kind, std::vector<Json>& out);
  void close(const std::string& status, std::vector<Json>& out);
  void call(const Json& d, std::vector<Json>& out);

  ResponseHead head_;
  int64_t seq_ = 0;
  Json output_ = Json::array();  // items done so far
  Open open_ = Open::none;
  std::string open_id_, open_text_;
  ToolCall call_;  // the call whose arguments are awaited
  std::string call_item_;
};

}  // namespace ws::server
