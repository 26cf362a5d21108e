// Compiled-model compatibility: the metadata entry ep_compatibility_info.<EP> written at generation, read back
// without parsing the graph (so a multi-GB model costs a scan of its top-level fields), and judged by the EP
// factory before a session partitions.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"

namespace epctx {

// The value of metadata key "ep_compatibility_info.<ep_type>" or nullopt. INVALID_ARGUMENT for empty ep_type or
// empty/oversized data, NO_SUCHFILE for a missing file, INVALID_GRAPH when the bytes are not a model.
StatusOr<std::optional<std::string>> CompatibilityInfoFromModelBytes(const void* data, size_t size,
                                                                     const std::string& ep_type);
StatusOr<std::optional<std::string>> CompatibilityInfoFromModelFile(const std::string& path, const std::string& ep_type);

}  // namespace epctx
