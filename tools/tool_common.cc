#include "tools/tool_common.h"

#include "model/model.h"

#include <onnx/onnx_pb.h>
#include <onnx/onnx-data_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <unistd.h>
#include <random>
#include <set>
#include <sstream>

#include "core/mapped_file.h"
#include "model/tensor_proto.h"

namespace epctx::tools {

Status ParseKeyValuePairs(const std::string& text, std::map<std::string, std::string>* out) {
  std::istringstream is(text);
  std::string pair;
  while (is >> pair) {
    size_t bar = pair.find('|');
    RETURN_ERROR_IF(bar == std::string::npos || bar == 0, INVALID_ARGUMENT, "option '", pair,
                    "' is not of the form key|value");
    (*out)[pair.substr(0, bar)] = pair.substr(bar + 1);
  }
  return Status::OK();
}

Status ParseFreeDimOverride(const std::string& text, std::map<std::string, int64_t>* out) {
  size_t colon = text.rfind(':');
  RETURN_ERROR_IF(colon == std::string::npos || colon == 0, INVALID_ARGUMENT, "free dimension override '", text,
                  "' is not of the form name:value");
  char* end = nullptr;
  long long v = std::strtoll(text.c_str() + colon + 1, &end, 10);
  RETURN_ERROR_IF(*end != '\0' || end == text.c_str() + colon + 1 || v < 0, INVALID_ARGUMENT,
                  "free dimension override '", text, "' needs a non-negative integer value");
  (*out)[text.substr(0, colon)] = v;
  return Status::OK();
}

namespace {
std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

// The plugin libraries of this epctx: installed ones in <libdir of libepctx.so>/epctx (as an Env finds them), then
// those of the build tree, <bin>/../lib/libepctx_<name>.so; each registered as <name>, the first folder winning.
void RegisterBuiltPlugins(EpRegistry* registry) {
  registry->RegisterFolder(InstalledPluginFolder());  // warns about libraries that fail to load
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  std::string dir(exe);
  dir = dir.substr(0, dir.find_last_of('/'));
  std::string lib = dir + "/../lib";
  if (DIR* d = opendir(lib.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string f = e->d_name;
      if (f.rfind("libepctx_", 0) == 0 && f.size() > 12 && f.substr(f.size() - 3) == ".so") names.push_back(f);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& f : names) {
      if (registry->Find(f.substr(9, f.size() - 12))) continue;
      Status st = registry->Register(f.substr(9, f.size() - 12), lib + "/" + f);
      if (!st.ok()) std::fprintf(stderr, "epctx: warning: built-in plugin %s not loaded: %s\n", f.c_str(), st.message().c_str());
    }
  }
}

bool MatchesEp(const std::string& want, const EpctxEpDevice* d) {
  std::string w = Lower(want), name = Lower(d->ep_name), reg = Lower(d->library_name);
  std::string shortname = name;
  const std::string suffix = "executionprovider";
  if (shortname.size() > suffix.size() && shortname.compare(shortname.size() - suffix.size(), suffix.size(), suffix) == 0)
    shortname.resize(shortname.size() - suffix.size());
  return w == name || w == reg || w == shortname;
}
}  // namespace

std::shared_ptr<EpRegistry> ToolRegistry(const std::vector<std::string>& plugin_ep_libs, Status* status) {
  static std::shared_ptr<EpRegistry> registry;
  if (!registry) {
    registry = std::make_shared<EpRegistry>(std::map<std::string, std::string>());
    RegisterBuiltPlugins(registry.get());
  }
  for (const auto& spec : plugin_ep_libs) {
    size_t bar = spec.find('|');
    if (bar == std::string::npos || bar == 0 || bar + 1 == spec.size()) {
      *status = MakeStatus(ErrorCode::INVALID_ARGUMENT, "--plugin_ep_libs entry '", spec, "' is not of the form Name|path");
      return registry;
    }
    if (registry->Find(spec.substr(0, bar))) continue;
    Status st = registry->Register(spec.substr(0, bar), spec.substr(bar + 1));
    if (!st.ok()) {
      *status = st;
      return registry;
    }
  }
  return registry;
}

StatusOr<SessionConfig> BuildConfig(const CommonFlags& flags) {
  SessionConfig c;
  Status reg_status;
  c.registry = ToolRegistry(flags.plugin_ep_libs, &reg_status);
  RETURN_IF_ERROR(reg_status);
  std::map<std::string, std::string> provider_options;
  RETURN_IF_ERROR(ParseKeyValuePairs(flags.provider_options, &provider_options));
  for (const auto& e : flags.eps) {
    std::string lower = Lower(e);
    if (lower == "cpu" || lower == "cpuexecutionprovider") continue;
    EpRequest req;
    for (const EpctxEpDevice* d : c.registry->Devices()) {
      if (d == c.registry->cpu_device() || d->device->IsVirtual() || !MatchesEp(e, d)) continue;
      if (!req.devices.empty() && req.devices[0]->factory != d->factory) continue;
      req.devices.push_back(d);
      req.ep_name = d->ep_name;
    }
    if (req.devices.empty()) {
      std::string available = "cpu";
      for (const EpctxEpDevice* d : c.registry->Devices())
        if (d != c.registry->cpu_device()) available += ", " + d->library_name + " (" + d->ep_name + ")";
      return MakeStatus(ErrorCode::INVALID_ARGUMENT, "execution provider '", e,
                        "' is not available (available: ", available, ")");
    }
    req.options = provider_options;
    c.eps.push_back(std::move(req));
  }
  for (const auto& kv : flags.configs) RETURN_IF_ERROR(ParseKeyValuePairs(kv, &c.entries));
  for (const auto& f : flags.free_dims) RETURN_IF_ERROR(ParseFreeDimOverride(f, &c.free_dimension_overrides));
  if (!flags.input_shapes.empty()) {
    std::string joined = c.Get("epctx.input_shapes");
    for (const auto& s : flags.input_shapes) {
      std::map<std::string, std::vector<int64_t>> check;
      RETURN_IF_ERROR_CTX(ParseInputShapes(s, &check), "--input-shape");
      joined += (joined.empty() ? "" : ";") + s;
    }
    c.entries["epctx.input_shapes"] = joined;
  }
  RETURN_ERROR_IF(flags.threads < 0, INVALID_ARGUMENT, "-x must be >= 0, got ", flags.threads);
  c.intra_op_num_threads = flags.threads;
  return c;
}

namespace {
std::vector<std::string> FilesWithPrefix(const std::string& dir, const std::string& prefix) {
  std::vector<std::pair<int, std::string>> found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind(prefix, 0) == 0 && n.size() > prefix.size() + 3 && n.substr(n.size() - 3) == ".pb")
        found.emplace_back(std::atoi(n.c_str() + prefix.size()), dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}
}  // namespace

StatusOr<std::vector<IValue>> ReadTestData(const std::string& dir, const std::string& prefix,
                                           const std::vector<ValueInfo>& types) {
  std::vector<IValue> values;
  auto files = FilesWithPrefix(dir, prefix);
  for (size_t i = 0; i < files.size(); ++i) {
    ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(files[i]));
    ValueType::Kind kind = i < types.size() ? types[i].type.kind : ValueType::Kind::kTensor;
    if (kind == ValueType::Kind::kSequence) {
      onnx::SequenceProto sp;
      RETURN_ERROR_IF(!sp.ParseFromString(bytes), INVALID_PROTOBUF, "'", files[i], "' is not a SequenceProto");
      ASSIGN_OR_RETURN(IValue v, SequenceFromProto(sp, files[i]));
      values.push_back(std::move(v));
    } else if (kind == ValueType::Kind::kOptional) {
      onnx::OptionalProto op;
      RETURN_ERROR_IF(!op.ParseFromString(bytes), INVALID_PROTOBUF, "'", files[i], "' is not an OptionalProto");
      ASSIGN_OR_RETURN(IValue v, OptionalFromProto(op, files[i]));
      values.push_back(std::move(v));
    } else {
      onnx::TensorProto tp;
      RETURN_ERROR_IF(!tp.ParseFromString(bytes), INVALID_PROTOBUF, "'", files[i], "' is not a TensorProto");
      ASSIGN_OR_RETURN(Tensor t, TensorFromProto(tp, "'" + files[i] + "'", nullptr));
      // ONNX 1.12's test data stores bfloat16 tensors as uint16 bit patterns; read them as the declared type.
      if (t.dtype() == DataType::kUint16 && i < types.size() && types[i].type.elem_type == DataType::kBFloat16)
        t = Tensor::View(DataType::kBFloat16, t.shape(), t.raw_data(), t.holder());
      values.push_back(IValue(std::move(t)));
    }
  }
  return values;
}

namespace {
template <typename T>
double AsDouble(const Tensor& t, int64_t i) {
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
    return static_cast<double>(t.data<T>()[i]);
  else if constexpr (kIsFloat8<T>)
    return static_cast<double>(static_cast<float>(t.data<T>()[i]));
  else if constexpr (kIsInt4<T>)
    return static_cast<double>(static_cast<int32_t>(t.data<T>()[i]));
  else
    return 0;
}

}  // namespace

double ElementAsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
#define X(e, T, n) \
  case DataType::e: \
    return AsDouble<T>(t, i);
    EPCTX_FOR_EACH_DATA_TYPE(X)
#undef X
    default: return 0;
  }
}

namespace {

bool TensorsClose(const Tensor& a, const Tensor& e, double rtol, double atol, std::string* why) {
  if (a.dtype() != e.dtype()) {
    *why = std::string("element type ") + DataTypeName(a.dtype()) + ", expected " + DataTypeName(e.dtype());
    return false;
  }
  if (a.shape() != e.shape()) {
    *why = "shape " + ShapeToString(a.shape()) + ", expected " + ShapeToString(e.shape());
    return false;
  }
  int64_t n = a.NumElements();
  if (a.dtype() == DataType::kString) {
    for (int64_t i = 0; i < n; ++i)
      if (a.data<std::string>()[i] != e.data<std::string>()[i]) {
        *why = "element " + std::to_string(i) + " is '" + a.data<std::string>()[i] + "', expected '" +
               e.data<std::string>()[i] + "'";
        return false;
      }
    return true;
  }
  bool is_float = a.dtype() == DataType::kFloat || a.dtype() == DataType::kDouble ||
                  a.dtype() == DataType::kFloat16 || a.dtype() == DataType::kBFloat16 || IsFloat8(a.dtype());
  if (a.dtype() == DataType::kComplex64 || a.dtype() == DataType::kComplex128) {
    // compare as pairs of reals
    int64_t m = n * 2;
    for (int64_t i = 0; i < m; ++i) {
      double x = a.dtype() == DataType::kComplex64 ? a.data<float>()[i] : a.data<double>()[i];
      double y = e.dtype() == DataType::kComplex64 ? e.data<float>()[i] : e.data<double>()[i];
      if (std::fabs(x - y) > atol + rtol * std::fabs(y)) {
        *why = "complex component " + std::to_string(i) + " differs";
        return false;
      }
    }
    return true;
  }
  double loose_atol = a.dtype() == DataType::kFloat16 || a.dtype() == DataType::kBFloat16 ? std::max(atol, 1e-3) : atol;
  for (int64_t i = 0; i < n; ++i) {
    double x = ElementAsDouble(a, i), y = ElementAsDouble(e, i);
    bool ok;
    if (is_float) {
      if (std::isnan(y)) ok = std::isnan(x);
      else if (std::isinf(y)) ok = x == y;
      else ok = std::fabs(x - y) <= loose_atol + rtol * std::fabs(y);
    } else {
      ok = x == y;
    }
    if (!ok) {
      std::ostringstream os;
      os.precision(9);
      os << "element " << i << " of " << ShapeToString(a.shape()) << " is " << x << ", expected " << y;
      *why = os.str();
      return false;
    }
  }
  return true;
}
}  // namespace

bool ValuesClose(const IValue& a, const IValue& e, double rtol, double atol, std::string* why) {
  if (a.kind() != e.kind()) {
    auto name = [](const IValue& v) { return v.is_none() ? "none" : v.is_tensor() ? "tensor" : "sequence"; };
    *why = std::string("value is a ") + name(a) + ", expected a " + name(e);
    return false;
  }
  if (a.is_none()) return true;
  if (a.is_tensor()) return TensorsClose(a.tensor(), e.tensor(), rtol, atol, why);
  if (a.sequence().size() != e.sequence().size()) {
    *why = "sequence of " + std::to_string(a.sequence().size()) + " tensors, expected " +
           std::to_string(e.sequence().size());
    return false;
  }
  for (size_t i = 0; i < a.sequence().size(); ++i) {
    if (!TensorsClose(a.sequence()[i], e.sequence()[i], rtol, atol, why)) {
      *why = "sequence element " + std::to_string(i) + ": " + *why;
      return false;
    }
  }
  return true;
}

StatusOr<std::vector<IValue>> RandomInputs(const std::vector<ValueInfo>& inputs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<IValue> out;
  for (const auto& in : inputs) {
    RETURN_ERROR_IF(in.type.kind != ValueType::Kind::kTensor, NOT_IMPLEMENTED, "random values for non-tensor input '",
                    in.name, "'");
    Shape shape;
    for (const auto& d : in.type.dims) shape.push_back(d.known() ? d.value : 1);
    ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(in.type.elem_type, shape));
    int64_t n = t.NumElements();
    std::uniform_real_distribution<float> uf(-1.f, 1.f);
    switch (t.dtype()) {
      case DataType::kFloat: for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = uf(rng); break;
      case DataType::kDouble: for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = uf(rng); break;
      case DataType::kFloat16: for (int64_t i = 0; i < n; ++i) t.data<Float16>()[i] = Float16(uf(rng)); break;
      case DataType::kInt64: for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = rng() % 16; break;
      case DataType::kInt32: for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = rng() % 16; break;
      case DataType::kBool: for (int64_t i = 0; i < n; ++i) t.data<bool>()[i] = rng() & 1; break;
      default: break;  // zeros
    }
    out.push_back(IValue(std::move(t)));
  }
  return out;
}

std::string Summarize(const IValue& v, size_t max_elems) {
  if (v.is_none()) return "none";
  if (v.is_sequence()) return "sequence of " + std::to_string(v.sequence().size()) + " tensors";
  const Tensor& t = v.tensor();
  std::ostringstream os;
  os << DataTypeName(t.dtype()) << ShapeToString(t.shape()) << " [";
  for (int64_t i = 0; i < t.NumElements() && i < static_cast<int64_t>(max_elems); ++i) {
    if (i) os << ", ";
    if (t.dtype() == DataType::kString) os << '"' << t.data<std::string>()[i] << '"';
    else os << ElementAsDouble(t, i);
  }
  if (t.NumElements() > static_cast<int64_t>(max_elems)) os << ", ...";
  os << "]";
  return os.str();
}

int Fail(const Status& status) {
  std::fprintf(stderr, "epctx: %s: %s\n", ErrorCodeName(status.code()), status.message().c_str());
  return 1;
}

void PrintLeftOnCpu(FILE* out, const std::vector<LeftOnCpuNode>& left, const std::string& prefix) {
  if (left.empty()) return;
  struct Group {
    std::vector<const LeftOnCpuNode*> nodes;
    std::map<std::string, size_t> ops;
  };
  // Reasons name the node's own values ("input 'a' dim 0 is free ('N')"); grouped with the names masked, so the
  // nodes downstream of one free dim form one group. A group of one node shows its reason unmasked.
  auto mask = [](const std::string& why) {
    std::string out;
    for (size_t i = 0; i < why.size();) {
      size_t hit = std::string::npos, len = 0;
      for (const char* w : {"input '", "output '"}) {
        size_t p = why.find(w, i);
        if (p < hit) hit = p, len = std::strlen(w);
      }
      size_t close = hit == std::string::npos ? hit : why.find('\'', hit + len);
      if (close == std::string::npos) {
        out += why.substr(i);
        break;
      }
      out += why.substr(i, hit + len - i) + "...'";
      i = close + 1;
    }
    return out;
  };
  std::map<std::string, Group> groups;  // masked reason text -> nodes
  std::map<std::string, std::string> exact;  // masked -> the first node's reason
  for (const LeftOnCpuNode& n : left) {
    std::string key, full;
    for (const auto& [ep, why] : n.reasons) {
      key += (key.empty() ? "" : "; ") + ep + ": " + mask(why);
      full += (full.empty() ? "" : "; ") + ep + ": " + why;
    }
    if (key.empty()) key = full = "no EP gave a reason";
    exact.emplace(key, full);
    Group& g = groups[key];
    g.nodes.push_back(&n);
    ++g.ops[n.op_type];
  }
  std::vector<std::pair<std::string, const Group*>> sorted;
  for (const auto& [k, g] : groups) sorted.emplace_back(k, &g);
  // Largest first, except groups of Constant nodes only: they cost nothing on the CPU EP, so they come last.
  auto constants_only = [](const Group* g) { return g->ops.size() == 1 && g->ops.count("Constant"); };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) {
    if (constants_only(a.second) != constants_only(b.second)) return !constants_only(a.second);
    return a.second->nodes.size() > b.second->nodes.size();
  });
  std::fprintf(out, "%snodes left on the CPU EP: %zu, for %zu reason(s)\n", prefix.c_str(), left.size(),
               sorted.size());
  constexpr size_t kNamesShown = 4;
  for (const auto& [reason, g] : sorted) {
    std::string ops;
    for (const auto& [op, c] : g->ops) ops += (ops.empty() ? "" : ", ") + op + (c > 1 ? " " + std::to_string(c) : "");
    std::fprintf(out, "%s  %zu node%s (%s): %s\n", prefix.c_str(), g->nodes.size(), g->nodes.size() == 1 ? "" : "s",
                 ops.c_str(), g->nodes.size() == 1 ? exact[reason].c_str() : reason.c_str());
    std::string names;
    for (size_t i = 0; i < g->nodes.size() && i < kNamesShown; ++i) {
      const LeftOnCpuNode& n = *g->nodes[i];
      names += (i ? ", " : "") + (n.name.empty() ? "(unnamed " + n.op_type + ")" : "'" + n.name + "'");
      if (!n.graph.empty()) names += " in subgraph '" + n.graph + "'";
    }
    if (g->nodes.size() > kNamesShown) names += " and " + std::to_string(g->nodes.size() - kNamesShown) + " more";
    std::fprintf(out, "%s    %s\n", prefix.c_str(), names.c_str());
  }
}

void PrintFreeDims(FILE* out, const std::vector<InferenceSession::FreeDim>& free, const std::vector<LeftOnCpuNode>& left,
                   const std::string& prefix) {
  if (free.empty()) return;
  size_t pinned_off = 0, not_handled = 0;  // nodes left for a free dim: dynamic_shapes=0 / a dim still not handled
  for (const LeftOnCpuNode& n : left)
    for (const auto& [ep, reason] : n.reasons) {
      if (reason.find("pin it with -f") != std::string::npos) {
        ++pinned_off;
        break;
      }
      if (reason.find("for every size of the free dims") != std::string::npos ||
          reason.find("binds at none of the probe sizes") != std::string::npos) {
        ++not_handled;
        break;
      }
    }
  if (pinned_off + not_handled == 0) return;
  std::string dims, flags;
  std::set<std::string> named;
  for (const auto& d : free) {
    dims += (dims.empty() ? "" : ", ") + std::string("'") + d.input + "' dim " + std::to_string(d.dim) +
            (d.symbol.empty() ? " (unnamed)" : " ('" + d.symbol + "')");
    if (!d.symbol.empty() && named.insert(d.symbol).second) flags += " -f " + d.symbol + ":N";
  }
  if (pinned_off)
    std::fprintf(out, "%sthe model's inputs have free dimensions: %s; with dynamic_shapes=0, nodes whose shapes depend "
                      "on them cannot be compiled ahead of time (%zu left on the CPU EP)\n",
                 prefix.c_str(), dims.c_str(), pinned_off + not_handled);
  else
    std::fprintf(out, "%sthe model's inputs have free dimensions: %s; %zu node(s) whose shapes are not known for every "
                      "size of them stay on the CPU EP\n", prefix.c_str(), dims.c_str(), not_handled);
  if (!flags.empty())
    std::fprintf(out, "%sto compile %s statically, pin the dims with the sizes the model will run with (N):%s\n",
                 prefix.c_str(), pinned_off ? "them" : "those nodes", flags.c_str());
  bool unnamed = false;
  for (const auto& d : free) unnamed |= d.symbol.empty();
  if (unnamed)
    std::fprintf(out, "%san unnamed dim has no dim_param to pin with -f; give that input a static shape\n",
                 prefix.c_str());
}

}  // namespace epctx::tools
