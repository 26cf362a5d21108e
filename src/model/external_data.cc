#include "model/external_data.h"

#include <climits>
#include <cstdlib>
#include <sstream>

namespace epctx {

StatusOr<std::string> ResolveExternalPath(const std::string& base_dir, const std::string& location,
                                          const std::string& what) {
  RETURN_ERROR_IF(base_dir.empty(), INVALID_GRAPH, what, " uses external data '", location,
                  "' but the model was loaded from memory and no folder was given; set "
                  "session.model_external_initializers_file_folder_path");
  RETURN_ERROR_IF(location.empty(), INVALID_GRAPH, what, " has external data with an empty location");
  RETURN_ERROR_IF(location[0] == '/', INVALID_GRAPH, what, " has external data at absolute path '", location,
                  "'; locations must be relative to the model's folder");
  std::stringstream ss(location);
  std::string part;
  while (std::getline(ss, part, '/'))
    RETURN_ERROR_IF(part == "..", INVALID_GRAPH, what, " has external data location '", location,
                    "' containing '..'; locations must stay inside the model's folder");
  char real_base[PATH_MAX];
  RETURN_ERROR_IF(!realpath(base_dir.c_str(), real_base), INVALID_GRAPH, what, ": model folder '", base_dir,
                  "' does not exist");
  std::string joined = base_dir + "/" + location;
  char real_file[PATH_MAX];
  RETURN_ERROR_IF(!realpath(joined.c_str(), real_file), INVALID_GRAPH, what, ": external data file '", joined,
                  "' does not exist");
  std::string rb(real_base), rf(real_file);
  if (rb != "/") rb += "/";
  RETURN_ERROR_IF(rf.compare(0, rb.size(), rb) != 0, INVALID_GRAPH, what, " has external data location '", location,
                  "' that resolves to '", rf, "', outside the model's folder '", real_base, "'");
  return rf;
}

Status ExternalDataResolver::Resolve(const ExternalDataRef& ref, uint64_t bytes_needed, const std::string& what,
                                     const void** data, std::shared_ptr<void>* holder) const {
  ASSIGN_OR_RETURN(std::string path, ResolveExternalPath(base_dir_, ref.location, what));
  std::shared_ptr<MappedFile> file;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    if (it != files_.end()) {
      file = it->second;
    } else {
      auto opened = MappedFile::Open(path);
      if (!opened.ok()) return Status(ErrorCode::INVALID_GRAPH, what + ": " + opened.status().message());
      file = opened.value();
      files_[path] = file;
    }
  }
  uint64_t length = ref.length < 0 ? (ref.offset <= file->size() ? file->size() - ref.offset : 0)
                                   : static_cast<uint64_t>(ref.length);
  RETURN_ERROR_IF(ref.offset > file->size() || length > file->size() - ref.offset, INVALID_GRAPH, what,
                  ": external data range [", ref.offset, ", +", length, ") lies outside '", ref.location, "' (",
                  file->size(), " bytes)");
  RETURN_ERROR_IF(length != bytes_needed, INVALID_GRAPH, what, ": external data length ", length,
                  " does not match the tensor's size of ", bytes_needed, " bytes");
  *data = file->data() + ref.offset;
  *holder = file;
  return Status::OK();
}

}  // namespace epctx
