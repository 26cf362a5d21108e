// Where a context model goes (ONNX Runtime's GetValidatedEpContextPath, with its dot-in-folder trap fixed) and
// where an EP's context binary goes beside it.
#pragma once

#include <string>

#include "core/status.h"

namespace epctx {

// explicit_path: ep.context_file_path ("" = derive); model_path: the source model's path ("" when from bytes).
// - explicit path naming a folder (trailing '/', an existing directory, or a file name without extension) →
//   INVALID_ARGUMENT "context_file_path should not point to a folder."
// - derived: <model folder>/<model file name without its last extension>_ctx.onnx (a '.' in a folder name does
//   not matter);
// - both empty → INVALID_ARGUMENT "Both ep_context_path and model_path are empty."
// - the result exists and error_if_exists → FAIL "Failed to generate EP context model since the file '<path>'
//   exists already. Please remove the EP context model if you want to re-generate it."
StatusOr<std::string> ValidatedEpContextPath(const std::string& explicit_path, const std::string& model_path,
                                             bool error_if_exists);

// "<folder of ctx>/<stem of ctx>_<ep short name>.bin" (e.g. m_ctx.onnx + "aotcpu" → m_ctx_aotcpu.bin).
std::string ContextBinaryPath(const std::string& ctx_model_path, const std::string& ep_short_name);

// Folder part of a path ("." when none).
std::string FolderOfPath(const std::string& path);

}  // namespace epctx
