#include "epcontext/compatibility.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <onnx/onnx_pb.h>

#include <climits>

#include "core/mapped_file.h"

namespace epctx {

StatusOr<std::optional<std::string>> CompatibilityInfoFromModelBytes(const void* data, size_t size,
                                                                     const std::string& ep_type) {
  RETURN_ERROR_IF(!data || size == 0 || ep_type.empty(), INVALID_ARGUMENT,
                  "Invalid argument provided to GetCompatibilityInfoFromModelBytes.");
  RETURN_ERROR_IF(size > static_cast<size_t>(INT_MAX), INVALID_ARGUMENT,
                  "Model data size exceeds maximum supported size (2GB). Use GetCompatibilityInfoFromModel with a "
                  "file path instead.");
  const std::string key = "ep_compatibility_info." + ep_type;
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(size));
  std::optional<std::string> found;
  bool saw_graph_or_ir = false;
  for (;;) {
    uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    int field = static_cast<int>(tag >> 3);
    if (field == 14 && (tag & 7) == 2) {  // ModelProto.metadata_props
      uint32_t len;
      RETURN_ERROR_IF(!in.ReadVarint32(&len), INVALID_GRAPH, "model bytes are truncated");
      auto limit = in.PushLimit(static_cast<int>(len));
      onnx::StringStringEntryProto e;
      RETURN_ERROR_IF(!e.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage(), INVALID_GRAPH,
                      "model metadata is corrupted");
      in.PopLimit(limit);
      if (e.key() == key) found = e.value();
      continue;
    }
    saw_graph_or_ir |= field == 7 || field == 1;
    RETURN_ERROR_IF(!google::protobuf::internal::WireFormatLite::SkipField(&in, tag), INVALID_GRAPH,
                    "the data is not an ONNX model (protobuf field ", field, " is malformed)");
  }
  RETURN_ERROR_IF(!in.ConsumedEntireMessage() || !saw_graph_or_ir, INVALID_GRAPH, "the data is not an ONNX model");
  return found;
}

StatusOr<std::optional<std::string>> CompatibilityInfoFromModelFile(const std::string& path, const std::string& ep_type) {
  RETURN_ERROR_IF(path.empty() || ep_type.empty(), INVALID_ARGUMENT,
                  "Invalid argument provided to GetCompatibilityInfoFromModel.");
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> f, MappedFile::Open(path));
  RETURN_ERROR_IF(f->size() == 0, INVALID_GRAPH, "'", path, "' is empty");
  RETURN_ERROR_IF(f->size() > static_cast<uint64_t>(INT_MAX), INVALID_GRAPH, "'", path,
                  "' is larger than the 2 GiB a protobuf model may have");
  auto r = CompatibilityInfoFromModelBytes(f->data(), f->size(), ep_type);
  if (!r.ok()) return r.status().WithContext("'" + path + "'");
  return r;
}

}  // namespace epctx
