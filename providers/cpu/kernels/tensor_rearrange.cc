// Rearranging kernels of opsets 18-26: CenterCropPad-18, Col2Im-18, TensorScatter-24 and BitCast-26.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "providers/cpu/kernels/elementwise_types.h"
#include "providers/cpu/kernels/tensor_util.h"

namespace epctx {
namespace tensor_kernels {
namespace {

int64_t SpanProduct(const Shape& s, int64_t begin, int64_t end) {
  int64_t p = 1;
  for (int64_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

// Copies the box `len` (per dim) from src at `src_start` into dst at `dst_start`; both tensors row-major of the
// given shapes and the same element type. Rows of the last dim are copied whole.
void CopyBox(DataType dt, const void* src, const Shape& src_shape, const std::vector<int64_t>& src_start,
             void* dst, const Shape& dst_shape, const std::vector<int64_t>& dst_start, const std::vector<int64_t>& len) {
  const size_t r = len.size();
  for (int64_t l : len)
    if (l <= 0) return;
  if (r == 0) {
    CopyElements(dt, src, dst, 1);
    return;
  }
  const std::vector<int64_t> ss = ContiguousStrides(src_shape), ds = ContiguousStrides(dst_shape);
  std::vector<int64_t> idx(r, 0);
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < r; ++k) rows *= len[k];
  const int64_t row = len[r - 1];
  for (int64_t q = 0; q < rows; ++q) {
    int64_t so = 0, d = 0;
    for (size_t k = 0; k < r; ++k) {
      so += (src_start[k] + idx[k]) * ss[k];
      d += (dst_start[k] + idx[k]) * ds[k];
    }
    CopyElements(dt, ElementPtr(src, dt, so), ElementPtr(dst, dt, d), row);
    for (size_t k = r - 1; k-- > 0;) {  // next row: the last dim is the row itself
      if (++idx[k] < len[k]) break;
      idx[k] = 0;
    }
  }
}

// CenterCropPad: each listed axis is cropped (centered, the extra element dropped from the end) or zero-padded
// (centered, the extra pad at the end) to the target size.
StatusOr<std::unique_ptr<OpKernel>> CreateCenterCropPad(const KernelInfo& info) {
  const std::vector<int64_t> attr_axes = info.GetInts("axes");
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input_data"));
    ASSIGN_OR_RETURN(const Tensor* st, RequireInput(ctx, 1, "shape"));
    ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadInts(ctx, *st, "shape"));
    const int64_t r = static_cast<int64_t>(x->rank());
    std::vector<int64_t> axes = attr_axes;
    if (axes.empty())
      for (int64_t a = 0; a < r; ++a) axes.push_back(a);
    if (axes.size() != target.size())
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(target), " has ", target.size(),
                       " values for ", axes.size(), " axes");
    Shape out = x->shape();
    std::vector<int64_t> src_start(r, 0), dst_start(r, 0), len(x->shape().begin(), x->shape().end());
    std::vector<bool> seen(r, false);
    for (size_t j = 0; j < axes.size(); ++j) {
      ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axes[j], r));
      if (seen[a]) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis ", a, " is listed twice");
      seen[a] = true;
      const int64_t dim = x->dim(a), t = target[j];
      if (t < 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(target), " has a negative size");
      out[a] = t;
      if (t < dim) {
        src_start[a] = (dim - t) / 2;
        len[a] = t;
      } else {
        dst_start[a] = (t - dim) / 2;
        len[a] = dim;
      }
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out));  // zero-filled: the padding
    if (y->NumElements() == 0) return Status::OK();
    CopyBox(x->dtype(), x->raw_data(), x->shape(), src_start, y->raw_data(), out, dst_start, len);
    return Status::OK();
  })(info);
}

// Col2Im: input (N, C * prod(block), L) holds the columns of sliding blocks; the output image (N, C, image...)
// sums each block element into its position (the inverse of an im2col with the same strides, pads, dilations).
StatusOr<std::unique_ptr<OpKernel>> CreateCol2Im(const KernelInfo& info) {
  const std::vector<int64_t> attr_strides = info.GetInts("strides"), attr_pads = info.GetInts("pads"),
                             attr_dil = info.GetInts("dilations");
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    ASSIGN_OR_RETURN(const Tensor* it, RequireInput(ctx, 1, "image_shape"));
    ASSIGN_OR_RETURN(const Tensor* bt, RequireInput(ctx, 2, "block_shape"));
    ASSIGN_OR_RETURN(std::vector<int64_t> image, ReadInts(ctx, *it, "image_shape"));
    ASSIGN_OR_RETURN(std::vector<int64_t> block, ReadInts(ctx, *bt, "block_shape"));
    const size_t nd = image.size();
    if (nd == 0 || block.size() != nd)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "image_shape ", ShapeToString(image), " and block_shape ",
                       ShapeToString(block), " must be non-empty and of the same length");
    std::vector<int64_t> strides = attr_strides.empty() ? std::vector<int64_t>(nd, 1) : attr_strides;
    std::vector<int64_t> dil = attr_dil.empty() ? std::vector<int64_t>(nd, 1) : attr_dil;
    std::vector<int64_t> pads = attr_pads.empty() ? std::vector<int64_t>(2 * nd, 0) : attr_pads;
    if (strides.size() != nd || dil.size() != nd || pads.size() != 2 * nd)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "strides, dilations and pads must have ", nd, ", ", nd, " and ",
                       2 * nd, " values");
    if (x->rank() != 3)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have shape (N, C * prod(block_shape), L), got ",
                       ShapeToString(x->shape()));
    int64_t kprod = 1, lprod = 1;
    std::vector<int64_t> grid(nd);
    for (size_t d = 0; d < nd; ++d) {
      if (block[d] <= 0 || image[d] <= 0 || strides[d] <= 0 || dil[d] <= 0)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "image, block, strides and dilations must be positive");
      kprod *= block[d];
      const int64_t span = image[d] + pads[d] + pads[d + nd] - (dil[d] * (block[d] - 1) + 1);
      if (span < 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "block ", ShapeToString(block), " does not fit image ",
                                     ShapeToString(image));
      grid[d] = span / strides[d] + 1;
      lprod *= grid[d];
    }
    if (x->dim(1) % kprod != 0 || x->dim(2) != lprod)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", ShapeToString(x->shape()), " needs dim 1 a multiple of ",
                       kprod, " and dim 2 = ", lprod, " blocks");
    const int64_t n = x->dim(0), c = x->dim(1) / kprod;
    Shape out{n, c};
    out.insert(out.end(), image.begin(), image.end());
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out));
    int64_t isize = 1;
    for (int64_t v : image) isize *= v;
    return WithNode(ctx, DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), "Col2Im", [&](auto tag) {
      using T = decltype(tag);
      using C = ComputeT<T>;
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      ParallelFor(ctx.num_threads(), n * c, static_cast<double>(kprod * lprod), [&](int64_t b, int64_t e) {
        std::vector<C> acc(static_cast<size_t>(isize));
        std::vector<int64_t> k(nd), l(nd);
        for (int64_t plane = b; plane < e; ++plane) {
          std::fill(acc.begin(), acc.end(), C(0));
          const T* p = src + plane * kprod * lprod;
          std::fill(k.begin(), k.end(), 0);
          for (int64_t ki = 0; ki < kprod; ++ki) {
            std::fill(l.begin(), l.end(), 0);
            for (int64_t li = 0; li < lprod; ++li) {
              int64_t pos = 0;
              bool inside = true;
              for (size_t d = 0; d < nd; ++d) {
                const int64_t id = l[d] * strides[d] - pads[d] + k[d] * dil[d];
                if (id < 0 || id >= image[d]) {
                  inside = false;
                  break;
                }
                pos = pos * image[d] + id;
              }
              if (inside) acc[pos] += static_cast<C>(p[ki * lprod + li]);
              for (size_t d = nd; d-- > 0;) {
                if (++l[d] < grid[d]) break;
                l[d] = 0;
              }
            }
            for (size_t d = nd; d-- > 0;) {
              if (++k[d] < block[d]) break;
              k[d] = 0;
            }
          }
          T* o = dst + plane * isize;
          for (int64_t i = 0; i < isize; ++i) o[i] = static_cast<T>(acc[i]);
        }
      });
      return Status::OK();
    }));
  })(info);
}

// TensorScatter: present_cache = past_cache with update (same shape except `axis`, the sequence axis) written for
// batch b at positions write_indices[b] + s along the axis (modulo the cache length in circular mode).
StatusOr<std::unique_ptr<OpKernel>> CreateTensorScatter(const KernelInfo& info) {
  const int64_t attr_axis = info.GetInt("axis", -2);
  const std::string mode = info.GetString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return info.Error(ErrorCode::INVALID_GRAPH, "mode must be linear or circular, got '", mode, "'");
  const bool circular = mode == "circular";
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* past, RequireInput(ctx, 0, "past_cache"));
    ASSIGN_OR_RETURN(const Tensor* upd, RequireInput(ctx, 1, "update"));
    const int64_t r = static_cast<int64_t>(past->rank());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, attr_axis, r));
    if (axis == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis must not be the batch axis 0");
    if (upd->dtype() != past->dtype() || upd->rank() != past->rank())
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "update ", ShapeToString(upd->shape()), " does not match past_cache ",
                       ShapeToString(past->shape()));
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && upd->dim(d) != past->dim(d))
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "update ", ShapeToString(upd->shape()), " differs from past_cache ",
                         ShapeToString(past->shape()), " outside axis ", axis);
    const int64_t batch = past->dim(0), max_len = past->dim(axis), s = upd->dim(axis);
    std::vector<int64_t> widx(static_cast<size_t>(batch), 0);
    if (const Tensor* w = ctx.Input(2)) {
      ASSIGN_OR_RETURN(widx, ReadInts(ctx, *w, "write_indices"));
      if (static_cast<int64_t>(widx.size()) != batch)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "write_indices has ", widx.size(), " values for batch ", batch);
    }
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t w = widx[b];
      if (w < 0 || (!circular && w + s > max_len) || (circular && w >= max_len && max_len > 0))
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "write index ", w, " with ", s, " updates is outside the cache of ",
                         max_len, circular ? " (circular)" : "");
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, past->dtype(), past->shape()));
    const DataType dt = past->dtype();
    CopyElements(dt, past->raw_data(), y->raw_data(), past->NumElements());
    // [batch, mid, axis, inner] view.
    const int64_t mid = SpanProduct(past->shape(), 1, axis), inner = SpanProduct(past->shape(), axis + 1, r);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t m = 0; m < mid; ++m)
        for (int64_t j = 0; j < s; ++j) {
          int64_t pos = widx[b] + j;
          if (circular) pos %= max_len;
          CopyElements(dt, ElementPtr(upd->raw_data(), dt, ((b * mid + m) * s + j) * inner),
                       ElementPtr(y->raw_data(), dt, ((b * mid + m) * max_len + pos) * inner), inner);
        }
    return Status::OK();
  })(info);
}

// BitCast: the same bytes read as the type `to` (same element size, same shape).
StatusOr<std::unique_ptr<OpKernel>> CreateBitCast(const KernelInfo& info) {
  ASSIGN_OR_RETURN(int64_t to, info.RequireInt("to"));
  if (!IsValidDataType(static_cast<int32_t>(to)))
    return info.Error(ErrorCode::NOT_IMPLEMENTED, "BitCast to data type ", to, " is not supported");
  const DataType dst = static_cast<DataType>(to);
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    const DataType src = x->dtype();
    if (src == DataType::kString || dst == DataType::kString || src == DataType::kBool || dst == DataType::kBool ||
        DataTypeSize(src) != DataTypeSize(dst))
      return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "BitCast from ", DataTypeName(src), " to ", DataTypeName(dst),
                       " is not supported (this CPU EP bit-casts between numeric types of the same size)");
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, dst, x->shape()));
    std::memcpy(y->raw_data(), x->raw_data(), static_cast<size_t>(x->NumElements()) * DataTypeSize(src));
    return Status::OK();
  })(info);
}

}  // namespace

void RegisterRearrangeKernels(KernelRegistry& r) {
  r.Register("", "CenterCropPad", CreateCenterCropPad, 18);
  r.Register("", "Col2Im", CreateCol2Im, 18);
  r.Register("", "TensorScatter", CreateTensorScatter, 24);
  r.Register("", "BitCast", CreateBitCast, 26);
}

}  // namespace tensor_kernels
}  // namespace epctx
