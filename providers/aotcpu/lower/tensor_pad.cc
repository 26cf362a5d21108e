// Pad: our own row loop (step kind kPad), on plain bytes or in a dense permutation such as nhwc; the rewrite
// FoldPadIntoConv.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "providers/aotcpu/lower/tensor_common.h"

namespace epctx {
namespace aotcpu {

// ---- Pad ---------------------------------------------------------------------------------------------------------

namespace {

struct PadSpec {
  int64_t mode = kPadConstant;
  std::vector<int64_t> begin, end;
  float value = 0;
};

// Pad's attributes and inputs per opset (2-10: pads/value attributes; 11+: pads, constant_value inputs; 18+: axes).
bool PadOf(const Graph& g, const Node& n, PadSpec* p, std::string* why) {
  if (n.opset < 2) return Reject(why, "Pad-1 is not supported");
  const std::vector<int64_t>& x = g.v(n.inputs[0]).dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  const std::string mode = n.Str("mode", "constant");
  if (mode == "constant") {
    p->mode = kPadConstant;
  } else if (mode == "reflect") {
    p->mode = kPadReflect;
  } else if (mode == "edge") {
    p->mode = kPadEdge;
  } else if (mode == "wrap" && n.opset >= 19) {
    p->mode = kPadWrap;
  } else {
    return Reject(why, "mode '" + mode + "' is not supported");
  }
  std::vector<int64_t> pads, axes;
  bool present = false;
  if (!IntsArg(g, n, 1, "pads", 11, &pads, &present) || !present) return Reject(why, "pads are not constant");
  if (n.opset < 11) {
    p->value = n.Float("value", 0.f);
  } else if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const Value& cv = g.v(n.inputs[2]);
    if (cv.dtype != kF32 || !g.ConstScalar(n.inputs[2], &p->value)) return Reject(why, "constant_value is not a constant float");
  }
  bool has_axes = false;
  if (n.opset >= 18 && !IntsArg(g, n, 3, "", 18, &axes, &has_axes)) return Reject(why, "axes are not constant");
  if (!has_axes)
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size()) return Reject(why, "pads has " + std::to_string(pads.size()) + " entries for " +
                                                   std::to_string(axes.size()) + " axes");
  p->begin.assign(x.size(), 0);
  p->end.assign(x.size(), 0);
  std::vector<bool> seen(x.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax;
    if (!NormAxis(axes[i], rank, &ax) || seen[static_cast<size_t>(ax)]) return Reject(why, "bad or repeated axis");
    seen[static_cast<size_t>(ax)] = true;
    const int64_t b = pads[i], e = pads[i + axes.size()], d = x[static_cast<size_t>(ax)];
    if (b < 0 || e < 0) return Reject(why, "negative pads (cropping) are not supported");
    if (b > (int64_t{1} << 32) || e > (int64_t{1} << 32)) return Reject(why, "pads too large");
    if (p->mode == kPadReflect && (b >= d || e >= d)) return Reject(why, "reflect pads must be smaller than the dim");
    if (p->mode == kPadEdge && d == 0 && (b || e)) return Reject(why, "edge-padding an empty axis");
    if (p->mode == kPadWrap && d == 0 && (b || e)) return Reject(why, "wrap-padding an empty axis");
    p->begin[static_cast<size_t>(ax)] = b;
    p->end[static_cast<size_t>(ax)] = e;
  }
  return true;
}

// The source index along one axis for destination index `i` (pads `b` before, source dim `d`); -1 = padding value.
inline int64_t PadSource(int64_t i, int64_t b, int64_t d, int64_t mode) {
  int64_t s = i - b;
  if (s >= 0 && s < d) return s;
  if (mode == kPadConstant) return -1;
  if (mode == kPadEdge) return s < 0 ? 0 : d - 1;
  if (mode == kPadWrap) return (s % d + d) % d;  // wrap: the source repeats with period d (pads may exceed d)
  return s < 0 ? -s : 2 * (d - 1) - s;  // reflect (pads < d, so one reflection lands inside)
}

class PadExec : public StepExec {
 public:
  PadExec(int src, int dst, std::vector<int64_t> sdims, std::vector<int64_t> begin, std::vector<int64_t> ddims,
          int64_t mode, float value)
      : src_(src), dst_(dst), sdims_(std::move(sdims)), begin_(std::move(begin)), ddims_(std::move(ddims)),
        mode_(mode), value_(value) {
    for (size_t k = 0; k + 1 < ddims_.size(); ++k) inner_only_ = inner_only_ && ddims_[k] == sdims_[k] && begin_[k] == 0;
  }

  void Run(RunContext& rc) override {
    const float* src = static_cast<const float*>(rc.ptr(src_));
    float* dst = static_cast<float*>(rc.ptr(dst_));
    const size_t rank = ddims_.size();
    const int64_t dinner = ddims_[rank - 1], sinner = sdims_[rank - 1], b = begin_[rank - 1];
    int64_t rows = 1;
    for (size_t k = 0; k + 1 < rank; ++k) rows *= ddims_[k];
    const std::vector<int64_t> sstrides = RowMajorStrides(sdims_);
    if (inner_only_ && mode_ == kPadConstant) {
      // Only the innermost axis is padded with a constant (a channel pad on nhwc bytes): row r of the destination is
      // row r of the source between two runs of the constant, with no index arithmetic per row.
      const int64_t tail = dinner - b - sinner;
#pragma omp parallel for schedule(static) if (rows * dinner > (1 << 16))
      for (int64_t r = 0; r < rows; ++r) {
        float* out = dst + r * dinner;
        std::fill_n(out, b, value_);
        std::memcpy(out + b, src + r * sinner, static_cast<size_t>(sinner) * sizeof(float));
        std::fill_n(out + b + sinner, tail, value_);
      }
      return;
    }
#pragma omp parallel for schedule(static) if (rows * dinner > (1 << 16))
    for (int64_t r = 0; r < rows; ++r) {
      float* out = dst + r * dinner;
      // The source row for destination row r, or none (a row of the constant).
      int64_t src_off = 0, rem = r;
      bool fill = false;
      for (size_t k = rank - 1; k-- > 0;) {
        const int64_t i = rem % ddims_[k];
        rem /= ddims_[k];
        const int64_t s = PadSource(i, begin_[k], sdims_[k], mode_);
        if (s < 0) {
          fill = true;
          break;
        }
        src_off += s * sstrides[k];
      }
      if (fill) {
        std::fill(out, out + dinner, value_);
        continue;
      }
      const float* in = src + src_off;
      for (int64_t j = 0; j < b; ++j) {
        const int64_t s = PadSource(j, b, sinner, mode_);
        out[j] = s < 0 ? value_ : in[s];
      }
      std::memcpy(out + b, in, static_cast<size_t>(sinner) * sizeof(float));
      for (int64_t j = b + sinner; j < dinner; ++j) {
        const int64_t s = PadSource(j, b, sinner, mode_);
        out[j] = s < 0 ? value_ : in[s];
      }
    }
  }

 private:
  int src_, dst_;
  std::vector<int64_t> sdims_, begin_, ddims_;
  int64_t mode_;
  float value_;
  bool inner_only_ = true;  // no axis but the last is padded
};
}  // namespace

int FoldPadIntoConv(Graph* g, std::vector<bool>* folded) {
  int count = 0;
  folded->resize(g->nodes.size(), false);
  for (size_t pi = 0; pi < g->nodes.size(); ++pi) {
    const Node& pad = g->nodes[pi];
    if ((*folded)[pi] || pad.op != "Pad" || !(pad.domain.empty() || pad.domain == "ai.onnx") || pad.outputs.size() != 1 ||
        pad.inputs.empty() || pad.inputs[0] < 0 || pad.outputs[0] < 0)
      continue;
    const int x = pad.inputs[0], y = pad.outputs[0];
    const Value& xv = g->v(x);
    const Value& yv = g->v(y);
    if (xv.dtype != kF32 || !xv.has_shape || !yv.has_shape || xv.dims.size() < 3 || yv.is_graph_output ||
        yv.consumers.empty())
      continue;
    PadSpec spec;
    if (!PadOf(*g, pad, &spec, nullptr) || spec.mode != kPadConstant || spec.value != 0.f || spec.begin[0] ||
        spec.end[0] || spec.begin[1] || spec.end[1])
      continue;
    // Every reader a Conv taking it as X with explicit pads (auto_pad NOTSET).
    bool all_conv = true;
    for (int c : yv.consumers) {
      const Node& cn = g->nodes[static_cast<size_t>(c)];
      all_conv = all_conv && !(*folded)[static_cast<size_t>(c)] && cn.op == "Conv" &&
                 (cn.domain.empty() || cn.domain == "ai.onnx") && !cn.inputs.empty() && cn.inputs[0] == y &&
                 std::count(cn.inputs.begin(), cn.inputs.end(), y) == 1 && cn.Str("auto_pad", "NOTSET") == "NOTSET";
    }
    if (!all_conv) continue;
    const size_t spatial = xv.dims.size() - 2;
    const std::vector<int> readers = yv.consumers;
    for (int c : readers) {
      Node& cn = g->nodes[static_cast<size_t>(c)];
      std::vector<int64_t> pads = cn.Ints("pads");
      if (pads.size() != 2 * spatial) pads.assign(2 * spatial, 0);
      for (size_t i = 0; i < spatial; ++i) {
        pads[i] += spec.begin[i + 2];
        pads[i + spatial] += spec.end[i + 2];
      }
      Attr a;
      a.type = EPCTX_ATTR_INTS;
      a.ints = pads;
      cn.attrs["pads"] = a;
      cn.inputs[0] = x;
      g->v(x).consumers.push_back(c);
    }
    std::vector<int>& xc = g->v(x).consumers;
    xc.erase(std::find(xc.begin(), xc.end(), static_cast<int>(pi)));
    for (size_t k = 1; k < g->nodes[pi].inputs.size(); ++k) {
      const int in = g->nodes[pi].inputs[k];
      if (in < 0) continue;
      std::vector<int>& ic = g->v(in).consumers;
      auto it = std::find(ic.begin(), ic.end(), static_cast<int>(pi));
      if (it != ic.end()) ic.erase(it);
    }
    g->v(y).consumers.clear();
    (*folded)[pi] = true;
    ++count;
  }
  return count;
}

bool SupportPad(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 1, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (x.dtype != kF32 || y.dtype != kF32) return Reject(why, "only float tensors");
  if (x.dims.empty()) return Reject(why, "scalar input");
  if (Numel(x.dims) == 0) return Reject(why, "empty input");
  PadSpec p;
  if (!PadOf(g, n, &p, why)) return false;
  std::vector<int64_t> dims = x.dims;
  for (size_t k = 0; k < dims.size(); ++k) dims[k] += p.begin[k] + p.end[k];
  if (dims != y.dims) return Reject(why, "computed shape " + DimsText(dims) + " differs from the graph's " + DimsText(y.dims));
  return true;
}

CheckResult LowerPad(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  PadSpec p;
  std::string why;
  if (!PadOf(ctx.graph(), n, &p, &why)) return ctx.Fail(node, why);
  Step s;
  s.kind = StepKind::kPad;
  s.name = StepName(ctx.graph(), n);
  // A source in a dense permutation of its axes (nhwc between convolutions) is padded in that order: the step sees the
  // bytes as a row-major tensor of the permuted dims, with the pads permuted alike, and the result keeps the layout.
  // Before, the source was reordered to plain and the result back for the next convolution (issue 24: a TensorFlow
  // face detector's channel pads, 3 steps where 1 does).
  std::vector<size_t> order;
  const Operand* cur = ctx.Peek(n.inputs[0]);
  const Value& yv = ctx.graph().v(n.outputs[0]);
  if (cur && cur->buf != Buf::kWeight && yv.dtype == kF32 && DensePermutation(*cur, &order)) {
    const size_t r = order.size();
    std::vector<int64_t> ydims(r), begin(r), end(r), ystrides(yv.dims.size());
    for (size_t k = 0; k < r; ++k) {
      ydims[k] = yv.dims[order[k]];
      begin[k] = p.begin[order[k]];
      end[k] = p.end[order[k]];
    }
    const std::vector<int64_t> phys = RowMajorStrides(ydims);
    for (size_t k = 0; k < r; ++k) ystrides[order[k]] = phys[k];
    try {
      const dnnl::memory::desc yd(dnnl::memory::dims(yv.dims.begin(), yv.dims.end()), dnnl::memory::data_type::f32,
                                  dnnl::memory::dims(ystrides.begin(), ystrides.end()));
      Operand src = ctx.Use(n.inputs[0]), dst = ctx.Define(n.outputs[0], yd);
      std::vector<int64_t> xdims(r);
      for (size_t k = 0; k < r; ++k) xdims[k] = src.dims[order[k]];
      src = StridedView(src, kF32, xdims, RowMajorStrides(xdims), 0);
      dst = StridedView(dst, kF32, ydims, phys, 0);
      s.ops = {src, dst};
      s.ints = {p.mode, static_cast<int64_t>(r)};
      s.ints.insert(s.ints.end(), begin.begin(), begin.end());
      s.ints.insert(s.ints.end(), end.begin(), end.end());
      s.floats = {p.value};
      ctx.Emit(std::move(s));
      return CheckResult::Ok();
    } catch (const dnnl::error&) {
      // a layout oneDNN cannot describe: the plain form below
    }
  }
  s.ops.push_back(ctx.UsePlain(n.inputs[0]));
  s.ops.push_back(ctx.DefinePlain(n.outputs[0]));
  s.ints = {p.mode, static_cast<int64_t>(p.begin.size())};
  s.ints.insert(s.ints.end(), p.begin.begin(), p.begin.end());
  s.ints.insert(s.ints.end(), p.end.begin(), p.end.end());
  s.floats = {p.value};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildPad(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  CheckResult r = bc.ExpectCounts(2, false, SIZE_MAX, 1);
  if (!r.ok) return r;
  if (s.ints.size() < 2) return bc.Fail("needs mode and rank");
  const int64_t mode = s.ints[0], n = s.ints[1];
  if (mode < kPadConstant || mode > kPadWrap) return bc.Fail("unknown pad mode " + std::to_string(mode));
  if (n < 1 || n > static_cast<int64_t>(kMaxRank)) return bc.Fail("rank " + std::to_string(n) + " out of range");
  if (s.ints.size() != static_cast<size_t>(2 + 2 * n)) return bc.Fail("pads do not match the rank");
  const Operand &src = s.ops[0], &dst = s.ops[1];
  if (!src.present() || !dst.present()) return bc.Fail("src and dst are required");
  if (src.dtype != kF32 || dst.dtype != kF32) return bc.Fail("pad operands must be f32");
  if (src.dims.size() != static_cast<size_t>(n) || dst.dims.size() != static_cast<size_t>(n))
    return bc.Fail("operand ranks differ from the pad rank");
  if (!IsPlain(src) || !IsPlain(dst)) return bc.Fail("operands must be plain row-major");
  std::vector<int64_t> begin(s.ints.begin() + 2, s.ints.begin() + 2 + n);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t b = s.ints[static_cast<size_t>(2 + k)], e = s.ints[static_cast<size_t>(2 + n + k)];
    const int64_t sd = src.dims[static_cast<size_t>(k)], dd = dst.dims[static_cast<size_t>(k)];
    if (b < 0 || e < 0 || b > (int64_t{1} << 40) || e > (int64_t{1} << 40)) return bc.Fail("pads out of range");
    if (sd <= 0 || dd < 0) return bc.Fail("empty or negative dims");
    if (dd != sd + b + e) return bc.Fail("dst dim " + std::to_string(k) + " is not src dim plus pads");
    if (mode == kPadReflect && (b >= sd || e >= sd)) return bc.Fail("reflect pads must be smaller than the src dim");
  }
  dnnl::memory::desc d0, d1;
  if (!(r = bc.Desc(0, &d0)).ok || !(r = bc.Desc(1, &d1)).ok) return r;  // both fit their buffers
  *out = std::make_unique<PadExec>(bc.Slot(0, d0), bc.Slot(1, d1), src.dims, std::move(begin), dst.dims, mode,
                                   s.floats[0]);
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
