#include "providers/aotcpu/binary/dynamic_records.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "providers/aotcpu/binary/record_io.h"
#include "providers/aotcpu/plan/compiler.h"  // LayoutFromDesc, OperandDesc
#include "providers/aotcpu/runtime/program.h"   // Operand, kMaxRank

namespace epctx {
namespace aotcpu {
namespace {

using record_io::Reader;
using record_io::Writer;

constexpr char kMagic[8] = {'A', 'O', 'T', 'D', 'Y', 'N', '1', '\0'};
constexpr uint32_t kNone = 0xFFFFFFFFu;  // an absent value index / no tensor
constexpr int64_t kMaxDim = int64_t{1} << 40;

// Value flags.
constexpr uint32_t kHasShape = 1, kInitializer = 2, kGraphInput = 4, kGraphOutput = 8, kHasData = 16;
constexpr uint32_t kAllFlags = 31;

// The ONNX code of a packed weight's oneDNN data type (as LowerContext::AddWeight records it); 0 when none.
uint32_t WeightDtype(const dnnl::memory::desc& d) {
  switch (d.data.data_type) {
    case dnnl_f32: return kF32;
    case dnnl_s32: return kI32;
    case dnnl_s8: return kI8;
    case dnnl_u8: return kU8;
    default: return 0;
  }
}

// Product of dims (1 for a scalar) without overflow; false when a dim is negative or the product exceeds 2^56.
bool Numel(const std::vector<int64_t>& dims, uint64_t* out) {
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return false;
    if (d != 0 && n > (uint64_t{1} << 56) / static_cast<uint64_t>(d)) return false;
    n *= static_cast<uint64_t>(d);
  }
  *out = n;
  return true;
}

// Read-only zero pages for derived constants' placeholders (never unmapped: parsed graphs keep pointers into them).
struct ZeroRegions {
  std::mutex mu;
  std::vector<std::pair<const char*, size_t>> regions;
};
ZeroRegions& Zeros() {
  static ZeroRegions* z = new ZeroRegions();
  return *z;
}

const void* DerivedPlaceholder(size_t bytes) {
  static const char kOne = 0;
  if (bytes == 0) return &kOne;
  ZeroRegions& z = Zeros();
  std::lock_guard<std::mutex> lock(z.mu);
  for (const auto& [p, n] : z.regions)
    if (n >= bytes) return p;
  const size_t size = std::max<size_t>(bytes, size_t{1} << 24);
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  z.regions.emplace_back(static_cast<const char*>(p), size);
  return p;
}

void WriteIndex(Writer& w, int v) { w.U32(v < 0 ? kNone : static_cast<uint32_t>(v)); }

void WriteNames(Writer& w, const std::vector<std::string>& names) {
  w.U32(static_cast<uint32_t>(names.size()));
  for (const std::string& s : names) w.Str(s);
}

CheckResult ReadNames(Reader& r, const char* what, std::vector<std::string>* names) {
  uint32_t n = 0;
  if (!r.U32(&n)) return CheckResult::Fail(std::string(what) + " count is truncated");
  if (n > kMaxDynIo) return CheckResult::Fail(std::string(what) + " count " + std::to_string(n) + " is beyond the limit");
  names->resize(n);
  for (uint32_t i = 0; i < n; ++i)
    if (!r.Str(&(*names)[i], kMaxDynName))
      return CheckResult::Fail(std::string(what) + " " + std::to_string(i) + " is truncated or too long");
  return CheckResult::Ok();
}

}  // namespace

bool IsDerivedPlaceholder(const void* p) {
  ZeroRegions& z = Zeros();
  std::lock_guard<std::mutex> lock(z.mu);
  const char* c = static_cast<const char*>(p);
  for (const auto& [q, n] : z.regions)
    if (c >= q && c < q + n) return true;
  return false;
}

// Whether `strides` lay `dims` out densely (each dim > 1 a different stride, together covering numel elements once).
bool DenseStridesOf(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  if (strides.size() != dims.size()) return false;
  std::vector<std::pair<int64_t, int64_t>> by_stride;  // stride, dim
  for (size_t i = 0; i < dims.size(); ++i) {
    if (strides[i] < 0 || strides[i] > kMaxDim) return false;
    if (dims[i] > 1) by_stride.emplace_back(strides[i], dims[i]);
  }
  std::sort(by_stride.begin(), by_stride.end());
  int64_t want = 1;
  for (const auto& [stride, dim] : by_stride) {
    if (stride != want) return false;
    want *= dim;
  }
  return true;
}

CheckResult DeriveConstant(const dnnl::memory::desc& layout, const std::vector<int64_t>& given, const void* data,
                           void* out, size_t bytes) {
  const dnnl_memory_desc_t& l = layout.data;
  if (l.data_type != dnnl_f32 || l.extra.flags != 0) return CheckResult::Fail("not a float weight without extra data");
  if (l.ndims < 0 || l.ndims > DNNL_MAX_NDIMS) return CheckResult::Fail("the weight's layout has a bad rank");
  std::vector<int64_t> dims;
  for (int i = 0; i < l.ndims; ++i) dims.push_back(l.dims[i]);
  uint64_t numel = 0;
  if (!Numel(dims, &numel) || numel * 4 != bytes || bytes > layout.get_size())
    return CheckResult::Fail("the weight's layout holds " + std::to_string(numel) + " floats, the constant " +
                             std::to_string(bytes / 4));
  if (bytes == 0) return CheckResult::Ok();
  try {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::memory::dims strides(dims.size());
    dnnl::memory::dim s = 1;
    for (size_t i = dims.size(); i-- > 0;) strides[i] = s, s *= dims[i];
    if (!given.empty()) {
      if (!DenseStridesOf(dims, given)) return CheckResult::Fail("the plain strides do not lay the weight's dims out densely");
      strides.assign(given.begin(), given.end());
    }
    const dnnl::memory::desc plain(dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::f32, strides);
    dnnl::memory src(layout, engine, const_cast<void*>(data));
    dnnl::memory dst(plain, engine, out);
    dnnl::stream stream(engine);
    dnnl::reorder(src, dst).execute(stream, src, dst);
    stream.wait();
  } catch (const dnnl::error& e) {
    return CheckResult::Fail(std::string("reordering the packed weight to plain: ") + e.what());
  }
  return CheckResult::Ok();
}

CheckResult BakeFolds(const Graph& g, const LoweringMemo& memo, std::vector<StoredWeight>* packed, Graph* out,
                      std::vector<std::shared_ptr<std::string>>* owned, size_t* baked,
                      const std::set<std::string>& skip) {
  *baked = 0;
  Graph w = g;
  std::map<std::string, size_t> weight_at;
  for (size_t i = 0; i < packed->size(); ++i) weight_at[(*packed)[i].name] = i;
  std::vector<bool> drop(w.nodes.size(), false);
  std::map<std::string, size_t> node_at;
  for (size_t i = 0; i < w.nodes.size(); ++i) node_at.emplace(w.nodes[i].name, i);
  for (const auto& [conv_name, fold] : memo.fold) {
    auto ni = node_at.find(conv_name);
    if (ni == node_at.end() || fold.absorbed.empty() || !fold.weights || skip.count(conv_name)) continue;
    Node& conv = w.nodes[ni->second];
    if (!conv.domain.empty() || conv.op != "Conv" || conv.inputs.size() < 2 || conv.outputs.size() != 1 ||
        conv.outputs[0] < 0 || conv.inputs[1] < 0)
      continue;
    const int wv = conv.inputs[1];
    const int bv = conv.inputs.size() > 2 ? conv.inputs[2] : -1;
    const Value& wval = w.v(wv);
    if (!wval.is_const() || wval.dtype != kF32 || wval.numel() < 0 ||
        fold.weights->size() != static_cast<size_t>(wval.numel()) || wval.dims.empty() ||
        (fold.has_bias && fold.bias.size() != static_cast<size_t>(wval.dims[0])))
      continue;
    // The chain as the fold names it: each absorbed node the sole reader of the value before it.
    int cur = conv.outputs[0];
    std::vector<size_t> chain;
    bool ok = true;
    for (const std::string& name : fold.absorbed) {
      const Value& v = w.v(cur);
      auto a = node_at.find(name);
      if (v.is_graph_output || v.consumers.size() != 1 || a == node_at.end() ||
          v.consumers[0] != static_cast<int>(a->second) || drop[a->second] || w.nodes[a->second].outputs.empty() ||
          w.nodes[a->second].outputs[0] < 0) {
        ok = false;
        break;
      }
      chain.push_back(a->second);
      cur = w.nodes[a->second].outputs[0];
    }
    if (!ok) continue;
    const std::string old_out = w.v(conv.outputs[0]).name;
    const std::string fused = old_out + "/" + wval.name + ":fused";
    const std::string bias = old_out + "/" + (bv >= 0 ? w.v(bv).name : std::string()) + ":bias";
    auto fw = weight_at.find(fused);
    auto decision = memo.conv.find(conv_name);
    if (fw == weight_at.end() || decision == memo.conv.end()) continue;
    const bool post_ops = decision->second.fused > 0;
    // The new constants.
    auto add_const = [&](const std::string& base, const std::vector<int64_t>& dims, const void* data, size_t bytes) {
      std::string name = base;
      while (w.by_name.count(name)) name += "'";
      auto b = std::make_shared<std::string>(static_cast<const char*>(data), bytes);
      owned->push_back(b);
      Value v;
      v.name = name;
      v.dtype = kF32;
      v.has_shape = true;
      v.dims = dims;
      v.is_initializer = true;
      v.data = b->data();
      const int index = static_cast<int>(w.values.size());
      w.by_name[name] = index;
      w.values.push_back(std::move(v));
      return index;
    };
    const std::vector<int64_t> wdims = w.v(wv).dims;
    const int nw = add_const(w.v(wv).name + ":folded", wdims, fold.weights->data(), fold.weights->size() * 4);
    int nb = -1;
    if (fold.has_bias) nb = add_const(conv_name + ":folded_bias", {wdims[0]}, fold.bias.data(), fold.bias.size() * 4);
    Node& c = w.nodes[ni->second];  // (values grew; nodes did not)
    c.inputs.resize(2);
    c.inputs[1] = nw;
    if (nb >= 0) c.inputs.push_back(nb);
    c.outputs[0] = cur;
    for (size_t a : chain) drop[a] = true;
    const std::string new_out = w.v(cur).name;
    // ":fused" when post-ops are fused too (the memo's count), as nn_conv.cc names it.
    (*packed)[fw->second].name = new_out + "/" + w.v(nw).name + (post_ops ? ":fused" : ":packed");
    if (nb >= 0)
      if (auto fb = weight_at.find(bias); fb != weight_at.end())
        (*packed)[fb->second].name = new_out + "/" + w.v(nb).name + ":bias";
    ++*baked;
  }
  if (*baked == 0) {
    *out = std::move(w);
    return CheckResult::Ok();
  }
  // Compact: the kept nodes, and the values a kept node or the graph's inputs/outputs name.
  std::vector<Node> nodes;
  for (size_t i = 0; i < w.nodes.size(); ++i)
    if (!drop[i]) nodes.push_back(std::move(w.nodes[i]));
  std::vector<bool> used(w.values.size(), false);
  for (const Node& n : nodes)
    for (const std::vector<int>* list : {&n.inputs, &n.outputs})
      for (int v : *list)
        if (v >= 0) used[static_cast<size_t>(v)] = true;
  for (int v : w.inputs) used[static_cast<size_t>(v)] = true;
  for (int v : w.outputs) used[static_cast<size_t>(v)] = true;
  std::vector<int> remap(w.values.size(), -1);
  Graph r;
  r.name = w.name;
  r.model_path = w.model_path;
  for (size_t i = 0; i < w.values.size(); ++i) {
    if (!used[i]) continue;
    remap[i] = static_cast<int>(r.values.size());
    Value v = std::move(w.values[i]);
    v.producer = -1;
    v.consumers.clear();
    r.by_name[v.name] = remap[i];
    r.values.push_back(std::move(v));
  }
  auto map_list = [&](std::vector<int>* list) {
    for (int& v : *list)
      if (v >= 0) v = remap[static_cast<size_t>(v)];
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    map_list(&nodes[i].inputs);
    map_list(&nodes[i].outputs);
    for (int v : nodes[i].inputs)
      if (v >= 0) r.values[static_cast<size_t>(v)].consumers.push_back(static_cast<int>(i));
    for (int v : nodes[i].outputs)
      if (v >= 0) r.values[static_cast<size_t>(v)].producer = static_cast<int>(i);
  }
  r.nodes = std::move(nodes);
  r.inputs = w.inputs;
  r.outputs = w.outputs;
  map_list(&r.inputs);
  map_list(&r.outputs);
  *out = std::move(r);
  return CheckResult::Ok();
}

DerivedConstants DerivableConstants(const Graph& g, const std::vector<StoredWeight>& packed) {
  DerivedConstants out;
  for (const StoredWeight& p : packed) {
    std::string base;
    for (const std::string suffix : {":packed", ":packed1x1", ":fused"})
      if (p.name.size() > suffix.size() && p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) == 0)
        base = p.name.substr(0, p.name.size() - suffix.size());
    if (base.empty() || p.layout.data.data_type != dnnl_f32 || p.layout.data.extra.flags != 0 || !p.data) continue;
    // The source value: the whole base ("<value>:packed", MatMul) or what follows a '/' ("<output>/<value>:packed").
    std::vector<std::string> candidates = {base};
    for (size_t k = base.find('/'); k != std::string::npos; k = base.find('/', k + 1))
      candidates.push_back(base.substr(k + 1));
    for (const std::string& name : candidates) {
      const int vi = g.Find(name);
      if (vi < 0 || out.count(name)) continue;
      const Value& v = g.v(vi);
      if (!v.is_const() || v.dtype != kF32 || !v.has_shape || v.is_graph_output || v.consumers.empty()) continue;
      bool weight_only = true;
      for (int c : v.consumers) {
        const Node& n = g.nodes[static_cast<size_t>(c)];
        const bool op = n.domain.empty() && (n.op == "MatMul" || n.op == "Gemm" || n.op == "Conv");
        for (size_t k = 0; k < n.inputs.size(); ++k)
          if (n.inputs[k] == vi && (!op || k != 1)) weight_only = false;
      }
      if (!weight_only) continue;
      std::string bytes(v.bytes(), '\0');
      if (bytes.empty()) continue;
      // Row-major, then the first two dims swapped.
      std::vector<std::vector<int64_t>> tries = {{}};
      const dnnl_memory_desc_t& l = p.layout.data;
      if (l.ndims >= 2) {
        std::vector<int64_t> st(static_cast<size_t>(l.ndims));
        int64_t inner = 1;
        for (int i = l.ndims; i-- > 2;) st[static_cast<size_t>(i)] = inner, inner *= l.dims[i];
        st[0] = inner;
        st[1] = inner * l.dims[0];
        tries.push_back(st);
      }
      for (const std::vector<int64_t>& st : tries)
        if (DeriveConstant(p.layout, st, p.data, bytes.data(), bytes.size()).ok &&
            std::memcmp(bytes.data(), v.data, bytes.size()) == 0) {
          out.emplace(name, DerivedConstant{p.name, st});
          break;
        }
      if (out.count(name)) break;
    }
  }
  return out;
}

CheckResult SerializeDynamicGraph(const Graph& g, const std::vector<std::string>& inputs,
                                  const std::vector<std::string>& outputs, const std::vector<StoredWeight>& packed,
                                  DynamicRecords* out, const std::string& tensor_name_prefix,
                                  const DynamicShapeInfo& shapes, const DerivedConstants& derived) {
  *out = DynamicRecords();
  std::map<std::string, uint32_t> weight_index;
  for (size_t i = 0; i < packed.size(); ++i) weight_index.emplace(packed[i].name, static_cast<uint32_t>(i));
  for (const auto& [value, dc] : derived) {
    const std::string& weight = dc.weight;
    const int v = g.Find(value);
    auto w = weight_index.find(weight);
    uint64_t numel = 0, wnumel = 0;
    if (v < 0 || !g.v(v).is_const() || g.v(v).dtype != kF32 || !Numel(g.v(v).dims, &numel))
      return CheckResult::Fail("derived constant '" + value + "' is not a float constant of the graph");
    if (w == weight_index.end()) return CheckResult::Fail("derived constant '" + value + "': no packed weight '" + weight + "'");
    const dnnl::memory::desc& l = packed[w->second].layout;
    if (!Numel(std::vector<int64_t>(l.data.dims, l.data.dims + l.data.ndims), &wnumel) || wnumel != numel ||
        l.data.data_type != dnnl_f32 || l.data.extra.flags != 0 ||
        (!dc.strides.empty() && !DenseStridesOf(std::vector<int64_t>(l.data.dims, l.data.dims + l.data.ndims), dc.strides)))
      return CheckResult::Fail("derived constant '" + value + "': packed weight '" + weight +
                               "' is not a float weight of its size, or the strides are not dense over its dims");
  }
  if (shapes.profiles.size() > kMaxDynProfiles || shapes.ranges.size() > kMaxDynIo)
    return CheckResult::Fail("more shape profiles or ranges than the format holds");
  for (const auto& profile : shapes.profiles)
    if (profile.size() != inputs.size()) return CheckResult::Fail("a shape profile does not give every input's dims");
  if (g.values.size() > kMaxDynValues || g.nodes.size() > kMaxDynNodes || packed.size() > kMaxDynWeights ||
      g.inputs.size() > kMaxDynIo || g.outputs.size() > kMaxDynIo || inputs.size() > kMaxDynIo ||
      outputs.size() > kMaxDynIo)
    return CheckResult::Fail("the graph has more values, nodes, inputs, outputs or weights than the format holds");
  Writer w;
  w.Raw(kMagic, 8);
  w.U32(kDynamicRecordsVersion);
  w.Str(g.name);
  w.U32(static_cast<uint32_t>(g.values.size()));
  for (const Value& v : g.values) {
    const std::string where = "value '" + v.name + "'";
    if (v.name.size() > kMaxDynName) return CheckResult::Fail(where + ": the name is too long");
    if (v.dims.size() > kMaxRank) return CheckResult::Fail(where + " has rank " + std::to_string(v.dims.size()));
    if (!v.dim_symbols.empty() && v.dim_symbols.size() != v.dims.size())
      return CheckResult::Fail(where + " has " + std::to_string(v.dim_symbols.size()) + " dim symbols for rank " +
                               std::to_string(v.dims.size()));
    uint32_t flags = (v.has_shape ? kHasShape : 0) | (v.is_initializer ? kInitializer : 0) |
                     (v.is_graph_input ? kGraphInput : 0) | (v.is_graph_output ? kGraphOutput : 0) |
                     (v.is_const() ? kHasData : 0);
    w.Str(v.name);
    w.U32(v.dtype);
    w.U32(flags);
    w.I64s(v.dims);
    WriteNames(w, v.dim_symbols);
    if (!v.is_const()) {
      w.U32(kNone);
      continue;
    }
    uint64_t numel = 0;
    const size_t esize = DtypeSize(v.dtype);
    if (!v.has_shape || !Numel(v.dims, &numel)) return CheckResult::Fail(where + " is a constant without a static shape");
    if (esize == 0) return CheckResult::Fail(where + " is a constant of dtype " + std::to_string(v.dtype) +
                                             ", which the binary does not carry");
    if (derived.count(v.name)) {  // stored only as its packed weight (version 3 section)
      w.U32(kNone);
      continue;
    }
    w.U32(static_cast<uint32_t>(out->tensors.size()));
    TensorInput t;
    t.name = tensor_name_prefix + "const:" + v.name;
    t.dtype = v.dtype;
    t.dims = {numel};  // 1-D: a constant's rank may exceed the TENSORS table's 8; the records hold the real dims
    t.bytes.assign(static_cast<const char*>(v.data), numel * esize);
    out->tensors.push_back(std::move(t));
  }
  w.U32(static_cast<uint32_t>(g.nodes.size()));
  for (const Node& n : g.nodes) {
    const std::string where = "node '" + n.name + "' (" + n.op + ")";
    if (n.has_subgraphs) return CheckResult::Fail(where + " has subgraphs");
    if (n.inputs.size() > kMaxDynNodeIo || n.outputs.size() > kMaxDynNodeIo || n.attrs.size() > kMaxDynAttrs)
      return CheckResult::Fail(where + " has more inputs, outputs or attributes than the format holds");
    w.Str(n.name);
    w.Str(n.op);
    w.Str(n.domain);
    w.I64(n.opset);
    w.U32(static_cast<uint32_t>(n.inputs.size()));
    for (int v : n.inputs) WriteIndex(w, v);
    w.U32(static_cast<uint32_t>(n.outputs.size()));
    for (int v : n.outputs) WriteIndex(w, v);
    w.U32(static_cast<uint32_t>(n.attrs.size()));
    for (const auto& [name, a] : n.attrs) {
      if (a.type == EPCTX_ATTR_GRAPH || a.type == EPCTX_ATTR_GRAPHS)
        return CheckResult::Fail(where + " attribute '" + name + "' is a subgraph");
      w.Str(name);
      w.U32(static_cast<uint32_t>(a.type));
      w.I64(a.i);
      w.F32(a.f);
      w.Str(a.s);
      w.I64s(a.ints);
      w.U32(static_cast<uint32_t>(a.floats.size()));
      for (float f : a.floats) w.F32(f);
    }
  }
  w.U32(static_cast<uint32_t>(g.inputs.size()));
  for (int v : g.inputs) WriteIndex(w, v);
  w.U32(static_cast<uint32_t>(g.outputs.size()));
  for (int v : g.outputs) WriteIndex(w, v);
  WriteNames(w, inputs);
  WriteNames(w, outputs);
  w.U32(static_cast<uint32_t>(packed.size()));
  for (const StoredWeight& p : packed) {
    const std::string where = "packed weight '" + p.name + "'";
    Operand op;
    const uint32_t dtype = WeightDtype(p.layout);
    if (!dtype) return CheckResult::Fail(where + " has a data type the records do not hold");
    if (!LayoutFromDesc(p.layout, &op)) return CheckResult::Fail(where + " has a layout no operand describes");
    if (!p.data || p.size != p.layout.get_size())
      return CheckResult::Fail(where + " has " + std::to_string(p.size) + " bytes, its layout " +
                               std::to_string(p.layout.get_size()));
    w.Str(p.name);
    w.U32(dtype);
    w.U32(op.tag);
    w.I64s(op.dims);
    w.I64s(op.strides);
    w.U32(static_cast<uint32_t>(out->tensors.size()));
    TensorInput t;
    t.name = tensor_name_prefix + "packed:" + p.name;
    t.dtype = dtype;
    t.dims = {p.size / DtypeSize(dtype)};
    t.layout = op.tag;
    t.bytes.assign(static_cast<const char*>(p.data), p.size);
    out->tensors.push_back(std::move(t));
  }
  // Version 2: profiles (u32 count; per profile one i64s per fused input) and ranges (u32 count; str, i64 lo, hi).
  w.U32(static_cast<uint32_t>(shapes.profiles.size()));
  for (const auto& profile : shapes.profiles)
    for (const std::vector<int64_t>& dims : profile) {
      if (dims.size() > kMaxRank) return CheckResult::Fail("a shape profile has rank " + std::to_string(dims.size()));
      w.I64s(dims);
    }
  w.U32(static_cast<uint32_t>(shapes.ranges.size()));
  for (const auto& [name, range] : shapes.ranges) {
    if (name.size() > kMaxDynName) return CheckResult::Fail("a range's symbol name is too long");
    w.Str(name);
    w.I64(range.first);
    w.I64(range.second);
  }
  // Version 3: derived constants (u32 count; u32 value index, str packed weight name).
  w.U32(static_cast<uint32_t>(derived.size()));
  for (const auto& [value, dc] : derived) {
    w.U32(static_cast<uint32_t>(g.Find(value)));
    w.Str(dc.weight);
    w.I64s(dc.strides);
  }
  out->records = std::move(w.out);
  return CheckResult::Ok();
}

CheckResult ParseDynamicGraph(std::string_view records, const std::vector<WeightRef>& tensors,
                              ParsedDynamicGraph* out) {
  *out = ParsedDynamicGraph();
  Graph& g = out->graph;
  Reader r(records);
  char magic[8];
  if (!r.Raw(magic, 8) || std::memcmp(magic, kMagic, 8) != 0)
    return CheckResult::Fail("dynamic graph records do not start with the magic AOTDYN1");
  uint32_t version = 0;
  if (!r.U32(&version)) return CheckResult::Fail("dynamic graph records are truncated in the version");
  if (version < 1 || version > 3)
    return CheckResult::Fail("dynamic graph records version " + std::to_string(version) +
                             " is not supported (this build reads 1 to 3)");
  if (!r.Str(&g.name, kMaxDynName)) return CheckResult::Fail("the graph name is truncated or too long");
  static const char kEmpty = 0;  // the data of a zero-byte constant (Value::data must not be null)
  auto tensor = [&](uint32_t t, uint64_t bytes, const std::string& where, const void** data) -> CheckResult {
    if (t >= tensors.size())
      return CheckResult::Fail(where + " names tensor " + std::to_string(t) + " of " + std::to_string(tensors.size()));
    if (tensors[t].length != bytes)
      return CheckResult::Fail(where + " needs " + std::to_string(bytes) + " bytes, tensor " + std::to_string(t) +
                               " has " + std::to_string(tensors[t].length));
    if (bytes && !tensors[t].data) return CheckResult::Fail(where + ": tensor " + std::to_string(t) + " has no data");
    *data = bytes ? tensors[t].data : &kEmpty;
    return CheckResult::Ok();
  };

  // Values.
  uint32_t nvalues = 0;
  if (!r.U32(&nvalues)) return CheckResult::Fail("the value count is truncated");
  if (nvalues > kMaxDynValues || static_cast<uint64_t>(nvalues) * 24 > records.size())
    return CheckResult::Fail("value count " + std::to_string(nvalues) + " exceeds the records or the limit");
  g.values.resize(nvalues);
  std::vector<uint32_t> pending;  // version 3: constants without a tensor, made from a packed weight (below)
  for (uint32_t i = 0; i < nvalues; ++i) {
    Value& v = g.values[i];
    std::string where = "value " + std::to_string(i);
    uint32_t flags = 0, nsym = 0, t = 0;
    if (!r.Str(&v.name, kMaxDynName)) return CheckResult::Fail(where + " name is truncated or too long");
    where += " ('" + v.name + "')";
    if (!r.U32(&v.dtype) || !r.U32(&flags)) return CheckResult::Fail(where + " dtype or flags are truncated");
    if (!r.I64s(&v.dims, kMaxRank)) return CheckResult::Fail(where + " dims are truncated or the rank is above 12");
    if (!r.U32(&nsym)) return CheckResult::Fail(where + " dim symbol count is truncated");
    if (nsym != 0 && nsym != v.dims.size())
      return CheckResult::Fail(where + " has " + std::to_string(nsym) + " dim symbols for rank " +
                               std::to_string(v.dims.size()));
    v.dim_symbols.resize(nsym);
    for (uint32_t k = 0; k < nsym; ++k)
      if (!r.Str(&v.dim_symbols[k], kMaxDynName))
        return CheckResult::Fail(where + " dim symbol " + std::to_string(k) + " is truncated or too long");
    if (!r.U32(&t)) return CheckResult::Fail(where + " tensor index is truncated");
    if (flags & ~kAllFlags) return CheckResult::Fail(where + " has unknown flags " + std::to_string(flags));
    if (v.dtype > 255) return CheckResult::Fail(where + " has unknown dtype " + std::to_string(v.dtype));
    v.has_shape = flags & kHasShape;
    v.is_initializer = flags & kInitializer;
    v.is_graph_input = flags & kGraphInput;
    v.is_graph_output = flags & kGraphOutput;
    for (int64_t d : v.dims)
      if (d < (v.has_shape ? 0 : -1) || d > kMaxDim)
        return CheckResult::Fail(where + " has dimension " + std::to_string(d));
    if (!g.by_name.emplace(v.name, static_cast<int>(i)).second)
      return CheckResult::Fail(where + ": another value has that name");
    const bool has_data = flags & kHasData;
    if (!has_data) {
      if (t != kNone) return CheckResult::Fail(where + " is not a constant but names tensor " + std::to_string(t));
      if (v.is_initializer) return CheckResult::Fail(where + " is an initializer without data");
      continue;
    }
    if (v.is_graph_input) return CheckResult::Fail(where + " is both a graph input and a constant");
    uint64_t numel = 0;
    const size_t esize = DtypeSize(v.dtype);
    if (!v.has_shape || !Numel(v.dims, &numel)) return CheckResult::Fail(where + " is a constant without a static shape");
    if (esize == 0) return CheckResult::Fail(where + " is a constant of unsupported dtype " + std::to_string(v.dtype));
    if (version >= 3 && t == kNone) {
      // Derived from a packed weight: the derived-constants section gives it its placeholder; until then it is a
      // constant (nodes may read it) marked by a sentinel.
      if (v.dtype != kF32) return CheckResult::Fail(where + " has no tensor but is not a float constant");
      v.data = &kEmpty;
      pending.push_back(i);
      continue;
    }
    CheckResult c = tensor(t, numel * esize, where, &v.data);
    if (!c.ok) return c;
  }

  // Nodes, in topological order: a node reads only graph inputs, constants and earlier nodes' outputs.
  uint32_t nnodes = 0;
  if (!r.U32(&nnodes)) return CheckResult::Fail("the node count is truncated");
  if (nnodes > kMaxDynNodes || static_cast<uint64_t>(nnodes) * 32 > records.size())
    return CheckResult::Fail("node count " + std::to_string(nnodes) + " exceeds the records or the limit");
  std::vector<bool> available(nvalues);
  for (uint32_t i = 0; i < nvalues; ++i) available[i] = g.values[i].is_graph_input || g.values[i].is_const();
  g.nodes.resize(nnodes);
  for (uint32_t i = 0; i < nnodes; ++i) {
    Node& n = g.nodes[i];
    std::string where = "node " + std::to_string(i);
    if (!r.Str(&n.name, kMaxDynName) || !r.Str(&n.op, kMaxDynName) || !r.Str(&n.domain, kMaxDynName) ||
        !r.I64(&n.opset))
      return CheckResult::Fail(where + " name, op, domain or opset is truncated or too long");
    where += " ('" + n.name + "', " + n.op + ")";
    if (n.opset < 0 || n.opset > 100000) return CheckResult::Fail(where + " has opset " + std::to_string(n.opset));
    for (int pass = 0; pass < 2; ++pass) {
      const char* what = pass == 0 ? "input" : "output";
      std::vector<int>& list = pass == 0 ? n.inputs : n.outputs;
      uint32_t count = 0;
      if (!r.U32(&count)) return CheckResult::Fail(where + " " + what + " count is truncated");
      if (count > kMaxDynNodeIo || static_cast<uint64_t>(count) * 4 > records.size() - r.pos())
        return CheckResult::Fail(where + " " + what + " count " + std::to_string(count) +
                                 " exceeds the records or the limit");
      list.resize(count);
      for (uint32_t k = 0; k < count; ++k) {
        uint32_t v = 0;
        r.U32(&v);  // in bounds: checked with the count
        const std::string slot = where + " " + what + " " + std::to_string(k);
        if (v == kNone) {
          list[k] = -1;
          continue;
        }
        if (v >= nvalues)
          return CheckResult::Fail(slot + " names value " + std::to_string(v) + " of " + std::to_string(nvalues));
        Value& val = g.values[v];
        if (pass == 0) {
          if (!available[v])
            return CheckResult::Fail(slot + " reads value '" + val.name +
                                     "' before any node produces it (not in topological order, or a cycle)");
          val.consumers.push_back(static_cast<int>(i));
        } else {
          if (val.is_graph_input || val.is_const())
            return CheckResult::Fail(slot + " writes value '" + val.name + "', a graph input or constant");
          if (val.producer >= 0)
            return CheckResult::Fail(slot + " writes value '" + val.name + "', which node " +
                                     std::to_string(val.producer) + " produces too");
          val.producer = static_cast<int>(i);
        }
        list[k] = static_cast<int>(v);
      }
      if (pass == 1)  // outputs become readable after the node (a node reading its own output is a cycle)
        for (int v : list)
          if (v >= 0) available[static_cast<size_t>(v)] = true;
    }
    uint32_t nattrs = 0;
    if (!r.U32(&nattrs)) return CheckResult::Fail(where + " attribute count is truncated");
    if (nattrs > kMaxDynAttrs)
      return CheckResult::Fail(where + " attribute count " + std::to_string(nattrs) + " is beyond the limit");
    for (uint32_t k = 0; k < nattrs; ++k) {
      std::string name;
      Attr a;
      uint32_t type = 0, nf = 0;
      const std::string at = where + " attribute " + std::to_string(k);
      // A tensor attribute (a Constant node's value) keeps its bytes in `s`: bounded by the records, not by a name's
      // limit.
      if (!r.Str(&name, kMaxDynName) || !r.U32(&type) || !r.I64(&a.i) || !r.F32(&a.f) ||
          !r.Str(&a.s, type == EPCTX_ATTR_TENSOR ? static_cast<uint32_t>(std::min<size_t>(records.size(), UINT32_MAX))
                                                 : kMaxDynName) ||
          !r.I64s(&a.ints, kMaxDynAttrElems) || !r.U32(&nf))
        return CheckResult::Fail(at + " is truncated or too long");
      if (type > EPCTX_ATTR_TENSORS) return CheckResult::Fail(at + " ('" + name + "') has unknown type " + std::to_string(type));
      if (type == EPCTX_ATTR_GRAPH || type == EPCTX_ATTR_GRAPHS)
        return CheckResult::Fail(at + " ('" + name + "') is a subgraph");
      if (nf > kMaxDynAttrElems || static_cast<uint64_t>(nf) * 4 > records.size() - r.pos())
        return CheckResult::Fail(at + " ('" + name + "') float count " + std::to_string(nf) +
                                 " exceeds the records or the limit");
      a.type = static_cast<EpctxOpAttrType>(type);
      a.floats.resize(nf);
      for (uint32_t f = 0; f < nf; ++f) r.F32(&a.floats[f]);
      if (!n.attrs.emplace(name, std::move(a)).second)
        return CheckResult::Fail(at + " ('" + name + "') is given twice");
    }
  }

  // Graph inputs and outputs.
  for (int pass = 0; pass < 2; ++pass) {
    const char* what = pass == 0 ? "graph input" : "graph output";
    std::vector<int>& list = pass == 0 ? g.inputs : g.outputs;
    uint32_t count = 0;
    if (!r.U32(&count)) return CheckResult::Fail(std::string(what) + " count is truncated");
    if (count > kMaxDynIo || static_cast<uint64_t>(count) * 4 > records.size() - r.pos())
      return CheckResult::Fail(std::string(what) + " count " + std::to_string(count) +
                               " exceeds the records or the limit");
    std::set<uint32_t> seen;
    for (uint32_t k = 0; k < count; ++k) {
      uint32_t v = 0;
      r.U32(&v);
      const std::string slot = std::string(what) + " " + std::to_string(k);
      if (v >= nvalues)
        return CheckResult::Fail(slot + " names value " + std::to_string(v) + " of " + std::to_string(nvalues));
      const Value& val = g.values[v];
      if (pass == 0 ? !val.is_graph_input : !val.is_graph_output)
        return CheckResult::Fail(slot + " names value '" + val.name + "', which is not flagged as one");
      if (pass == 1 && !available[v])
        return CheckResult::Fail(slot + " names value '" + val.name + "', which nothing produces");
      if (!seen.insert(v).second) return CheckResult::Fail(slot + " names value '" + val.name + "' twice");
      list.push_back(static_cast<int>(v));
    }
    size_t flagged = 0;
    for (const Value& val : g.values) flagged += pass == 0 ? val.is_graph_input : val.is_graph_output;
    if (flagged != list.size())
      return CheckResult::Fail(std::to_string(flagged) + " values are flagged as " + what + "s, the list has " +
                               std::to_string(list.size()));
  }

  // The fused node's inputs and outputs.
  CheckResult c = ReadNames(r, "fused input", &out->inputs);
  if (!c.ok) return c;
  if (!(c = ReadNames(r, "fused output", &out->outputs)).ok) return c;
  for (const std::string& name : out->inputs)
    if (g.Find(name) < 0 || !g.v(g.Find(name)).is_graph_input)
      return CheckResult::Fail("fused input '" + name + "' is not a graph input");
  for (const std::string& name : out->outputs)
    if (g.Find(name) < 0 || !g.v(g.Find(name)).is_graph_output)
      return CheckResult::Fail("fused output '" + name + "' is not a graph output");

  // Packed weights.
  uint32_t nweights = 0;
  if (!r.U32(&nweights)) return CheckResult::Fail("the packed weight count is truncated");
  if (nweights > kMaxDynWeights || static_cast<uint64_t>(nweights) * 24 > records.size() - r.pos())
    return CheckResult::Fail("packed weight count " + std::to_string(nweights) + " exceeds the records or the limit");
  for (uint32_t i = 0; i < nweights; ++i) {
    std::string name;
    Operand op;
    uint32_t t = 0;
    std::string where = "packed weight " + std::to_string(i);
    if (!r.Str(&name, kMaxDynName) || !r.U32(&op.dtype) || !r.U32(&op.tag) || !r.I64s(&op.dims, kMaxRank) ||
        !r.I64s(&op.strides, kMaxRank) || !r.U32(&t))
      return CheckResult::Fail(where + " is truncated, or a name or rank is beyond the limits");
    where += " ('" + name + "')";
    if (op.dtype != kF32 && op.dtype != kI32 && op.dtype != kI8 && op.dtype != kU8)
      return CheckResult::Fail(where + " has unsupported dtype " + std::to_string(op.dtype));
    if (op.tag == 0 && op.strides.size() != op.dims.size())
      return CheckResult::Fail(where + " has " + std::to_string(op.strides.size()) + " strides for rank " +
                               std::to_string(op.dims.size()));
    if (op.tag != 0 && !op.strides.empty()) return CheckResult::Fail(where + " has both a format tag and strides");
    if (op.dims.empty()) return CheckResult::Fail(where + " has rank 0");
    for (int64_t d : op.dims)
      if (d <= 0 || d > kMaxDim) return CheckResult::Fail(where + " has dimension " + std::to_string(d));
    for (int64_t s : op.strides)
      if (s < 0 || s > kMaxDim) return CheckResult::Fail(where + " has stride " + std::to_string(s));
    op.buf = Buf::kWeight;
    BorrowedWeight b;
    if (!(c = OperandDesc(op, &b.layout)).ok) return CheckResult::Fail(where + " has a bad layout: " + c.reason);
    b.size = b.layout.get_size();
    if (b.size == 0) return CheckResult::Fail(where + " has a layout of no bytes");
    if (!(c = tensor(t, b.size, where, &b.data)).ok) return c;
    if (!out->packed.emplace(name, b).second) return CheckResult::Fail(where + " is given twice");
  }
  if (version >= 2) {
    uint32_t nprof = 0;
    if (!r.U32(&nprof)) return CheckResult::Fail("the shape profile count is truncated");
    if (nprof > kMaxDynProfiles) return CheckResult::Fail("shape profile count " + std::to_string(nprof) + " exceeds 256");
    for (uint32_t k = 0; k < nprof; ++k) {
      std::vector<std::vector<int64_t>> profile(out->inputs.size());
      for (size_t i = 0; i < profile.size(); ++i) {
        if (!r.I64s(&profile[i], kMaxRank))
          return CheckResult::Fail("shape profile " + std::to_string(k) + " input " + std::to_string(i) +
                                   " is truncated or has a rank beyond 12");
        for (int64_t d : profile[i])
          if (d < 0 || d > kMaxDim)
            return CheckResult::Fail("shape profile " + std::to_string(k) + " input '" + out->inputs[i] +
                                     "' has dim " + std::to_string(d));
      }
      out->shapes.profiles.push_back(std::move(profile));
    }
    uint32_t nranges = 0;
    if (!r.U32(&nranges)) return CheckResult::Fail("the shape range count is truncated");
    if (nranges > kMaxDynIo) return CheckResult::Fail("shape range count " + std::to_string(nranges) + " exceeds 4096");
    for (uint32_t k = 0; k < nranges; ++k) {
      std::string name;
      int64_t lo = 0, hi = 0;
      if (!r.Str(&name, kMaxDynName) || !r.I64(&lo) || !r.I64(&hi))
        return CheckResult::Fail("shape range " + std::to_string(k) + " is truncated");
      if (lo < 0 || hi < lo)
        return CheckResult::Fail("shape range '" + name + "' is " + std::to_string(lo) + ".." + std::to_string(hi));
      if (!out->shapes.ranges.emplace(name, std::make_pair(lo, hi)).second)
        return CheckResult::Fail("shape range '" + name + "' is given twice");
    }
  }
  if (version >= 3) {
    uint32_t nderived = 0;
    if (!r.U32(&nderived)) return CheckResult::Fail("the derived constant count is truncated");
    if (nderived > pending.size())
      return CheckResult::Fail("derived constant count " + std::to_string(nderived) + " exceeds the " +
                               std::to_string(pending.size()) + " constants without a tensor");
    for (uint32_t k = 0; k < nderived; ++k) {
      uint32_t vi = 0;
      std::string weight;
      std::vector<int64_t> strides;
      std::string where = "derived constant " + std::to_string(k);
      if (!r.U32(&vi) || !r.Str(&weight, kMaxDynName) || !r.I64s(&strides, kMaxRank))
        return CheckResult::Fail(where + " is truncated, or a name or rank is beyond the limits");
      if (vi >= nvalues)
        return CheckResult::Fail(where + " names value " + std::to_string(vi) + " of " + std::to_string(nvalues));
      Value& v = g.values[vi];
      where += " ('" + v.name + "')";
      if (v.data != &kEmpty || !std::binary_search(pending.begin(), pending.end(), vi))
        return CheckResult::Fail(where + " is not a constant without a tensor, or is given twice");
      auto w = out->packed.find(weight);
      if (w == out->packed.end()) return CheckResult::Fail(where + " names packed weight '" + weight + "', which is not stored");
      const dnnl_memory_desc_t& l = w->second.layout.data;
      uint64_t numel = 0, wnumel = 0;
      Numel(v.dims, &numel);  // checked with the value
      if (l.data_type != dnnl_f32 || l.extra.flags != 0 ||
          !Numel(std::vector<int64_t>(l.dims, l.dims + l.ndims), &wnumel) || wnumel != numel ||
          numel * 4 > w->second.size)
        return CheckResult::Fail(where + ": packed weight '" + weight + "' is not a float weight of " +
                                 std::to_string(numel) + " elements");
      if (!strides.empty() && !DenseStridesOf(std::vector<int64_t>(l.dims, l.dims + l.ndims), strides))
        return CheckResult::Fail(where + ": its strides do not lay out packed weight '" + weight + "' densely");
      v.data = DerivedPlaceholder(numel * 4);
      if (!v.data) return CheckResult::Fail(where + ": no memory for its placeholder");
      out->derived.emplace(v.name, DerivedConstant{weight, std::move(strides)});
    }
    for (uint32_t i : pending)
      if (g.values[i].data == &kEmpty)
        return CheckResult::Fail("value " + std::to_string(i) + " ('" + g.values[i].name +
                                 "') is a constant without a tensor and no packed weight it derives from");
  }
  if (!r.done())
    return CheckResult::Fail("dynamic graph records have " + std::to_string(records.size() - r.pos()) +
                             " trailing bytes");
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
