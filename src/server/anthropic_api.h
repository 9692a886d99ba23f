// Anthropic's Messages API as a translation onto the chat-completions path: a /v1/messages
// body becomes the OpenAI chat body the existing parsers validate (so rendering, tool
// grammars and prefix reuse are the same as /v1/chat/completions), and a parsed reply
// becomes Anthropic's message object or its stream of named SSE events.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/tool_calls.h"

namespace ws::server {

class ApiError;

// The OpenAI chat body of an Anthropic Messages body. Shape errors are ApiError 400 naming
// the Anthropic field ("messages[2].content[0].tool_use_id"). `count_tokens`: the body of
// /v1/messages/count_tokens, which has no max_tokens.
nlohmann::ordered_json anthropic_to_chat_body(const nlohmann::ordered_json& body, bool count_tokens);

// Anthropic's error envelope: {"type": "error", "error": {"type", "message"}}, the error
// type chosen by the HTTP status as Anthropic's API names them.
nlohmann::ordered_json anthropic_error_json(const ApiError& e);

// Why generation ended, in Anthropic's words, and the stop sequence that ended it (if any).
struct StopInfo {
  std::string reason;                    // end_turn | max_tokens | stop_sequence | tool_use
  std::optional<std::string> sequence;   // the matched stop sequence
};
// `text`: the reply as emitted (stop string excluded); `generated`: its tokens, decoded again
// (with control-token text when `special`) to see which stop string followed the text.
StopInfo anthropic_stop(const Completion& c, bool called, const std::vector<std::string>& stop,
                        const Tokenizer& tok, bool special);

// usage: input_tokens counts only the prompt tokens computed (Anthropic's meaning: cache
// reads are reported apart), cache_read_input_tokens the ones reused from the prefix cache.
nlohmann::ordered_json anthropic_usage_json(const TurnResult& turn);

// The non-streaming message: thinking, text and tool_use blocks of `reply`.
nlohmann::ordered_json anthropic_message_json(const std::string& id, const std::string& model, const ParsedReply& reply,
                                              const StopInfo& stop, const TurnResult& turn);

// One server-sent event: `event: NAME` and its JSON data.
struct SseEvent {
  std::string name;
  nlohmann::ordered_json data;
  std::string wire() const;  // "event: NAME\ndata: JSON\n\n"
};

SseEvent message_start_event(const std::string& id, const std::string& model, int32_t prompt_tokens);
// message_delta (stop_reason, stop_sequence, the final usage) and message_stop.
std::vector<SseEvent> message_end_events(const StopInfo& stop, const TurnResult& turn);

// Turns the chat deltas ReplyStreamer makes ({reasoning_content}, {content}, {tool_calls})
// into content blocks: one open at a time, each opened with content_block_start, grown with
// thinking_delta / text_delta / input_json_delta and closed with content_block_stop before
// the next one starts, indices counting up from 0.
class AnthropicBlocks {
 public:
  std::vector<SseEvent> push(const nlohmann::ordered_json& delta);
  std::vector<SseEvent> close();  // closes the open block, if any
  bool called() const { return called_; }

 private:
  enum class Kind { none, thinking, text, tool };
  void open(Kind kind, nlohmann::ordered_json block, std::vector<SseEvent>& out);
  SseEvent delta_event(nlohmann::ordered_json delta) const;
  Kind open_ = Kind::none;
  int index_ = -1;
  bool called_ = false;
};

}  // namespace ws::server
