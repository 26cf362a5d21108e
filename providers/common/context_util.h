// Plugin-side EPContext helpers shared by the plugin EPs in this tree (ExampleExecutionProvider, AotCpu): paths of
// context binaries, atomic writes, EPContext attribute readers, the path rules for ep_cache_context, EPContext node
// creation and read-only file mapping.
//
// Written only against <epctx/ep_api.h> and libc, so it can live inside a plugin .so (static library
// epctx_plugin_common, position-independent, hidden visibility). Nothing here keeps state between calls; every
// function is reentrant and thread-safe. Functions taking `const EpctxApi* api` return statuses created with it
// (NULL = OK; ownership to the caller). `ep_name` is the EP's name (e.g. "ExampleExecutionProvider"): it prefixes
// every message so a user sees which plugin failed.
#ifndef EPCTX_PROVIDERS_COMMON_CONTEXT_UTIL_H_
#define EPCTX_PROVIDERS_COMMON_CONTEXT_UTIL_H_

#include <epctx/ep_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace epctx {
namespace plugin {

// ---- paths (pure string functions; '/' separators) ----

// "a/b/c.onnx" -> "a/b"; "/c.onnx" -> "/"; "c.onnx" -> "" (no folder part).
std::string FolderOf(const std::string& path);
// "a/b/c.onnx" -> "c.onnx".
std::string FileNameOf(const std::string& path);
// JoinPath("", n) = n; JoinPath("a", n) = "a/n"; JoinPath("a/", n) = "a/n".
std::string JoinPath(const std::string& folder, const std::string& name);
// strerror(err) as a string.
std::string ErrnoText(int err);

// The context binary beside a context model: "<folder>/<file name without its last extension><suffix>", e.g.
// ContextBinaryPath("out/m_ctx.onnx", "_example.bin") = "out/m_ctx_example.bin". A name without an extension (or
// a dot file such as ".onnx") keeps its whole name as the stem.
std::string ContextBinaryPath(const std::string& ctx_model_path, const std::string& suffix);

// ---- statuses ----

// `code` "<ep_name>: <message>".
EpctxStatus* EpError(const EpctxApi* api, const char* ep_name, EpctxErrorCode code, const std::string& message);
// INVALID_GRAPH "Failed to load from EpContext model. <ep_name>: <message>", ONNX Runtime's wording for every
// failure to load an EPContext node.
EpctxStatus* LoadError(const EpctxApi* api, const char* ep_name, const std::string& message);
inline constexpr const char* kLoadErrorPrefix = "Failed to load from EpContext model. ";

// ---- writing ----

// Removes the temporaries ".<file name of path>.tmp.<pid>.<n>.<microseconds>" that WriteFileAtomically left beside
// `path` in a process that died mid-write, i.e. whose pid is no running process (kill(pid, 0) fails with ESRCH);
// this process's and live processes' files are kept. Best effort; returns the number removed.
int RemoveStaleBinaryTemporaries(const std::string& path);

// Writes `size` bytes at `data` to `path` through a temporary file in the same folder (O_EXCL, fsync, rename, then
// a best-effort fsync of the folder), so `path` is either untouched or complete; the temporary file is removed on
// any failure. Before writing, temporaries of `path` that a killed writer left (RemoveStaleBinaryTemporaries) are
// removed. Errors: EP_FAIL "<ep_name>: failed to write the context binary '<path>': <step>: <strerror>".
EpctxStatus* WriteFileAtomically(const EpctxApi* api, const char* ep_name, const std::string& path, const void* data,
                                 size_t size);
inline EpctxStatus* WriteFileAtomically(const EpctxApi* api, const char* ep_name, const std::string& path,
                                        const std::string& bytes) {
  return WriteFileAtomically(api, ep_name, path, bytes.data(), bytes.size());
}

// ---- EPContext nodes ----

// True for op EPContext in domain com.microsoft.
bool IsEpContextNode(const EpctxApi* api, const EpctxNode* node);
// True for an EPContext node whose `source` attribute equals one of `sources`, ignoring ASCII case (ONNX Runtime
// EPs accept their EP name and a short name, e.g. {"ExampleExecutionProvider", "example"}). A node without a
// string `source` is nobody's.
bool IsEpContextNodeFrom(const EpctxApi* api, const EpctxNode* node, const std::vector<std::string>& sources);

// Attribute readers. Absent: *value = default_value (IntAttr) or *present = false (StringAttr), OK. Present with
// another type: LoadError "node '<node>': attribute <name> is not an integer" / "... is not a string".
// IntAttr also requires 0 or 1 (every int attribute the EPs read is a flag: main_context, embed_mode):
// "node '<node>': attribute <name> is <v>; it must be 0 or 1".
EpctxStatus* IntAttr(const EpctxApi* api, const char* ep_name, const EpctxNode* node, const char* name,
                     int64_t default_value, int64_t* value);
EpctxStatus* StringAttr(const EpctxApi* api, const char* ep_name, const EpctxNode* node, const char* name,
                        bool* present, std::string* value);

// The attributes of an EPContext node an EP makes in Compile. Empty optional strings are left out.
struct EpContextNodeSpec {
  std::string name;  // node name; also its partition_name
  int64_t main_context = 1;
  int64_t embed_mode = 1;
  bool has_cache = true;  // false: no ep_cache_context (a main_context=0 node that finds its graph by name)
  std::string cache;      // ep_cache_context: the payload (embed 1) or the binary's path relative to the model (0)
  std::string source;     // the EP's name, matched by the loader
  std::string sdk_version;            // ep_sdk_version (optional)
  std::string hardware_architecture;  // optional, e.g. the target ISA
  std::string notes;                  // optional
  std::vector<std::string> inputs, outputs;  // the fused node's input and output names, unchanged
};

// Makes the node with EpctxApi::CreateNode. Attribute order: main_context, embed_mode, source, ep_sdk_version,
// partition_name, ep_cache_context, hardware_architecture, notes. *node is owned by the caller (hand it to the
// runtime through Compile's ep_context_nodes). Fails with the API's status; nothing leaks on failure.
EpctxStatus* MakeEpContextNode(const EpctxApi* api, const EpContextNodeSpec& spec, EpctxNode** node);

// ---- loading: where an embed_mode=0 node's file is ----

// The folder a context binary of `graph` is relative to: the model's folder ("." for a bare file name), or for a
// model loaded from bytes the folder of `context_file_path` (ep.context_file_path; that path itself when it names
// an existing folder). false when the model came from bytes and `context_file_path` is empty.
bool ContextFolder(const EpctxApi* api, const EpctxGraph* graph, const std::string& context_file_path,
                   std::string* folder);

// Applies every rule for the file named by ep_cache_context (`relative`) of node `node_name`, in this order; each
// failure is a LoadError "node '<node>': ..." that names the file:
//   empty; absolute; a '..' component; no folder to resolve against (model from bytes, no ep.context_file_path);
//   folder not accessible; file missing ("... does not exist") or not accessible; resolving (symlinks followed) to
//   outside the model's folder; not a regular file.
// On success *path = "<folder>/<relative>" (for messages and reports) and *real_path = its realpath (open this one:
// it is the file that was checked). Both are set only on success, except *path, which is set once the folder is
// known.
EpctxStatus* ResolveContextBinary(const EpctxApi* api, const char* ep_name, const EpctxGraph* graph,
                                  const std::string& node_name, const std::string& relative,
                                  const std::string& context_file_path, std::string* path, std::string* real_path);

// ---- read-only mapping ----

// A read-only, private mapping of a whole file; munmap in the destructor. Move-only. data() is page-aligned.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const void* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void Reset();  // unmaps

 private:
  friend bool MapFile(const std::string& path, MappedFile* out, std::string* why, bool will_need);
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Maps `path` read-only (PROT_READ, MAP_PRIVATE); the file descriptor is closed before returning. `will_need`
// adds madvise(MADV_WILLNEED) (read-ahead; its failure is ignored). A file of 2 MiB or more is advised
// MADV_HUGEPAGE (2 MiB pages where the kernel and the page cache allow; ignored otherwise). On failure returns false, leaves *out
// untouched and sets *why to one sentence naming the path: "cannot open '<p>': <strerror>", "'<p>' is not a
// regular file", "'<p>' is empty" (a zero-byte file cannot be mapped), "'<p>' is too large to map (<n> bytes)",
// "cannot map '<p>' (<n> bytes): <strerror>".
bool MapFile(const std::string& path, MappedFile* out, std::string* why, bool will_need = false);

}  // namespace plugin
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_COMMON_CONTEXT_UTIL_H_
