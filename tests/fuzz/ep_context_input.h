// The input format of ep_context_fuzz: a list of records from which the harness builds an EPContext model, the
// files beside it and the session options. make_fuzz_seeds encodes real context models into it; the harness
// decodes whatever the fuzzer mutates. A record is: u8 tag, u32 little-endian length, `length` bytes (a length past
// the end of the input takes what is left). Unknown tags are ignored.
//
//   'N' name              starts a new node (domain com.microsoft, op EPContext)
//   'D' domain            domain of the current node
//   'T' op type           op type of the current node (e.g. "Relu" for a CPU node between two EPContext nodes)
//   'I' u8 elem, u8 rank, rank x u8 dim, name      an input of the current node; dim 255 = free dim "N"
//   'Y' u8 elem, u8 rank, rank x u8 dim, name      an output of the current node
//   'A' u8 attr, u8 type, value                     an attribute of the current node: attr indexes kAttrNames (an
//                                                   index past the end names the attribute "unknown_attr"); type is an
//                                                   AttributeProto type (1 FLOAT: f32, 2 INT: i64, 3 STRING: bytes,
//                                                   6 FLOATS, 7 INTS, 8 STRINGS: '\0'-separated)
//   'F' u8 folder, name '\0' bytes                  a file in the model folder (folder 0) or its "sub" (folder 1);
//                                                   names are [A-Za-z0-9._-], not a fixture's name
//   'M' key '\0' value                              model metadata (e.g. ep_compatibility_info.<EP>)
//   'E' u8                                          EPs: 0 example, 1 AotCpu, 2 AotCpu then example
//   'L' u8                                          load: 0 from the model file, 1 from bytes with
//                                                   ep.context_file_path, 2 from bytes without it
//   'C' u8 key, value                               session config entry: key indexes kConfigKeys
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace epctx::fuzz {

inline constexpr const char* kAttrNames[] = {
    "main_context",          "ep_cache_context", "embed_mode", "ep_sdk_version", "onnx_model_filename",
    "hardware_architecture", "partition_name",   "source",     "notes",          "max_size"};
inline constexpr size_t kNumAttrNames = sizeof(kAttrNames) / sizeof(kAttrNames[0]);

// Config keys a fuzz input may set. None of them makes the session write outside its folder.
inline constexpr const char* kConfigKeys[] = {
    "ep.context_embed_mode", "session.disable_model_compile", "session.fail_on_suboptimal_compiled_model",
    "ep.aotcpuexecutionprovider.verify_weights", "ep.context_node_name_prefix"};
inline constexpr size_t kNumConfigKeys = sizeof(kConfigKeys) / sizeof(kConfigKeys[0]);

// Names of the fixtures the harness creates in the model folder; 'F' records may not replace them.
inline constexpr const char* kModelFile = "m_ctx.onnx";
inline constexpr const char* kEscapeLink = "escape.bin";    // symlink to a valid binary outside the folder
inline constexpr const char* kFolderEntry = "folder.bin";  // a directory
inline constexpr const char* kSubFolder = "sub";

inline void PutRecord(std::string* out, char tag, const std::string& payload) {
  out->push_back(tag);
  const uint32_t n = static_cast<uint32_t>(payload.size());
  char len[4];
  std::memcpy(len, &n, 4);  // little-endian hosts only (x86-64)
  out->append(len, 4);
  out->append(payload);
}

}  // namespace epctx::fuzz
