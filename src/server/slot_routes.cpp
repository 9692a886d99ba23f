// llama-server's GET /slots and POST /slots/{id}?action=save|restore|erase. (Being written: issue 30.)
#include <httplib.h>

#include "server/api_error.h"
#include "server/http_server.h"

namespace ws::server {

void Server::handle_slots(const httplib::Request&, httplib::Response&) {
  throw ApiError(501, "/slots is not implemented yet", "not_supported_error");
}

void Server::handle_slot_action(const httplib::Request&, httplib::Response&) {
  throw ApiError(501, "/slots actions are not implemented yet", "not_supported_error");
}

}  // namespace ws::server
