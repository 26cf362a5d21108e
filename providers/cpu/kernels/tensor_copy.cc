// Kernels that are one strided copy of their input: Transpose, Slice, Expand, Tile, DepthToSpace, SpaceToDepth.
// Each computes the output shape and source strides and hands them to StridedCopy, which coalesces dims and
// picks memcpy rows, a blocked 2-D transpose, or a strided gather loop.
#include <algorithm>
#include <type_traits>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "providers/cpu/kernels/broadcast.h"
#include "providers/cpu/kernels/tensor_util.h"

namespace epctx {
namespace tensor_kernels {

namespace {

// Offset of flat outer index `o` over dims[0..n) with the given strides.
inline int64_t OuterOffset(int64_t o, const Shape& dims, const std::vector<int64_t>& st, size_t n) {
  int64_t off = 0;
  for (size_t k = n; k-- > 0;) {
    int64_t q = o / dims[k];
    off += (o - q * dims[k]) * st[k];
    o = q;
  }
  return off;
}

#ifdef __AVX2__
// d[j * ds + i] = s[i * ss + j] for an 8x8 block of 4-byte elements (moved as float bit patterns).
inline void Transpose8x8(const float* s, int64_t ss, float* d, int64_t ds) {
  __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ss), r2 = _mm256_loadu_ps(s + 2 * ss),
         r3 = _mm256_loadu_ps(s + 3 * ss), r4 = _mm256_loadu_ps(s + 4 * ss), r5 = _mm256_loadu_ps(s + 5 * ss),
         r6 = _mm256_loadu_ps(s + 6 * ss), r7 = _mm256_loadu_ps(s + 7 * ss);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
         u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
         u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

template <typename T>
void CopyRow(const T* s, T* d, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    std::memcpy(d, s, static_cast<size_t>(n) * sizeof(T));
  } else {
    for (int64_t j = 0; j < n; ++j) d[j] = s[j];
  }
}

template <typename T>
void StridedCopyImpl(const T* src, T* dst, const Shape& dims, const std::vector<int64_t>& st, int threads) {
  const size_t r = dims.size();
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  if (r >= 2 && st[r - 2] == 1 && st[r - 1] != 1) {
    // dst[o][a][b] = src[off(o) + a + b * sb]: a batch of 2-D transposes, done in kT x kT tiles so that both
    // the reads (along a) and the writes (along b) stay within a few cache lines. 4-byte elements use an
    // in-register 8x8 transpose where AVX2 is available.
    constexpr int64_t kT = 16;
    const int64_t A = dims[r - 2], B = dims[r - 1], sb = st[r - 1];
    int64_t outer = 1;
    for (size_t k = 0; k + 2 < r; ++k) outer *= dims[k];
    const int64_t a_tiles = (A + kT - 1) / kT;
    ParallelFor(threads, outer * a_tiles, static_cast<double>(kT * B), [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t o = item / a_tiles;
        const int64_t a0 = (item - o * a_tiles) * kT;
        const int64_t na = std::min(A - a0, kT);
        const T* s = src + OuterOffset(o, dims, st, r - 2) + a0;
        T* d = dst + o * A * B + a0 * B;
        for (int64_t b0 = 0; b0 < B; b0 += kT) {
          const int64_t nb = std::min(B - b0, kT);
#ifdef __AVX2__
          if constexpr (sizeof(T) == 4 && std::is_trivially_copyable_v<T>) {
            if (na == kT && nb == kT) {
              const float* sf = reinterpret_cast<const float*>(s + b0 * sb);
              float* df = reinterpret_cast<float*>(d + b0);
              for (int64_t aa = 0; aa < kT; aa += 8)
                for (int64_t bb = 0; bb < kT; bb += 8) Transpose8x8(sf + bb * sb + aa, sb, df + aa * B + bb, B);
              continue;
            }
          }
#endif
          for (int64_t a = 0; a < na; ++a) {
            T* drow = d + a * B + b0;
            const T* scol = s + a + b0 * sb;
            for (int64_t b = 0; b < nb; ++b) drow[b] = scol[b * sb];
          }
        }
      }
    });
    return;
  }
  const int64_t inner = dims[r - 1], s_in = st[r - 1];
  int64_t outer = 1;
  for (size_t k = 0; k + 1 < r; ++k) outer *= dims[k];
  ParallelFor(threads, outer, static_cast<double>(inner), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(r - 1, 0);
    int64_t off = 0;
    {
      int64_t o = begin;
      for (size_t k = r - 1; k-- > 0;) {
        idx[k] = o % dims[k];
        o /= dims[k];
        off += idx[k] * st[k];
      }
    }
    for (int64_t o = begin; o < end; ++o) {
      T* d = dst + o * inner;
      const T* s = src + off;
      if (s_in == 1) {
        CopyRow(s, d, inner);
      } else if (s_in == 0) {
        const T v = s[0];
        for (int64_t j = 0; j < inner; ++j) d[j] = v;
      } else {
        for (int64_t j = 0; j < inner; ++j) d[j] = s[j * s_in];
      }
      for (size_t k = r - 1; k-- > 0;) {  // next outer index
        off += st[k];
        if (++idx[k] < dims[k]) break;
        off -= st[k] * dims[k];
        idx[k] = 0;
      }
    }
  });
}

}  // namespace

void StridedCopy(DataType dt, const void* src, void* dst, Shape dims, std::vector<int64_t> src_strides,
                 int num_threads) {
  // Drop unit dims, then merge neighbours that are contiguous with each other in the source.
  Shape d;
  std::vector<int64_t> s;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 0) return;
    if (dims[k] == 1) continue;
    if (!d.empty() && s.back() == src_strides[k] * dims[k]) {
      d.back() *= dims[k];
      s.back() = src_strides[k];
    } else {
      d.push_back(dims[k]);
      s.push_back(src_strides[k]);
    }
  }
  Status st = DispatchByElementSize(dt, "StridedCopy", [&](auto tag) {
    using T = decltype(tag);
    StridedCopyImpl<T>(static_cast<const T*>(src), static_cast<T*>(dst), d, s, num_threads);
    return Status::OK();
  });
  st.IgnoreError();  // callers only pass tensors of supported element types
}

namespace {

// ---------------------------------------------------------------- Transpose

class Transpose final : public OpKernel {
 public:
  explicit Transpose(std::vector<int64_t> perm) : perm_(std::move(perm)) {}
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    std::vector<int64_t> perm = info.GetInts("perm");
    std::vector<bool> seen(perm.size(), false);
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p])
        return info.Error(ErrorCode::INVALID_GRAPH, "perm ", ShapeToString(perm), " is not a permutation");
      seen[p] = true;
    }
    return std::unique_ptr<OpKernel>(new Transpose(std::move(perm)));
  }

  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    const size_t r = x->rank();
    std::vector<int64_t> perm = perm_;
    if (perm.empty()) {
      for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
    } else if (perm.size() != r) {
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "perm has ", perm.size(), " entries but the input has rank ", r,
                       " (shape ", ShapeToString(x->shape()), ")");
    }
    std::vector<int64_t> in_strides = ContiguousStrides(x->shape());
    Shape out_shape(r);
    std::vector<int64_t> strides(r);
    for (size_t i = 0; i < r; ++i) {
      out_shape[i] = x->dim(perm[i]);
      strides[i] = in_strides[perm[i]];
    }
    // Only unit dims move: same memory order, so alias the input.
    bool identity = true;
    for (size_t i = 0, last = 0; i < r; ++i) {
      if (x->dim(perm[i]) == 1) continue;
      if (static_cast<size_t>(perm[i]) < last) identity = false;
      last = perm[i];
    }
    if (identity) {
      ctx.SetOutput(0, x->Reshaped(out_shape));
      return Status::OK();
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    StridedCopy(x->dtype(), x->raw_data(), y->raw_data(), out_shape, strides, ctx.num_threads());
    return Status::OK();
  }

 private:
  std::vector<int64_t> perm_;
};

// ---------------------------------------------------------------- Slice

// Per-axis start/count/step after ONNX's clamping rules.
struct SliceAxis {
  int64_t start = 0, count = 0, step = 1;
};

SliceAxis ClampSlice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  SliceAxis a;
  if (dim == 0) return a;  // empty: count 0, step 1
  a.step = step;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    if (end > start) a.count = (end - start) / step + ((end - start) % step != 0);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    // step may be INT64_MIN; -step would overflow, so work with (start - end) / step <= 0.
    if (start > end) {
      const int64_t span = start - end;
      const int64_t q = span / step;  // non-positive
      a.count = -q + (span % step != 0);
    }
  }
  a.start = start;
  if (a.count <= 1) a.step = 1;  // a huge step over one element must not overflow stride arithmetic
  return a;
}

class Slice final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    auto k = std::unique_ptr<Slice>(new Slice());
    k->attr_mode_ = info.opset() < 10;
    if (k->attr_mode_) {
      if (!info.HasAttr("starts") || !info.HasAttr("ends"))
        return info.Error(ErrorCode::INVALID_GRAPH, "attributes 'starts' and 'ends' are required before opset 10");
      k->starts_ = info.GetInts("starts");
      k->ends_ = info.GetInts("ends");
      k->axes_ = info.GetInts("axes");
      k->has_axes_ = info.HasAttr("axes");
    }
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    std::vector<int64_t> starts = starts_, ends = ends_, axes = axes_, steps;
    bool has_axes = has_axes_;
    if (!attr_mode_) {
      ASSIGN_OR_RETURN(const Tensor* ts, RequireInput(ctx, 1, "starts"));
      ASSIGN_OR_RETURN(const Tensor* te, RequireInput(ctx, 2, "ends"));
      ASSIGN_OR_RETURN(starts, ReadInts(ctx, *ts, "starts"));
      ASSIGN_OR_RETURN(ends, ReadInts(ctx, *te, "ends"));
      if (const Tensor* ta = ctx.Input(3)) {
        ASSIGN_OR_RETURN(axes, ReadInts(ctx, *ta, "axes"));
        has_axes = true;
      }
      if (const Tensor* tst = ctx.Input(4)) {
        ASSIGN_OR_RETURN(steps, ReadInts(ctx, *tst, "steps"));
      }
    }
    const int64_t r = static_cast<int64_t>(x->rank());
    if (starts.size() != ends.size())
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "starts has ", starts.size(), " values but ends has ", ends.size());
    if (!has_axes) {
      axes.clear();
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (axes.size() != starts.size())
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axes has ", axes.size(), " values but starts has ", starts.size());
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (steps.size() != starts.size())
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "steps has ", steps.size(), " values but starts has ",
                       starts.size());

    std::vector<SliceAxis> ax(r);
    for (int64_t k = 0; k < r; ++k) ax[k] = SliceAxis{0, x->dim(k), 1};
    std::vector<bool> seen(r, false);
    for (size_t i = 0; i < axes.size(); ++i) {
      ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axes[i], r));
      if (seen[a]) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis ", axes[i], " appears twice in axes");
      seen[a] = true;
      if (steps[i] == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "step for axis ", axes[i], " is 0");
      ax[a] = ClampSlice(starts[i], ends[i], steps[i], x->dim(a));
    }
    std::vector<int64_t> in_strides = ContiguousStrides(x->shape());
    Shape out_shape(r);
    std::vector<int64_t> strides(r);
    int64_t offset = 0;
    for (int64_t k = 0; k < r; ++k) {
      out_shape[k] = ax[k].count;
      strides[k] = ax[k].step * in_strides[k];
      if (ax[k].count > 0) offset += ax[k].start * in_strides[k];
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    if (y->NumElements() == 0) return Status::OK();
    StridedCopy(x->dtype(), ElementPtr(x->raw_data(), x->dtype(), offset), y->raw_data(), out_shape, strides,
                ctx.num_threads());
    return Status::OK();
  }

 private:
  bool attr_mode_ = false;
  bool has_axes_ = false;
  std::vector<int64_t> starts_, ends_, axes_;
};

// ---------------------------------------------------------------- Expand

Status ExpandCompute(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const Tensor* ts, RequireInput(ctx, 1, "shape"));
  if (ts->rank() != 1)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape must be 1-D, got shape ", ShapeToString(ts->shape()));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(ctx, *ts, "shape"));
  for (int64_t d : shape)
    if (d < 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(shape), " has a negative dim");
  StatusOr<Shape> out = BroadcastShapes(x->shape(), shape);
  if (!out.ok()) return ctx.Error(out.status().code(), out.status().message());
  const Shape& out_shape = out.value();
  ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
  if (y->NumElements() == 0) return Status::OK();
  StridedCopy(x->dtype(), x->raw_data(), y->raw_data(), out_shape, BroadcastStrides(x->shape(), out_shape),
              ctx.num_threads());
  return Status::OK();
}

// ---------------------------------------------------------------- Tile

Status TileCompute(KernelContext& ctx, int opset) {
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  const int64_t r = static_cast<int64_t>(x->rank());
  std::vector<int64_t> repeats;
  if (opset < 6) {
    ASSIGN_OR_RETURN(const Tensor* tt, RequireInput(ctx, 1, "tiles"));
    ASSIGN_OR_RETURN(const Tensor* ta, RequireInput(ctx, 2, "axis"));
    ASSIGN_OR_RETURN(int64_t tiles, ReadScalarInt(ctx, *tt, "tiles"));
    ASSIGN_OR_RETURN(int64_t axis, ReadScalarInt(ctx, *ta, "axis"));
    ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, r));
    repeats.assign(r, 1);
    repeats[axis] = tiles;
  } else {
    ASSIGN_OR_RETURN(const Tensor* tr, RequireInput(ctx, 1, "repeats"));
    ASSIGN_OR_RETURN(repeats, ReadInts(ctx, *tr, "repeats"));
  }
  if (static_cast<int64_t>(repeats.size()) != r)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "repeats has ", repeats.size(), " values but the input has rank ",
                     r);
  std::vector<int64_t> in_strides = ContiguousStrides(x->shape());
  Shape out_shape(r), dims(2 * r);
  std::vector<int64_t> strides(2 * r);
  for (int64_t k = 0; k < r; ++k) {
    if (repeats[k] < 0)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "repeats ", ShapeToString(repeats), " has a negative value");
    if (x->dim(k) != 0 && repeats[k] > INT64_MAX / x->dim(k))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "repeats ", ShapeToString(repeats), " overflow the output size");
    out_shape[k] = repeats[k] * x->dim(k);
    dims[2 * k] = repeats[k];
    strides[2 * k] = 0;
    dims[2 * k + 1] = x->dim(k);
    strides[2 * k + 1] = in_strides[k];
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
  if (y->NumElements() == 0) return Status::OK();
  StridedCopy(x->dtype(), x->raw_data(), y->raw_data(), dims, strides, ctx.num_threads());
  return Status::OK();
}

// ---------------------------------------------------------------- DepthToSpace / SpaceToDepth

class DepthSpace final : public OpKernel {
 public:
  DepthSpace(bool to_space, bool crd, int64_t b) : to_space_(to_space), crd_(crd), b_(b) {}
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info, bool to_space) {
    ASSIGN_OR_RETURN(int64_t b, info.RequireInt("blocksize"));
    if (b <= 0) return info.Error(ErrorCode::INVALID_GRAPH, "blocksize must be positive, got ", b);
    bool crd = false;
    if (to_space) {
      std::string mode = info.GetString("mode", "DCR");
      if (mode != "DCR" && mode != "CRD")
        return info.Error(ErrorCode::INVALID_GRAPH, "mode must be DCR or CRD, got '", mode, "'");
      crd = mode == "CRD";
    }
    return std::unique_ptr<OpKernel>(new DepthSpace(to_space, crd, b));
  }

  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    if (x->rank() != 4)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must be 4-D (N,C,H,W), got shape ",
                       ShapeToString(x->shape()));
    const int64_t N = x->dim(0), C = x->dim(1), H = x->dim(2), W = x->dim(3), b = b_;
    Shape out_shape, dims;
    std::vector<int64_t> st;
    const int64_t sN = C * H * W;
    if (to_space_) {
      if (C % b != 0 || (C / b) % b != 0)  // C % (b * b) without overflowing b * b
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "channels ", C, " are not divisible by blocksize^2 (blocksize ",
                         b, ")");
      if (H > INT64_MAX / b || W > INT64_MAX / b)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "blocksize ", b, " makes the output too large");
      const int64_t Cq = C / b / b;
      out_shape = {N, Cq, H * b, W * b};
      // Stride products below are bounded by the element count only when the input is non-empty.
      if (x->NumElements() == 0) return ctx.Output(0, x->dtype(), out_shape).status();
      dims = {N, Cq, H, b, W, b};
      // Source channel of (c, b1, b2): DCR = (b1 * b + b2) * Cq + c, CRD = (c * b + b1) * b + b2.
      const int64_t sc = crd_ ? b * b * H * W : H * W;
      const int64_t sb1 = crd_ ? b * H * W : b * Cq * H * W;
      const int64_t sb2 = crd_ ? H * W : Cq * H * W;
      st = {sN, sc, W, sb1, 1, sb2};
    } else {
      if (H % b != 0 || W % b != 0)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "spatial dims ", H, "x", W, " are not divisible by blocksize ",
                         b);
      if (C > INT64_MAX / b / b)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "blocksize ", b, " makes the output too large");
      const int64_t Hq = H / b, Wq = W / b;
      out_shape = {N, C * b * b, Hq, Wq};
      if (x->NumElements() == 0) return ctx.Output(0, x->dtype(), out_shape).status();
      dims = {N, b, b, C, Hq, Wq};
      st = {sN, W, 1, H * W, b * W, b};
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    if (y->NumElements() == 0) return Status::OK();
    StridedCopy(x->dtype(), x->raw_data(), y->raw_data(), dims, st, ctx.num_threads());
    return Status::OK();
  }

 private:
  bool to_space_, crd_;
  int64_t b_;
};

}  // namespace

void RegisterCopyKernels(KernelRegistry& r) {
  r.Register("", "Transpose", &Transpose::Create);
  r.Register("", "Slice", &Slice::Create);
  r.Register("", "Expand", LambdaKernel(ExpandCompute));
  r.Register("", "Tile", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    int opset = info.opset();
    return LambdaKernel([opset](KernelContext& ctx) { return TileCompute(ctx, opset); })(info);
  });
  r.Register("", "DepthToSpace", [](const KernelInfo& info) { return DepthSpace::Create(info, true); });
  r.Register("", "SpaceToDepth", [](const KernelInfo& info) { return DepthSpace::Create(info, false); });
}

}  // namespace tensor_kernels
}  // namespace epctx
