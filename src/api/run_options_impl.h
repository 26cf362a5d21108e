// RunOptions::Impl, shared by run_options.cc and Session::Run (api.cc).
#pragma once

#include <atomic>
#include <map>
#include <string>

#include "epctx/epctx.h"

namespace epctx {

struct RunOptions::Impl {
  std::string run_tag;
  int log_severity_level = -1;  // ONNX Runtime's default: the session's level
  int log_verbosity_level = 0;
  std::map<std::string, std::string> entries;
  std::atomic<bool> terminate{false};
};

}  // namespace epctx
