// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API on the same
// engine path as chat completions. (Being written: issue 30.)
#include <httplib.h>

#include "server/api_error.h"
#include "server/http_server.h"

namespace ws::server {

void Server::handle_messages(const httplib::Request&, httplib::Response&) {
  throw ApiError(501, "/v1/messages is not implemented yet", "not_supported_error");
}

void Server::handle_count_tokens(const httplib::Request&, httplib::Response&) {
  throw ApiError(501, "/v1/messages/count_tokens is not implemented yet", "not_supported_error");
}

}  // namespace ws::server
