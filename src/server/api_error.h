// Errors returned to HTTP clients in OpenAI's error-object format:
// {"error": {"message", "type", "param", "code"}} with a matching HTTP status. `type`
// takes llama-server's names where it has one (authentication_error, not_found_error,
// exceed_context_size_error, not_supported_error, unavailable_error), so clients written
// for either server recognise the error.
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
  const std::string& type() const { return type_; }
  nlohmann::ordered_json to_json() const {
    nlohmann::ordered_json j = error_json(what(), type_, param_, code_);
    for (const auto& [k, v] : extra_.items()) j["error"][k] = v;
    return j;
  }
  // Fields beside message/type/param/code (llama-server's n_prompt_tokens and n_ctx).
  ApiError& with(const std::string& key, nlohmann::ordered_json value) {
    extra_[key] = std::move(value);
    return *this;
  }

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
  nlohmann::ordered_json extra_ = nlohmann::ordered_json::object();
};

// Shorthands for the statuses the API uses.
inline ApiError bad_request(const std::string& message, const std::string& param = "", const std::string& code = "") {
  return ApiError(400, message, "invalid_request_error", param, code);
}

// The prompt does not fit the context: llama-server's exceed_context_size_error with its
// counts (`n_prompt_tokens` a lower bound when counted before tokenizing), and OpenAI's code.
inline ApiError context_exceeded(const std::string& message, const std::string& param, int64_t n_prompt_tokens,
                                 int32_t n_ctx) {
  ApiError e(400, message, "exceed_context_size_error", param, "context_length_exceeded");
  e.with("n_prompt_tokens", n_prompt_tokens).with("n_ctx", n_ctx);
  return e;
}

}  // namespace ws::server
