// `epctx inspect MODEL [--json]`: what a (context) model holds, read with libonnx's protobuf only — no session, no
// EP, no checker, nothing opened besides the model itself. Prints the IR version, opsets, metadata (notably every
// ep_compatibility_info.<EP>), graph inputs/outputs with their types, every EPContext node (domain com.microsoft:
// name, source, main_context, embed_mode — schema defaults 1/1 when absent —, partition_name, ep_sdk_version; for
// embed_mode=0 the binary path resolved relative to the model's folder, whether it exists and its size; for
// embed_mode=1 the payload size) and the other nodes of the main graph counted by op type.
//
// The model may be hostile: every string is escaped before it is printed (text) or replaced where it is not UTF-8
// (JSON); a binary path that is absolute, holds a '..' component or resolves (through symlinks) outside the model's
// folder is reported with a note and never followed further (it is only ever stat'ed, never opened). Failures are
// "epctx: <CODE>: <message>" on stderr with exit code 1.
//
// AotCpu context binaries (`epctx inspect FILE.bin`, a file starting with the magic EPCTXAOT, and the binary an
// AotCpu EPContext node references or embeds): validated and read by AotCpu's reader library
// (providers/aotcpu/reader/describe.h, the only AotCpu header included here), then the format version, size,
// compatibility block, section table, tensor totals (with the bytes de-duplication saved) and per graph its weights
// and program (inputs/outputs, arena, steps by kind; `--steps`: one line per step). A binary that fails validation
// (or whose program does not parse) is reported in the output, then as
// "epctx: INVALID_GRAPH: <binary> is not a valid AotCpu context binary: <reason>" with exit code 1.
#include <google/protobuf/io/coded_stream.h>
#include <limits.h>
#include <onnx/onnx_pb.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "providers/aotcpu/reader/describe.h"
#include "tools/tool_common.h"

namespace epctx::tools {

namespace {

using nlohmann::json;

constexpr const char* kLeftOnCpuKey = "epctx.left_on_cpu";  // written by the session (src/session/session.cc)

// Printable form of an untrusted string for the terminal: control bytes and '\\' escaped, UTF-8 passed through.
std::string Printable(const std::string& s, size_t max_len = 4096) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_len; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_len) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string DomainName(const std::string& d) { return d.empty() ? "ai.onnx" : d; }

const char* ElemTypeName(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return "float";
    case onnx::TensorProto::UINT8: return "uint8";
    case onnx::TensorProto::INT8: return "int8";
    case onnx::TensorProto::UINT16: return "uint16";
    case onnx::TensorProto::INT16: return "int16";
    case onnx::TensorProto::INT32: return "int32";
    case onnx::TensorProto::INT64: return "int64";
    case onnx::TensorProto::STRING: return "string";
    case onnx::TensorProto::BOOL: return "bool";
    case onnx::TensorProto::FLOAT16: return "float16";
    case onnx::TensorProto::DOUBLE: return "double";
    case onnx::TensorProto::UINT32: return "uint32";
    case onnx::TensorProto::UINT64: return "uint64";
    case onnx::TensorProto::COMPLEX64: return "complex64";
    case onnx::TensorProto::COMPLEX128: return "complex128";
    case onnx::TensorProto::BFLOAT16: return "bfloat16";
    case onnx::TensorProto::UNDEFINED: return "undefined";
    default: return nullptr;
  }
}

std::string ElemType(int t) {
  const char* n = ElemTypeName(t);
  return n ? n : "elem_type(" + std::to_string(t) + ")";
}

std::string ShapeString(const onnx::TensorShapeProto& shape) {
  std::string s = "[";
  for (int i = 0; i < shape.dim_size(); ++i) {
    if (i) s += ",";
    const auto& d = shape.dim(i);
    if (d.has_dim_value()) s += std::to_string(d.dim_value());
    else if (d.has_dim_param() && !d.dim_param().empty()) s += Printable(d.dim_param(), 256);
    else s += "?";
  }
  return s + "]";
}

// "float[N,4]", "seq(float[?])", "map(int64,float)", "optional(...)", "sparse float[...]"; protobuf's recursion
// limit bounds the nesting of a parsed model, `depth` bounds it again here.
std::string TypeString(const onnx::TypeProto& t, int depth = 0) {
  if (depth > 64) return "...";
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType: {
      std::string s = ElemType(t.tensor_type().elem_type());
      return t.tensor_type().has_shape() ? s + ShapeString(t.tensor_type().shape()) : s + " (unknown rank)";
    }
    case onnx::TypeProto::kSequenceType:
      return "seq(" + (t.sequence_type().has_elem_type() ? TypeString(t.sequence_type().elem_type(), depth + 1) : "?") + ")";
    case onnx::TypeProto::kMapType:
      return "map(" + ElemType(t.map_type().key_type()) + "," +
             (t.map_type().has_value_type() ? TypeString(t.map_type().value_type(), depth + 1) : "?") + ")";
    case onnx::TypeProto::kOptionalType:
      return "optional(" +
             (t.optional_type().has_elem_type() ? TypeString(t.optional_type().elem_type(), depth + 1) : "?") + ")";
    case onnx::TypeProto::kSparseTensorType: {
      std::string s = "sparse " + ElemType(t.sparse_tensor_type().elem_type());
      return t.sparse_tensor_type().has_shape() ? s + ShapeString(t.sparse_tensor_type().shape()) : s;
    }
    default: return "unknown";
  }
}

json ValueInfoJson(const onnx::ValueInfoProto& v) {
  json j;
  j["name"] = v.name();
  j["type"] = v.has_type() ? TypeString(v.type()) : "unknown";
  if (v.has_type() && v.type().has_tensor_type()) {
    const auto& tt = v.type().tensor_type();
    j["elem_type"] = ElemType(tt.elem_type());
    if (tt.has_shape()) {
      json dims = json::array();
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) dims.push_back(d.dim_value());
        else if (d.has_dim_param() && !d.dim_param().empty()) dims.push_back(d.dim_param());
        else dims.push_back(nullptr);
      }
      j["shape"] = dims;
    } else {
      j["shape"] = nullptr;
    }
  }
  return j;
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// An INT attribute with its schema default; a wrong-typed attribute is reported and the default used.
int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t def, bool* present,
                std::vector<std::string>* notes) {
  *present = false;
  const auto* a = FindAttr(n, name);
  if (!a) return def;
  if (a->type() == onnx::AttributeProto::INT || (a->type() == onnx::AttributeProto::UNDEFINED && a->has_i())) {
    *present = true;
    return a->i();
  }
  notes->push_back("attribute '" + name + "' is not an INT (type " + std::to_string(a->type()) +
                   "); the schema default " + std::to_string(def) + " is shown");
  return def;
}

// A STRING attribute; absent → has=false. A wrong-typed attribute is reported.
std::string StrAttr(const onnx::NodeProto& n, const std::string& name, bool* has, std::vector<std::string>* notes) {
  *has = false;
  const auto* a = FindAttr(n, name);
  if (!a) return "";
  if (a->type() == onnx::AttributeProto::STRING || (a->type() == onnx::AttributeProto::UNDEFINED && a->has_s())) {
    *has = true;
    return a->s();
  }
  notes->push_back("attribute '" + name + "' is not a STRING (type " + std::to_string(a->type()) + ")");
  return "";
}

std::string FolderOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool HasDotDot(const std::string& rel) {
  std::stringstream ss(rel);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (part == "..") return true;
  return false;
}

// What an embed_mode=0 node's ep_cache_context points at, judged without opening it. `*open_path` gets the resolved
// real path only when the file may be read: a regular file that provably (realpath) stays inside the model's folder.
json DescribeBinary(const std::string& model_folder, const std::string& rel, std::string* open_path) {
  open_path->clear();
  json b;
  b["path"] = rel;
  b["resolved"] = nullptr;
  b["exists"] = false;
  b["size"] = nullptr;
  b["note"] = nullptr;
  if (rel.empty()) {
    b["note"] = "the file path in ep_cache_context is empty";
    return b;
  }
  if (rel[0] == '/') {
    b["note"] = "absolute path refused (binary paths must be relative to the model's folder); not opened";
    return b;
  }
  if (HasDotDot(rel)) {
    b["note"] = "path with a '..' component refused (it may leave the model's folder); not opened";
    return b;
  }
  if (rel.find('\0') != std::string::npos) {
    b["note"] = "path holds a NUL byte; not opened";
    return b;
  }
  const std::string joined = model_folder + "/" + rel;
  b["resolved"] = joined;
  struct stat st;
  if (::stat(joined.c_str(), &st) != 0) {
    b["note"] = "does not exist";
    return b;
  }
  b["exists"] = true;
  char real_folder[PATH_MAX], real_file[PATH_MAX];
  std::string resolved;
  if (::realpath(model_folder.c_str(), real_folder) && ::realpath(joined.c_str(), real_file)) {
    std::string rf(real_folder), rp(real_file);
    if (rf != "/") rf += "/";
    if (rp.compare(0, rf.size(), rf) != 0) {
      b["note"] = "resolves to '" + rp + "', outside the model's folder; refused";
      return b;
    }
    resolved = rp;
  }
  if (!S_ISREG(st.st_mode)) {
    b["note"] = "is not a regular file";
    return b;
  }
  b["size"] = static_cast<uint64_t>(st.st_size);
  if (st.st_size == 0) b["note"] = "is empty";
  *open_path = resolved;
  return b;
}

// --- AotCpu context binaries -----------------------------------------------------------------------------------

constexpr const char* kAotCpuEp = "AotCpuExecutionProvider";

bool HasAotMagic(const void* data, uint64_t size) { return aotcpu_reader::HasContextBinaryMagic(data, size); }

std::string DtypeName(uint32_t dtype) {
  const char* n = dtype <= static_cast<uint32_t>(INT_MAX) ? ElemTypeName(static_cast<int>(dtype)) : nullptr;
  return n ? n : "dtype(" + std::to_string(dtype) + ")";
}

json IoJson(const std::vector<aotcpu_reader::ProgramIo>& ios) {
  json a = json::array();
  for (const aotcpu_reader::ProgramIo& io : ios)
    a.push_back({{"name", io.name}, {"dtype", DtypeName(io.dtype)}, {"dims", io.dims}});
  return a;
}

// The facts of one AotCpu context binary of `size` bytes at `data` (untrusted; DescribeContextBinary validates it
// first). Sets *failure to the validator's (or the records parser's) reason when the binary is not valid; whatever
// was read before the failure stays in the result.
json DescribeAotBinary(const uint8_t* data, uint64_t size, bool with_steps, std::string* failure) {
  const aotcpu_reader::BinaryDescription d = aotcpu_reader::DescribeContextBinary(data, size, with_steps);
  json j;
  j["size"] = size;
  j["valid"] = false;
  j["reason"] = nullptr;
  failure->clear();
  if (!d.valid) {
    *failure = d.invalid;
    j["reason"] = d.invalid;
    return j;
  }
  j["format_version"] = std::to_string(d.major) + "." + std::to_string(d.minor);
  json options = json::array();
  for (const auto& [k, v] : d.options) options.push_back({{"key", k}, {"value", v}});
  j["compatibility"] = {{"epctx_version", d.epctx_version},
                        {"onednn_version", d.onednn_version},
                        {"isa", d.isa},
                        {"options", options}};
  json sections = json::array();
  for (const aotcpu_reader::SectionEntry& e : d.sections)
    sections.push_back({{"type", e.type}, {"type_code", e.type_code}, {"offset", e.offset}, {"length", e.length}});
  j["sections"] = sections;
  j["tensors"] = {{"count", d.tensor_count},
                  {"bytes", d.tensor_bytes},
                  {"distinct", d.distinct_tensors},
                  {"distinct_bytes", d.distinct_bytes}};
  json graphs = json::array();
  for (const aotcpu_reader::GraphDescription& gd : d.graphs) {
    json g;
    g["name"] = gd.name;
    g["weights"] = {{"count", gd.weight_count}, {"bytes", gd.weight_bytes}};
    g["records_bytes"] = gd.records_bytes;
    if (!gd.parsed) {
      g["error"] = gd.error;
      if (failure->empty()) *failure = "graph '" + Printable(gd.name, 256) + "': " + gd.error;
      graphs.push_back(g);
      continue;
    }
    if (gd.dynamic) {  // a partition for every input shape
      json ios = json::array();
      for (const aotcpu_reader::DynamicInput& in : gd.dynamic_inputs) {
        json io = {{"name", in.name}};
        if (in.known) {
          json dims = json::array();
          for (const aotcpu_reader::DynamicDim& dim : in.dims) {
            if (dim.size >= 0) dims.push_back(dim.size);
            else dims.push_back(dim.symbol);
          }
          io["dims"] = dims;
          io["dtype"] = DtypeName(in.dtype);
        }
        ios.push_back(io);
      }
      g["dynamic"] = true;
      g["inputs"] = ios;
      g["outputs"] = gd.dynamic_outputs;
      g["symbols"] = gd.symbols;
      g["node_count"] = gd.node_count;
      g["packed_weights"] = gd.packed_weights;
      json profiles = json::array();
      for (const auto& profile : gd.shape_profiles) {
        json p = json::object();
        for (const auto& [input, dims] : profile) p[input] = dims;
        profiles.push_back(p);
      }
      g["shape_profiles"] = profiles;
      json ranges = json::object();
      for (const auto& [sym, range] : gd.shape_ranges) ranges[sym] = {range.first, range.second};
      g["shape_ranges"] = ranges;
      graphs.push_back(g);
      continue;
    }
    g["inputs"] = IoJson(gd.inputs);
    g["outputs"] = IoJson(gd.outputs);
    g["arena_bytes"] = gd.arena_bytes;
    g["step_count"] = gd.step_count;
    g["steps_by_kind"] = gd.steps_by_kind;
    if (with_steps) g["steps"] = gd.steps;
    graphs.push_back(g);
  }
  j["graphs"] = graphs;
  j["valid"] = failure->empty();
  if (!failure->empty()) j["reason"] = *failure;
  return j;
}

std::string DimsString(const json& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i].get<int64_t>());
  return s + "]";
}

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

// Prints DescribeAotBinary's facts, every line prefixed by `in`.
void PrintAotBinary(const json& b, const std::string& in) {
  auto u = [](const json& v) { return static_cast<unsigned long long>(v.get<uint64_t>()); };
  if (!b["valid"].get<bool>() && !b.contains("format_version")) {
    std::printf("%sinvalid: %s\n", in.c_str(), Printable(b["reason"].get<std::string>()).c_str());
    return;
  }
  std::printf("%sformat: %s\n", in.c_str(), b["format_version"].get<std::string>().c_str());
  const json& c = b["compatibility"];
  std::printf("%scompatibility:\n", in.c_str());
  std::printf("%s  epctx: %s\n", in.c_str(), Printable(c["epctx_version"].get<std::string>()).c_str());
  std::printf("%s  oneDNN: %s\n", in.c_str(), Printable(c["onednn_version"].get<std::string>()).c_str());
  std::printf("%s  ISA: %s\n", in.c_str(), Printable(c["isa"].get<std::string>()).c_str());
  std::string opts;
  for (const auto& o : c["options"])
    opts += (opts.empty() ? "" : ", ") + Printable(o["key"].get<std::string>()) + "=" +
            Printable(o["value"].get<std::string>());
  std::printf("%s  options: %s\n", in.c_str(), opts.empty() ? "(none)" : opts.c_str());
  std::printf("%ssections: %zu\n", in.c_str(), b["sections"].size());
  for (const auto& sec : b["sections"])
    std::printf("%s  %-8s offset %llu, length %llu\n", in.c_str(), sec["type"].get<std::string>().c_str(),
                u(sec["offset"]), u(sec["length"]));
  const json& t = b["tensors"];
  std::printf("%stensors: %llu, %s (%s after de-duplication, %llu distinct)\n", in.c_str(), u(t["count"]),
              Bytes(t["bytes"].get<uint64_t>()).c_str(), Bytes(t["distinct_bytes"].get<uint64_t>()).c_str(),
              u(t["distinct"]));
  std::printf("%sgraphs: %zu\n", in.c_str(), b["graphs"].size());
  for (const auto& g : b["graphs"]) {
    std::printf("%s  graph: %s\n", in.c_str(), Printable(g["name"].get<std::string>()).c_str());
    std::printf("%s    weights: %llu tensors, %s\n", in.c_str(), u(g["weights"]["count"]),
                Bytes(g["weights"]["bytes"].get<uint64_t>()).c_str());
    if (g.contains("error")) {
      std::printf("%s    invalid program: %s\n", in.c_str(), Printable(g["error"].get<std::string>()).c_str());
      continue;
    }
    if (g.value("dynamic", false)) {  // compiled per input shape at run time (docs/aotcpu.md "Dynamic shapes")
      std::string syms;
      for (const auto& sym : g["symbols"]) syms += (syms.empty() ? "" : ", ") + Printable(sym.get<std::string>());
      std::printf("%s    dynamic: every input shape (free dims: %s); %llu nodes, %llu packed weights\n", in.c_str(),
                  syms.c_str(), u(g["node_count"]), u(g["packed_weights"]));
      std::printf("%s    inputs: %zu\n", in.c_str(), g["inputs"].size());
      for (const auto& io : g["inputs"]) {
        std::string dims = "[";
        for (size_t k = 0; io.contains("dims") && k < io["dims"].size(); ++k)
          dims += (k ? "," : "") + (io["dims"][k].is_string() ? Printable(io["dims"][k].get<std::string>())
                                                              : std::to_string(io["dims"][k].get<int64_t>()));
        std::printf("%s      %s: %s%s]\n", in.c_str(), Printable(io["name"].get<std::string>()).c_str(),
                    io.value("dtype", std::string("?")).c_str(), dims.c_str());
      }
      std::printf("%s    outputs: %zu\n", in.c_str(), g["outputs"].size());
      if (g.contains("shape_ranges") && !g["shape_ranges"].empty()) {
        std::string ranges;
        for (const auto& [sym, range] : g["shape_ranges"].items())
          ranges += (ranges.empty() ? "" : ", ") + Printable(sym) + " " + std::to_string(range[0].get<int64_t>()) +
                    ".." + std::to_string(range[1].get<int64_t>());
        std::printf("%s    shape ranges: %s\n", in.c_str(), ranges.c_str());
      }
      if (g.contains("shape_profiles"))
        for (const auto& p : g["shape_profiles"]) {
          std::string text;
          for (const auto& [input, dims] : p.items()) {
            std::string d;
            for (const auto& x : dims) d += (d.empty() ? "" : "x") + std::to_string(x.get<int64_t>());
            text += (text.empty() ? "" : ", ") + Printable(input) + ":" + d;
          }
          std::printf("%s    shape profile (built at load): %s\n", in.c_str(), text.c_str());
        }
      continue;
    }
    for (const char* side : {"inputs", "outputs"}) {
      std::printf("%s    %s: %zu\n", in.c_str(), side, g[side].size());
      for (const auto& io : g[side])
        std::printf("%s      %s: %s%s\n", in.c_str(), Printable(io["name"].get<std::string>()).c_str(),
                    io["dtype"].get<std::string>().c_str(), DimsString(io["dims"]).c_str());
    }
    std::printf("%s    arena: %s\n", in.c_str(), Bytes(g["arena_bytes"].get<uint64_t>()).c_str());
    // Most frequent kind first (ties by name): the histogram reads as "where the work is".
    std::vector<std::pair<std::string, uint64_t>> order;
    for (const auto& [kind, n] : g["steps_by_kind"].items()) order.emplace_back(kind, n.get<uint64_t>());
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string hist;
    for (const auto& [kind, n] : order) hist += (hist.empty() ? "" : ", ") + kind + " " + std::to_string(n);
    if (!hist.empty()) hist = " (" + hist + ")";
    std::printf("%s    steps: %llu%s\n", in.c_str(), u(g["step_count"]), hist.c_str());
    if (g.contains("steps")) {
      size_t i = 0;
      for (const auto& st : g["steps"])
        std::printf("%s      %zu: %s\n", in.c_str(), i++, Printable(st.get<std::string>()).c_str());
    }
  }
  if (!b["valid"].get<bool>())
    std::printf("%sinvalid: %s\n", in.c_str(), Printable(b["reason"].get<std::string>()).c_str());
}

// A binary that failed validation: where it came from and why. Reported after the output, exit code 1.
struct Failure {
  std::string from, reason;
};

// `epctx inspect FILE.bin`: a file that starts with the AotCpu magic.
json InspectAotFile(const std::string& path, const MappedFile& file, bool steps, std::vector<Failure>* failures) {
  std::string why;
  json j = DescribeAotBinary(file.data(), file.size(), steps, &why);
  j["file"] = path;
  if (!why.empty()) failures->push_back({"'" + path + "'", why});
  return j;
}

StatusOr<json> Inspect(const std::string& path, bool steps, std::vector<Failure>* failures) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return MakeStatus(errno == ENOENT ? ErrorCode::NO_SUCHFILE : ErrorCode::FAIL, "cannot open '", path,
                      "': ", std::strerror(errno));
  RETURN_ERROR_IF(S_ISDIR(st.st_mode), INVALID_ARGUMENT, "'", path, "' is a folder, not a model file");
  RETURN_ERROR_IF(!S_ISREG(st.st_mode), INVALID_ARGUMENT, "'", path, "' is not a regular file");
  RETURN_ERROR_IF(st.st_size == 0, INVALID_PROTOBUF, "failed to load model '", path, "': the file is empty");
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  if (HasAotMagic(file->data(), file->size())) return InspectAotFile(path, *file, steps, failures);
  RETURN_ERROR_IF(file->size() > static_cast<uint64_t>(INT_MAX), INVALID_PROTOBUF,
                  "failed to load model '", path, "': ", file->size(), " bytes is above protobuf's 2 GiB limit");
  onnx::ModelProto m;
  {
    google::protobuf::io::CodedInputStream in(file->data(), static_cast<int>(file->size()));
    in.SetTotalBytesLimit(INT_MAX);
    in.SetRecursionLimit(128);
    RETURN_ERROR_IF(!m.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage(), INVALID_PROTOBUF,
                    "failed to load model '", path, "': not a valid ONNX protobuf (truncated or corrupted)");
  }
  RETURN_ERROR_IF(!m.has_graph(), INVALID_GRAPH, "model '", path, "' has no graph");

  json j;
  json warnings = json::array();
  j["model"] = path;
  j["file_size"] = static_cast<uint64_t>(file->size());
  j["ir_version"] = m.ir_version();
  j["producer_name"] = m.producer_name();
  j["producer_version"] = m.producer_version();
  j["graph_name"] = m.graph().name();
  json opsets = json::object();
  for (const auto& os : m.opset_import()) {
    const std::string d = DomainName(os.domain());
    if (opsets.contains(d)) warnings.push_back("opset domain '" + d + "' imported more than once");
    opsets[d] = os.version();
  }
  j["opsets"] = opsets;
  json metadata = json::object(), compat = json::object();
  const std::string kCompat = "ep_compatibility_info.";
  for (const auto& p : m.metadata_props()) {
    if (metadata.contains(p.key())) warnings.push_back("metadata key '" + p.key() + "' given more than once");
    metadata[p.key()] = p.value();
    if (p.key().compare(0, kCompat.size(), kCompat) == 0) compat[p.key().substr(kCompat.size())] = p.value();
  }
  j["metadata"] = metadata;
  j["compatibility"] = compat;
  // Why the nodes that are not EPContext nodes stay on the CPU EP, as the compiling session recorded it.
  j["left_on_cpu"] = nullptr;
  if (metadata.contains(kLeftOnCpuKey)) {
    json left = json::parse(metadata[kLeftOnCpuKey].get<std::string>(), nullptr, /*allow_exceptions=*/false);
    bool ok = left.is_array();
    for (const auto& e : ok ? left : json::array())
      ok &= e.is_object() && e.contains("node") && e["node"].is_string() && e.contains("op") && e["op"].is_string() &&
            e.contains("reasons") && e["reasons"].is_object();
    if (ok) j["left_on_cpu"] = left;
    else warnings.push_back(std::string("metadata '") + kLeftOnCpuKey + "' is not the list epctx writes; ignored");
  }
  json inputs = json::array(), outputs = json::array();
  for (const auto& v : m.graph().input()) inputs.push_back(ValueInfoJson(v));
  for (const auto& v : m.graph().output()) outputs.push_back(ValueInfoJson(v));
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  int external = 0;
  for (const auto& t : m.graph().initializer()) external += t.data_location() == onnx::TensorProto::EXTERNAL;
  j["initializers"] = {{"count", m.graph().initializer_size()}, {"external", external}};

  const std::string folder = FolderOf(path);
  json ctx_nodes = json::array();
  std::map<std::string, int64_t> by_op;
  int64_t other = 0;
  // EPContext nodes of the main graph and of control-flow bodies (a partition inside an If branch is an EPContext node
  // there: Silero VAD v5's four); `graph` names where a node sits ("main", or "<node>/<attribute>" nested).
  std::function<void(const onnx::GraphProto&, const std::string&)> visit = [&](const onnx::GraphProto& graph,
                                                                              const std::string& where) {
  for (const auto& n : graph.node()) {
    for (const auto& a : n.attribute()) {
      const std::string inner = (where == "main" ? "" : where + "/") + Printable(n.name(), 256) + "/" + a.name();
      if (a.type() == onnx::AttributeProto::GRAPH) visit(a.g(), inner);
      for (const auto& sub : a.graphs()) visit(sub, inner);
    }
    if (n.op_type() != "EPContext" || n.domain() != "com.microsoft") {
      if (where != "main") continue;  // cpu_nodes counts the main graph's nodes
      std::string op = n.op_type();
      if (!n.domain().empty() && n.domain() != "ai.onnx") op = n.domain() + ":" + op;
      ++by_op[op];
      ++other;
      if (n.op_type() == "EPContext")
        warnings.push_back("node '" + n.name() + "' is an EPContext in domain '" + n.domain() +
                           "', not com.microsoft; counted as an ordinary node");
      continue;
    }
    std::vector<std::string> notes;
    json c;
    c["name"] = n.name();
    c["graph"] = where;
    bool has = false;
    std::string source = StrAttr(n, "source", &has, &notes);
    c["source"] = has ? json(source) : json(nullptr);
    bool main_present = false, embed_present = false;
    int64_t main = IntAttr(n, "main_context", 1, &main_present, &notes);
    int64_t embed = IntAttr(n, "embed_mode", 1, &embed_present, &notes);
    c["main_context"] = main;
    c["main_context_default"] = !main_present;
    c["embed_mode"] = embed;
    c["embed_mode_default"] = !embed_present;
    std::string partition = StrAttr(n, "partition_name", &has, &notes);
    c["partition_name"] = has ? json(partition) : json(nullptr);
    std::string sdk = StrAttr(n, "ep_sdk_version", &has, &notes);
    c["ep_sdk_version"] = has ? json(sdk) : json(nullptr);
    bool has_cache = false;
    std::string cache = StrAttr(n, "ep_cache_context", &has_cache, &notes);
    c["binary"] = nullptr;
    c["payload_size"] = nullptr;
    c["aotcpu"] = nullptr;
    // An AotCpu node's binary (or any binary with the AotCpu magic) is validated and described.
    const bool aot_source = source == kAotCpuEp;
    auto describe_aot = [&](const uint8_t* data, uint64_t size, const std::string& from) {
      if (!aot_source && !HasAotMagic(data, size)) return;
      std::string why;
      c["aotcpu"] = DescribeAotBinary(data, size, steps, &why);
      if (!why.empty()) failures->push_back({from, why});
    };
    if (embed == 1) {
      c["payload_size"] = has_cache ? json(static_cast<uint64_t>(cache.size())) : json(nullptr);
      if (!has_cache && main == 1) notes.push_back("main context without ep_cache_context");
      if (has_cache)
        describe_aot(reinterpret_cast<const uint8_t*>(cache.data()), cache.size(),
                     "'" + path + "' node '" + Printable(n.name(), 256) + "' (embedded)");
    } else if (embed == 0) {
      std::string open_path;
      if (has_cache) c["binary"] = DescribeBinary(folder, cache, &open_path);
      else if (main == 0) notes.push_back("main_context=0: its graph is in a binary named by a main_context=1 node");
      else notes.push_back("main context without ep_cache_context");
      if (!open_path.empty()) {
        const std::string from = "'" + c["binary"]["resolved"].get<std::string>() + "'";
        if (c["binary"]["size"].get<uint64_t>() == 0) {
          describe_aot(nullptr, 0, from);
        } else {
          StatusOr<std::shared_ptr<MappedFile>> bin = MappedFile::Open(open_path);
          if (bin.ok()) describe_aot(bin.value()->data(), bin.value()->size(), from);
          else notes.push_back("cannot read the binary: " + bin.status().message());
        }
      }
    } else {
      notes.push_back("embed_mode " + std::to_string(embed) + " is neither 0 nor 1");
    }
    c["inputs"] = json(std::vector<std::string>(n.input().begin(), n.input().end()));
    c["outputs"] = json(std::vector<std::string>(n.output().begin(), n.output().end()));
    c["notes"] = notes;
    ctx_nodes.push_back(c);
  }
  };
  visit(m.graph(), "main");
  j["ep_context_nodes"] = ctx_nodes;
  j["cpu_nodes"] = {{"count", other}, {"by_op_type", by_op}};
  j["warnings"] = warnings;
  return j;
}

std::string Str(const json& v) {
  if (!v.is_string()) return "(none)";
  return v.get<std::string>().empty() ? "\"\"" : Printable(v.get<std::string>());
}

void PrintText(const json& j) {
  std::printf("model: %s (%llu bytes)\n", Printable(j["model"].get<std::string>()).c_str(),
              static_cast<unsigned long long>(j["file_size"].get<uint64_t>()));
  std::printf("ir_version: %lld\n", static_cast<long long>(j["ir_version"].get<int64_t>()));
  std::string producer = j["producer_name"].get<std::string>();
  if (!j["producer_version"].get<std::string>().empty()) producer += " " + j["producer_version"].get<std::string>();
  std::printf("producer: %s\n", producer.empty() ? "(none)" : Printable(producer).c_str());
  std::string opsets;
  for (const auto& [d, v] : j["opsets"].items())
    opsets += (opsets.empty() ? "" : ", ") + Printable(d) + " " + std::to_string(v.get<int64_t>());
  std::printf("opsets: %s\n", opsets.empty() ? "(none)" : opsets.c_str());
  std::printf("metadata:%s\n", j["metadata"].empty() ? " (none)" : "");
  for (const auto& [k, v] : j["metadata"].items()) {
    if (k == kLeftOnCpuKey && j["left_on_cpu"].is_array()) {  // long: shown grouped under "CPU nodes"
      std::printf("  %s = (%zu nodes, below)\n", k.c_str(), j["left_on_cpu"].size());
      continue;
    }
    std::printf("  %s = %s\n", Printable(k).c_str(), Printable(v.get<std::string>()).c_str());
  }
  std::printf("compatibility info:%s\n", j["compatibility"].empty() ? " (none)" : "");
  for (const auto& [k, v] : j["compatibility"].items())
    std::printf("  %s: %s\n", Printable(k).c_str(), Printable(v.get<std::string>()).c_str());
  std::printf("graph: %s\n", Str(j["graph_name"]).c_str());
  for (const char* side : {"inputs", "outputs"}) {
    std::printf("%s: %zu\n", side, j[side].size());
    for (const auto& v : j[side])
      std::printf("  %s: %s\n", Printable(v["name"].get<std::string>()).c_str(),
                  Printable(v["type"].get<std::string>()).c_str());
  }
  std::printf("initializers: %lld (%lld external)\n", static_cast<long long>(j["initializers"]["count"].get<int64_t>()),
              static_cast<long long>(j["initializers"]["external"].get<int64_t>()));
  std::printf("EPContext nodes: %zu\n", j["ep_context_nodes"].size());
  for (const auto& c : j["ep_context_nodes"]) {
    std::printf("  %s\n", Str(c["name"]).c_str());
    if (c["graph"] != "main") std::printf("    graph: %s\n", Str(c["graph"]).c_str());
    std::printf("    source: %s\n", Str(c["source"]).c_str());
    std::printf("    main_context: %lld%s\n", static_cast<long long>(c["main_context"].get<int64_t>()),
                c["main_context_default"].get<bool>() ? " (default)" : "");
    std::printf("    embed_mode: %lld%s\n", static_cast<long long>(c["embed_mode"].get<int64_t>()),
                c["embed_mode_default"].get<bool>() ? " (default)" : "");
    std::printf("    partition_name: %s\n", Str(c["partition_name"]).c_str());
    std::printf("    ep_sdk_version: %s\n", Str(c["ep_sdk_version"]).c_str());
    if (!c["payload_size"].is_null())
      std::printf("    payload: %llu bytes\n", static_cast<unsigned long long>(c["payload_size"].get<uint64_t>()));
    if (!c["binary"].is_null()) {
      const json& b = c["binary"];
      std::string line = "    binary: " + Str(b["path"]);
      if (!b["resolved"].is_null()) line += " -> " + Str(b["resolved"]);
      line += b["exists"].get<bool>() ? " (exists" : " (missing";
      if (!b["size"].is_null()) line += ", " + std::to_string(b["size"].get<uint64_t>()) + " bytes";
      line += ")";
      if (!b["note"].is_null()) line += ": " + Str(b["note"]);
      std::printf("%s\n", line.c_str());
    }
    for (const auto& note : c["notes"]) std::printf("    note: %s\n", Str(note).c_str());
    if (!c["aotcpu"].is_null()) {
      std::printf("    AotCpu context binary (%llu bytes):\n",
                  static_cast<unsigned long long>(c["aotcpu"]["size"].get<uint64_t>()));
      PrintAotBinary(c["aotcpu"], "      ");
    }
  }
  std::string ops;
  for (const auto& [op, count] : j["cpu_nodes"]["by_op_type"].items())
    ops += (ops.empty() ? "" : ", ") + Printable(op) + " " + std::to_string(count.get<int64_t>());
  const long long cpu = j["cpu_nodes"]["count"].get<int64_t>();
  if (cpu) std::printf("CPU nodes: %lld (%s)\n", cpu, ops.c_str());
  else std::printf("CPU nodes: 0\n");
  if (j["left_on_cpu"].is_array()) {
    std::vector<LeftOnCpuNode> left;
    for (const auto& e : j["left_on_cpu"]) {
      LeftOnCpuNode n;
      n.name = Printable(e["node"].get<std::string>());
      n.op_type = Printable(e["op"].get<std::string>());
      if (e.contains("graph") && e["graph"].is_string()) n.graph = Printable(e["graph"].get<std::string>());
      for (const auto& [ep, why] : e["reasons"].items())
        n.reasons.emplace_back(Printable(ep), why.is_string() ? Printable(why.get<std::string>()) : "?");
      left.push_back(std::move(n));
    }
    PrintLeftOnCpu(stdout, left, "  ");
  } else if (cpu && !j["ep_context_nodes"].empty()) {
    std::printf("  why they stay on the CPU EP was not recorded in this model; `epctx perf -v -e EP SOURCE_MODEL` "
                "shows it\n");
  }
  for (const auto& w : j["warnings"]) std::printf("warning: %s\n", Str(w).c_str());
}

}  // namespace

int RunInspectCommand(const InspectOptions& opts) {
  std::vector<Failure> failures;
  StatusOr<json> j = [&]() -> StatusOr<json> {
    try {
      return Inspect(opts.model, opts.steps, &failures);
    } catch (const std::exception& e) {  // std::bad_alloc on an absurd model, and the like
      return MakeStatus(ErrorCode::FAIL, "cannot inspect '", opts.model, "': ", e.what());
    }
  }();
  if (!j.ok()) return Fail(j.status());
  try {
    if (opts.json) {
      // Names and attribute strings come from the model: invalid UTF-8 is replaced, never a throw.
      std::printf("%s\n", j.value().dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    } else if (j.value().contains("file")) {  // an AotCpu context binary on its own
      std::printf("AotCpu context binary: %s (%llu bytes)\n", Printable(j.value()["file"].get<std::string>()).c_str(),
                  static_cast<unsigned long long>(j.value()["size"].get<uint64_t>()));
      PrintAotBinary(j.value(), "");
    } else {
      PrintText(j.value());
    }
  } catch (const std::exception& e) {
    return Fail(MakeStatus(ErrorCode::FAIL, "cannot print '", opts.model, "': ", e.what()));
  }
  std::fflush(stdout);
  for (size_t i = 0; i + 1 < failures.size(); ++i)
    std::fprintf(stderr, "epctx: INVALID_GRAPH: %s is not a valid AotCpu context binary: %s\n",
                 Printable(failures[i].from).c_str(), Printable(failures[i].reason).c_str());
  if (!failures.empty())
    return Fail(MakeStatus(ErrorCode::INVALID_GRAPH, Printable(failures.back().from),
                           " is not a valid AotCpu context binary: ", Printable(failures.back().reason)));
  return 0;
}

}  // namespace epctx::tools
