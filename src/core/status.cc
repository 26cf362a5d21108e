#include "core/status.h"

namespace epctx {

const char* ErrorCodeName(ErrorCode code) noexcept {
  switch (code) {
#define EPCTX_CODE(name) \
  case ErrorCode::name:  \
    return #name;
    EPCTX_CODE(OK)
    EPCTX_CODE(FAIL)
    EPCTX_CODE(INVALID_ARGUMENT)
    EPCTX_CODE(NO_SUCHFILE)
    EPCTX_CODE(NO_MODEL)
    EPCTX_CODE(ENGINE_ERROR)
    EPCTX_CODE(RUNTIME_EXCEPTION)
    EPCTX_CODE(INVALID_PROTOBUF)
    EPCTX_CODE(MODEL_LOADED)
    EPCTX_CODE(NOT_IMPLEMENTED)
    EPCTX_CODE(INVALID_GRAPH)
    EPCTX_CODE(EP_FAIL)
    EPCTX_CODE(MODEL_LOAD_CANCELED)
    EPCTX_CODE(MODEL_REQUIRES_COMPILATION)
    EPCTX_CODE(NOT_FOUND)
#undef EPCTX_CODE
  }
  return "UNKNOWN";
}

Status::Status(ErrorCode code, std::string message) {
  if (code != ErrorCode::OK) state_ = std::make_shared<State>(State{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(ErrorCodeName(code())) + ": " + message();
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code(), context + ": " + message());
}

}  // namespace epctx
