#include "server/image_url.h"

#include <fstream>
#include <iterator>

namespace ws::server {

std::vector<uint8_t> base64_decode(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;  // '-' and '_': the URL-safe alphabet
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::vector<uint8_t> out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  bool padding = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      padding = true;
      continue;
    }
    const int v = value(c);
    if (v < 0 || padding) throw vision::ImageError("the data: URL is not valid base64");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t((acc >> bits) & 0xFF));
    }
  }
  if (bits >= 6) throw vision::ImageError("the data: URL is not valid base64 (truncated)");
  return out;
}

std::vector<uint8_t> load_image_url(const std::string& url, bool allow_local_files) {
  if (url.rfind("data:", 0) == 0) {
    const size_t comma = url.find(',');
    if (comma == std::string::npos) throw vision::ImageError("malformed data: URL (no ',')");
    const std::string meta = url.substr(5, comma - 5);
    if (meta.size() < 7 || meta.compare(meta.size() - 7, 7, ";base64") != 0)
      throw vision::ImageError("data: URLs must be base64-encoded (data:image/png;base64,...)");
    return base64_decode(url.substr(comma + 1));
  }
  if (url.rfind("file://", 0) == 0) {
    if (!allow_local_files)
      throw vision::ImageError("file:// image URLs are refused unless the server runs with --allow-local-files");
    const std::string path = url.substr(7);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw vision::ImageError("cannot read image file '" + path + "'");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0)
    throw vision::ImageError("remote image URLs are not fetched; send the image inline as a data: URL");
  throw vision::ImageError("unsupported image URL (use data:image/...;base64,...)");
}

}  // namespace ws::server
