// What an AotCpu context binary holds, as plain values: the public face of AotCpu's reader for tools (`epctx
// inspect`) that must not see the compiler. Nothing here names oneDNN or an AotCpu internal type; the library behind
// it (`epctx_aotcpu_reader`) validates the file with binary/'s validator, then parses each graph's records (a static
// program, or a dynamic partition's graph) the way the EP's loader does.
//
// The bytes are hostile: DescribeContextBinary runs the full validation (every size, offset, checksum and content
// hash; ContextBinaryReader::Open) before it reads anything else, and reads nothing outside [data, data + size).
// Errors are values, never exceptions or aborts: a binary the validator refuses comes back with `valid` false and
// nothing but `size` and the reason; a graph whose records do not parse, with `parsed` false and its `error`.
//
// Thread safety: DescribeContextBinary is reentrant; the results are plain values owned by the caller and borrow
// nothing from `data`.
#ifndef EPCTX_PROVIDERS_AOTCPU_READER_DESCRIBE_H_
#define EPCTX_PROVIDERS_AOTCPU_READER_DESCRIBE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace epctx::aotcpu_reader {

// Whether `size` bytes at `data` start with the context binary's magic ("EPCTXAOT"). Says nothing of the rest.
// `data` may be null only when size is 0.
bool HasContextBinaryMagic(const void* data, uint64_t size);

// One entry of the section table, as stored: the type's name ("COMPAT", ..., "UNKNOWN"), its code, where it is.
struct SectionEntry {
  std::string type;
  uint32_t type_code = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// An input or output of a static program: name, ONNX TensorProto dtype code, dims.
struct ProgramIo {
  std::string name;
  uint32_t dtype = 0;
  std::vector<int64_t> dims;
};

// A dim of a dynamic partition's input: a size (>= 0), or free, then `symbol` names it (the model's dim_param, else
// "<input>:<axis>") and `size` is negative.
struct DynamicDim {
  int64_t size = -1;
  std::string symbol;
};

// An input of a dynamic partition. `known` is false when the partition's graph has no value of that name (then
// `dtype` and `dims` are unset).
struct DynamicInput {
  std::string name;
  bool known = false;
  uint32_t dtype = 0;
  std::vector<DynamicDim> dims;
};

// One graph (partition) of the binary. When `parsed` is false its records did not parse: only the fields up to
// `error` are set. Otherwise `dynamic` says which of the two groups below is.
struct GraphDescription {
  std::string name;
  uint64_t weight_count = 0;   // tensors the graph references
  uint64_t weight_bytes = 0;   // their lengths, summed (shared tensors counted once per reference)
  uint64_t records_bytes = 0;
  bool parsed = false;
  std::string error;           // the parser's reason when !parsed
  bool dynamic = false;        // a partition compiled per input shape at run time ("AOTDYN1" records)

  // A static program (dynamic == false).
  std::vector<ProgramIo> inputs, outputs;
  uint64_t arena_bytes = 0;
  uint64_t step_count = 0;
  std::map<std::string, uint64_t> steps_by_kind;  // step kind name -> count
  std::vector<std::string> steps;                 // one line per step; only when asked for (with_steps)

  // A dynamic partition (dynamic == true).
  std::vector<DynamicInput> dynamic_inputs;
  std::vector<std::string> dynamic_outputs;  // the fused node's output names
  std::set<std::string> symbols;             // every free dim's symbol among the inputs
  uint64_t node_count = 0;
  uint64_t packed_weights = 0;               // weights packed by earlier shapes, stored with the graph
  // Shapes built at load: per profile, (input name, dims) in input order.
  std::vector<std::vector<std::pair<std::string, std::vector<int64_t>>>> shape_profiles;
  std::map<std::string, std::pair<int64_t, int64_t>> shape_ranges;  // symbol -> [lo, hi]
};

// One context binary. When `valid` is false the validator refused the file and only `size` and `invalid` are set.
struct BinaryDescription {
  uint64_t size = 0;
  bool valid = false;
  std::string invalid;  // the validator's reason when !valid
  uint16_t major = 0, minor = 0;
  // The compatibility block.
  std::string epctx_version, onednn_version, isa;
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<SectionEntry> sections;
  // Tensor table totals: entries, their lengths summed, distinct byte ranges and their lengths (what de-duplication
  // saved is tensor_bytes - distinct_bytes).
  uint64_t tensor_count = 0, tensor_bytes = 0, distinct_tensors = 0, distinct_bytes = 0;
  std::vector<GraphDescription> graphs;
};

// Describes the `size` bytes at `data` (untrusted; `data` may be null only when size is 0; borrowed for the call).
// `with_steps` also describes every step of the static programs (GraphDescription::steps).
BinaryDescription DescribeContextBinary(const void* data, uint64_t size, bool with_steps);

}  // namespace epctx::aotcpu_reader

#endif  // EPCTX_PROVIDERS_AOTCPU_READER_DESCRIBE_H_
