// The chat-specific parts of a request and its reply that tools and reasoning add:
// tool_choice / parallel_tool_calls / chat_template_kwargs / reasoning_format from the
// body, the syntax the reply is parsed with, the forced-call grammar, and the message and
// streamed deltas (reasoning_content, content, tool_calls) built from the parsed reply.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/turn.h"
#include "grammar/grammar.h"
#include "server/tool_calls.h"

namespace ws::server {

enum class ToolChoice { auto_, none, required, named };

// What the template's source says, worked out once at startup.
struct TemplateDialect {
  ToolFormat tools = ToolFormat::none;
  ReasoningMarkers reasoning;
};
TemplateDialect detect_dialect(const std::string& template_source);

struct ChatOptions {
  ToolChoice tool_choice = ToolChoice::auto_;
  std::string function;       // named: the function to call
  bool parallel = false;      // parallel_tool_calls (llama-server's default: false)
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  ReasoningFormat reasoning = ReasoningFormat::auto_;
};

// Templates that write thinking blocks drop them from the history, so the next turn
// diverges right after the last message: mark that end to be checkpointed
// (TurnRequest::keep_message_end). Every chat route calls it on its turn.
void keep_last_message_end(const TemplateDialect& d, TurnRequest& turn);

// `server_reasoning`: --reasoning-format, which a request's reasoning_format overrides.
ChatOptions parse_chat_options(const nlohmann::ordered_json& body, const nlohmann::ordered_json& tools,
                               ReasoningFormat server_reasoning);

// The syntax the reply to `prompt` is parsed with.
ReplySyntax reply_syntax(const TemplateDialect& d, const ChatOptions& o, const nlohmann::ordered_json& tools,
                         const std::string& prompt);

// tool_choice "required" or named: the grammar forcing a call; null otherwise. A request
// that also constrains the reply (response_format, grammar) is a 400.
std::shared_ptr<const grammar::Grammar> forced_call_grammar(const ReplySyntax& syn, const ChatOptions& o,
                                                            const nlohmann::ordered_json& tools, bool constrained);

// The assistant message of a parsed reply: content (null when only calls came), and
// reasoning_content and tool_calls when present.
nlohmann::ordered_json chat_message_json(const ParsedReply& r);

// Turns one choice's text, as it streams, into deltas: reasoning_content and content
// pieces, then each tool call (its id, type and name, then its arguments) once complete.
class ReplyStreamer {
 public:
  explicit ReplyStreamer(ReplySyntax syn) : syn_(std::move(syn)) {}
  std::vector<nlohmann::ordered_json> push(const std::string& text);
  std::vector<nlohmann::ordered_json> finish();
  bool called() const { return calls_sent_ > 0; }

 private:
  std::vector<nlohmann::ordered_json> diff(const ParsedReply& r);
  ReplySyntax syn_;
  std::string text_;
  size_t reasoning_sent_ = 0, content_sent_ = 0, calls_sent_ = 0;
};

}  // namespace ws::server
