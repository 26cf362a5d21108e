// The one Status type of the runtime (the class is in the public include/epctx/status.h, because CompileModel
// returns it): a code (ONNX Runtime's names) and a message. No exceptions cross the
// library internally; the public C++ wrapper turns a non-OK Status into epctx::Exception once, at the boundary.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "epctx/status.h"
#include "epctx/status_codes.h"

namespace epctx {

// Value or error. Accessing value() of an error is an internal invariant violation (asserts).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

// Builds a message from streamable parts: MakeStatus(ErrorCode::FAIL, "x=", x).
template <typename... Args>
Status MakeStatus(ErrorCode code, const Args&... args);

}  // namespace epctx

#include <sstream>
namespace epctx {
template <typename... Args>
Status MakeStatus(ErrorCode code, const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return Status(code, os.str());
}
}  // namespace epctx

#define EPCTX_CONCAT_INNER(a, b) a##b
#define EPCTX_CONCAT(a, b) EPCTX_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::epctx::Status _st = (expr);              \
    if (!_st.ok()) return _st;                 \
  } while (0)

// RETURN_IF_ERROR that prefixes the propagated message with context (any streamable parts).
#define RETURN_IF_ERROR_CTX(expr, ...)                                                        \
  do {                                                                                        \
    ::epctx::Status _st = (expr);                                                             \
    if (!_st.ok()) return ::epctx::MakeStatus(_st.code(), __VA_ARGS__, ": ", _st.message()); \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(EPCTX_CONCAT(_so_, __LINE__), lhs, expr)

// Returns INVALID_ARGUMENT (or the given code) with a message when cond is false.
#define RETURN_ERROR_IF(cond, code, ...) \
  do {                                   \
    if (cond) return ::epctx::MakeStatus(::epctx::ErrorCode::code, __VA_ARGS__); \
  } while (0)
