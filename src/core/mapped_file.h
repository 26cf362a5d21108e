// A read-only memory map of a whole file. The mapping lives as long as any shared_ptr to it (tensors viewing
// mapped weights hold one), so weights are never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace epctx {

class MappedFile {
 public:
  // NO_SUCHFILE when the file does not exist, FAIL for other open/map errors (both name the path).
  static StatusOr<std::shared_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

// Reads a whole file into a string (NO_SUCHFILE / FAIL naming the path).
StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace epctx
