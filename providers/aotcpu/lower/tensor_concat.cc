// Concat (into a blocked or permuted destination slice by slice, or oneDNN concat) and Split (sub-views of a blocked or
// permuted source, or one reorder per part).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "providers/aotcpu/lower/tensor_common.h"

namespace epctx {
namespace aotcpu {

// ---- Concat ------------------------------------------------------------------------------------------------------

bool SupportConcat(const Graph& g, const Node& n, std::string* why) {
  if (n.inputs.empty()) return Reject(why, "no inputs");
  if (!StaticIo(g, n, n.inputs.size(), why)) return false;
  const Value& y = g.v(n.outputs[0]);
  if (!MovableType(y.dtype)) return Reject(why, "unsupported element type");
  if (!n.Has("axis")) return Reject(why, "axis is required");
  const int64_t rank = static_cast<int64_t>(y.dims.size());
  int64_t axis;
  if (rank == 0 || !NormAxis(n.Int("axis", 0), rank, &axis)) return Reject(why, "axis out of range");
  int64_t total = 0;
  for (int vi : n.inputs) {
    const Value& x = g.v(vi);
    if (x.dtype != y.dtype || x.dims.size() != y.dims.size()) return Reject(why, "inputs differ in type or rank");
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis && x.dims[static_cast<size_t>(i)] != y.dims[static_cast<size_t>(i)])
        return Reject(why, "input shapes differ off the axis");
    total += x.dims[static_cast<size_t>(axis)];
  }
  if (total != y.dims[static_cast<size_t>(axis)]) return Reject(why, "output length along the axis disagrees");
  if (Numel(y.dims) == 0) return Reject(why, "empty result");
  if (n.inputs.size() + 1 > kMaxStepOperands) return Reject(why, "too many inputs");
  return true;
}

CheckResult LowerConcat(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  const Graph& g = ctx.graph();
  const Value& y = g.v(n.outputs[0]);
  int64_t axis = 0;  // the support check validated it
  NormAxis(n.Int("axis", 0), static_cast<int64_t>(y.dims.size()), &axis);
  std::vector<int> srcs;  // empty inputs contribute nothing (and oneDNN refuses zero-size sources)
  for (int vi : n.inputs)
    if (g.v(vi).dims[static_cast<size_t>(axis)] != 0) srcs.push_back(vi);

  // Keep a shared blocked layout when the concatenation axis is not blocked in it.
  uint32_t tag = 0;
  if (!ctx.options().portable_layouts) {
    for (int vi : srcs) {
      const Operand* o = ctx.Peek(vi);
      if (!o || o->tag == 0 || (tag != 0 && o->tag != tag)) {
        tag = 0;
        break;
      }
      tag = o->tag;
    }
    if (tag != 0) {
      dnnl::memory::desc d;
      Operand probe = *ctx.Peek(srcs[0]);
      if (!OperandDesc(probe, &d).ok) {
        tag = 0;
      } else {
        const auto& b = d.data.format_desc.blocking;
        for (int k = 0; k < b.inner_nblks; ++k)
          if (b.inner_idxs[k] == axis) tag = 0;
      }
    }
  }
  // Otherwise the destination takes the layout of the sources when every one can be written into a slice of it:
  //   - a channel-blocked tag (nChw8c at AVX2) along the blocked axis, every source's extent a whole number of blocks
  //     (each slice is then exactly a source-sized tensor in that tag, BlockedSubView);
  //   - a dense permutation of the axes (nhwc), the first source's: each slice is a strided view.
  // Each source is reordered once, into its slice; the consumer (a convolution) reads the result as it is. Before,
  // the result was plain and the next convolution reordered it again (issue 24: a YOLOv8-shaped detector's C2f and
  // SPPF concatenations, 2 copies of every concatenated byte).
  if (tag == 0 && !ctx.options().portable_layouts && y.dtype == kF32 && srcs.size() > 1 && y.dims.size() >= 3) {
    // The layout of the first source in a permutation (dense, or a slice of one such as a Split part), else the
    // first source's.
    const Operand* first = ctx.Peek(srcs[0]);
    std::vector<size_t> order;
    for (int vi : srcs) {
      const Operand* o = ctx.Peek(vi);
      if (o && o->buf != Buf::kWeight && StrideOrder(*o, &order)) {
        first = o;
        break;
      }
    }
    dnnl::memory::desc dst_desc;
    std::vector<int64_t> dst_strides;  // a permutation layout's element strides (empty for a tag)
    if (first && first->buf != Buf::kWeight && StrideOrder(*first, &order)) {
      const size_t r = order.size();
      std::vector<int64_t> pd(r);
      for (size_t k = 0; k < r; ++k) pd[k] = y.dims[order[k]];
      const std::vector<int64_t> phys = RowMajorStrides(pd);
      dst_strides.assign(r, 0);
      for (size_t k = 0; k < r; ++k) dst_strides[order[k]] = phys[k];
      try {
        dst_desc = dnnl::memory::desc(dnnl::memory::dims(y.dims.begin(), y.dims.end()), dnnl::memory::data_type::f32,
                                      dnnl::memory::dims(dst_strides.begin(), dst_strides.end()));
      } catch (const dnnl::error&) {
        dst_desc = dnnl::memory::desc();
      }
    } else if (first && first->buf != Buf::kWeight && first->tag != 0) {
      bool same = true;
      for (int vi : srcs) {
        const Operand* o = ctx.Peek(vi);
        same = same && o && o->tag == first->tag;
      }
      if (same) {
        try {
          dst_desc = dnnl::memory::desc(dnnl::memory::dims(y.dims.begin(), y.dims.end()), dnnl::memory::data_type::f32,
                                        static_cast<dnnl::memory::format_tag>(first->tag));
        } catch (const dnnl::error&) {
          dst_desc = dnnl::memory::desc();
        }
      }
    }
    Operand probe;
    if (dst_desc.data.ndims != 0 && LayoutFromDesc(dst_desc, &probe)) {
      probe.dtype = y.dtype;
      probe.buf = Buf::kArena;
      std::vector<Operand> slices;
      int64_t begin = 0;
      for (int vi : srcs) {
        const Value& x = g.v(vi);
        std::vector<int64_t> offsets(y.dims.size(), 0);
        offsets[static_cast<size_t>(axis)] = begin;
        Operand sub;
        if (dst_strides.empty()) {
          if (!BlockedSubView(probe, x.dims, offsets, &sub)) break;
        } else {
          sub = StridedView(probe, y.dtype, x.dims, dst_strides, begin * dst_strides[static_cast<size_t>(axis)]);
        }
        slices.push_back(sub);
        begin += x.dims[static_cast<size_t>(axis)];
      }
      if (slices.size() == srcs.size()) {
        std::vector<Operand> ins;
        for (int vi : srcs) ins.push_back(ctx.Use(vi));
        const Operand dst = ctx.Define(n.outputs[0], dst_desc);
        if (dst.buf == Buf::kArena && !IsPlain(dst)) {
          for (size_t i = 0; i < srcs.size(); ++i) {
            Operand slice = slices[i];  // placed where Define put the result
            slice.buf = dst.buf;
            slice.index = dst.index;
            slice.offset = dst.offset + (slices[i].offset - probe.offset);
            Step r;
            r.kind = StepKind::kReorder;
            r.name = StepName(g, n) + ":" + std::to_string(i);
            r.ops = {ins[i], slice};
            ctx.Emit(std::move(r));
          }
          return CheckResult::Ok();
        }
        // Define gives a layout other than plain arena storage (a graph output is copied out at the end).
        return ctx.Fail(node, "the concatenation's destination was not placed in its layout");
      }
    }
  }
  // Otherwise in place when the result lives in the arena: each source reordered straight into its slice of a plain
  // destination, with no copy of a blocked source to plain first and no concatenation copy after (PP-OCRv4's detector
  // concatenates four blocked 24-channel maps: 4 plain copies, then a 1.3 ms concat, issue 14).
  Step s;
  s.kind = StepKind::kConcat;
  s.name = StepName(ctx.graph(), n);
  if (tag == 0) {
    std::vector<Operand> ins;
    for (int vi : srcs) ins.push_back(ctx.Use(vi));
    const Operand dst = ctx.DefinePlain(n.outputs[0]);
    if (dst.buf == Buf::kArena && DnnlType(y.dtype) != dnnl::memory::data_type::undef) {
      const std::vector<int64_t> rs = RowMajorStrides(y.dims);
      int64_t begin = 0;
      for (size_t i = 0; i < srcs.size(); ++i) {
        const Value& x = g.v(srcs[i]);
        Step r;
        r.kind = StepKind::kReorder;
        r.name = s.name + ":" + std::to_string(i);
        r.ops = {ins[i], StridedView(dst, y.dtype, x.dims, rs, begin * rs[static_cast<size_t>(axis)])};
        ctx.Emit(std::move(r));
        begin += x.dims[static_cast<size_t>(axis)];
      }
      return CheckResult::Ok();
    }
    for (int vi : srcs) s.ops.push_back(ctx.UsePlain(vi));
    s.ops.push_back(dst);
  } else {
    for (int vi : srcs) s.ops.push_back(ctx.Use(vi));
    try {
      s.ops.push_back(ctx.Define(n.outputs[0], dnnl::memory::desc(dnnl::memory::dims(y.dims.begin(), y.dims.end()),
                                                                  DnnlType(y.dtype),
                                                                  static_cast<dnnl::memory::format_tag>(tag))));
    } catch (const dnnl::error& e) {
      return ctx.Fail(node, std::string("concat layout: ") + e.what());
    }
  }
  s.ints = {axis};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildConcat(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  CheckResult r = bc.ExpectCounts(2, true, 1, 0);
  if (!r.ok) return r;
  const size_t nsrc = s.ops.size() - 1;
  dnnl::memory::desc dst;
  if (!(r = bc.Desc(nsrc, &dst)).ok) return r;
  if (dst.is_zero()) return bc.Fail("dst is absent or has rank 0");
  const dnnl::memory::dims dd = dst.dims();
  const int64_t rank = static_cast<int64_t>(dd.size());
  const int64_t axis = s.ints[0];
  if (axis < 0 || axis >= rank) return bc.Fail("axis " + std::to_string(axis) + " out of range for rank " +
                                               std::to_string(rank));
  std::vector<dnnl::memory::desc> srcs(nsrc);
  int64_t total = 0;
  for (size_t i = 0; i < nsrc; ++i) {
    if (!(r = bc.Desc(i, &srcs[i])).ok) return r;
    const dnnl::memory::dims sd = srcs[i].dims();
    if (srcs[i].is_zero() || sd.size() != dd.size() || srcs[i].data_type() != dst.data_type())
      return bc.Fail("src " + std::to_string(i) + " differs from dst in rank or type");
    for (int64_t k = 0; k < rank; ++k)
      if (k != axis && sd[static_cast<size_t>(k)] != dd[static_cast<size_t>(k)])
        return bc.Fail("src " + std::to_string(i) + " differs from dst off the axis");
    if (sd[static_cast<size_t>(axis)] <= 0) return bc.Fail("src " + std::to_string(i) + " is empty");
    total += sd[static_cast<size_t>(axis)];
  }
  if (total != dd[static_cast<size_t>(axis)]) return bc.Fail("srcs do not add up to dst along the axis");
  try {
    dnnl::concat::primitive_desc pd(dst, static_cast<int>(axis), srcs, bc.engine(), UserScratchpad());
    if (pd.dst_desc() != dst) return bc.Fail("oneDNN chose another dst layout");
    std::vector<std::pair<int, int>> args;
    for (size_t i = 0; i < nsrc; ++i)
      args.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), bc.Slot(i, srcs[i]));
    args.emplace_back(DNNL_ARG_DST, bc.Slot(nsrc, dst));
    *out = std::make_unique<PrimitiveExec>(dnnl::concat(pd), std::move(args));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("oneDNN concat: ") + e.what());
  }
  return CheckResult::Ok();
}

// ---- Split -------------------------------------------------------------------------------------------------------

namespace {
// The lengths of Split's outputs along its axis, per the node's opset: the `split` attribute (opset < 13) or input
// (13+), else equal parts (opset 18: `num_outputs` parts of ceil(dim / num_outputs), the last one smaller; before:
// as many equal parts as outputs, the dim divisible by their count).
bool SplitLengths(const Graph& g, const Node& n, int64_t* axis, std::vector<int64_t>* lengths, std::string* why) {
  if (n.inputs.empty() || n.inputs[0] < 0 || !g.v(n.inputs[0]).has_shape)
    return Reject(why, "input has no static shape");
  if (n.opset < 2) return Reject(why, "Split-1 is not supported");
  const std::vector<int64_t>& x = g.v(n.inputs[0]).dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0 || !NormAxis(n.Int("axis", 0), rank, axis)) return Reject(why, "axis out of range");
  const int64_t dim = x[static_cast<size_t>(*axis)];
  const int64_t outs = static_cast<int64_t>(n.outputs.size());
  if (outs == 0) return Reject(why, "no outputs");
  bool present = false;
  if (!IntsArg(g, n, 1, "split", 13, lengths, &present)) return Reject(why, "split is not constant");
  if (n.opset >= 13 && n.inputs.size() > 1 && n.inputs[1] >= 0 && g.v(n.inputs[1]).has_shape &&
      g.v(n.inputs[1]).numel() == 0)
    present = false;  // an empty split input counts as absent
  if (present) {
    if (n.opset >= 18 && n.Has("num_outputs")) return Reject(why, "both split and num_outputs are given");
    if (static_cast<int64_t>(lengths->size()) != outs) return Reject(why, "split has another length than the outputs");
    int64_t total = 0;
    for (int64_t l : *lengths) {
      if (l < 0) return Reject(why, "negative split length");
      total += l;
    }
    if (total != dim) return Reject(why, "split lengths do not add up to the axis");
    return true;
  }
  lengths->clear();
  if (n.opset >= 18) {
    if (!n.Has("num_outputs")) return Reject(why, "neither split nor num_outputs is given");
    if (n.Int("num_outputs", 0) != outs) return Reject(why, "num_outputs differs from the number of outputs");
    const int64_t chunk = (dim + outs - 1) / outs;
    for (int64_t i = 0, left = dim; i < outs; ++i, left -= chunk) lengths->push_back(std::clamp<int64_t>(left, 0, chunk));
    if (chunk * (outs - 1) >= dim && outs > 1) return Reject(why, "num_outputs leaves an output empty");
    return true;
  }
  if (dim % outs != 0) return Reject(why, "the axis is not divisible into equal parts");
  lengths->assign(static_cast<size_t>(outs), dim / outs);
  return true;
}
}  // namespace

bool SupportSplit(const Graph& g, const Node& n, std::string* why) {
  int64_t axis;
  std::vector<int64_t> lengths;
  if (!SplitLengths(g, n, &axis, &lengths, why)) return false;
  const Value& x = g.v(n.inputs[0]);
  if (!MovableType(x.dtype)) return Reject(why, "unsupported element type");
  if (x.dims.size() > kMaxRank) return Reject(why, "rank above " + std::to_string(kMaxRank));
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (n.outputs[i] < 0) return Reject(why, "absent output");
    const Value& y = g.v(n.outputs[i]);
    std::vector<int64_t> dims = x.dims;
    dims[static_cast<size_t>(axis)] = lengths[i];
    if (!y.has_shape || y.dtype != x.dtype || y.dims != dims)
      return Reject(why, "output " + std::to_string(i) + " is not " + DimsText(dims) + " of the input's type");
    if (Numel(dims) == 0) return Reject(why, "empty output");
  }
  return true;
}

CheckResult LowerSplit(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  int64_t axis;
  std::vector<int64_t> lengths;
  std::string why;
  if (!SplitLengths(ctx.graph(), n, &axis, &lengths, &why)) return ctx.Fail(node, why);
  const Value& x = ctx.graph().v(n.inputs[0]);
  // A blocked source split into sub-blocks: views of its bytes, no copy.
  const Operand* cur = ctx.Peek(n.inputs[0]);
  if (cur && cur->tag != 0 && !ctx.options().portable_layouts) {
    std::vector<Operand> views(n.outputs.size());
    bool all = true;
    int64_t at = 0;
    for (size_t i = 0; i < n.outputs.size() && all; ++i) {
      std::vector<int64_t> dims = x.dims, offsets(x.dims.size(), 0);
      dims[static_cast<size_t>(axis)] = lengths[i];
      offsets[static_cast<size_t>(axis)] = at;
      all = ctx.graph().v(n.outputs[i]).consumers.size() > 0 && !ctx.graph().v(n.outputs[i]).is_graph_output &&
            BlockedSubView(ctx.Use(n.inputs[0]), dims, offsets, &views[i]);
      at += lengths[i];
    }
    if (all) {
      for (size_t i = 0; i < n.outputs.size(); ++i)
        if (!ctx.DefineSubView(n.outputs[i], views[i])) return ctx.Fail(node, "split output is a fused output");
      return CheckResult::Ok();
    }
  }
  // A source in a dense permutation of its axes (nhwc), split along any axis: strided views of its bytes, no copy
  // (issue 24: a YOLOv8-shaped detector's C2f blocks split every nhwc convolution result along channels; it was
  // reordered to plain, copied per part, and each part reordered back to nhwc for the next convolution). A consumer
  // that needs a dense layout reorders its part once.
  std::vector<size_t> order;
  if (cur && cur->buf != Buf::kWeight && x.dtype == kF32 && !ctx.options().portable_layouts &&
      DensePermutation(*cur, &order)) {
    std::vector<int64_t> st;
    bool all = PlainStrides(*cur, &st);
    for (size_t i = 0; i < n.outputs.size() && all; ++i)
      all = ctx.graph().v(n.outputs[i]).consumers.size() > 0 && !ctx.graph().v(n.outputs[i]).is_graph_output;
    if (all) {
      const Operand src = ctx.Use(n.inputs[0]);
      int64_t at = 0;
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        std::vector<int64_t> dims = x.dims;
        dims[static_cast<size_t>(axis)] = lengths[i];
        if (!ctx.DefineSubView(n.outputs[i], StridedView(src, x.dtype, dims, st, at * st[static_cast<size_t>(axis)])))
          return ctx.Fail(node, "split output is a fused output");
        at += lengths[i];
      }
      return CheckResult::Ok();
    }
  }
  const Operand in = ctx.UsePlain(n.inputs[0]);
  const std::vector<int64_t> rs = RowMajorStrides(x.dims);
  int64_t begin = 0;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    std::vector<int64_t> dims = x.dims;
    dims[static_cast<size_t>(axis)] = lengths[i];
    Step s;
    s.kind = StepKind::kReorder;
    s.name = StepName(ctx.graph(), n) + ":" + std::to_string(i);
    s.ops.push_back(StridedView(in, x.dtype, dims, rs, begin * rs[static_cast<size_t>(axis)]));
    s.ops.push_back(ctx.DefinePlain(n.outputs[i]));
    ctx.Emit(std::move(s));
    begin += lengths[i];
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
