// Errors returned to HTTP clients in OpenAI's error-object format:
// {"error": {"message", "type", "param", "code"}} with a matching HTTP status.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace ws::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = "",
           std::string code = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::ordered_json to_json() const { return error_json(what(), type_, param_, code_); }

  // The body OpenAI sends; empty param/code become null as in OpenAI's responses.
  static nlohmann::ordered_json error_json(const std::string& message, const std::string& type, const std::string& param = "",
                                   const std::string& code = "") {
    nlohmann::ordered_json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
    if (!param.empty()) e["param"] = param;
    if (!code.empty()) e["code"] = code;
    return {{"error", e}};
  }

 private:
  int status_;
  std::string type_, param_, code_;
};

// Shorthands for the statuses the API uses.
inline ApiError bad_request(const std::string& message, const std::string& param = "", const std::string& code = "") {
  return ApiError(400, message, "invalid_request_error", param, code);
}

}  // namespace ws::server
