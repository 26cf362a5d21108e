#include "providers/aotcpu/plan/compiler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include <xxhash.h>

#include "providers/aotcpu/ir/float16.h"
#include "providers/aotcpu/lower/ops.h"
#include "providers/aotcpu/runtime/roofline.h"

namespace epctx {
namespace aotcpu {
namespace {

size_t ElementSize(uint32_t dtype) {
  switch (dtype) {
    case 1: case 6: return 4;
    case 2: case 3: case 9: return 1;
    case 7: return 8;
    default: return 0;
  }
}

std::vector<int64_t> DenseStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) st[k - 1] = st[k] * std::max<int64_t>(dims[k], 1);
  return st;
}

// The element type of a value's bytes outside the partition (float16 for promoted values, ir/float16.h).
uint32_t StorageDtype(const Value& v) { return v.float16_storage ? kF16 : v.dtype; }

uint64_t OperandBytes(const Operand& op) {
  dnnl::memory::desc d;
  if (!OperandDesc(op, &d).ok) return 0;
  return d.get_size();
}

}  // namespace

bool IsPlain(const Operand& op) {
  if (op.tag != 0) return false;
  return op.strides.empty() || op.strides == DenseStrides(op.dims);
}

bool SameLayout(const dnnl::memory::desc& a, const dnnl::memory::desc& b) {
  if (!(a == b)) return false;
  const dnnl_memory_desc_t &x = a.data, &y = b.data;
  if (x.format_kind != dnnl_blocked) return true;
  for (int i = 0; i < x.ndims; ++i)
    if (x.format_desc.blocking.strides[i] != y.format_desc.blocking.strides[i]) return false;
  return true;
}

bool LayoutFromDesc(const dnnl::memory::desc& d, Operand* op) {
  const dnnl_memory_desc_t& md = d.data;
  op->dims.assign(md.dims, md.dims + md.ndims);
  if (md.format_kind != dnnl_blocked) return false;
  for (int i = 0; i < md.ndims; ++i)
    if (md.padded_dims[i] != md.dims[i] && md.format_desc.blocking.inner_nblks == 0) return false;
  if (md.offset0 != 0) return false;
  if (md.format_desc.blocking.inner_nblks == 0 && md.extra.flags == 0) {
    op->tag = 0;
    op->strides.assign(md.format_desc.blocking.strides, md.format_desc.blocking.strides + md.ndims);
    if (op->strides == DenseStrides(op->dims)) op->strides = DenseStrides(op->dims);
    return true;
  }
  const uint32_t tag = FormatTagOf(d);
  if (!tag) return false;
  op->tag = tag;
  op->strides.clear();
  return true;
}

namespace {
// FormatTagOf scans every oneDNN format tag (about 500 descriptor inits): its answers, by the descriptor's fields.
// A dynamic graph asks again for every operand of every new shape (a fifth of a new shape's lowering on the PaddleOCR
// detector). Bounded; shared by the compile threads.
std::string TagKey(const dnnl_memory_desc_t& md) {
  std::string k;
  auto add = [&k](const void* p, size_t n) { k.append(static_cast<const char*>(p), n); };
  add(&md.ndims, sizeof(md.ndims));
  add(md.dims, sizeof(md.dims[0]) * static_cast<size_t>(md.ndims));
  add(md.padded_dims, sizeof(md.padded_dims[0]) * static_cast<size_t>(md.ndims));
  add(md.padded_offsets, sizeof(md.padded_offsets[0]) * static_cast<size_t>(md.ndims));
  add(&md.offset0, sizeof(md.offset0));
  add(&md.data_type, sizeof(md.data_type));
  const dnnl_blocking_desc_t& b = md.format_desc.blocking;
  add(b.strides, sizeof(b.strides[0]) * static_cast<size_t>(md.ndims));
  add(&b.inner_nblks, sizeof(b.inner_nblks));
  add(b.inner_blks, sizeof(b.inner_blks[0]) * static_cast<size_t>(b.inner_nblks));
  add(b.inner_idxs, sizeof(b.inner_idxs[0]) * static_cast<size_t>(b.inner_nblks));
  add(&md.extra.flags, sizeof(md.extra.flags));
  return k;
}
uint32_t FormatTagSearch(const dnnl_memory_desc_t& md);
}  // namespace

uint32_t FormatTagOf(const dnnl::memory::desc& d) {
  const dnnl_memory_desc_t& md = d.data;
  if (md.format_kind != dnnl_blocked || md.ndims <= 0 || md.ndims > DNNL_MAX_NDIMS) return 0;
  if (md.format_desc.blocking.inner_nblks < 0 || md.format_desc.blocking.inner_nblks > DNNL_MAX_NDIMS) return 0;
  if (md.extra.flags != 0) return FormatTagSearch(md);  // compensation data the key does not cover
  static std::mutex mu;
  static std::unordered_map<std::string, uint32_t> cache;
  const std::string key = TagKey(md);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const uint32_t tag = FormatTagSearch(md);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 16384) cache.clear();
  cache.emplace(key, tag);
  return tag;
}

namespace {
uint32_t FormatTagSearch(const dnnl_memory_desc_t& md) {
  // oneDNN's equality ignores the strides of size-1 dims, but its kernels do not: a first convolution's weights
  // [24, 1, 3, 3] in Acdb8a also "equal" Abcd8a, and a primitive recreated from Abcd8a fell back to the reference
  // kernel (100 ms instead of 0.4 ms on openWakeWord's embedding model, issue 14). A tag whose strides match exactly
  // wins; the first merely equal one otherwise.
  uint32_t equal = 0;
  for (int t = static_cast<int>(dnnl_format_tag_any) + 1; t < static_cast<int>(dnnl_format_tag_last); ++t) {
    dnnl_memory_desc_t probe;
    if (dnnl_memory_desc_init_by_tag(&probe, md.ndims, md.dims, md.data_type, static_cast<dnnl_format_tag_t>(t)) !=
        dnnl_success)
      continue;
    if (!dnnl_memory_desc_equal(&probe, &md)) continue;
    bool exact = true;
    for (int i = 0; i < md.ndims; ++i)
      exact &= probe.format_desc.blocking.strides[i] == md.format_desc.blocking.strides[i];
    if (exact) return static_cast<uint32_t>(t);
    if (!equal) equal = static_cast<uint32_t>(t);
  }
  return equal;
}
}  // namespace

bool StaticFloatTensors(const Graph& g, const Node& n, std::string* why) {
  for (int v : n.inputs) {
    if (v < 0) continue;
    const Value& val = g.v(v);
    if (!val.has_shape) return *why = "input '" + val.name + "' has no static shape", false;
    if (val.dtype != kF32) return *why = "input '" + val.name + "' is not float", false;
    if (val.numel() == 0) return *why = "input '" + val.name + "' is empty", false;
  }
  for (int v : n.outputs) {
    if (v < 0) continue;
    const Value& val = g.v(v);
    if (!val.has_shape) return *why = "output '" + val.name + "' has no static shape", false;
    if (val.dtype != kF32) return *why = "output '" + val.name + "' is not float", false;
    if (val.numel() == 0) return *why = "output '" + val.name + "' is empty", false;
  }
  return true;
}

// ---- LowerContext ----

struct LowerContext::Storage {
  uint64_t bytes = 0;
  uint64_t offset = 0;
  int first = -1, last = -1;
};

struct LowerContext::Impl {
  std::vector<Storage> storages;
  // Weight names given so far, with their uses: a name given twice (one constant packed in two layouts, beside two
  // differently blocked activations) gets "#2", "#3"..., since the context binary resolves a graph's tensors by name
  // (difftest seed 20261211 model 4033: a Sub's 64-byte blocked constant read the 4-byte tensor of the same name).
  std::map<std::string, int> weight_names;
  std::string UniqueWeightName(const std::string& name) {
    const int uses = ++weight_names[name];
    return uses == 1 ? name : name + "#" + std::to_string(uses);
  }
  std::unordered_map<int, Operand> ops;          // value -> current operand
  std::unordered_map<int, int> plain_copy;       // blocked value -> value-like key of its plain copy (negative ids)
  std::unordered_map<int, Operand> plain_ops;    // plain copies, by value
  std::unordered_map<int, std::vector<Operand>> layout_ops;  // copies in other layouts (UseAs), by value
  std::vector<Step> steps;
  std::vector<TensorInput> weights;
  std::vector<CompiledGraph::Borrowed> borrowed;  // one per weight once any weight is borrowed
  uint64_t weight_bytes = 0;
  std::set<int> absorbed;
  std::unordered_map<int, uint32_t> output_index;  // value -> fused output index (first occurrence)
  std::set<int> fused_outputs;
  std::unordered_map<int, std::pair<Operand, std::string>> views;  // deferred views: operand, reorder step name
  std::map<std::string, Operand> derived;  // FindDerived / SetDerived
};

const Operand* LowerContext::FindDerived(const std::string& key) const {
  auto it = impl_->derived.find(key);
  return it == impl_->derived.end() ? nullptr : &it->second;
}
void LowerContext::SetDerived(const std::string& key, const Operand& op) { impl_->derived[key] = op; }

LowerContext::LowerContext(const Graph& g, const CompileOptions& options)
    : g_(g), options_(options), engine_(dnnl::engine::kind::cpu, 0), impl_(new Impl()) {}
LowerContext::~LowerContext() = default;

CheckResult LowerContext::Fail(int n, const std::string& why) const {
  if (n < 0) return CheckResult::Fail(why);
  return CheckResult::Fail("node '" + node(n).name + "' (" + node(n).op + "): " + why);
}

void LowerContext::BindInput(int value, uint32_t index) {
  const Value& v = g_.v(value);
  Operand op;
  op.buf = Buf::kInput;
  op.index = index;
  op.dtype = v.dtype;
  op.dims = v.dims;
  op.strides = DenseStrides(v.dims);
  if (v.float16_storage) {  // float16 bytes in, float32 inside (ir/float16.h): one converting copy at the edge
    op.dtype = kF16;
    Operand f32 = NewPlain(kF32, v.dims);
    Step s;
    s.kind = StepKind::kReorder;
    s.name = v.name + ":from_float16";
    s.ops = {op, f32};
    impl_->steps.push_back(std::move(s));
    op = f32;
  }
  impl_->ops[value] = op;
}

void LowerContext::BindOutput(int value, uint32_t index) {
  impl_->fused_outputs.insert(value);
  impl_->output_index.emplace(value, index);
}

const Operand* LowerContext::Peek(int value) const {
  auto it = impl_->ops.find(value);
  return it == impl_->ops.end() ? nullptr : &it->second;
}

bool LowerContext::IsAvailable(int value) const {
  return value >= 0 && (impl_->ops.count(value) || impl_->views.count(value) || g_.v(value).is_const());
}

void LowerContext::DefineView(int value, const Operand& view, const std::string& name) {
  impl_->views[value] = {view, name};
  // A fused output is copied now, while the bytes it views are still in cache (copying at the program's end
  // measured 40-50 us per 256 KB head tensor against 6 us hot); its readers then take the plain output.
  if (impl_->output_index.count(value)) Use(value);
}

const Operand* LowerContext::PeekView(int value) const {
  auto it = impl_->views.find(value);
  return it == impl_->views.end() ? nullptr : &it->second.first;
}

Operand LowerContext::Use(int value) {
  auto view = impl_->views.find(value);
  if (view != impl_->views.end()) {  // materialize a deferred view, once
    Step step;
    step.kind = StepKind::kReorder;
    step.name = view->second.second;
    step.ops = {view->second.first, DefinePlain(value)};
    impl_->views.erase(view);
    Emit(std::move(step));
  }
  auto it = impl_->ops.find(value);
  if (it != impl_->ops.end()) return it->second;
  const Value& v = g_.v(value);
  Operand op;
  if (v.is_const()) {
    TensorInput t;
    t.name = v.name;
    if (options_.initializer_owner && v.is_initializer && !v.folded && v.bytes() > 0) {  // not promoted data
      AddBorrowed({v.data, v.bytes(), options_.initializer_owner});
    } else {
      t.bytes.assign(static_cast<const char*>(v.data), v.bytes());
    }
    t.dtype = v.dtype;
    for (int64_t d : v.dims) t.dims.push_back(static_cast<uint64_t>(d));
    if (t.dims.empty()) t.dims.push_back(1);
    op.buf = Buf::kWeight;
    op.index = static_cast<uint32_t>(impl_->weights.size());
    op.dtype = v.dtype;
    op.dims = v.dims;
    op.strides = DenseStrides(v.dims);
    impl_->weight_bytes += t.bytes.size();
    impl_->weights.push_back(std::move(t));
    if (!impl_->borrowed.empty()) impl_->borrowed.resize(impl_->weights.size());
    impl_->ops[value] = op;
    return op;
  }
  return op;  // not available: kNone (the lowering checks IsAvailable first)
}

Operand LowerContext::UsePlain(int value) {
  Operand op = Use(value);
  if (!op.present() || IsPlain(op)) return op;
  auto it = impl_->plain_ops.find(value);
  if (it != impl_->plain_ops.end()) return it->second;
  Operand dst;
  dst.buf = Buf::kArena;  // OperandBytes counts present operands only
  dst.dtype = op.dtype;
  dst.dims = op.dims;
  dst.strides = DenseStrides(op.dims);
  dst = ReorderCopy(value, op, dst, OperandBytes(dst), ":to_plain");
  impl_->plain_ops[value] = dst;
  return dst;
}

Operand LowerContext::NewPlain(uint32_t dtype, const std::vector<int64_t>& dims) {
  Operand op;
  op.buf = Buf::kArena;
  op.dtype = dtype;
  op.dims = dims;
  op.strides = DenseStrides(dims);
  Storage s;
  s.bytes = std::max<uint64_t>(OperandBytes(op), 1);
  op.index = static_cast<uint32_t>(impl_->storages.size());
  impl_->storages.push_back(s);
  return op;
}

Operand LowerContext::ReorderCopy(int value, const Operand& src, Operand dst, uint64_t bytes, const char* suffix) {
  dst.buf = Buf::kArena;
  Storage s;
  s.bytes = bytes;
  dst.index = static_cast<uint32_t>(impl_->storages.size());
  impl_->storages.push_back(s);
  Step step;
  step.kind = StepKind::kReorder;
  step.name = g_.v(value).name + suffix;
  step.ops = {src, dst};
  Emit(std::move(step));
  return dst;
}

Operand LowerContext::BroadcastCopy(int value, const std::vector<int64_t>& dims) {
  const Value& v = g_.v(value);
  if (dims.empty() || v.dims.size() > dims.size() || DtypeSize(v.dtype) == 0) return Operand();
  std::vector<int64_t> in(dims.size() - v.dims.size(), 1);
  in.insert(in.end(), v.dims.begin(), v.dims.end());
  const std::vector<int64_t> rs = DenseStrides(in);
  std::vector<int64_t> strides(dims.size());
  int64_t numel = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (in[i] != dims[i] && in[i] != 1) return Operand();
    strides[i] = in[i] == 1 ? 0 : rs[i];
    numel *= dims[i];
  }
  if (numel <= 0) return Operand();
  Operand src = UsePlain(value);
  if (!src.present()) return src;
  Operand dst;
  dst.buf = Buf::kArena;
  dst.dtype = v.dtype;
  dst.dims = dims;
  dst.strides = DenseStrides(dims);
  Storage st;
  st.bytes = static_cast<uint64_t>(numel) * DtypeSize(v.dtype);
  dst.index = static_cast<uint32_t>(impl_->storages.size());
  impl_->storages.push_back(st);
  Step step;
  step.kind = StepKind::kStridedCopy;
  step.name = v.name + ":broadcast";
  step.ops = {src, dst};
  step.ints.push_back(0);
  step.ints.insert(step.ints.end(), strides.begin(), strides.end());
  Emit(std::move(step));
  return dst;
}

Operand LowerContext::UseAs(int value, const dnnl::memory::desc& desc) {
  // The same bytes under another description (strides of size-1 dims differ): a view, described exactly as asked,
  // so the executor recreates the primitive the compiler chose.
  auto same_bytes = [&desc](const Operand& o, Operand* view) {
    dnnl::memory::desc d;
    if (!OperandDesc(o, &d).ok || !(d == desc)) return false;
    *view = o;
    if (SameLayout(d, desc)) return true;
    Operand layout;
    if (!LayoutFromDesc(desc, &layout)) return false;
    view->dims = layout.dims;
    view->tag = layout.tag;
    view->strides = layout.strides;
    return true;
  };
  // `src` itself when it is the asked layout, else a copy made earlier, else a new one (one reorder step).
  auto as_asked = [&](const Operand& src) {
    Operand view;
    if (same_bytes(src, &view)) return view;
    for (const Operand& copy : impl_->layout_ops[value])
      if (same_bytes(copy, &view)) return view;
    Operand dst;
    if (!LayoutFromDesc(desc, &dst) || desc.get_size() == 0) return Operand();
    dst.dtype = src.dtype;
    dst = ReorderCopy(value, src, dst, desc.get_size(), dst.tag ? ":to_blocked" : ":to_strided");
    impl_->layout_ops[value].push_back(dst);
    return dst;
  };
  // A deferred view (a Transpose) already in the asked layout is read in place: tf2onnx's NHWC input transposed to
  // NCHW is, as bytes, the nhwc (acdb) source a convolution asks for. One in another layout is reordered straight
  // into it, not first into plain storage and then again (issue 24: two reorders of each input of a TensorFlow face
  // detector). Either way it stays deferred for readers that want it plain.
  auto deferred = impl_->views.find(value);
  if (deferred != impl_->views.end()) return as_asked(deferred->second.first);
  Operand op = Use(value);
  if (!op.present()) return op;
  return as_asked(op);
}

CheckResult LowerContext::AddWeight(const std::string& given, std::string bytes, const dnnl::memory::desc& desc,
                                    Operand* out) {
  const std::string name = impl_->UniqueWeightName(given);
  if (bytes.size() == desc.get_size() && AddEarlierWeight(name, desc, out)) return CheckResult::Ok();
  return AddWeight(name, std::move(bytes), desc, out, 0);
}

CheckResult LowerContext::AddWeight(const std::string& name, std::string bytes, const dnnl::memory::desc& desc,
                                    Operand* out, size_t borrowed_size) {
  Operand op;
  // Packed int8 weights may carry oneDNN's compensation after the blocked data (desc extra flags): the operand
  // records the blocked layout, the tensor holds every byte, and the step's builder checks the length it needs.
  dnnl::memory::desc layout = desc;
  layout.data.extra = dnnl_memory_extra_desc_t();
  if (!LayoutFromDesc(layout, &op)) return CheckResult::Fail("weight '" + name + "' has a layout no format tag describes");
  const uint32_t dtype = desc.data.data_type == dnnl_f32 ? kF32 : desc.data.data_type == dnnl_s32 ? kI32
                         : desc.data.data_type == dnnl_s8 ? kI8 : kU8;
  const size_t size = borrowed_size ? borrowed_size : bytes.size();
  if (size != desc.get_size())
    return CheckResult::Fail("weight '" + name + "' has " + std::to_string(size) + " bytes, its layout " +
                             std::to_string(desc.get_size()));
  op.buf = Buf::kWeight;
  op.index = static_cast<uint32_t>(impl_->weights.size());
  op.dtype = dtype;
  TensorInput t;
  t.name = name;
  t.dtype = dtype;
  t.dims = {size / ElementSize(dtype)};
  t.layout = op.tag;
  t.bytes = std::move(bytes);
  impl_->weight_bytes += t.bytes.size();
  impl_->weights.push_back(std::move(t));
  if (!impl_->borrowed.empty()) impl_->borrowed.resize(impl_->weights.size());
  if (options_.on_weight) options_.on_weight(impl_->weights.size(), impl_->weight_bytes);
  *out = op;
  return CheckResult::Ok();
}

void LowerContext::AddBorrowed(const CompiledGraph::Borrowed& b) {
  impl_->borrowed.resize(impl_->weights.size() + 1);
  impl_->borrowed.back() = b;
}

bool LowerContext::AddEarlierWeight(const std::string& name, const dnnl::memory::desc& desc, Operand* out) {
  if (!options_.earlier_weight) return false;
  const CompileOptions::EarlierWeight* e = options_.earlier_weight(name);
  if (!e || !(e->layout == desc)) return false;
  const void* data = e->bytes ? static_cast<const void*>(e->bytes->data()) : e->data;
  const size_t size = e->bytes ? e->bytes->size() : e->size;
  if (!data || size != desc.get_size()) return false;
  AddBorrowed({data, size, e->bytes ? std::shared_ptr<const void>(e->bytes) : e->keep});
  CheckResult r = AddWeight(name, std::string(), desc, out, size);
  return r.ok;
}

namespace {
uint64_t SourceHash(const void* data, const dnnl::memory::desc& plain) {
  // The bytes and their logical shape: equal bytes under another shape pack differently.
  uint64_t h = XXH3_64bits(data, plain.get_size());
  const dnnl_memory_desc_t& md = plain.data;
  return XXH3_64bits_withSeed(md.dims, sizeof(md.dims[0]) * static_cast<size_t>(md.ndims), h);
}
}  // namespace

bool LowerContext::PreferredLayout(const std::string& name, const void* data, const dnnl::memory::desc& plain,
                                   dnnl::memory::desc* out) const {
  if (options_.earlier_weight) {
    const CompileOptions::EarlierWeight* e = options_.earlier_weight(name);
    if (e) {
      *out = e->layout;
      return true;
    }
  }
  if (!options_.find_layout || !data) return false;
  return options_.find_layout(SourceHash(data, plain), out);
}

CheckResult LowerContext::PackWeight(const std::string& given, const void* data, const dnnl::memory::desc& plain,
                                     const dnnl::memory::desc& target, Operand* out) {
  const std::string name = impl_->UniqueWeightName(given);
  if (options_.record_layout && data) options_.record_layout(SourceHash(data, plain), target);
  if (AddEarlierWeight(name, target, out)) return CheckResult::Ok();  // packed by an earlier shape
  std::string bytes(target.get_size(), '\0');
  try {
    dnnl::memory src(plain, engine_, const_cast<void*>(data));
    dnnl::memory dst(target, engine_, bytes.data());
    dnnl::stream stream(engine_);
    dnnl::reorder(src, dst).execute(stream, src, dst);
    stream.wait();
  } catch (const dnnl::error& e) {
    return CheckResult::Fail("packing weight '" + name + "': " + e.what());
  }
  return AddWeight(name, std::move(bytes), target, out, 0);  // the name is already unique
}

Operand LowerContext::Define(int value, const dnnl::memory::desc& desc) {
  Operand op;
  const Value& v = g_.v(value);
  op.dtype = v.dtype;
  if (!LayoutFromDesc(desc, &op)) {  // unknown blocked layout: fall back to plain (the step will reorder)
    op.tag = 0;
    op.dims = v.dims;
    op.strides = DenseStrides(v.dims);
  }
  auto out = impl_->output_index.find(value);
  if (out != impl_->output_index.end() && IsPlain(op) && op.dims == v.dims && !v.float16_storage) {
    op.buf = Buf::kOutput;
    op.index = out->second;
    op.offset = 0;
  } else {
    op.buf = Buf::kArena;
    Storage s;
    s.bytes = desc.get_size();
    if (s.bytes == 0) s.bytes = OperandBytes(op);
    op.index = static_cast<uint32_t>(impl_->storages.size());
    impl_->storages.push_back(s);
  }
  impl_->ops[value] = op;
  return op;
}

Operand LowerContext::DefinePlain(int value) {
  const Value& v = g_.v(value);
  Operand op;
  op.dtype = v.dtype;
  op.dims = v.dims;
  op.strides = DenseStrides(v.dims);
  auto out = impl_->output_index.find(value);
  if (out != impl_->output_index.end() && !v.float16_storage) {  // float16 outputs: converted by Finish
    op.buf = Buf::kOutput;
    op.index = out->second;
  } else {
    op.buf = Buf::kArena;
    Storage s;
    s.bytes = std::max<uint64_t>(v.bytes(), 1);
    op.index = static_cast<uint32_t>(impl_->storages.size());
    impl_->storages.push_back(s);
  }
  impl_->ops[value] = op;
  return op;
}

CheckResult LowerContext::Alias(int value, int source, const std::vector<int64_t>& dims) {
  Operand src = UsePlain(source);
  if (!src.present()) return Fail(current_node_, "input '" + g_.v(source).name + "' is not available");
  if (!IsPlain(src)) return Fail(current_node_, "cannot view a non-plain tensor");
  int64_t a = 1, b = 1;
  for (int64_t d : dims) a *= d;
  for (int64_t d : src.dims) b *= d;
  if (a != b) return Fail(current_node_, "view changes the element count");
  src.dims = dims;
  src.strides = DenseStrides(dims);
  impl_->ops[value] = src;
  return CheckResult::Ok();
}

bool LowerContext::DefineSubView(int value, const Operand& view) {
  if (impl_->output_index.count(value) || impl_->fused_outputs.count(value)) return false;
  impl_->ops[value] = view;
  return true;
}

void LowerContext::Emit(Step step) {
  if (step.name.empty() && current_node_ >= 0) step.name = node(current_node_).name;
  impl_->steps.push_back(std::move(step));
}

int LowerContext::SoleConsumer(int value) const {
  if (value < 0) return -1;
  const Value& v = g_.v(value);
  if (v.consumers.size() != 1 || impl_->fused_outputs.count(value)) return -1;
  const int c = v.consumers[0];
  return impl_->absorbed.count(c) ? -1 : c;
}

void LowerContext::Absorb(int n) { impl_->absorbed.insert(n); }
bool LowerContext::IsAbsorbed(int n) const { return impl_->absorbed.count(n) != 0; }

CheckResult LowerContext::Finish(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                                 CompiledGraph* out) {
  Impl& m = *impl_;
  Program& p = out->program;
  p = Program();
  for (const std::string& name : inputs) {
    const int v = g_.Find(name);
    if (v < 0) return CheckResult::Fail("fused input '" + name + "' is not in the graph");
    p.inputs.push_back({name, StorageDtype(g_.v(v)), g_.v(v).dims});
  }
  // Outputs not written in place by their producer get a copy (blocked layout, alias, input, constant, duplicate).
  std::set<uint32_t> written;
  for (const Step& s : m.steps)
    for (const Operand& o : s.ops)
      if (o.buf == Buf::kOutput) written.insert(o.index);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int v = g_.Find(outputs[i]);
    if (v < 0) return CheckResult::Fail("fused output '" + outputs[i] + "' is not in the graph");
    p.outputs.push_back({outputs[i], StorageDtype(g_.v(v)), g_.v(v).dims});
    if (written.count(static_cast<uint32_t>(i))) continue;
    if (g_.v(v).has_shape && g_.v(v).numel() == 0) continue;  // no elements: nothing to copy
    Operand src = Use(v);
    if (!src.present()) return CheckResult::Fail("fused output '" + outputs[i] + "' is produced by no step");
    if (src.buf == Buf::kOutput && src.index == i) continue;
    Operand dst;
    dst.buf = Buf::kOutput;
    dst.index = static_cast<uint32_t>(i);
    dst.dtype = StorageDtype(g_.v(v));
    dst.dims = g_.v(v).dims;
    dst.strides = DenseStrides(dst.dims);
    src.dims = dst.dims.empty() ? src.dims : src.dims;
    Step s;
    s.kind = StepKind::kReorder;
    s.name = outputs[i] + ":output";
    s.ops = {src, dst};
    if (src.dims != dst.dims && IsPlain(src)) {  // a scalar or reshaped view: same bytes
      s.ops[0].dims = dst.dims;
      s.ops[0].strides = dst.strides;
    }
    m.steps.push_back(std::move(s));
  }
  // Lifetimes.
  for (size_t i = 0; i < m.steps.size(); ++i)
    for (const Operand& o : m.steps[i].ops)
      if (o.buf == Buf::kArena) {
        Storage& s = m.storages[o.index];
        if (s.first < 0) s.first = static_cast<int>(i);
        s.last = static_cast<int>(i);
      }
  // Offsets: largest first, lowest free offset among storages whose lifetimes overlap.
  std::vector<size_t> order;
  for (size_t i = 0; i < m.storages.size(); ++i)
    if (m.storages[i].first >= 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return m.storages[a].bytes != m.storages[b].bytes ? m.storages[a].bytes > m.storages[b].bytes : a < b;
  });
  std::vector<size_t> placed;
  uint64_t arena = 0;
  for (size_t i : order) {
    Storage& s = m.storages[i];
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t j : placed) {
      const Storage& t = m.storages[j];
      if (t.first <= s.last && s.first <= t.last) busy.push_back({t.offset, t.offset + t.bytes});
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& b : busy) {
      if (offset + s.bytes <= b.first) break;
      offset = std::max(offset, (b.second + 63) / 64 * 64);
    }
    s.offset = offset;
    arena = std::max(arena, offset + s.bytes);
    placed.push_back(i);
  }
  for (Step& s : m.steps)
    for (Operand& o : s.ops)
      if (o.buf == Buf::kArena) {
        o.offset += m.storages[o.index].offset;
        o.index = 0;
      }
  p.arena_bytes = (arena + 63) / 64 * 64;
  p.num_weights = static_cast<uint32_t>(m.weights.size());
  p.steps = std::move(m.steps);
  out->weights = std::move(m.weights);
  out->borrowed = std::move(m.borrowed);
  if (!out->borrowed.empty()) out->borrowed.resize(out->weights.size());
  return CheckResult::Ok();
}

namespace {

CheckResult CompileGraphOnce(const Graph& source, const std::vector<std::string>& inputs,
                             const std::vector<std::string>& outputs, const CompileOptions& options,
                             CompiledGraph* out) {
  Graph g = source;
  std::vector<bool> folded, computed;
  CheckResult r = RewriteEmptyOperands(&g, &computed);  // before folding: what it makes constant may fold further
  if (!r.ok) return r;
  r = FoldConstants(&g, &folded);
  if (!r.ok) return r;
  for (size_t i = 0; i < computed.size() && i < folded.size(); ++i) folded[i] = folded[i] || computed[i];
  PromoteFloat16(&g);
  folded.resize(g.nodes.size(), false);
  FuseSpelledActivations(&g, &folded);
  FoldPadIntoConv(&g, &folded);
  SplitConvTransposeBias(&g, &folded);
  FoldAddIntoBatchNorm(&g, &folded);
  LowerContext ctx(g, options);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int v = g.Find(inputs[i]);
    if (v < 0) return CheckResult::Fail("fused input '" + inputs[i] + "' is not in the graph");
    ctx.BindInput(v, static_cast<uint32_t>(i));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int v = g.Find(outputs[i]);
    if (v < 0) return CheckResult::Fail("fused output '" + outputs[i] + "' is not in the graph");
    ctx.BindOutput(v, static_cast<uint32_t>(i));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (folded[i] || ctx.IsAbsorbed(static_cast<int>(i))) continue;
    const Node& n = g.nodes[i];
    const OpEntry* e = FindOp(n.domain, n.op);
    if (!e) return ctx.Fail(static_cast<int>(i), "no lowering for this op");
    if (AllOutputsEmpty(g, n)) {  // nothing to compute: the outputs are defined, no step reads or writes them
      ctx.SetCurrentNode(static_cast<int>(i));
      for (int v : n.outputs)
        if (v >= 0) ctx.DefinePlain(v);
      continue;
    }
    std::string why;
    if (!e->support(g, n, &why)) return ctx.Fail(static_cast<int>(i), "not supported: " + why);
    ctx.SetCurrentNode(static_cast<int>(i));
    try {
      r = e->lower(ctx, static_cast<int>(i));
    } catch (const dnnl::error& err) {
      r = ctx.Fail(static_cast<int>(i), std::string("oneDNN: ") + err.what());
    }
    if (!r.ok) return r;
  }
  ctx.SetCurrentNode(-1);
  return ctx.Finish(inputs, outputs, out);
}

// ---- Layout plan ---------------------------------------------------------------------------------------------------
// Each op's lowering picks its layouts greedily, in topological order, from the layouts its inputs have. Which
// layout the convolutions hand on decides the rest: oneDNN's choice (blocked nChw8c at AVX2, mostly nhwc at AVX-512)
// or channels-last, in which every op here also runs (Pad, Concat, pooling, binary ops, Transpose as a view). The plan
// lowers a partition with convolutions both ways and keeps the program of lower estimated cost over the whole
// partition: every step's bytes and multiply-adds at fixed rates, layout copies at the rate they reach (measured with
// EPCTX_AOTCPU_PROFILE's roofline: reorders 13-26 GB/s, elementwise and pad steps 20-50 GB/s, convolutions 100-230
// GFLOP/s on the 2-core machines). A model, not a measurement: the same program on every compile (context binaries
// are deterministic), whatever the machine's load. EPCTX_AOTCPU_LAYOUT_PLAN=0 keeps oneDNN's choice and
// EPCTX_AOTCPU_LAYOUT_PLAN=channels_last forces the other (A/B runs).

double EstimatedCostUs(const Program& p) {
  double us = 0;
  for (const Step& s : p.steps) {
    const StepWork w = EstimateStepWork(s);
    switch (s.kind) {
      case StepKind::kReorder:
      case StepKind::kStridedCopy:
        us += w.bytes / 15e3;  // bytes at 15 GB/s, in microseconds
        break;
      case StepKind::kConv:
      case StepKind::kDeconv:
      case StepKind::kMatMul:
      case StepKind::kInnerProduct:
      case StepKind::kLstm:
        us += w.flops / 150e3 + w.bytes / 30e3;
        break;
      default:
        us += w.bytes / 30e3;
        break;
    }
  }
  return us;
}

// EPCTX_AOTCPU_LAYOUT_PLAN: unset or "1" plans; "0" keeps oneDNN's layouts; "channels_last" forces the other.
enum class PlanMode { kPlan, kOneDnn, kChannelsLast };
PlanMode LayoutPlanMode() {
  static const PlanMode mode = [] {
    const char* e = std::getenv("EPCTX_AOTCPU_LAYOUT_PLAN");
    if (e && std::strcmp(e, "0") == 0) return PlanMode::kOneDnn;
    if (e && std::strcmp(e, "channels_last") == 0) return PlanMode::kChannelsLast;
    return PlanMode::kPlan;
  }();
  return mode;
}

bool HasConvolution(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.domain.empty() && (n.op == "Conv" || n.op == "ConvTranspose")) return true;
  return false;
}

}  // namespace

CheckResult CompileGraph(const Graph& source, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const CompileOptions& options, CompiledGraph* out) {
  // A dynamic graph's later shapes (memo, earlier weights) keep the first shape's decisions; portable layouts are
  // plain everywhere.
  if (options.portable_layouts || options.channels_last || options.memo || options.earlier_weight ||
      LayoutPlanMode() == PlanMode::kOneDnn || !HasConvolution(source))
    return CompileGraphOnce(source, inputs, outputs, options, out);
  if (LayoutPlanMode() == PlanMode::kChannelsLast) {
    CompileOptions cl = options;
    cl.channels_last = true;
    return CompileGraphOnce(source, inputs, outputs, cl, out);
  }
  // The candidates are lowered without the callbacks that record or report (a weight-sharing group's layouts,
  // progress); the one kept is lowered again with them when there are any.
  CompileOptions quiet = options;
  quiet.on_weight = nullptr;
  quiet.record_layout = nullptr;
  CompiledGraph chosen, other;
  CheckResult r = CompileGraphOnce(source, inputs, outputs, quiet, &chosen);
  if (!r.ok) return r;
  quiet.channels_last = true;
  bool channels_last = false;
  double cost_any = EstimatedCostUs(chosen.program), cost_cl = -1;
  if (CompileGraphOnce(source, inputs, outputs, quiet, &other).ok) {
    cost_cl = EstimatedCostUs(other.program);
    // Channels-last only when it saves more than 3%: oneDNN's own choice wins ties.
    if (cost_cl < 0.97 * cost_any) {
      chosen = std::move(other);
      channels_last = true;
    }
  }
  if (const char* p = std::getenv("EPCTX_AOTCPU_PROFILE"); p && *p && std::strcmp(p, "0") != 0)
    std::fprintf(stderr, "[aotcpu profile] layout plan: oneDNN's layouts %.1f us (estimate), channels-last %.1f us -> %s\n",
                 cost_any, cost_cl, channels_last ? "channels-last" : "oneDNN's");
  if (!options.on_weight && !options.record_layout) {
    *out = std::move(chosen);
    return CheckResult::Ok();
  }
  CompileOptions final_options = options;
  final_options.channels_last = channels_last;
  return CompileGraphOnce(source, inputs, outputs, final_options, out);
}

}  // namespace aotcpu
}  // namespace epctx
