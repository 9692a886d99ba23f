// Image sources of OpenAI content parts ({"type": "image_url", "image_url": {"url": ...}}):
// data: URLs (base64), file:// only when local files are allowed, nothing remote (the
// server never fetches from the network).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vision/image.h"

namespace ws::server {

// The encoded image bytes behind `url`. Throws vision::ImageError (-> HTTP 400) with a clear
// message for remote URLs, file:// without `allow_local_files`, unreadable files and
// malformed data: URLs. The bytes are not decoded here (decode_image does that).
std::vector<uint8_t> load_image_url(const std::string& url, bool allow_local_files);

// Standard base64 (RFC 4648, padding optional, whitespace ignored); throws vision::ImageError.
std::vector<uint8_t> base64_decode(const std::string& text);

}  // namespace ws::server
