// epctx::Status: an error code (ONNX Runtime's OrtErrorCode values) and a message; OK has no message.
// The runtime's one Status type, and what epctx::CompileModel returns (like Ort::Status). Copies are cheap
// (the state is shared and immutable); thread-safe to copy and read.
#pragma once

#include <memory>
#include <string>

#include "epctx/status_codes.h"

namespace epctx {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(ErrorCode code, std::string message);

  static Status OK() { return Status(); }
  bool ok() const { return state_ == nullptr; }
  ErrorCode code() const { return state_ ? state_->code : ErrorCode::OK; }
  const std::string& message() const;
  // "INVALID_ARGUMENT: message" (or "OK").
  std::string ToString() const;
  // Returns a copy whose message is "<context>: <old message>". OK stays OK.
  Status WithContext(const std::string& context) const;
  void IgnoreError() const {}
  // ONNX Runtime's Ort::Status spelling (the public API returns this type from CompileModel).
  bool IsOK() const { return ok(); }
  ErrorCode GetErrorCode() const { return code(); }
  const std::string& GetErrorMessage() const { return message(); }

 private:
  struct State {
    ErrorCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;  // null = OK; shared so copies are cheap
};

}  // namespace epctx
