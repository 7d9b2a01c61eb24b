// serve/api_error.h — a request the server refuses, as the OpenAI error object and HTTP status.
//
// Every client mistake becomes a 4xx with {"error": {"message", "type", "param", "code"}}, which
// the official SDKs turn into their typed exceptions (BadRequestError, NotFoundError, ...). 5xx
// is kept for the server's own failures and for "busy" (503), because SDKs retry 5xx.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace toy::serve {

struct ApiError : std::runtime_error {
  int status;         // HTTP status: 400, 401, 404, 405, 413, 503, ...
  std::string type;   // "invalid_request_error", "not_found_error", "server_error", ...
  std::string param;  // the offending request field, "" when none
  std::string code;   // machine-readable: "context_length_exceeded", "model_not_found", ...

  ApiError(int status, std::string message, std::string param = "", std::string code = "", std::string type = "")
      : std::runtime_error(std::move(message)),
        status(status),
        type(type.empty() ? default_type(status) : std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}

  static std::string default_type(int status) {
    switch (status) {
      case 401:
        return "authentication_error";
      case 404:
        return "not_found_error";
      case 503:
        return "server_busy";
      default:
        return status >= 500 ? "server_error" : "invalid_request_error";
    }
  }

  nlohmann::ordered_json body() const {
    using json = nlohmann::ordered_json;
    return {{"error",
             {{"message", what()},
              {"type", type},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", code.empty() ? json(nullptr) : json(code)}}}};
  }
};

// A 400 naming the field: bad_request("temperature", "must be a number between 0 and 2").
inline ApiError bad_request(const std::string& param, const std::string& message, const std::string& code = "") {
  return ApiError(400, "'" + param + "': " + message, param, code.empty() ? "invalid_value" : code);
}

}  // namespace toy::serve
