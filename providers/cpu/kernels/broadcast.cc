#include "providers/cpu/kernels/broadcast.h"

#include <algorithm>

namespace epctx {

namespace {

Status NotBroadcastable(const Shape& a, const Shape& b, size_t dim_from_right, int64_t da, int64_t db) {
  const size_t rank = std::max(a.size(), b.size());
  return MakeStatus(ErrorCode::INVALID_ARGUMENT, "shapes ", ShapeToString(a), " and ", ShapeToString(b),
                    " are not broadcastable (output dim ", rank - 1 - dim_from_right, ": ", da, " vs ", db, ")");
}

// Dim of `s` at position i counted from the right (missing leading dims are 1).
int64_t DimFromRight(const Shape& s, size_t i) { return i < s.size() ? s[s.size() - 1 - i] : 1; }

}  // namespace

StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) { return BroadcastShapes({&a, &b}); }

StatusOr<Shape> BroadcastShapes(const std::vector<const Shape*>& shapes) {
  size_t rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t d = 1;
    const Shape* owner = nullptr;  // the shape that set a non-1 size here
    for (const Shape* s : shapes) {
      int64_t v = DimFromRight(*s, i);
      if (v < 0) return MakeStatus(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(*s), " has a negative dim");
      if (v == 1) continue;
      if (owner == nullptr) {
        d = v;
        owner = s;
      } else if (v != d) {
        return NotBroadcastable(*owner, *s, i, d, v);
      }
    }
    out[rank - 1 - i] = d;
  }
  return out;
}

Status CheckUnidirectionalBroadcast(const Shape& from, const Shape& target) {
  if (from.size() > target.size())
    return MakeStatus(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(from), " cannot broadcast to ",
                      ShapeToString(target), " (rank ", from.size(), " > ", target.size(), ")");
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t f = DimFromRight(from, i), t = DimFromRight(target, i);
    if (f != t && f != 1)
      return MakeStatus(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(from), " cannot broadcast to ",
                        ShapeToString(target), " (dim ", target.size() - 1 - i, ": ", f, " vs ", t, ")");
  }
  return Status::OK();
}

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < in.size() && i < out.size(); ++i) {
    const size_t od = out.size() - 1 - i;
    const int64_t d = in[in.size() - 1 - i];
    strides[od] = d == 1 ? 0 : stride;
    stride *= d;
  }
  return strides;
}

StatusOr<BroadcastPlan> BroadcastPlan::Make(const std::vector<const Shape*>& inputs) {
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(inputs));
  return Build(inputs, std::move(out));
}

StatusOr<BroadcastPlan> BroadcastPlan::MakeTo(const std::vector<const Shape*>& inputs, const Shape& out) {
  for (const Shape* s : inputs) RETURN_IF_ERROR(CheckUnidirectionalBroadcast(*s, out));
  return Build(inputs, out);
}

StatusOr<BroadcastPlan> BroadcastPlan::Build(const std::vector<const Shape*>& inputs, Shape out) {
  BroadcastPlan p;
  const size_t n = inputs.size();
  const size_t rank = out.size();
  p.out_size_ = ShapeSize(out);
  if (p.out_size_ < 0)
    return MakeStatus(ErrorCode::INVALID_ARGUMENT, "broadcast output shape ", ShapeToString(out), " is invalid or too large");
  p.out_shape_ = std::move(out);
  p.steps_.assign(n, true);
  p.scalar_.assign(n, false);
  for (size_t k = 0; k < n; ++k) {
    const int64_t sz = ShapeSize(*inputs[k]);
    p.scalar_[k] = sz == 1;
    if (sz != p.out_size_) p.all_same_ = false;
  }
  if (p.out_size_ == 0) return p;

  // Padded input shapes and their row-major strides.
  std::vector<int64_t> in_dims(n * rank), in_strides(n * rank);
  for (size_t k = 0; k < n; ++k) {
    const Shape& s = *inputs[k];
    int64_t stride = 1;
    for (size_t i = 0; i < rank; ++i) {
      const size_t d = rank - 1 - i;
      const int64_t v = DimFromRight(s, i);
      in_dims[k * rank + d] = v;
      in_strides[k * rank + d] = stride;
      stride *= v;
    }
  }
  // Coalesce: drop output dims of 1; merge neighbours where every input has the same broadcast pattern.
  std::vector<int64_t> dims;              // merged output dims
  std::vector<std::vector<int64_t>> str;  // per merged dim: per input stride (0 = broadcast)
  std::vector<char> prev_pattern;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t od = p.out_shape_[d];
    if (od == 1) continue;
    std::vector<char> pattern(n);
    std::vector<int64_t> s(n);
    for (size_t k = 0; k < n; ++k) {
      pattern[k] = in_dims[k * rank + d] == od;
      s[k] = pattern[k] ? in_strides[k * rank + d] : 0;
    }
    if (!dims.empty() && pattern == prev_pattern) {
      dims.back() *= od;
      str.back() = s;  // the inner dim's stride is the merged dim's stride
    } else {
      dims.push_back(od);
      str.push_back(s);
      prev_pattern = pattern;
    }
  }
  if (dims.empty()) {  // a single element
    p.run_length_ = 1;
    p.num_runs_ = 1;
    return p;
  }
  p.run_length_ = dims.back();
  p.num_runs_ = p.out_size_ / p.run_length_;
  for (size_t k = 0; k < n; ++k) p.steps_[k] = str.back()[k] != 0;
  const size_t outer = dims.size() - 1;
  p.outer_dims_.assign(dims.begin(), dims.begin() + outer);
  p.outer_strides_.resize(n * outer);
  for (size_t k = 0; k < n; ++k)
    for (size_t d = 0; d < outer; ++d) p.outer_strides_[k * outer + d] = str[d][k];
  return p;
}

}  // namespace epctx
