// Gather: a bounds-checked row copy (step kind kGather).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "providers/aotcpu/lower/tensor_common.h"

namespace epctx {
namespace aotcpu {
namespace {

// ---- Gather step -------------------------------------------------------------------------------------------------

class GatherExec : public StepExec {
 public:
  GatherExec(int data, int indices, int dst, int64_t outer, int64_t bound, int64_t inner_bytes, int64_t num_indices,
             bool i64)
      : data_(data), indices_(indices), dst_(dst), outer_(outer), bound_(bound),
        inner_(inner_bytes), nidx_(num_indices), i64_(i64) {}

  void Run(RunContext& rc) override {
    const char* data = static_cast<const char*>(rc.ptr(data_));
    const void* ind = rc.ptr(indices_);
    char* dst = static_cast<char*>(rc.ptr(dst_));
    rows_.resize(static_cast<size_t>(nidx_));
    for (int64_t j = 0; j < nidx_; ++j) {
      int64_t v;
      if (i64_) {
        std::memcpy(&v, static_cast<const char*>(ind) + j * 8, 8);
      } else {
        int32_t w;
        std::memcpy(&w, static_cast<const char*>(ind) + j * 4, 4);
        v = w;
      }
      if (v < -bound_ || v >= bound_) {
        rc.Fail("index " + std::to_string(v) + " (position " + std::to_string(j) + " of the indices) is out of range [" +
                std::to_string(-bound_) + ", " + std::to_string(bound_) + ") of the gathered axis");
        return;
      }
      rows_[static_cast<size_t>(j)] = v < 0 ? v + bound_ : v;
    }
    for (int64_t o = 0; o < outer_; ++o) {
      const char* src = data + o * bound_ * inner_;
      char* d = dst + o * nidx_ * inner_;
      for (int64_t j = 0; j < nidx_; ++j)
        std::memcpy(d + j * inner_, src + rows_[static_cast<size_t>(j)] * inner_, static_cast<size_t>(inner_));
    }
  }

 private:
  int data_, indices_, dst_;
  int64_t outer_, bound_, inner_, nidx_;
  bool i64_;
  // Validated rows of the current run. A RunContext is used by one run at a time, but this exec is shared between
  // concurrent runs, so the buffer is per thread.
  static thread_local std::vector<int64_t> rows_;
};
thread_local std::vector<int64_t> GatherExec::rows_;


}  // namespace

// ---- Gather ------------------------------------------------------------------------------------------------------

bool SupportGather(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 2, why)) return false;
  const Value &x = g.v(n.inputs[0]), &ind = g.v(n.inputs[1]), &y = g.v(n.outputs[0]);
  if (x.dtype != y.dtype || !MovableType(x.dtype)) return Reject(why, "unsupported element type");
  if (ind.dtype != kI64 && ind.dtype != kI32) return Reject(why, "indices must be int64 or int32");
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis;
  if (rank == 0 || !NormAxis(n.Int("axis", 0), rank, &axis)) return Reject(why, "axis out of range");
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), ind.dims.begin(), ind.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  if (dims != y.dims) return Reject(why, "output shape disagrees with data and indices");
  if (Numel(dims) == 0) return Reject(why, "empty result");
  // Constant indices are checked now: an out-of-range one leaves the node to the CPU EP, which reports it.
  std::vector<int64_t> idx;
  if (ind.is_const() && g.ConstInts(n.inputs[1], &idx)) {
    const int64_t bound = x.dims[static_cast<size_t>(axis)];
    for (int64_t i : idx)
      if (i < -bound || i >= bound) return Reject(why, "constant index out of range");
  }
  return true;
}

CheckResult LowerGather(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  const Graph& g = ctx.graph();
  const Value& x = g.v(n.inputs[0]);
  int64_t axis = 0;  // the support check validated it
  NormAxis(n.Int("axis", 0), static_cast<int64_t>(x.dims.size()), &axis);
  Step s;
  s.kind = StepKind::kGather;
  s.name = StepName(ctx.graph(), n);
  s.ops.push_back(x.is_const() ? ctx.Use(n.inputs[0]) : ctx.UsePlain(n.inputs[0]));
  s.ops.push_back(ctx.UsePlain(n.inputs[1]));
  s.ops.push_back(ctx.DefinePlain(n.outputs[0]));
  s.ints = {axis};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildGather(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  CheckResult r = bc.ExpectCounts(3, false, 1, 0);
  if (!r.ok) return r;
  const Operand &data = s.ops[0], &ind = s.ops[1], &dst = s.ops[2];
  if (!data.present() || !ind.present() || !dst.present()) return bc.Fail("data, indices and dst are required");
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  const int64_t axis = s.ints[0];
  if (axis < 0 || axis >= rank)
    return bc.Fail("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  if (ind.dtype != kI64 && ind.dtype != kI32) return bc.Fail("indices must be int64 or int32");
  if (data.dtype != dst.dtype) return bc.Fail("data and dst differ in type");
  const size_t es = DtypeSize(data.dtype);
  if (es == 0) return bc.Fail("unsupported element type " + std::to_string(data.dtype));
  std::vector<int64_t> dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), ind.dims.begin(), ind.dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  if (dims != dst.dims)
    return bc.Fail("dst dims " + DimsText(dst.dims) + " are not data dims " + DimsText(data.dims) + " with axis " +
                   std::to_string(axis) + " replaced by indices dims " + DimsText(ind.dims));
  for (const Operand* o : {&data, &ind, &dst})
    for (int64_t d : o->dims)
      if (d < 0) return bc.Fail("negative dim");
  if (!IsPlain(data) || !IsPlain(ind) || !IsPlain(dst)) return bc.Fail("operands must be plain row-major");
  dnnl::memory::desc dd[3];
  for (size_t i = 0; i < 3; ++i)
    if (!(r = bc.Desc(i, &dd[i])).ok) return r;  // checks that each operand fits its buffer
  int64_t outer = 1, inner = static_cast<int64_t>(es);
  for (int64_t i = 0; i < axis; ++i) outer *= data.dims[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= data.dims[static_cast<size_t>(i)];
  const int d0 = bc.Slot(0, dd[0]), d1 = bc.Slot(1, dd[1]), d2 = bc.Slot(2, dd[2]);
  *out = std::make_unique<GatherExec>(d0, d1, d2, outer, data.dims[static_cast<size_t>(axis)], inner,
                                      Numel(ind.dims), ind.dtype == kI64);
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
