#include "epcontext/paths.h"

#include <sys/stat.h>

namespace epctx {

namespace {
std::string FileName(const std::string& p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}
bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}
bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
}  // namespace

std::string FolderOfPath(const std::string& path) {
  size_t s = path.find_last_of('/');
  if (s == std::string::npos) return ".";
  return s == 0 ? "/" : path.substr(0, s);
}

StatusOr<std::string> ValidatedEpContextPath(const std::string& explicit_path, const std::string& model_path,
                                             bool error_if_exists) {
  std::string out;
  if (!explicit_path.empty()) {
    std::string name = FileName(explicit_path);
    size_t dot = name.find_last_of('.');
    bool has_ext = dot != std::string::npos && dot != 0 && dot + 1 < name.size();
    RETURN_ERROR_IF(name.empty() || name == "." || name == ".." || !has_ext || IsDir(explicit_path),
                    INVALID_ARGUMENT, "context_file_path should not point to a folder.");
    out = explicit_path;
  } else if (!model_path.empty()) {
    std::string name = FileName(model_path);
    size_t dot = name.find_last_of('.');
    std::string stem = dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
    size_t slash = model_path.find_last_of('/');
    out = (slash == std::string::npos ? std::string() : model_path.substr(0, slash + 1)) + stem + "_ctx.onnx";
  } else {
    return Status(ErrorCode::INVALID_ARGUMENT, "Both ep_context_path and model_path are empty.");
  }
  RETURN_ERROR_IF(error_if_exists && Exists(out), FAIL, "Failed to generate EP context model since the file '", out,
                  "' exists already. Please remove the EP context model if you want to re-generate it.");
  return out;
}

std::string ContextBinaryPath(const std::string& ctx_model_path, const std::string& ep_short_name) {
  std::string name = FileName(ctx_model_path);
  size_t dot = name.find_last_of('.');
  std::string stem = dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
  size_t slash = ctx_model_path.find_last_of('/');
  return (slash == std::string::npos ? std::string() : ctx_model_path.substr(0, slash + 1)) + stem + "_" +
         ep_short_name + ".bin";
}

}  // namespace epctx
