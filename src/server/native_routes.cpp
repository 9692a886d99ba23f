// llama-server's native POST /completion and POST /infill. (Being written: issue 30.)
#include <httplib.h>

#include "server/api_error.h"
#include "server/http_server.h"

namespace ws::server {

void Server::handle_completion(const httplib::Request&, httplib::Response&) {
  throw ApiError(501, "/completion is not implemented yet", "not_supported_error");
}

void Server::handle_infill(const httplib::Request&, httplib::Response&) {
  throw ApiError(501, "/infill is not implemented yet", "not_supported_error");
}

}  // namespace ws::server
