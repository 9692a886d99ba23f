// Readers for the value syntaxes tool calls are written in: JSON, Python literals (LFM2's
// pythonic calls, Qwen 3.5's True/False parameters) and Gemma 4's (<|"|>-quoted strings,
// bare keys). Each reads one value at a position and returns where it ended, or npos when
// the text there is not (or not yet: a streamed prefix) a whole value.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

namespace ws::server {

struct ToolCall;

size_t read_json(std::string_view s, size_t pos, nlohmann::ordered_json& out);
size_t read_python_value(std::string_view s, size_t pos, nlohmann::ordered_json& out);
size_t read_gemma_value(std::string_view s, size_t pos, nlohmann::ordered_json& out);
// [name(k=v, ...), ...]: calls with keyword arguments only.
size_t read_python_calls(std::string_view s, size_t pos, std::vector<ToolCall>& out);
// A parameter's text as a value: JSON or a Python literal when the whole text is one, else
// the text as a string.
nlohmann::ordered_json loose_value(std::string_view text);

}  // namespace ws::server
