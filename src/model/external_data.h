// External data of initializers (TensorProto.data_location = EXTERNAL): location/offset/length, resolved
// relative to a base folder, with the path rules ONNX Runtime users expect and that hostile files must not
// escape: no absolute path, no '..' component, and the resolved real path (symlinks followed) must stay inside
// the base folder. Files are mapped once and shared by every tensor that lives in them.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/mapped_file.h"
#include "core/status.h"

namespace epctx {

struct ExternalDataRef {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;  // -1: up to the end of the file
};

class ExternalDataResolver {
 public:
  // base_dir: folder the locations are relative to ("" = cannot resolve: every external tensor is an error).
  explicit ExternalDataResolver(std::string base_dir) : base_dir_(std::move(base_dir)) {}

  // Returns a pointer to `bytes_needed` bytes at the reference; the mapping is kept alive by *holder.
  // INVALID_GRAPH naming `what` and the path for unsafe paths, missing files or ranges outside the file.
  Status Resolve(const ExternalDataRef& ref, uint64_t bytes_needed, const std::string& what, const void** data,
                 std::shared_ptr<void>* holder) const;
  const std::string& base_dir() const { return base_dir_; }

 private:
  std::string base_dir_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<MappedFile>> files_;
};

// Checks a location string against the rules above without opening it; returns the resolved absolute path.
StatusOr<std::string> ResolveExternalPath(const std::string& base_dir, const std::string& location,
                                          const std::string& what);

}  // namespace epctx
