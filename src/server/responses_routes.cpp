// POST /v1/responses: OpenAI's Responses API on the same engine path as chat completions.
// (Being written: issue 30.)
#include <httplib.h>

#include "server/api_error.h"
#include "server/http_server.h"

namespace ws::server {

void Server::handle_responses(const httplib::Request&, httplib::Response&) {
  throw ApiError(501, "/v1/responses is not implemented yet", "not_supported_error");
}

}  // namespace ws::server
