// What the files of src/api share: Value::Impl (a Value holds one runtime IValue; tensors share their bytes) and the
// session config a SessionOptions stands for.
#pragma once

#include "core/tensor.h"
#include "epctx/epctx.h"
#include "session/session.h"

namespace epctx {

struct Value::Impl {
  IValue value;
};

// The options' SessionConfig, with the Env's EP registry when the options have none yet.
SessionConfig ConfigFor(const Env& env, const SessionOptions& options);

}  // namespace epctx
