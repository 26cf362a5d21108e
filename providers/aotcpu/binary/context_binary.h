// The AotCpu context binary: the file an AotCpuExecutionProvider writes at compile time and maps at load time.
// The byte layout is specified in docs/context-binary-format.md; this header is the in-process contract.
//
// Depends only on the C++ standard library and xxhash, so it can live inside the plugin (which must not use the
// runtime's Status) and inside the fuzz target.
//
// Files on disk are hostile: nothing is handed out before ValidateContextBinary has checked every size, offset,
// alignment, checksum and cross-reference of the whole file. ContextBinaryReader::Open runs that validation itself.
//
// Thread safety: all functions are reentrant; a ContextBinaryReader is immutable after Open and may be shared
// between threads as long as the bytes it views stay mapped and unmodified.
#ifndef EPCTX_PROVIDERS_AOTCPU_BINARY_CONTEXT_BINARY_H_
#define EPCTX_PROVIDERS_AOTCPU_BINARY_CONTEXT_BINARY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "providers/aotcpu/check_result.h"

namespace epctx {
namespace aotcpu {

// Format version this code writes. Readers refuse any other major and accept any minor.
inline constexpr uint16_t kContextBinaryMajor = 1;
inline constexpr uint16_t kContextBinaryMinor = 0;
inline constexpr char kContextBinaryMagic[8] = {'E', 'P', 'C', 'T', 'X', 'A', 'O', 'T'};

// Limits the validator enforces (a file beyond them is refused, not truncated).
inline constexpr uint32_t kMaxSections = 64;
inline constexpr uint32_t kMaxTensorRank = 8;
inline constexpr uint64_t kFileAlignment = 4096;     // file size and WEIGHTS section offset
inline constexpr uint64_t kTensorAlignment = 64;     // every tensor's offset inside WEIGHTS

// Section types. Values are part of the format; unknown values are skipped by readers.
enum class SectionType : uint32_t { kCompat = 1, kGraphs = 2, kTensors = 3, kWeights = 4 };

// Name of a section type for messages ("COMPAT", ..., "UNKNOWN").
const char* SectionTypeName(uint32_t type);

// Element size in bytes of an ONNX TensorProto data type code, or 0 if the format does not carry that type.
size_t DtypeSize(uint32_t dtype);

// The compatibility block. A loader compares it against the running process and refuses on mismatch.
struct CompatInfo {
  std::string epctx_version;
  std::string onednn_version;
  std::string isa;                                          // e.g. "avx512_core"
  std::vector<std::pair<std::string, std::string>> options;  // layout-affecting options, stored as key=value lines
};

// --- Writing -------------------------------------------------------------------------------------------------

struct TensorInput {
  std::string name;           // only its hash is stored
  std::string bytes;          // raw contents; length must equal product(dims) * DtypeSize(dtype)
  uint32_t dtype = 1;         // ONNX TensorProto code
  std::vector<uint64_t> dims; // rank <= kMaxTensorRank
  uint32_t layout = 0;        // 0 = plain row-major; other values are opaque layout tags owned by the compiler
};

struct GraphInput {
  std::string name;
  std::vector<std::string> tensor_names;  // tensors this graph uses; each must name an entry of `tensors`
  std::string records;                    // opaque op records (the compiler's business)
};

struct ContextBinaryContents {
  CompatInfo compat;
  std::vector<GraphInput> graphs;
  std::vector<TensorInput> tensors;
};

// Serializes `in` into `*out` (replacing its contents). Identical tensor bytes (same XXH3-64 and confirmed equal
// byte-for-byte) are stored once in WEIGHTS; every input tensor still gets its own table entry, in input order.
// A graph naming a tensor that is not in `in.tensors` references the first tensor of that name; if none, fails.
// Fails (without touching *out's validity guarantees) on bad dims/dtype/length or unknown tensor names.
CheckResult WriteContextBinary(const ContextBinaryContents& in, std::string* out);

// --- Reading -------------------------------------------------------------------------------------------------

struct TensorView {
  uint64_t name_hash = 0;
  uint64_t content_hash = 0;
  uint32_t dtype = 0;
  uint32_t layout = 0;
  std::vector<uint64_t> dims;
  const unsigned char* data = nullptr;  // points into the validated bytes; 64-byte aligned relative to file start
  uint64_t length = 0;
};

struct GraphView {
  std::string_view name;
  std::vector<uint32_t> tensor_indices;  // indices into ContextBinaryReader::tensors(), all checked < tensors().size()
  std::string_view records;
};

// Checks `size` bytes at `data` completely. Never reads outside [data, data + size), never crashes or allocates
// more than O(size) on any input. `data` may be null only when size is 0.
CheckResult ValidateContextBinary(const void* data, size_t size);

// A validated view of a context binary. Does not own the bytes: the caller keeps them alive (typically an mmap).
class ContextBinaryReader {
 public:
  // Validates, then indexes. On failure the reader stays empty and the result carries the reason.
  // Full validation (the default) checks every section checksum and every tensor's content hash, one thread.
  // Load mode (full_validation=false, what the EP uses) checks the same structure and every section checksum except
  // WEIGHTS, whose bytes are instead verified through the tensors' content hashes, each distinct range once, spread
  // over the cores: every weight byte a graph can reach is still checked before use, and read once, not twice.
  // verify_weights=false (load mode only) skips the weights' content hashes: for binaries whose storage is trusted.
  CheckResult Open(const void* data, size_t size, bool full_validation = true, bool verify_weights = true);

  uint16_t major() const { return major_; }
  uint16_t minor() const { return minor_; }
  const CompatInfo& compat() const { return compat_; }
  const std::vector<GraphView>& graphs() const { return graphs_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // First tensor whose name hashes like `name`, or nullptr.
  const TensorView* FindTensor(std::string_view name) const;

 private:
  friend CheckResult ParseContextBinary(const void*, size_t, ContextBinaryReader*, bool, bool);
  uint16_t major_ = 0, minor_ = 0;
  CompatInfo compat_;
  std::vector<GraphView> graphs_;
  std::vector<TensorView> tensors_;
};

// The weights' content-hash check of load mode, split off so that the caller can work while it runs:
// Open(data, size, /*full_validation=*/false, /*verify_weights=*/false) checks everything else, Start hashes the
// weights on background threads, and Finish joins that work on the calling thread and returns the verdict. Between
// the two the caller may use everything but the weight bytes (AotCpuExecutionProvider builds its oneDNN primitives,
// which only take pointers); nothing may read a weight byte before Finish returned ok.
//
// Each distinct (data, length) range is hashed once, largest first; the verdict is the same as Open's with
// verify_weights=true (same message, "tensor <index> [length <bytes>] content hash mismatch"; with several bad
// tensors, any one of them). Thread safety: one object is used by one thread; the hashing threads it starts only
// read the tensors' bytes.
class WeightVerification {
 public:
  WeightVerification();
  // Stops the background threads early and waits for them when Finish was not called (the verdict is dropped).
  ~WeightVerification();
  WeightVerification(const WeightVerification&) = delete;
  WeightVerification& operator=(const WeightVerification&) = delete;

  // Starts checking `tensors` (as ContextBinaryReader::tensors(); copied, but the bytes they point at must stay
  // mapped until Finish returns) on `background_threads` new threads (fewer if the system refuses to start them;
  // 0: all the work waits for Finish). Starting again drops an unfinished check.
  void Start(const std::vector<TensorView>& tensors, unsigned background_threads);
  // Hashes what is left on the calling thread, waits for the background threads and returns the verdict; again
  // returns the same verdict. Ok when nothing was started.
  CheckResult Finish();

  // Background threads for checking `tensors` while the calling thread works too: the hardware threads minus one
  // (at most 7), or 0 below 8 MiB of weights, where starting a thread costs more than it saves.
  static unsigned DefaultBackgroundThreads(const std::vector<TensorView>& tensors);

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::vector<std::thread> threads_;
  std::optional<CheckResult> result_;
};

// XXH3 64-bit (seed 0) as used for every hash in the format (through the widest vector path the CPU runs, hash.h).
uint64_t ContextBinaryHash(const void* data, size_t size);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_BINARY_CONTEXT_BINARY_H_
