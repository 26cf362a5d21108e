// Weight sharing across sessions (ep.share_ep_contexts=1), the EP's two process-wide workspaces.
//
// Generation (ep.context_enable=1): the sessions of a group compile into one context binary. The first session fixes
// its path ("<first ctx model folder>/<first model stem>_aotcpu.bin"); each session stages its graphs and commits
// them when its session was created successfully; the last one (ep.stop_share_ep_contexts=1) writes the binary with
// every graph and clears the group. Equal weights are stored once: identical packed bytes (hash, then byte
// comparison) are referenced, not copied, and packing follows the layout an earlier graph chose for the same source
// weight. A session that fails aborts the group, so the next session starts a new one.
//
// Inference: the first session maps a binary, takes the graphs its EPContext nodes name and leaves the others in the
// workspace; a later session whose graphs are all there takes them without opening the file. A graph is handed out
// once; the mapping lives as long as any session or the workspace uses it.
#ifndef EPCTX_PROVIDERS_AOTCPU_BINARY_SHARE_H_
#define EPCTX_PROVIDERS_AOTCPU_BINARY_SHARE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "providers/aotcpu/binary/context_binary.h"

namespace epctx {
namespace aotcpu {

class GenerationGroup {
 public:
  static GenerationGroup& Instance();

  // Joins the current group or starts one (binary at `binary_path_if_new`). *started = true for a new group.
  // Returns the group's binary path.
  std::string Join(const std::string& binary_path_if_new, bool* started);
  // Adds a session's graphs and tensors (staged; visible to later sessions once committed). Tensors whose bytes equal
  // one already in the group are dropped and the graph refers to the existing tensor by name. Fails on a graph name
  // the group already has.
  CheckResult Stage(uint64_t session, std::vector<GraphInput> graphs, std::vector<TensorInput> tensors);
  void Commit(uint64_t session);
  // Everything committed plus `session`'s staged graphs, as binary contents (compat filled by the caller).
  ContextBinaryContents Contents(uint64_t session) const;
  // Ends the group (after the last session, or when a session of it fails).
  void Clear();
  bool Active() const;

  // Layout registry (CompileOptions::find_layout / record_layout).
  bool FindLayout(uint64_t source_hash, dnnl::memory::desc* out) const;
  void RecordLayout(uint64_t source_hash, const dnnl::memory::desc& layout);

  // Bytes of tensors dropped because the group already had them (for reports and tests).
  uint64_t deduplicated_bytes() const;

 private:
  struct Staged {
    std::vector<GraphInput> graphs;
    std::vector<TensorInput> tensors;
  };
  mutable std::mutex mu_;
  std::string binary_path_;
  std::vector<GraphInput> graphs_;
  std::vector<TensorInput> tensors_;
  std::multimap<uint64_t, size_t> by_hash_;  // content hash -> index into tensors_ or staged (encoded)
  std::map<uint64_t, Staged> staged_;
  std::map<uint64_t, dnnl::memory::desc> layouts_;
  uint64_t deduplicated_ = 0;
};

// A mapped, validated binary shared by the sessions using its graphs.
struct SharedBinary {
  std::shared_ptr<const void> keep;  // owns the bytes
  std::shared_ptr<ContextBinaryReader> reader;
  std::string from;  // path, for messages
};

class InferenceWorkspace {
 public:
  static InferenceWorkspace& Instance();
  // Takes every named graph if all are present (removing them); false (taking nothing) otherwise.
  bool TakeAll(const std::vector<std::string>& names, std::vector<std::shared_ptr<SharedBinary>>* out);
  // Offers the graphs of `binary` that `used` does not name; names already present are left as they are.
  void Offer(const std::shared_ptr<SharedBinary>& binary, const std::vector<std::string>& used);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<SharedBinary>> graphs_;
};

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_BINARY_SHARE_H_
