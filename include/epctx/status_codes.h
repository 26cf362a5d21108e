// Status codes shared by the public C++ API and the runtime. Values equal ONNX Runtime's OrtErrorCode so that
// codes printed by epctx and by ONNX Runtime mean the same thing.
#pragma once

namespace epctx {

enum class ErrorCode : int {
  OK = 0,
  FAIL = 1,
  INVALID_ARGUMENT = 2,
  NO_SUCHFILE = 3,
  NO_MODEL = 4,
  ENGINE_ERROR = 5,
  RUNTIME_EXCEPTION = 6,
  INVALID_PROTOBUF = 7,
  MODEL_LOADED = 8,
  NOT_IMPLEMENTED = 9,
  INVALID_GRAPH = 10,
  EP_FAIL = 11,
  MODEL_LOAD_CANCELED = 12,
  MODEL_REQUIRES_COMPILATION = 13,
  NOT_FOUND = 14,
};

// The canonical upper-case name ("INVALID_ARGUMENT"); "UNKNOWN" for values outside the table.
const char* ErrorCodeName(ErrorCode code) noexcept;

}  // namespace epctx
