// OpenAI's Responses API on top of the chat-completions path: a Responses request body
// becomes the equivalent /v1/chat/completions body (so parse_chat_request and the
// template render it exactly as a chat turn, and a conversation's turns share their
// prefix with chat turns), and a parsed reply becomes Responses output items.
// Errors name the Responses field ("input[2].call_id", "text.format.schema").
#pragma once
#include <memory>
#include <string>

#include "grammar/grammar.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace ws::server {

struct ResponsesRequest {
  Json chat;  // the equivalent chat-completions body
  // text.format (json_object / json_schema), compiled; null: plain text.
  std::shared_ptr<const grammar::Grammar> format_grammar;
  // What the response object echoes back (instructions, tools, tool_choice, text, ...).
  Json echo = Json::object();
};

// Validates a Responses body and translates it. previous_response_id, conversation,
// background and item_reference inputs need stored responses, which this server does not
// keep (nor does llama-server): each is a 400 naming the field.
ResponsesRequest parse_responses_request(const Json& body);

// Output items in the shape OpenAI sends them. `status`: "in_progress", "completed" or
// "incomplete".
Json reasoning_item(const std::string& id, const std::string& text, const std::string& status);
Json message_item(const std::string& id, const std::string& text, const std::string& status);
Json function_call_item(const std::string& id, const ToolCall& call, const std::string& status);

// A fresh id with OpenAI's prefix for its kind ("resp", "msg", "rs", "fc").
std::string responses_id(const char* prefix);

}  // namespace ws::server
