// libFuzzer target for the OpenAI request path (server/openai_request): the input is an
// HTTP body, parsed as the chat and completion routes parse it (JSON nesting limit first,
// then field validation, data: image URLs, response_format -> grammar). Any input must
// either be accepted or refused with ApiError, which the server answers with a 4xx; any
// other exception would be a 500 and is reported as a crash.
// Built and run by tests/fuzz.sh with ASan + UBSan (use fuzz/openai_request.dict).
#include <string>

#include "server/api_error.h"
#include "server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ws::server;
  const std::string body(reinterpret_cast<const char*>(data), size);
  Json json;
  try {
    json = parse_body(body);
  } catch (const ApiError& e) {
    if (e.status() < 400 || e.status() >= 500) __builtin_trap();
    return 0;
  }
  for (int route = 0; route < 2; ++route) {
    try {
      if (route == 0) {
        const ChatRequest r = parse_chat_request(json, /*allow_local_files=*/false);
        if (!r.messages.is_array()) __builtin_trap();
      } else {
        const CompletionRequest r = parse_completion_request(json);
        (void)r;
      }
    } catch (const ApiError& e) {
      if (e.status() < 400 || e.status() >= 500) __builtin_trap();  // a client error must be a 4xx
    }
  }
  return 0;
}
