// epctx::RunOptions (ONNX Runtime's Ort::RunOptions): stored values and the terminate flag Session::Run hands to
// the execution plan (session/execution_plan.h, RunTerminateScope).
#include <atomic>
#include <map>
#include <string>

#include "core/status.h"
#include "epctx/epctx.h"
#include "api/run_options_impl.h"

namespace epctx {

namespace {
[[noreturn]] void ThrowInvalid(const std::string& message) { throw Exception(ErrorCode::INVALID_ARGUMENT, message); }
}  // namespace

RunOptions::RunOptions() : impl_(new Impl()) {}
RunOptions::~RunOptions() = default;
RunOptions::RunOptions(RunOptions&&) noexcept = default;
RunOptions& RunOptions::operator=(RunOptions&&) noexcept = default;

RunOptions& RunOptions::SetRunLogVerbosityLevel(int level) {
  if (level < 0) ThrowInvalid("run log verbosity level " + std::to_string(level) + " is negative");
  impl_->log_verbosity_level = level;
  return *this;
}
int RunOptions::GetRunLogVerbosityLevel() const { return impl_->log_verbosity_level; }
RunOptions& RunOptions::SetRunLogSeverityLevel(int level) {
  if (level < -1 || level > 4)
    ThrowInvalid("run log severity level " + std::to_string(level) +
                 " is not one of -1 (the session's), 0 (verbose), 1 (info), 2 (warning), 3 (error), 4 (fatal)");
  impl_->log_severity_level = level;
  return *this;
}
int RunOptions::GetRunLogSeverityLevel() const { return impl_->log_severity_level; }
RunOptions& RunOptions::SetRunTag(const char* run_tag) {
  impl_->run_tag = run_tag ? run_tag : "";
  return *this;
}
const char* RunOptions::GetRunTag() const { return impl_->run_tag.c_str(); }
RunOptions& RunOptions::AddConfigEntry(const char* key, const char* value) {
  if (!key || !*key) ThrowInvalid("run config entry key is empty");
  if (!value) ThrowInvalid(std::string("run config entry '") + key + "' has a null value");
  impl_->entries[key] = value;
  return *this;
}
const char* RunOptions::GetConfigEntry(const char* key) const {
  if (!key) return nullptr;
  auto it = impl_->entries.find(key);
  return it == impl_->entries.end() ? nullptr : it->second.c_str();
}
RunOptions& RunOptions::SetTerminate() {
  impl_->terminate.store(true);
  return *this;
}
RunOptions& RunOptions::UnsetTerminate() {
  impl_->terminate.store(false);
  return *this;
}
bool RunOptions::GetTerminate() const { return impl_->terminate.load(); }

}  // namespace epctx
