// Control flow (If, Loop, Scan), sequences and optionals. Subgraphs run through the session's SubgraphRunner,
// which resolves values of enclosing scopes.
#include <algorithm>
#include <cstring>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/tensor_util.h"

namespace epctx {

namespace {

// Copies `count` elements from src[src_off] to dst[dst_off] (element offsets), strings by assignment.
void CopyElements(const Tensor& src, int64_t src_off, Tensor* dst, int64_t dst_off, int64_t count) {
  const DataType dt = src.dtype();
  tensor_kernels::CopyElements(dt, tensor_kernels::ElementPtr(src.raw_data(), dt, src_off),
                               tensor_kernels::ElementPtr(dst->raw_data(), dt, dst_off), count);
}

// Stacks equally shaped tensors along a new axis `axis`.
StatusOr<Tensor> Stack(const std::vector<Tensor>& parts, int64_t axis, DataType dtype, const Shape& elem_shape) {
  Shape out_shape = elem_shape;
  out_shape.insert(out_shape.begin() + axis, static_cast<int64_t>(parts.size()));
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(dtype, out_shape));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= elem_shape[i];
  for (size_t i = axis; i < elem_shape.size(); ++i) inner *= elem_shape[i];
  int64_t n = static_cast<int64_t>(parts.size());
  for (int64_t p = 0; p < n; ++p) {
    if (parts[p].shape() != elem_shape || parts[p].dtype() != dtype)
      return MakeStatus(ErrorCode::INVALID_ARGUMENT, "cannot stack values of shape ", ShapeToString(parts[p].shape()),
                        " with values of shape ", ShapeToString(elem_shape));
    for (int64_t o = 0; o < outer; ++o) CopyElements(parts[p], o * inner, &out, (o * n + p) * inner, inner);
  }
  return out;
}

// The i-th slice of `t` along `axis` (the axis removed).
StatusOr<Tensor> SliceAxis(const Tensor& t, int64_t axis, int64_t index) {
  Shape s = t.shape();
  int64_t len = s[axis];
  s.erase(s.begin() + axis);
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(t.dtype(), s));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= t.dim(i);
  for (size_t i = axis + 1; i < t.rank(); ++i) inner *= t.dim(i);
  for (int64_t o = 0; o < outer; ++o) CopyElements(t, (o * len + index) * inner, &out, o * inner, inner);
  return out;
}

StatusOr<bool> ScalarBool(const KernelContext& ctx, const Tensor* t, const char* what) {
  if (!t || t->NumElements() != 1)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be a tensor with exactly one element");
  if (t->dtype() == DataType::kBool) return t->data<bool>()[0];
  return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be bool, got ", DataTypeName(t->dtype()));
}

Status IfCompute(KernelContext& ctx) {
  ASSIGN_OR_RETURN(bool cond, ScalarBool(ctx, ctx.Input(0), "condition"));
  SubgraphRunner* branch = ctx.Subgraph(cond ? "then_branch" : "else_branch");
  if (!branch) return ctx.Error(ErrorCode::INVALID_GRAPH, "missing ", cond ? "then_branch" : "else_branch");
  std::vector<IValue> fetches;
  RETURN_IF_ERROR(branch->Run({}, &fetches));
  if (fetches.size() != ctx.num_outputs())
    return ctx.Error(ErrorCode::INVALID_GRAPH, "branch produced ", fetches.size(), " outputs, node has ",
                     ctx.num_outputs());
  for (size_t i = 0; i < fetches.size(); ++i) ctx.SetOutput(i, std::move(fetches[i]));
  return Status::OK();
}

Status LoopCompute(KernelContext& ctx) {
  SubgraphRunner* body = ctx.Subgraph("body");
  if (!body) return ctx.Error(ErrorCode::INVALID_GRAPH, "missing body");
  const Tensor* m = ctx.Input(0);
  int64_t max_trips = INT64_MAX;
  if (m) {
    if (m->NumElements() != 1 || m->dtype() != DataType::kInt64)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "M must be a single int64");
    max_trips = m->data<int64_t>()[0];
  }
  bool cond = true;
  if (ctx.Input(1)) {
    ASSIGN_OR_RETURN(cond, ScalarBool(ctx, ctx.Input(1), "cond"));
  }
  size_t n_carried = ctx.num_inputs() >= 2 ? ctx.num_inputs() - 2 : 0;
  std::vector<IValue> carried;
  for (size_t i = 0; i < n_carried; ++i) {
    const IValue* v = ctx.InputValue(2 + i);
    carried.push_back(v ? *v : IValue());
  }
  size_t body_outputs = body->graph().outputs.size();
  if (body_outputs < 1 + n_carried)
    return ctx.Error(ErrorCode::INVALID_GRAPH, "body has ", body_outputs, " outputs, needs at least ", 1 + n_carried);
  size_t n_scan = body_outputs - 1 - n_carried;
  if (ctx.num_outputs() > n_carried + n_scan)
    return ctx.Error(ErrorCode::INVALID_GRAPH, "node has ", ctx.num_outputs(), " outputs, body produces only ",
                     n_carried + n_scan, " (", n_carried, " loop-carried, ", n_scan, " scan)");
  std::vector<std::vector<Tensor>> scans(n_scan);
  for (int64_t it = 0; it < max_trips && cond; ++it) {
    ASSIGN_OR_RETURN(Tensor iter, Tensor::Allocate(DataType::kInt64, {}));
    iter.data<int64_t>()[0] = it;
    ASSIGN_OR_RETURN(Tensor c, Tensor::Allocate(DataType::kBool, {}));
    c.data<bool>()[0] = cond;
    std::vector<IValue> feeds{IValue(iter), IValue(c)};
    feeds.insert(feeds.end(), carried.begin(), carried.end());
    std::vector<IValue> fetches;
    RETURN_IF_ERROR(body->Run(feeds, &fetches));
    ASSIGN_OR_RETURN(cond, ScalarBool(ctx, fetches[0].is_tensor() ? &fetches[0].tensor() : nullptr, "body's cond output"));
    for (size_t i = 0; i < n_carried; ++i) carried[i] = std::move(fetches[1 + i]);
    for (size_t i = 0; i < n_scan; ++i) {
      const IValue& v = fetches[1 + n_carried + i];
      if (!v.is_tensor()) return ctx.Error(ErrorCode::INVALID_GRAPH, "scan output ", i, " is not a tensor");
      scans[i].push_back(v.tensor());
    }
  }
  for (size_t i = 0; i < n_carried; ++i) ctx.SetOutput(i, std::move(carried[i]));
  for (size_t i = 0; i < n_scan; ++i) {
    Tensor out;
    if (scans[i].empty()) {
      DataType dt = DataType::kFloat;
      Shape shape{0};
      if (const ValueType* t = body->graph().FindType(body->graph().outputs[1 + n_carried + i].name)) {
        if (t->elem_type != DataType::kUndefined) dt = t->elem_type;
        if (t->has_shape)
          for (const auto& d : t->dims) shape.push_back(d.known() ? d.value : 0);
      }
      ASSIGN_OR_RETURN(out, Tensor::Allocate(dt, shape));
    } else {
      ASSIGN_OR_RETURN(out, Stack(scans[i], 0, scans[i][0].dtype(), scans[i][0].shape()));
    }
    ctx.SetOutput(n_carried + i, IValue(std::move(out)));
  }
  return Status::OK();
}

class ScanKernel final : public OpKernel {
 public:
  explicit ScanKernel(const KernelInfo& info) : opset_(info.opset()) {
    num_scan_inputs_ = info.GetInt("num_scan_inputs", 0);
    in_dirs_ = info.GetInts(opset_ >= 9 ? "scan_input_directions" : "directions");
    out_dirs_ = info.GetInts("scan_output_directions");
    in_axes_ = info.GetInts("scan_input_axes");
    out_axes_ = info.GetInts("scan_output_axes");
  }

  Status Compute(KernelContext& ctx) const override {
    if (opset_ >= 9) {
      std::vector<IValue> ins;
      for (size_t i = 0; i < ctx.num_inputs(); ++i) ins.push_back(ctx.InputValue(i) ? *ctx.InputValue(i) : IValue());
      std::vector<IValue> outs;
      RETURN_IF_ERROR(RunOne(ctx, ins, &outs));
      for (size_t i = 0; i < outs.size(); ++i) ctx.SetOutput(i, std::move(outs[i]));
      return Status::OK();
    }
    // Opset 8: input 0 is sequence_lens (optional); every other input has a leading batch axis.
    if (ctx.InputValue(0) && ctx.Input(0))
      return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "Scan-8 with sequence_lens is not supported");
    int64_t batch = -1;
    for (size_t i = 1; i < ctx.num_inputs(); ++i) {
      const Tensor* t = ctx.Input(i);
      if (!t || t->rank() < 1) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", i, " needs a batch axis");
      if (batch >= 0 && t->dim(0) != batch) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "batch sizes differ");
      batch = t->dim(0);
    }
    std::vector<std::vector<Tensor>> per_output(ctx.num_outputs());
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<IValue> ins;
      for (size_t i = 1; i < ctx.num_inputs(); ++i) {
        ASSIGN_OR_RETURN(Tensor s, SliceAxis(*ctx.Input(i), 0, b));
        ins.push_back(IValue(std::move(s)));
      }
      std::vector<IValue> outs;
      RETURN_IF_ERROR(RunOne(ctx, ins, &outs));
      for (size_t i = 0; i < outs.size() && i < per_output.size(); ++i) {
        if (!outs[i].is_tensor()) return ctx.Error(ErrorCode::INVALID_GRAPH, "output ", i, " is not a tensor");
        per_output[i].push_back(outs[i].tensor());
      }
    }
    for (size_t i = 0; i < per_output.size(); ++i) {
      if (per_output[i].empty()) continue;
      ASSIGN_OR_RETURN(Tensor t, Stack(per_output[i], 0, per_output[i][0].dtype(), per_output[i][0].shape()));
      ctx.SetOutput(i, IValue(std::move(t)));
    }
    return Status::OK();
  }

 private:
  // One scan over `ins` = states..., scan inputs... (scan axis per attributes; opset 8 uses axis 0 after the
  // batch axis was removed).
  Status RunOne(KernelContext& ctx, const std::vector<IValue>& ins, std::vector<IValue>* outs) const {
    SubgraphRunner* body = ctx.Subgraph("body");
    if (!body) return ctx.Error(ErrorCode::INVALID_GRAPH, "missing body");
    int64_t m = num_scan_inputs_;
    if (m < 0 || m > static_cast<int64_t>(ins.size()))
      return ctx.Error(ErrorCode::INVALID_GRAPH, "num_scan_inputs ", m, " is out of range");
    size_t n_states = ins.size() - m;
    int64_t seq_len = -1;
    std::vector<int64_t> axes(m, 0);
    for (int64_t j = 0; j < m; ++j) {
      const IValue& v = ins[n_states + j];
      if (!v.is_tensor()) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "scan input ", j, " is not a tensor");
      int64_t r = static_cast<int64_t>(v.tensor().rank());
      int64_t ax = j < static_cast<int64_t>(in_axes_.size()) ? in_axes_[j] : 0;
      if (ax < 0) ax += r;
      if (ax < 0 || ax >= r) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "scan input axis out of range");
      axes[j] = ax;
      int64_t len = v.tensor().dim(ax);
      if (seq_len >= 0 && len != seq_len)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "scan inputs have different sequence lengths ", seq_len, " and ", len);
      seq_len = len;
    }
    if (seq_len < 0) seq_len = 0;
    std::vector<IValue> states(ins.begin(), ins.begin() + n_states);
    size_t n_body_out = body->graph().outputs.size();
    if (n_body_out < n_states) return ctx.Error(ErrorCode::INVALID_GRAPH, "body has too few outputs");
    size_t k = n_body_out - n_states;
    std::vector<std::vector<Tensor>> scans(k);
    for (int64_t t = 0; t < seq_len; ++t) {
      std::vector<IValue> feeds = states;
      for (int64_t j = 0; j < m; ++j) {
        bool rev = j < static_cast<int64_t>(in_dirs_.size()) && in_dirs_[j] == 1;
        ASSIGN_OR_RETURN(Tensor s, SliceAxis(ins[n_states + j].tensor(), axes[j], rev ? seq_len - 1 - t : t));
        feeds.push_back(IValue(std::move(s)));
      }
      std::vector<IValue> fetches;
      RETURN_IF_ERROR(body->Run(feeds, &fetches));
      for (size_t i = 0; i < n_states; ++i) states[i] = fetches[i];
      for (size_t i = 0; i < k; ++i) {
        if (!fetches[n_states + i].is_tensor()) return ctx.Error(ErrorCode::INVALID_GRAPH, "scan output is not a tensor");
        scans[i].push_back(fetches[n_states + i].tensor());
      }
    }
    *outs = states;
    for (size_t i = 0; i < k; ++i) {
      bool rev = i < out_dirs_.size() && out_dirs_[i] == 1;
      if (rev) std::reverse(scans[i].begin(), scans[i].end());
      if (scans[i].empty()) {
        ASSIGN_OR_RETURN(Tensor e, Tensor::Allocate(DataType::kFloat, {0}));
        outs->push_back(IValue(e));
        continue;
      }
      int64_t r = static_cast<int64_t>(scans[i][0].rank()) + 1;
      int64_t ax = i < out_axes_.size() ? out_axes_[i] : 0;
      if (ax < 0) ax += r;
      if (ax < 0 || ax >= r) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "scan output axis out of range");
      ASSIGN_OR_RETURN(Tensor st, Stack(scans[i], ax, scans[i][0].dtype(), scans[i][0].shape()));
      outs->push_back(IValue(std::move(st)));
    }
    return Status::OK();
  }

  int opset_;
  int64_t num_scan_inputs_;
  std::vector<int64_t> in_dirs_, out_dirs_, in_axes_, out_axes_;
};

// ---- sequences ----

StatusOr<const IValue*> SeqInput(const KernelContext& ctx, size_t i) {
  const IValue* v = ctx.InputValue(i);
  if (!v || !v->is_sequence()) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", i, " must be a sequence");
  return v;
}

StatusOr<int64_t> ScalarIndex(const KernelContext& ctx, const Tensor* t, const char* what) {
  if (!t || t->NumElements() != 1) return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be a scalar");
  if (t->dtype() == DataType::kInt64) return t->data<int64_t>()[0];
  if (t->dtype() == DataType::kInt32) return static_cast<int64_t>(t->data<int32_t>()[0]);
  return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be int32 or int64");
}

StatusOr<int64_t> NormalisePosition(const KernelContext& ctx, int64_t pos, int64_t size, bool allow_end) {
  int64_t hi = allow_end ? size : size - 1;
  if (pos < -size || pos > hi)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "position ", pos, " is out of range for a sequence of ", size);
  return pos < 0 ? pos + size : pos;
}

void RegisterSequenceKernels(KernelRegistry& r) {
  r.Register("", "SequenceEmpty", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    DataType dt = static_cast<DataType>(info.GetInt("dtype", static_cast<int64_t>(DataType::kFloat)));
    return LambdaKernel([dt](KernelContext& ctx) {
      ctx.SetOutput(0, IValue::Sequence({}, dt));
      return Status::OK();
    })(info);
  });
  r.Register("", "SequenceConstruct", LambdaKernel([](KernelContext& ctx) {
    TensorSequence seq;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor* t = ctx.Input(i);
      if (!t) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", i, " must be a tensor");
      if (!seq.empty() && t->dtype() != seq[0].dtype())
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "all inputs must have the same element type");
      seq.push_back(*t);
    }
    DataType dt = seq.empty() ? DataType::kFloat : seq[0].dtype();
    ctx.SetOutput(0, IValue::Sequence(std::move(seq), dt));
    return Status::OK();
  }));
  r.Register("", "SequenceInsert", LambdaKernel([](KernelContext& ctx) {
    ASSIGN_OR_RETURN(const IValue* s, SeqInput(ctx, 0));
    const Tensor* t = ctx.Input(1);
    if (!t) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "tensor input is missing");
    TensorSequence seq = s->sequence();
    if (!seq.empty() && seq[0].dtype() != t->dtype())
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inserting ", DataTypeName(t->dtype()), " into a sequence of ",
                       DataTypeName(seq[0].dtype()));
    int64_t pos = static_cast<int64_t>(seq.size());
    if (ctx.Input(2)) {
      ASSIGN_OR_RETURN(int64_t p, ScalarIndex(ctx, ctx.Input(2), "position"));
      ASSIGN_OR_RETURN(pos, NormalisePosition(ctx, p, static_cast<int64_t>(seq.size()), true));
    }
    seq.insert(seq.begin() + pos, *t);
    ctx.SetOutput(0, IValue::Sequence(std::move(seq), t->dtype()));
    return Status::OK();
  }));
  r.Register("", "SequenceAt", LambdaKernel([](KernelContext& ctx) {
    ASSIGN_OR_RETURN(const IValue* s, SeqInput(ctx, 0));
    ASSIGN_OR_RETURN(int64_t p, ScalarIndex(ctx, ctx.Input(1), "position"));
    ASSIGN_OR_RETURN(int64_t pos, NormalisePosition(ctx, p, static_cast<int64_t>(s->sequence().size()), false));
    ctx.SetOutput(0, IValue(s->sequence()[pos]));
    return Status::OK();
  }));
  r.Register("", "SequenceErase", LambdaKernel([](KernelContext& ctx) {
    ASSIGN_OR_RETURN(const IValue* s, SeqInput(ctx, 0));
    TensorSequence seq = s->sequence();
    int64_t pos = static_cast<int64_t>(seq.size()) - 1;
    if (ctx.Input(1)) {
      ASSIGN_OR_RETURN(int64_t p, ScalarIndex(ctx, ctx.Input(1), "position"));
      ASSIGN_OR_RETURN(pos, NormalisePosition(ctx, p, static_cast<int64_t>(seq.size()), false));
    }
    if (pos < 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot erase from an empty sequence");
    seq.erase(seq.begin() + pos);
    ctx.SetOutput(0, IValue::Sequence(std::move(seq), s->sequence_elem_type()));
    return Status::OK();
  }));
  r.Register("", "SequenceLength", LambdaKernel([](KernelContext& ctx) {
    ASSIGN_OR_RETURN(const IValue* s, SeqInput(ctx, 0));
    ASSIGN_OR_RETURN(Tensor* y, ctx.Output(0, DataType::kInt64, {}));
    y->data<int64_t>()[0] = static_cast<int64_t>(s->sequence().size());
    return Status::OK();
  }));
  r.Register("", "SplitToSequence", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    int64_t axis_attr = info.GetInt("axis", 0);
    bool keepdims = info.GetInt("keepdims", 1) != 0;
    return LambdaKernel([axis_attr, keepdims](KernelContext& ctx) -> Status {
      const Tensor* x = ctx.Input(0);
      if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input is missing");
      int64_t r = static_cast<int64_t>(x->rank());
      int64_t axis = axis_attr < 0 ? axis_attr + r : axis_attr;
      if (axis < 0 || axis >= r) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis ", axis_attr, " out of range");
      int64_t len = x->dim(axis);
      std::vector<int64_t> sizes;
      const Tensor* split = ctx.Input(1);
      bool scalar_split = false;
      if (!split) {
        sizes.assign(len, 1);
      } else {
        std::vector<int64_t> vals;
        for (int64_t i = 0; i < split->NumElements(); ++i)
          vals.push_back(split->dtype() == DataType::kInt32 ? split->data<int32_t>()[i] : split->data<int64_t>()[i]);
        if (split->rank() == 0) {
          scalar_split = true;
          int64_t c = vals[0];
          if (c <= 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "split must be positive");
          for (int64_t done = 0; done < len; done += c) sizes.push_back(std::min(c, len - done));
        } else {
          int64_t sum = 0;
          for (int64_t v : vals) {
            if (v < 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "negative split size");
            sum += v;
          }
          if (sum != len) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "split sizes sum to ", sum, ", axis has ", len);
          sizes = vals;
        }
      }
      (void)scalar_split;
      TensorSequence seq;
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < axis; ++i) outer *= x->dim(i);
      for (int64_t i = axis + 1; i < r; ++i) inner *= x->dim(i);
      int64_t start = 0;
      for (int64_t sz : sizes) {
        Shape s = x->shape();
        s[axis] = sz;
        if (!split && !keepdims) s.erase(s.begin() + axis);
        ASSIGN_OR_RETURN(Tensor part, Tensor::Allocate(x->dtype(), s));
        for (int64_t o = 0; o < outer; ++o) CopyElements(*x, (o * len + start) * inner, &part, o * sz * inner, sz * inner);
        seq.push_back(std::move(part));
        start += sz;
      }
      ctx.SetOutput(0, IValue::Sequence(std::move(seq), x->dtype()));
      return Status::OK();
    })(info);
  });
  r.Register("", "ConcatFromSequence", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    ASSIGN_OR_RETURN(int64_t axis_attr, info.RequireInt("axis"));
    bool new_axis = info.GetInt("new_axis", 0) != 0;
    return LambdaKernel([axis_attr, new_axis](KernelContext& ctx) -> Status {
      ASSIGN_OR_RETURN(const IValue* s, SeqInput(ctx, 0));
      const TensorSequence& seq = s->sequence();
      if (seq.empty()) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot concatenate an empty sequence");
      int64_t r = static_cast<int64_t>(seq[0].rank()) + (new_axis ? 1 : 0);
      int64_t axis = axis_attr < 0 ? axis_attr + r : axis_attr;
      if (axis < 0 || axis >= r) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis ", axis_attr, " out of range");
      if (new_axis) {
        ASSIGN_OR_RETURN(Tensor t, Stack(seq, axis, seq[0].dtype(), seq[0].shape()));
        ctx.SetOutput(0, IValue(std::move(t)));
        return Status::OK();
      }
      Shape out_shape = seq[0].shape();
      int64_t total = 0;
      for (const auto& t : seq) {
        if (t.rank() != seq[0].rank() || t.dtype() != seq[0].dtype())
          return ctx.Error(ErrorCode::INVALID_ARGUMENT, "sequence elements differ in rank or type");
        for (int64_t d = 0; d < static_cast<int64_t>(t.rank()); ++d)
          if (d != axis && t.dim(d) != out_shape[d])
            return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shapes ", ShapeToString(t.shape()), " and ",
                             ShapeToString(out_shape), " differ outside axis ", axis);
        total += t.dim(axis);
      }
      out_shape[axis] = total;
      ASSIGN_OR_RETURN(Tensor* y, ctx.Output(0, seq[0].dtype(), out_shape));
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < axis; ++i) outer *= out_shape[i];
      for (size_t i = axis + 1; i < out_shape.size(); ++i) inner *= out_shape[i];
      int64_t off = 0;
      for (const auto& t : seq) {
        int64_t len = t.dim(axis);
        for (int64_t o = 0; o < outer; ++o) CopyElements(t, o * len * inner, y, (o * total + off) * inner, len * inner);
        off += len;
      }
      return Status::OK();
    })(info);
  });
  r.Register("", "SequenceMap", LambdaKernel([](KernelContext& ctx) -> Status {
    SubgraphRunner* body = ctx.Subgraph("body");
    if (!body) return ctx.Error(ErrorCode::INVALID_GRAPH, "missing body");
    ASSIGN_OR_RETURN(const IValue* s0, SeqInput(ctx, 0));
    if (ctx.num_outputs() > body->graph().outputs.size())
      return ctx.Error(ErrorCode::INVALID_GRAPH, "node has ", ctx.num_outputs(), " outputs, body produces only ",
                       body->graph().outputs.size());
    size_t n = s0->sequence().size();
    std::vector<std::vector<Tensor>> outs(ctx.num_outputs());
    for (size_t i = 0; i < n; ++i) {
      std::vector<IValue> feeds;
      for (size_t k = 0; k < ctx.num_inputs(); ++k) {
        const IValue* v = ctx.InputValue(k);
        if (!v) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", k, " is missing");
        if (v->is_sequence()) {
          if (v->sequence().size() != n)
            return ctx.Error(ErrorCode::INVALID_ARGUMENT, "sequence inputs have different lengths");
          feeds.push_back(IValue(v->sequence()[i]));
        } else {
          feeds.push_back(*v);
        }
      }
      std::vector<IValue> fetches;
      RETURN_IF_ERROR(body->Run(feeds, &fetches));
      for (size_t k = 0; k < outs.size() && k < fetches.size(); ++k) {
        if (!fetches[k].is_tensor()) return ctx.Error(ErrorCode::INVALID_GRAPH, "body output ", k, " is not a tensor");
        outs[k].push_back(fetches[k].tensor());
      }
    }
    const auto& body_outputs = body->graph().outputs;
    for (size_t k = 0; k < outs.size(); ++k) {
      DataType dt = outs[k].empty() ? DataType::kFloat : outs[k][0].dtype();
      if (outs[k].empty() && k < body_outputs.size())
        if (const ValueType* t = body->graph().FindType(body_outputs[k].name)) dt = t->elem_type;
      ctx.SetOutput(k, IValue::Sequence(std::move(outs[k]), dt));
    }
    return Status::OK();
  }));
}

void RegisterOptionalKernels(KernelRegistry& r) {
  r.Register("", "Optional", LambdaKernel([](KernelContext& ctx) {
    const IValue* v = ctx.InputValue(0);
    ctx.SetOutput(0, v ? *v : IValue());
    return Status::OK();
  }));
  r.Register("", "OptionalHasElement", LambdaKernel([](KernelContext& ctx) -> Status {
    const IValue* v = ctx.InputValue(0);
    ASSIGN_OR_RETURN(Tensor* y, ctx.Output(0, DataType::kBool, {}));
    y->data<bool>()[0] = v && !v->is_none();
    return Status::OK();
  }));
  r.Register("", "OptionalGetElement", LambdaKernel([](KernelContext& ctx) -> Status {
    const IValue* v = ctx.InputValue(0);
    if (!v || v->is_none()) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "the optional input is empty");
    ctx.SetOutput(0, *v);
    return Status::OK();
  }));
}

}  // namespace

void RegisterControlFlowKernels(KernelRegistry& r) {
  r.Register("", "If", LambdaKernel(IfCompute));
  r.Register("", "Loop", LambdaKernel(LoopCompute));
  r.Register("", "Scan", MakeFactory<ScanKernel>());
  RegisterSequenceKernels(r);
  RegisterOptionalKernels(r);
}

}  // namespace epctx
