// The bounds a server puts on each client's connections (serve --read-timeout,
// --max-connections, --max-connections-per-client, --max-body-mb); enforced by
// GuardedHttpServer (http_guard.h).
#pragma once
#include <cstddef>

namespace ws::server {

struct ConnectionLimits {
  int read_timeout_s = 5;    // the request head in full; each wait for body bytes; idle keep-alive
  int write_timeout_s = 30;  // each wait for the client to take response bytes
  int max_connections = 256;            // open connections in all; more are refused (503)
  int max_connections_per_client = 64;  // per client address (429); 0: no per-address cap
  size_t max_body_bytes = size_t(64) << 20;  // on the wire, chunked or not; more is 413
};

}  // namespace ws::server
