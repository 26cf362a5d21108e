// Index-driven kernels: Gather, GatherElements, GatherND, Scatter/ScatterElements, ScatterND, OneHot, NonZero,
// Unique. Every index is validated before the first element moves, so a bad index is an INVALID_ARGUMENT and
// never an out-of-bounds access.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "providers/cpu/kernels/tensor_util.h"

namespace epctx {
namespace tensor_kernels {

namespace {

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t k = begin; k < end; ++k) p *= s[k];
  return p;
}

template <typename T>
inline double ToDouble(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// ---------------------------------------------------------------- Gather

template <typename T>
void GatherImpl(const T* src, T* dst, const std::vector<int64_t>& idx, int64_t outer, int64_t dim, int64_t inner,
                int threads) {
  const int64_t n = static_cast<int64_t>(idx.size());
  ParallelFor(threads, outer * n, static_cast<double>(inner), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t o = item / n, j = item - o * n;
      const T* s = src + (o * dim + idx[j]) * inner;
      T* d = dst + item * inner;
      if constexpr (std::is_trivially_copyable_v<T>) {
        if (inner == 1) {
          *d = *s;
        } else {
          std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(T));
        }
      } else {
        for (int64_t i = 0; i < inner; ++i) d[i] = s[i];
      }
    }
  });
}

StatusOr<std::unique_ptr<OpKernel>> CreateGather(const KernelInfo& info) {
  const int64_t axis = info.GetInt("axis", 0);
  return LambdaKernel([axis](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ASSIGN_OR_RETURN(const Tensor* ti, RequireInput(ctx, 1, "indices"));
    const int64_t r = static_cast<int64_t>(x->rank());
    if (r < 1) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "data must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis, r));
    ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(ctx, *ti, x->dim(a), "indices"));
    Shape out_shape(x->shape().begin(), x->shape().begin() + a);
    out_shape.insert(out_shape.end(), ti->shape().begin(), ti->shape().end());
    out_shape.insert(out_shape.end(), x->shape().begin() + a + 1, x->shape().end());
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    if (y->NumElements() == 0) return Status::OK();
    const int64_t outer = Product(x->shape(), 0, a), inner = Product(x->shape(), a + 1, r);
    return WithNode(ctx, DispatchByElementSize(x->dtype(), "Gather", [&](auto tag) {
      using T = decltype(tag);
      GatherImpl<T>(x->data<T>(), y->data<T>(), idx, outer, x->dim(a), inner, ctx.num_threads());
      return Status::OK();
    }));
  })(info);
}

// ---------------------------------------------------------------- GatherElements / ScatterElements

// For every element e of `indices` (row-major), the flat offset in `data` it addresses: e's own coordinates with
// the `axis` coordinate replaced by the index value. Checks shapes and index bounds.
StatusOr<std::vector<int64_t>> ElementOffsets(const KernelContext& ctx, const Tensor& data, const Tensor& indices,
                                              int64_t axis) {
  const size_t r = data.rank();
  if (indices.rank() != r)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "indices ", ShapeToString(indices.shape()),
                     " must have the rank of data ", ShapeToString(data.shape()));
  for (size_t k = 0; k < r; ++k)
    if (static_cast<int64_t>(k) != axis && indices.dim(k) > data.dim(k))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "indices shape ", ShapeToString(indices.shape()),
                       " exceeds data shape ", ShapeToString(data.shape()), " along axis ", k);
  ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(ctx, indices, data.dim(axis), "indices"));
  std::vector<int64_t> ds = ContiguousStrides(data.shape());
  std::vector<int64_t> coord(r, 0);
  for (size_t e = 0; e < idx.size(); ++e) {
    int64_t off = 0;
    for (size_t k = 0; k < r; ++k) off += (static_cast<int64_t>(k) == axis ? idx[e] : coord[k]) * ds[k];
    idx[e] = off;
    for (size_t k = r; k-- > 0;) {
      if (++coord[k] < indices.dim(k)) break;
      coord[k] = 0;
    }
  }
  return idx;
}

StatusOr<std::unique_ptr<OpKernel>> CreateGatherElements(const KernelInfo& info) {
  const int64_t axis = info.GetInt("axis", 0);
  return LambdaKernel([axis](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ASSIGN_OR_RETURN(const Tensor* ti, RequireInput(ctx, 1, "indices"));
    if (x->rank() < 1) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "data must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis, static_cast<int64_t>(x->rank())));
    ASSIGN_OR_RETURN(std::vector<int64_t> off, ElementOffsets(ctx, *x, *ti, a));
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), ti->shape()));
    return WithNode(ctx, DispatchByElementSize(x->dtype(), "GatherElements", [&](auto tag) {
      using T = decltype(tag);
      const T* s = x->data<T>();
      T* d = y->data<T>();
      for (size_t e = 0; e < off.size(); ++e) d[e] = s[off[e]];
      return Status::OK();
    }));
  })(info);
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> ParseReduction(const KernelInfo& info) {
  const std::string s = info.GetString("reduction", "none");
  if (s == "none") return Reduction::kNone;
  if (s == "add") return Reduction::kAdd;
  if (s == "mul") return Reduction::kMul;
  if (s == "max") return Reduction::kMax;
  if (s == "min") return Reduction::kMin;
  return info.Error(ErrorCode::INVALID_GRAPH, "reduction must be none, add, mul, max or min, got '", s, "'");
}

// y[off[e] + i] (op)= u[e * block + i] for every e and i < block, in order.
Status ScatterApply(const KernelContext& ctx, Tensor* y, const Tensor& u, const std::vector<int64_t>& off,
                    int64_t block, Reduction red) {
  if (red == Reduction::kNone) {
    return WithNode(ctx, DispatchByElementSize(y->dtype(), "Scatter", [&](auto tag) {
      using T = decltype(tag);
      T* d = y->data<T>();
      const T* s = u.data<T>();
      for (size_t e = 0; e < off.size(); ++e)
        for (int64_t i = 0; i < block; ++i) d[off[e] + i] = s[e * block + i];
      return Status::OK();
    }));
  }
  Status st = DispatchType<EPCTX_NUMERIC_TYPES, bool>(y->dtype(), "reduction", [&](auto tag) {
    using T = decltype(tag);
    T* d = y->data<T>();
    const T* s = u.data<T>();
    auto combine = [red](T a, T b) -> T {
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        const float x = float(a), z = float(b);
        switch (red) {
          case Reduction::kAdd: return T(x + z);
          case Reduction::kMul: return T(x * z);
          case Reduction::kMax: return x < z ? b : a;
          case Reduction::kMin: return z < x ? b : a;
          default: return b;
        }
      } else if constexpr (std::is_same_v<T, bool>) {
        switch (red) {
          case Reduction::kAdd: case Reduction::kMax: return a || b;
          case Reduction::kMul: case Reduction::kMin: return a && b;
          default: return b;
        }
      } else if constexpr (std::is_integral_v<T>) {
        // Integers wrap (computed modulo 2^64, then narrowed) rather than overflow.
        switch (red) {
          case Reduction::kAdd: return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
          case Reduction::kMul: return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
          case Reduction::kMax: return a < b ? b : a;
          case Reduction::kMin: return b < a ? b : a;
          default: return b;
        }
      } else {
        switch (red) {
          case Reduction::kAdd: return static_cast<T>(a + b);
          case Reduction::kMul: return static_cast<T>(a * b);
          case Reduction::kMax: return a < b ? b : a;
          case Reduction::kMin: return b < a ? b : a;
          default: return b;
        }
      }
    };
    for (size_t e = 0; e < off.size(); ++e)
      for (int64_t i = 0; i < block; ++i) d[off[e] + i] = combine(d[off[e] + i], s[e * block + i]);
    return Status::OK();
  });
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  return st;
}

StatusOr<std::unique_ptr<OpKernel>> CreateScatterElements(const KernelInfo& info) {
  const int64_t axis = info.GetInt("axis", 0);
  ASSIGN_OR_RETURN(Reduction red, ParseReduction(info));
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ASSIGN_OR_RETURN(const Tensor* ti, RequireInput(ctx, 1, "indices"));
    ASSIGN_OR_RETURN(const Tensor* tu, RequireInput(ctx, 2, "updates"));
    if (x->rank() < 1) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "data must have rank >= 1");
    if (tu->shape() != ti->shape() || tu->dtype() != x->dtype())
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "updates (", DataTypeName(tu->dtype()), " ",
                       ShapeToString(tu->shape()), ") must have the shape of indices ", ShapeToString(ti->shape()),
                       " and the type of data (", DataTypeName(x->dtype()), ")");
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis, static_cast<int64_t>(x->rank())));
    ASSIGN_OR_RETURN(std::vector<int64_t> off, ElementOffsets(ctx, *x, *ti, a));
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    CopyElements(x->dtype(), x->raw_data(), y->raw_data(), x->NumElements());
    return ScatterApply(ctx, y, *tu, off, 1, red);
  })(info);
}

// ---------------------------------------------------------------- GatherND / ScatterND

// Offsets (into data) of the slices addressed by the index tuples of `indices` (last dim = tuple length k),
// with the first `batch_dims` dims of data and indices treated as batch. Checks shapes and bounds.
StatusOr<std::vector<int64_t>> TupleOffsets(const KernelContext& ctx, const Tensor& data, const Tensor& indices,
                                            int64_t batch_dims) {
  const int64_t r = static_cast<int64_t>(data.rank()), q = static_cast<int64_t>(indices.rank());
  if (r < 1 || q < 1)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "data and indices must have rank >= 1, got ",
                     ShapeToString(data.shape()), " and ", ShapeToString(indices.shape()));
  if (batch_dims < 0 || batch_dims >= std::min(r, q))
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "batch_dims ", batch_dims, " must be in [0, min(rank(data), ",
                     "rank(indices))) = [0, ", std::min(r, q), ")");
  for (int64_t k = 0; k < batch_dims; ++k)
    if (data.dim(k) != indices.dim(k))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "batch dim ", k, " differs: data ", ShapeToString(data.shape()),
                       " vs indices ", ShapeToString(indices.shape()));
  const int64_t k = indices.dim(q - 1);
  if (k > r - batch_dims)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "index tuples of length ", k, " exceed rank(data) - batch_dims = ",
                     r - batch_dims);
  if (indices.dtype() != DataType::kInt64 && indices.dtype() != DataType::kInt32)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "indices must be int64, got ", DataTypeName(indices.dtype()));
  ASSIGN_OR_RETURN(std::vector<int64_t> raw, ReadInts(ctx, indices, "indices"));
  std::vector<int64_t> ds = ContiguousStrides(data.shape());
  const int64_t batch = Product(indices.shape(), 0, batch_dims);
  const int64_t tuples = Product(indices.shape(), 0, q - 1);
  const int64_t per_batch = batch > 0 ? tuples / batch : 0;
  const int64_t batch_stride = batch_dims > 0 ? ds[batch_dims - 1] : 0;
  std::vector<int64_t> off(tuples);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t o = (t / std::max<int64_t>(per_batch, 1)) * batch_stride;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = raw[t * k + j];
      const int64_t d = data.dim(batch_dims + j);
      if (v < -d || v >= d)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "index ", v, " is out of range [", -d, ", ", d - 1,
                         "] for data axis ", batch_dims + j);
      if (v < 0) v += d;
      o += v * ds[batch_dims + j];
    }
    off[t] = o;
  }
  return off;
}

StatusOr<std::unique_ptr<OpKernel>> CreateGatherND(const KernelInfo& info) {
  const int64_t batch_dims = info.GetInt("batch_dims", 0);
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ASSIGN_OR_RETURN(const Tensor* ti, RequireInput(ctx, 1, "indices"));
    ASSIGN_OR_RETURN(std::vector<int64_t> off, TupleOffsets(ctx, *x, *ti, batch_dims));
    const int64_t k = ti->dim(ti->rank() - 1);
    Shape out_shape(ti->shape().begin(), ti->shape().end() - 1);
    out_shape.insert(out_shape.end(), x->shape().begin() + batch_dims + k, x->shape().end());
    const int64_t block = Product(x->shape(), batch_dims + k, x->rank());
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    const DataType dt = x->dtype();
    for (size_t t = 0; t < off.size(); ++t)
      CopyElements(dt, ElementPtr(x->raw_data(), dt, off[t]), ElementPtr(y->raw_data(), dt, t * block), block);
    return Status::OK();
  })(info);
}

StatusOr<std::unique_ptr<OpKernel>> CreateScatterND(const KernelInfo& info) {
  ASSIGN_OR_RETURN(Reduction red, ParseReduction(info));
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ASSIGN_OR_RETURN(const Tensor* ti, RequireInput(ctx, 1, "indices"));
    ASSIGN_OR_RETURN(const Tensor* tu, RequireInput(ctx, 2, "updates"));
    ASSIGN_OR_RETURN(std::vector<int64_t> off, TupleOffsets(ctx, *x, *ti, 0));
    const int64_t k = ti->dim(ti->rank() - 1);
    Shape expected(ti->shape().begin(), ti->shape().end() - 1);
    expected.insert(expected.end(), x->shape().begin() + k, x->shape().end());
    if (tu->shape() != expected || tu->dtype() != x->dtype())
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "updates (", DataTypeName(tu->dtype()), " ",
                       ShapeToString(tu->shape()), ") must be ", DataTypeName(x->dtype()), " ",
                       ShapeToString(expected));
    const int64_t block = Product(x->shape(), k, x->rank());
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    CopyElements(x->dtype(), x->raw_data(), y->raw_data(), x->NumElements());
    return ScatterApply(ctx, y, *tu, off, block, red);
  })(info);
}

// ---------------------------------------------------------------- OneHot

// Values of a numeric tensor as int64 (floats truncated toward zero, as a cast would).
StatusOr<std::vector<int64_t>> ReadAsInt64(const KernelContext& ctx, const Tensor& t, const char* what) {
  std::vector<int64_t> out(static_cast<size_t>(t.NumElements()));
  Status st = DispatchType<EPCTX_NUMERIC_TYPES>(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_integral_v<T>) {
        out[i] = static_cast<int64_t>(p[i]);
      } else {
        const double v = ToDouble(p[i]);
        out[i] = std::fabs(v) < 9e18 ? static_cast<int64_t>(v) : INT64_MIN;  // NaN/huge: out of any range
      }
    }
    return Status::OK();
  });
  if (!st.ok()) return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be numeric, got ", DataTypeName(t.dtype()));
  return out;
}

StatusOr<std::unique_ptr<OpKernel>> CreateOneHot(const KernelInfo& info) {
  const int64_t axis = info.GetInt("axis", -1);
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* ti, RequireInput(ctx, 0, "indices"));
    ASSIGN_OR_RETURN(const Tensor* td, RequireInput(ctx, 1, "depth"));
    ASSIGN_OR_RETURN(const Tensor* tv, RequireInput(ctx, 2, "values"));
    if (tv->NumElements() != 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "values must hold [off_value, on_value], got shape ",
                       ShapeToString(tv->shape()));
    ASSIGN_OR_RETURN(double depth_d, ReadScalarDouble(ctx, *td, "depth"));
    if (!(depth_d >= 1 && depth_d < 1e12))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "depth ", depth_d, " must be a positive count");
    const int64_t depth = static_cast<int64_t>(depth_d);
    const int64_t r = static_cast<int64_t>(ti->rank());
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis, r + 1));
    ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadAsInt64(ctx, *ti, "indices"));
    Shape out_shape = ti->shape();
    out_shape.insert(out_shape.begin() + a, depth);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, tv->dtype(), out_shape));
    const int64_t inner = Product(ti->shape(), a, r);
    return WithNode(ctx, DispatchByElementSize(tv->dtype(), "OneHot", [&](auto tag) {
      using T = decltype(tag);
      const T off_v = tv->data<T>()[0], on_v = tv->data<T>()[1];
      T* d = y->data<T>();
      const int64_t n = y->NumElements();
      for (int64_t i = 0; i < n; ++i) d[i] = off_v;
      for (size_t e = 0; e < idx.size(); ++e) {
        int64_t v = idx[e];
        if (v < -depth || v >= depth) continue;
        if (v < 0) v += depth;
        const int64_t o = static_cast<int64_t>(e) / inner, i = static_cast<int64_t>(e) - o * inner;
        d[(o * depth + v) * inner + i] = on_v;
      }
      return Status::OK();
    }));
  })(info);
}

// ---------------------------------------------------------------- NonZero

Status NonZeroCompute(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
  std::vector<int64_t> flat;
  Status st = DispatchType<EPCTX_NUMERIC_TYPES, bool>(x->dtype(), "NonZero", [&](auto tag) {
    using T = decltype(tag);
    const T* p = x->data<T>();
    const int64_t n = x->NumElements();
    for (int64_t i = 0; i < n; ++i) {
      bool nz;
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        nz = float(p[i]) != 0.0f;
      } else {
        nz = p[i] != T{};
      }
      if (nz) flat.push_back(i);
    }
    return Status::OK();
  });
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  // A scalar behaves as a one-element vector (as numpy does).
  const Shape shape = x->rank() == 0 ? Shape{1} : x->shape();
  const int64_t r = static_cast<int64_t>(shape.size()), nnz = static_cast<int64_t>(flat.size());
  ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kInt64, {r, nnz}));
  int64_t* d = y->data<int64_t>();
  for (int64_t j = 0; j < nnz; ++j) {
    int64_t f = flat[j];
    for (int64_t k = r; k-- > 0;) {
      d[k * nnz + j] = f % shape[k];
      f /= shape[k];
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------- Unique

// Three-way comparison with a total order (NaN after everything, NaNs equal) so sorting is well defined.
template <typename T>
inline int Compare(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return Compare(float(a), float(b));
  } else if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
    return a < b ? -1 : (b < a ? 1 : 0);
  } else {
    return a < b ? -1 : (b < a ? 1 : 0);
  }
}

template <typename T>
Status UniqueImpl(KernelContext& ctx, const Tensor& x, bool sorted, bool has_axis, int64_t axis) {
  int64_t outer = 1, dim = x.NumElements(), inner = 1;
  if (has_axis) {
    outer = Product(x.shape(), 0, axis);
    dim = x.dim(axis);
    inner = Product(x.shape(), axis + 1, x.rank());
  }
  const T* p = x.data<T>();
  // Slice j is the elements p[(o * dim + j) * inner + i] in (o, i) order; compared lexicographically.
  auto cmp = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int c = Compare(p[(o * dim + a) * inner + i], p[(o * dim + b) * inner + i]);
        if (c) return c;
      }
    return 0;
  };
  std::vector<int64_t> order(dim);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  // Groups of equal slices in sorted order; the first member of each is its first occurrence.
  std::vector<int64_t> first, count, group_of(dim);
  for (int64_t j = 0; j < dim; ++j) {
    if (j == 0 || cmp(order[j - 1], order[j]) != 0) {
      first.push_back(order[j]);
      count.push_back(0);
    }
    ++count.back();
    group_of[order[j]] = static_cast<int64_t>(first.size()) - 1;
  }
  const int64_t u = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank(u);  // output position of each group
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(u);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    for (int64_t pos = 0; pos < u; ++pos) rank[by_first[pos]] = pos;
  }
  Shape y_shape = {u};
  if (has_axis) {
    y_shape = x.shape();
    y_shape[axis] = u;
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.dtype(), y_shape));
  T* yd = y->data<T>();
  for (int64_t g = 0; g < u; ++g)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) yd[(o * u + rank[g]) * inner + i] = p[(o * dim + first[g]) * inner + i];
  if (ctx.OutputRequested(1)) {
    ASSIGN_OR_RETURN(Tensor * t, ctx.Output(1, DataType::kInt64, {u}));
    for (int64_t g = 0; g < u; ++g) t->data<int64_t>()[rank[g]] = first[g];
  }
  if (ctx.OutputRequested(2)) {
    ASSIGN_OR_RETURN(Tensor * t, ctx.Output(2, DataType::kInt64, {dim}));
    for (int64_t j = 0; j < dim; ++j) t->data<int64_t>()[j] = rank[group_of[j]];
  }
  if (ctx.OutputRequested(3)) {
    ASSIGN_OR_RETURN(Tensor * t, ctx.Output(3, DataType::kInt64, {u}));
    for (int64_t g = 0; g < u; ++g) t->data<int64_t>()[rank[g]] = count[g];
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<OpKernel>> CreateUnique(const KernelInfo& info) {
  const bool sorted = info.GetInt("sorted", 1) != 0;
  const bool has_axis = info.HasAttr("axis");
  const int64_t axis = info.GetInt("axis", 0);
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    int64_t a = 0;
    if (has_axis) {
      ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, axis, static_cast<int64_t>(x->rank())));
    }
    return WithNode(ctx, DispatchType<EPCTX_ALL_TYPES>(x->dtype(), "Unique", [&](auto tag) {
      using T = decltype(tag);
      return UniqueImpl<T>(ctx, *x, sorted, has_axis, a);
    }));
  })(info);
}

}  // namespace

void RegisterIndexKernels(KernelRegistry& r) {
  r.Register("", "Gather", CreateGather);
  r.Register("", "GatherElements", CreateGatherElements);
  r.Register("", "GatherND", CreateGatherND);
  r.Register("", "Scatter", CreateScatterElements);
  r.Register("", "ScatterElements", CreateScatterElements);
  r.Register("", "ScatterND", CreateScatterND);
  r.Register("", "OneHot", CreateOneHot);
  r.Register("", "NonZero", LambdaKernel(NonZeroCompute));
  r.Register("", "Unique", CreateUnique);
}

}  // namespace tensor_kernels
}  // namespace epctx
