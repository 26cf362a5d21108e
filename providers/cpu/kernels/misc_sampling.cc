// GridSample (opsets 16, 20, 22; 4-D and 5-D X) and RoiAlign (opsets 10 and 16).
//
// Both kernels first turn the sampling positions into tap tables (input offset + weight per tap), shared by all
// channels, and then run a plain weighted gather per channel. Taps that fall outside the input get weight 0 and
// offset 0, so the gather never reads out of bounds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace misc {
namespace {

template <typename T>
using ComputeType = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Reads an element as the compute type (half types go through float).
template <typename A, typename T>
A ToCompute(T v) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    return static_cast<A>(v);
  } else {
    return static_cast<A>(static_cast<float>(v));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// GridSample

enum class GridMode { kBilinear, kNearest, kBicubic };
enum class GridPadding { kZeros, kBorder, kReflection };

template <typename A>
A ReflectCoordinate(A x, A twice_low, A twice_high) {
  if (twice_low == twice_high) return 0;
  const A lo = twice_low / 2;
  const A span = (twice_high - twice_low) / 2;
  x = std::fabs(x - lo);
  const A extra = std::fmod(x, span);
  const bool even_flips = std::fmod(std::floor(x / span), A(2)) == 0;
  return even_flips ? extra + lo : span - extra + lo;
}

template <typename A>
void CubicWeights(A t, A* c) {
  const A a = static_cast<A>(-0.75);
  auto near = [a](A d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
  auto far = [a](A d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
  c[0] = far(t + 1);
  c[1] = near(t);
  c[2] = near(1 - t);
  c[3] = far(2 - t);
}

class GridSampleKernel final : public OpKernel {
 public:
  GridSampleKernel(GridMode mode, GridPadding padding, bool align_corners, int opset)
      : mode_(mode), padding_(padding), align_corners_(align_corners), opset_(opset) {}

  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    // GridSample-20 renamed the modes (linear, nearest, cubic; default linear) and allows N-D input.
    const bool v20 = info.opset() >= 20;
    const std::string m = info.GetString("mode", v20 ? "linear" : "bilinear");
    const std::string p = info.GetString("padding_mode", "zeros");
    GridMode mode;
    GridPadding padding;
    if (m == (v20 ? "linear" : "bilinear")) mode = GridMode::kBilinear;
    else if (m == "nearest") mode = GridMode::kNearest;
    else if (m == (v20 ? "cubic" : "bicubic")) mode = GridMode::kBicubic;
    else return info.Error(ErrorCode::INVALID_ARGUMENT, "mode '", m, "' is not supported (",
                           v20 ? "linear, nearest, cubic" : "bilinear, nearest, bicubic", ")");
    if (p == "zeros") padding = GridPadding::kZeros;
    else if (p == "border") padding = GridPadding::kBorder;
    else if (p == "reflection") padding = GridPadding::kReflection;
    else return info.Error(ErrorCode::INVALID_ARGUMENT, "padding_mode '", p, "' is not supported (zeros, border, reflection)");
    return std::unique_ptr<OpKernel>(
        new GridSampleKernel(mode, padding, info.GetInt("align_corners", 0) != 0, info.opset()));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* grid = ctx.Input(1);
    RETURN_ERROR_IF(!x || !grid, INVALID_ARGUMENT, ctx.node().Describe(), ": inputs X and grid are required");
    const int64_t rank = static_cast<int64_t>(x->rank());
    // GridSample-16 is 4-D only. GridSample-20 defines any rank r + 2 >= 3; like ONNX Runtime 1.30, this kernel
    // runs r = 2 (spatial) and r = 3 (volumetric).
    RETURN_ERROR_IF(opset_ < 20 && rank != 4, INVALID_ARGUMENT, ctx.node().Describe(),
                    ": X must be 4-D (N,C,H,W) before GridSample-20, got shape ", ShapeToString(x->shape()));
    RETURN_ERROR_IF(rank < 3, INVALID_ARGUMENT, ctx.node().Describe(),
                    ": X must have rank 3 or more (N,C,D1..Dr), got shape ", ShapeToString(x->shape()));
    RETURN_ERROR_IF(rank != 4 && rank != 5, NOT_IMPLEMENTED, ctx.node().Describe(), ": X of rank ", rank,
                    " (", rank - 2, " spatial dims) is not implemented by the CPU EP, which runs 4-D (N,C,H,W) and "
                    "5-D (N,C,D,H,W) X; got shape ", ShapeToString(x->shape()));
    const int nd = static_cast<int>(rank - 2);
    RETURN_ERROR_IF(grid->rank() != x->rank() || grid->dim(0) != x->dim(0) || grid->dim(rank - 1) != nd,
                    INVALID_ARGUMENT, ctx.node().Describe(), ": grid must have shape ",
                    nd == 2 ? "(N,H_out,W_out,2)" : "(N,D_out,H_out,W_out,3)", " for X ", ShapeToString(x->shape()),
                    " (rank ", rank, ", N = ", x->dim(0), "), got ", ShapeToString(grid->shape()));
    // The spec's "cubic" covers N-cubic, but tricubic (64 taps) is not implemented here, nor by ONNX Runtime 1.30.
    RETURN_ERROR_IF(nd == 3 && mode_ == GridMode::kBicubic, NOT_IMPLEMENTED, ctx.node().Describe(),
                    ": mode 'cubic' is implemented for 4-D X only; tricubic sampling of 5-D X ",
                    ShapeToString(x->shape()), " is not (use 'linear' or 'nearest')");
    RETURN_ERROR_IF(grid->dtype() != x->dtype(), INVALID_ARGUMENT, ctx.node().Describe(), ": grid type ",
                    DataTypeName(grid->dtype()), " differs from X type ", DataTypeName(x->dtype()));
    Shape out_shape = {x->dim(0), x->dim(1)};
    for (int k = 1; k <= nd; ++k) out_shape.push_back(grid->dim(k));
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    if (y->NumElements() == 0) return Status::OK();
    return DispatchType<float, double, Float16, BFloat16>(x->dtype(), "GridSample", [&](auto tag) {
             using T = decltype(tag);
             Run<T>(*x, *grid, y, ctx.num_threads());
             return Status::OK();
           }).WithContext(ctx.node().Describe());
  }

 private:
  // At most 3 spatial dims. Axis k counts from the innermost (k = 0 is W), the order of a grid point's
  // coordinates (x, y[, z]).
  static constexpr int kMaxDims = 3;

  template <typename A>
  A Unnormalize(A g, int64_t size) const {
    return align_corners_ ? (g + 1) / 2 * static_cast<A>(size - 1) : ((g + 1) * static_cast<A>(size) - 1) / 2;
  }

  // Border / reflection padding of a source coordinate (identity for zeros padding).
  template <typename A>
  A PadCoordinate(A c, int64_t size) const {
    if (padding_ == GridPadding::kZeros) return c;
    if (padding_ == GridPadding::kReflection) {
      c = align_corners_ ? ReflectCoordinate<A>(c, 0, static_cast<A>(2 * (size - 1)))
                         : ReflectCoordinate<A>(c, -1, static_cast<A>(2 * size - 1));
    }
    return std::min(std::max(c, A(0)), static_cast<A>(size - 1));
  }

  // Taps of one point for nearest (1 tap) and N-linear (2^nd taps, axis k's bit k selecting floor or floor + 1)
  // sampling. g: the point's normalized coordinates; size, stride: extent and element stride of X per axis.
  // Taps outside X keep offset 0 and weight 0.
  template <typename A>
  void LinearTaps(int nd, const A* g, const int64_t* size, const int64_t* stride, int64_t* o, A* w) const {
    A s[kMaxDims];
    for (int k = 0; k < nd; ++k) {
      s[k] = Unnormalize(g[k], size[k]);
      if (!std::isfinite(s[k])) return;  // reads as zero
    }
    // Far-out coordinates are clamped to a range that keeps them out of bounds but convertible to integers.
    for (int k = 0; k < nd; ++k) {
      const A limit = static_cast<A>(size[k] + 8);
      s[k] = std::min(std::max(PadCoordinate(s[k], size[k]), -limit), limit);
    }
    if (mode_ == GridMode::kNearest) {
      int64_t at = 0;
      for (int k = 0; k < nd; ++k) {
        const int64_t i = static_cast<int64_t>(std::nearbyint(s[k]));  // ties to even
        if (i < 0 || i >= size[k]) return;
        at += i * stride[k];
      }
      o[0] = at;
      w[0] = 1;
      return;
    }
    int64_t i0[kMaxDims];
    A t[kMaxDims];
    for (int k = 0; k < nd; ++k) {
      const A f = std::floor(s[k]);
      i0[k] = static_cast<int64_t>(f);
      t[k] = s[k] - f;
    }
    for (int tap = 0; tap < (1 << nd); ++tap) {
      int64_t at = 0;
      A wt = 1;
      bool inside = true;
      for (int k = 0; k < nd && inside; ++k) {
        const int bit = (tap >> k) & 1;
        const int64_t i = i0[k] + bit;
        inside = i >= 0 && i < size[k];
        at += i * stride[k];
        wt *= bit ? t[k] : 1 - t[k];
      }
      if (inside) {
        o[tap] = at;
        w[tap] = wt;
      }
    }
  }

  // The 16 taps of bicubic sampling (2 spatial dims): each tap is padded on its own (border/reflection) and
  // read as zero when still outside.
  template <typename A>
  void CubicTaps(const A* g, const int64_t* size, int64_t* o, A* w) const {
    const int64_t W = size[0], H = size[1];
    A sx = Unnormalize(g[0], W), sy = Unnormalize(g[1], H);
    if (!std::isfinite(sx) || !std::isfinite(sy)) return;  // reads as zero
    if (padding_ != GridPadding::kReflection) {
      const A limit_x = static_cast<A>(W + 8), limit_y = static_cast<A>(H + 8);
      sx = std::min(std::max(sx, -limit_x), limit_x);
      sy = std::min(std::max(sy, -limit_y), limit_y);
    }
    const A fx = std::floor(sx), fy = std::floor(sy);
    A cx[4], cy[4];
    CubicWeights<A>(sx - fx, cx);
    CubicWeights<A>(sy - fy, cy);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        const A tx = PadCoordinate<A>(fx - 1 + j, W), ty = PadCoordinate<A>(fy - 1 + i, H);
        const int64_t ix = static_cast<int64_t>(tx), iy = static_cast<int64_t>(ty);
        if (ix >= 0 && ix < W && iy >= 0 && iy < H) {
          o[i * 4 + j] = iy * W + ix;
          w[i * 4 + j] = cy[i] * cx[j];
        }
      }
    }
  }

  template <typename T>
  void Run(const Tensor& x, const Tensor& grid, Tensor* y, int num_threads) const {
    using A = ComputeType<T>;
    const int rank = static_cast<int>(x.rank());
    const int nd = rank - 2;
    const int64_t N = x.dim(0), C = x.dim(1);
    int64_t size[kMaxDims], stride[kMaxDims];
    int64_t S = 1, P = 1;  // input and output points per channel
    for (int k = 0; k < nd; ++k) {
      size[k] = x.dim(rank - 1 - k);
      stride[k] = S;
      S *= size[k];
      P *= grid.dim(1 + k);
    }
    const int K = mode_ == GridMode::kNearest ? 1 : mode_ == GridMode::kBilinear ? 1 << nd : 16;
    if (S == 0) return;  // every sample is padding: the zero-filled output stands
    const T* xd = x.data<T>();
    const T* gd = grid.data<T>();
    T* yd = y->data<T>();
    std::vector<int64_t> off(static_cast<size_t>(P) * K);
    std::vector<A> wt(static_cast<size_t>(P) * K);
    for (int64_t n = 0; n < N; ++n) {
      const T* g = gd + n * P * nd;
      ParallelFor(num_threads, P, K * 4.0, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          int64_t* o = &off[p * K];
          A* w = &wt[p * K];
          std::fill(o, o + K, 0);
          std::fill(w, w + K, A(0));
          A gc[kMaxDims];
          for (int k = 0; k < nd; ++k) gc[k] = ToCompute<A>(g[p * nd + k]);
          if (mode_ == GridMode::kBicubic) CubicTaps(gc, size, o, w);
          else LinearTaps(nd, gc, size, stride, o, w);
        }
      });
      ParallelFor(num_threads, C, static_cast<double>(P) * K, [&](int64_t cb, int64_t ce) {
        for (int64_t c = cb; c < ce; ++c) {
          const T* src = xd + (n * C + c) * S;
          T* dst = yd + (n * C + c) * P;
          for (int64_t p = 0; p < P; ++p) {
            const int64_t* o = &off[p * K];
            const A* w = &wt[p * K];
            A sum = 0;
            for (int t = 0; t < K; ++t) sum += w[t] * ToCompute<A>(src[o[t]]);
            dst[p] = static_cast<T>(sum);
          }
        }
      });
    }
  }

  GridMode mode_;
  GridPadding padding_;
  bool align_corners_;
  int opset_;
};

// ---------------------------------------------------------------------------------------------------------------
// RoiAlign

class RoiAlignKernel final : public OpKernel {
 public:
  struct Params {
    bool max_mode = false;
    int64_t out_h = 1, out_w = 1;
    int64_t sampling_ratio = 0;
    float spatial_scale = 1;
    bool half_pixel = false;
  };
  explicit RoiAlignKernel(Params p) : p_(p) {}

  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    Params p;
    const std::string mode = info.GetString("mode", "avg");
    if (mode == "max") p.max_mode = true;
    else if (mode != "avg") return info.Error(ErrorCode::INVALID_ARGUMENT, "mode '", mode, "' is not supported (avg, max)");
    p.out_h = info.GetInt("output_height", 1);
    p.out_w = info.GetInt("output_width", 1);
    p.sampling_ratio = info.GetInt("sampling_ratio", 0);
    p.spatial_scale = info.GetFloat("spatial_scale", 1.0f);
    if (p.out_h <= 0 || p.out_w <= 0 || p.out_h > (1 << 20) || p.out_w > (1 << 20))
      return info.Error(ErrorCode::INVALID_ARGUMENT, "output_height/output_width must be in [1, 2^20], got ",
                        p.out_h, "x", p.out_w);
    if (p.sampling_ratio < 0 || p.sampling_ratio > 4096)
      return info.Error(ErrorCode::INVALID_ARGUMENT, "sampling_ratio must be in [0, 4096], got ", p.sampling_ratio);
    if (info.opset() >= 16) {
      const std::string ct = info.GetString("coordinate_transformation_mode", "half_pixel");
      if (ct == "half_pixel") p.half_pixel = true;
      else if (ct != "output_half_pixel")
        return info.Error(ErrorCode::INVALID_ARGUMENT, "coordinate_transformation_mode '", ct,
                          "' is not supported (half_pixel, output_half_pixel)");
    }
    return std::unique_ptr<OpKernel>(new RoiAlignKernel(p));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* rois = ctx.Input(1);
    const Tensor* bidx = ctx.Input(2);
    RETURN_ERROR_IF(!x || !rois || !bidx, INVALID_ARGUMENT, ctx.node().Describe(),
                    ": inputs X, rois and batch_indices are required");
    RETURN_ERROR_IF(x->rank() != 4, INVALID_ARGUMENT, ctx.node().Describe(), ": X must be 4-D (N,C,H,W), got ",
                    ShapeToString(x->shape()));
    RETURN_ERROR_IF(rois->rank() != 2 || rois->dim(1) != 4, INVALID_ARGUMENT, ctx.node().Describe(),
                    ": rois must have shape (num_rois, 4), got ", ShapeToString(rois->shape()));
    RETURN_ERROR_IF(rois->dtype() != x->dtype(), INVALID_ARGUMENT, ctx.node().Describe(), ": rois type ",
                    DataTypeName(rois->dtype()), " differs from X type ", DataTypeName(x->dtype()));
    RETURN_ERROR_IF(bidx->rank() != 1 || bidx->dim(0) != rois->dim(0), INVALID_ARGUMENT, ctx.node().Describe(),
                    ": batch_indices must have shape (", rois->dim(0), "), got ", ShapeToString(bidx->shape()));
    RETURN_ERROR_IF(bidx->dtype() != DataType::kInt64 && bidx->dtype() != DataType::kInt32, INVALID_ARGUMENT,
                    ctx.node().Describe(), ": batch_indices must be int64, got ", DataTypeName(bidx->dtype()));
    const int64_t R = rois->dim(0);
    std::vector<int64_t> batch(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) {
      batch[r] = bidx->dtype() == DataType::kInt64 ? bidx->data<int64_t>()[r] : bidx->data<int32_t>()[r];
      RETURN_ERROR_IF(batch[r] < 0 || batch[r] >= x->dim(0), INVALID_ARGUMENT, ctx.node().Describe(),
                      ": batch_indices[", r, "] = ", batch[r], " is out of range [0, ", x->dim(0), ")");
    }
    const Shape out_shape = {R, x->dim(1), p_.out_h, p_.out_w};
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    if (y->NumElements() == 0) return Status::OK();
    return DispatchType<float, double, Float16, BFloat16>(x->dtype(), "RoiAlign", [&](auto tag) {
             using T = decltype(tag);
             return Run<T>(ctx, *x, *rois, batch, y);
           }).WithContext(ctx.node().Describe());
  }

 private:
  template <typename T>
  Status Run(const KernelContext& ctx, const Tensor& x, const Tensor& rois, const std::vector<int64_t>& batch,
             Tensor* y) const {
    using A = ComputeType<T>;
    const int64_t C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
    const int64_t PH = p_.out_h, PW = p_.out_w;
    const T* rd = rois.data<T>();
    const T* xd = x.data<T>();
    T* yd = y->data<T>();
    if (H == 0 || W == 0) return Status::OK();  // nothing to sample: the zero-filled output stands
    // Geometry of every ROI, validated before any work: start, bin size and sampling grid.
    struct Geometry {
      A start_h, start_w, bin_h, bin_w;
      int64_t grid_h, grid_w;
    };
    std::vector<Geometry> geo(static_cast<size_t>(R));
    const A offset = p_.half_pixel ? A(0.5) : A(0);
    constexpr double kMaxSamples = 4194304.0;  // per ROI (2^22): bounds memory and time for absurd ROIs
    for (int64_t r = 0; r < R; ++r) {
      A c[4];
      for (int i = 0; i < 4; ++i) {
        c[i] = ToCompute<A>(rd[r * 4 + i]);
        RETURN_ERROR_IF(!std::isfinite(c[i]), INVALID_ARGUMENT, ctx.node().Describe(), ": rois[", r, "] has a ",
                        "non-finite coordinate");
      }
      const A scale = static_cast<A>(p_.spatial_scale);
      Geometry& g = geo[r];
      g.start_w = c[0] * scale - offset;
      g.start_h = c[1] * scale - offset;
      A roi_w = c[2] * scale - offset - g.start_w, roi_h = c[3] * scale - offset - g.start_h;
      if (!p_.half_pixel) {
        roi_w = std::max(roi_w, A(1));
        roi_h = std::max(roi_h, A(1));
      }
      g.bin_h = roi_h / static_cast<A>(PH);
      g.bin_w = roi_w / static_cast<A>(PW);
      const double gh = p_.sampling_ratio > 0 ? static_cast<double>(p_.sampling_ratio) : std::ceil(roi_h / PH);
      const double gw = p_.sampling_ratio > 0 ? static_cast<double>(p_.sampling_ratio) : std::ceil(roi_w / PW);
      RETURN_ERROR_IF(!(gh * gw * PH * PW <= kMaxSamples), INVALID_ARGUMENT, ctx.node().Describe(), ": rois[", r,
                      "] needs ", gh * gw * PH * PW, " sample points; the limit is 2^22");
      g.grid_h = std::max<int64_t>(static_cast<int64_t>(gh), 0);
      g.grid_w = std::max<int64_t>(static_cast<int64_t>(gw), 0);
    }
    // Bilinear taps of every sample point of one ROI (4 per point), shared by its channels.
    auto build_taps = [&](const Geometry& g, std::vector<int64_t>* taps_pos, std::vector<A>* taps_w) {
      const size_t samples = static_cast<size_t>(PH * PW * g.grid_h * g.grid_w);
      taps_pos->assign(samples * 4, 0);
      taps_w->assign(samples * 4, A(0));
      size_t s = 0;
      for (int64_t ph = 0; ph < PH; ++ph) {
        for (int64_t pw = 0; pw < PW; ++pw) {
          for (int64_t iy = 0; iy < g.grid_h; ++iy) {
            const A yy = g.start_h + ph * g.bin_h + (static_cast<A>(iy) + A(0.5)) * g.bin_h / static_cast<A>(g.grid_h);
            for (int64_t ix = 0; ix < g.grid_w; ++ix, ++s) {
              const A xx =
                  g.start_w + pw * g.bin_w + (static_cast<A>(ix) + A(0.5)) * g.bin_w / static_cast<A>(g.grid_w);
              if (!(yy >= -1 && yy <= static_cast<A>(H) && xx >= -1 && xx <= static_cast<A>(W))) continue;
              A sy = std::max(yy, A(0)), sx = std::max(xx, A(0));
              int64_t y0 = static_cast<int64_t>(sy), x0 = static_cast<int64_t>(sx), y1, x1;
              if (y0 >= H - 1) {
                y0 = y1 = H - 1;
                sy = static_cast<A>(y0);
              } else {
                y1 = y0 + 1;
              }
              if (x0 >= W - 1) {
                x0 = x1 = W - 1;
                sx = static_cast<A>(x0);
              } else {
                x1 = x0 + 1;
              }
              const A ly = sy - y0, lx = sx - x0, hy = 1 - ly, hx = 1 - lx;
              int64_t* pos = &(*taps_pos)[s * 4];
              A* w = &(*taps_w)[s * 4];
              pos[0] = y0 * W + x0;
              pos[1] = y0 * W + x1;
              pos[2] = y1 * W + x0;
              pos[3] = y1 * W + x1;
              w[0] = hy * hx;
              w[1] = hy * lx;
              w[2] = ly * hx;
              w[3] = ly * lx;
            }
          }
        }
      }
    };
    // Work items are (roi, channel) pairs; a thread rebuilds the taps only when its roi changes.
    ParallelFor(ctx.num_threads(), R * C, static_cast<double>(PH * PW) * 16, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> taps_pos;
      std::vector<A> taps_w;
      int64_t built = -1;
      for (int64_t rc = begin; rc < end; ++rc) {
        const int64_t r = rc / C, c = rc % C;
        const Geometry& g = geo[r];
        if (built != r) {
          build_taps(g, &taps_pos, &taps_w);
          built = r;
        }
        const T* src = xd + (batch[r] * C + c) * H * W;
        T* dst = yd + rc * PH * PW;
        const int64_t per_bin = g.grid_h * g.grid_w;
        const A count = static_cast<A>(std::max<int64_t>(per_bin, 1));
        for (int64_t b = 0; b < PH * PW; ++b) {
          A acc = 0;
          bool first = true;
          for (int64_t s = b * per_bin; s < (b + 1) * per_bin; ++s) {
            const int64_t* pos = &taps_pos[s * 4];
            const A* w = &taps_w[s * 4];
            if (p_.max_mode) {
              // As ONNX Runtime: the largest weighted corner value of each sample, then the largest sample.
              A v = w[0] * ToCompute<A>(src[pos[0]]);
              for (int t = 1; t < 4; ++t) v = std::max(v, w[t] * ToCompute<A>(src[pos[t]]));
              acc = first ? v : std::max(acc, v);
              first = false;
            } else {
              acc += w[0] * ToCompute<A>(src[pos[0]]) + w[1] * ToCompute<A>(src[pos[1]]) +
                     w[2] * ToCompute<A>(src[pos[2]]) + w[3] * ToCompute<A>(src[pos[3]]);
            }
          }
          dst[b] = static_cast<T>(p_.max_mode ? acc : acc / count);
        }
      }
    });
    return Status::OK();
  }

  Params p_;
};

}  // namespace

// AffineGrid-20: theta (N, 2, 3) or (N, 3, 4) maps the normalized output coordinates (x, y[, z], 1) to a sampling
// grid (N, H, W, 2) or (N, D, H, W, 3) for GridSample. Coordinates are pixel centres in [-1, 1]
// (align_corners = 0) or the corner pixels at -1 and 1 (align_corners = 1).
class AffineGridKernel final : public OpKernel {
 public:
  explicit AffineGridKernel(bool align_corners) : align_corners_(align_corners) {}

  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    return std::unique_ptr<OpKernel>(new AffineGridKernel(info.GetInt("align_corners", 0) != 0));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* theta = ctx.Input(0);
    const Tensor* size = ctx.Input(1);
    const std::string node = ctx.node().Describe();
    RETURN_ERROR_IF(!theta || !size, INVALID_ARGUMENT, node, ": inputs theta and size are required");
    RETURN_ERROR_IF(size->dtype() != DataType::kInt64 || size->rank() != 1 ||
                        (size->NumElements() != 4 && size->NumElements() != 5),
                    INVALID_ARGUMENT, node, ": size must be int64 (N, C, H, W) or (N, C, D, H, W), got ",
                    DataTypeName(size->dtype()), " ", ShapeToString(size->shape()));
    const int64_t* sz = size->data<int64_t>();
    const int nd = static_cast<int>(size->NumElements()) - 2;  // 2 or 3 spatial dims
    const int64_t n = sz[0];
    RETURN_ERROR_IF(theta->rank() != 3 || theta->dim(0) != n || theta->dim(1) != nd || theta->dim(2) != nd + 1,
                    INVALID_ARGUMENT, node, ": theta must have shape (N, ", nd, ", ", nd + 1, ") with N = ", n,
                    ", got ", ShapeToString(theta->shape()));
    Shape out{n};
    for (int d = 0; d < nd; ++d) {
      RETURN_ERROR_IF(sz[2 + d] <= 0 || sz[2 + d] > (int64_t{1} << 24), INVALID_ARGUMENT, node, ": size ", sz[2 + d],
                      " is out of range");
      out.push_back(sz[2 + d]);
    }
    out.push_back(nd);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, theta->dtype(), out));
    // Normalized coordinate of index i along a dim of size m.
    const bool ac = align_corners_;
    auto coord = [ac](int64_t i, int64_t m) -> double {
      if (ac) return m == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(m - 1);
      return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(m);
    };
    return DispatchType<float, double, Float16, BFloat16>(theta->dtype(), "AffineGrid", [&](auto tag) {
             using T = decltype(tag);
             const T* th = theta->data<T>();
             T* dst = y->data<T>();
             // Spatial dims in order (D,) H, W; the point is (x from W, y from H[, z from D], 1).
             const int64_t D = nd == 3 ? sz[2] : 1, H = sz[nd == 3 ? 3 : 2], W = sz[nd == 3 ? 4 : 3];
             const int64_t per = D * H * W;
             for (int64_t b = 0; b < n; ++b) {
               double m[12];
               for (int k = 0; k < nd * (nd + 1); ++k) m[k] = static_cast<double>(static_cast<float>(th[b * nd * (nd + 1) + k]));
               if constexpr (std::is_same_v<T, double>) {
                 for (int k = 0; k < nd * (nd + 1); ++k) m[k] = th[b * nd * (nd + 1) + k];
               }
               for (int64_t d = 0; d < D; ++d)
                 for (int64_t h = 0; h < H; ++h)
                   for (int64_t w = 0; w < W; ++w) {
                     const double p[4] = {coord(w, W), coord(h, H), nd == 3 ? coord(d, D) : 1.0, 1.0};
                     T* o = dst + (b * per + (d * H + h) * W + w) * nd;
                     for (int r = 0; r < nd; ++r) {
                       double v = 0;
                       for (int c = 0; c <= nd; ++c) v += m[r * (nd + 1) + c] * p[c];
                       o[r] = static_cast<T>(static_cast<float>(v));
                       if constexpr (std::is_same_v<T, double>) o[r] = v;
                     }
                   }
             }
             return Status::OK();
           }).WithContext(node);
  }

 private:
  bool align_corners_;
};

// MaxRoiPool: each roi (batch, x1, y1, x2, y2), scaled by spatial_scale and rounded to pixels, is divided into
// pooled_shape bins; a bin takes the maximum of its pixels (0 for an empty bin).
class MaxRoiPoolKernel final : public OpKernel {
 public:
  MaxRoiPoolKernel(int64_t ph, int64_t pw, float scale) : ph_(ph), pw_(pw), scale_(scale) {}

  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    const std::vector<int64_t> ps = info.GetInts("pooled_shape");
    if (ps.size() != 2 || ps[0] <= 0 || ps[1] <= 0 || ps[0] > (1 << 20) || ps[1] > (1 << 20))
      return info.Error(ErrorCode::INVALID_GRAPH, "pooled_shape must be two positive values");
    return std::unique_ptr<OpKernel>(new MaxRoiPoolKernel(ps[0], ps[1], info.GetFloat("spatial_scale", 1.0f)));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* rois = ctx.Input(1);
    const std::string node = ctx.node().Describe();
    RETURN_ERROR_IF(!x || !rois, INVALID_ARGUMENT, node, ": inputs X and rois are required");
    RETURN_ERROR_IF(x->rank() != 4 || x->dtype() != DataType::kFloat || rois->dtype() != DataType::kFloat,
                    NOT_IMPLEMENTED, node, ": float X (N, C, H, W) and rois only, got ", DataTypeName(x->dtype()), " ",
                    ShapeToString(x->shape()));
    RETURN_ERROR_IF(rois->rank() != 2 || rois->dim(1) != 5, INVALID_ARGUMENT, node, ": rois must be (num_rois, 5), got ",
                    ShapeToString(rois->shape()));
    const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3), nr = rois->dim(0);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kFloat, {nr, c, ph_, pw_}));
    const float* rp = rois->data<float>();
    const float* xp = x->data<float>();
    float* yp = y->data<float>();
    for (int64_t r = 0; r < nr; ++r) {
      const float* roi = rp + r * 5;
      const int64_t b = static_cast<int64_t>(roi[0]);
      RETURN_ERROR_IF(b < 0 || b >= n, INVALID_ARGUMENT, node, ": roi ", r, " names batch ", roi[0], " of ", n);
      const int64_t sw = static_cast<int64_t>(std::round(roi[1] * scale_)), sh = static_cast<int64_t>(std::round(roi[2] * scale_));
      const int64_t ew = static_cast<int64_t>(std::round(roi[3] * scale_)), eh = static_cast<int64_t>(std::round(roi[4] * scale_));
      const int64_t rh = std::max<int64_t>(eh - sh + 1, 1), rw = std::max<int64_t>(ew - sw + 1, 1);
      const float bh = static_cast<float>(rh) / static_cast<float>(ph_), bw = static_cast<float>(rw) / static_cast<float>(pw_);
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* plane = xp + (b * c + ch) * h * w;
        for (int64_t i = 0; i < ph_; ++i)
          for (int64_t j = 0; j < pw_; ++j) {
            int64_t hs = static_cast<int64_t>(std::floor(static_cast<float>(i) * bh));
            int64_t he = static_cast<int64_t>(std::ceil(static_cast<float>(i + 1) * bh));
            int64_t ws = static_cast<int64_t>(std::floor(static_cast<float>(j) * bw));
            int64_t we = static_cast<int64_t>(std::ceil(static_cast<float>(j + 1) * bw));
            hs = std::min(std::max<int64_t>(hs + sh, 0), h);
            he = std::min(std::max<int64_t>(he + sh, 0), h);
            ws = std::min(std::max<int64_t>(ws + sw, 0), w);
            we = std::min(std::max<int64_t>(we + sw, 0), w);
            float m = 0;
            if (he > hs && we > ws) {
              m = -std::numeric_limits<float>::max();
              for (int64_t yy = hs; yy < he; ++yy)
                for (int64_t xx = ws; xx < we; ++xx) m = std::max(m, plane[yy * w + xx]);
            }
            yp[((r * c + ch) * ph_ + i) * pw_ + j] = m;
          }
      }
    }
    return Status::OK();
  }

 private:
  int64_t ph_, pw_;
  float scale_;
};

// DeformConv (2-D, float): a convolution whose taps sample X at their regular position plus a learned offset
// (offset: (N, offset_group * kH * kW * 2, oH, oW), (dy, dx) per tap), bilinearly with zeros outside X, each
// sample scaled by `mask` when given. Direct loops: sampled columns per (image, group), then a dot product per
// output channel.
class DeformConvKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    auto k = std::unique_ptr<DeformConvKernel>(new DeformConvKernel());
    k->kernel_ = info.GetInts("kernel_shape");
    k->strides_ = info.GetInts("strides", {1, 1});
    k->dil_ = info.GetInts("dilations", {1, 1});
    k->pads_ = info.GetInts("pads", {0, 0, 0, 0});
    k->group_ = info.GetInt("group", 1);
    k->offset_group_ = info.GetInt("offset_group", 1);
    if (k->strides_.size() != 2 || k->dil_.size() != 2 || k->pads_.size() != 4 || k->group_ <= 0 ||
        k->offset_group_ <= 0 || (!k->kernel_.empty() && k->kernel_.size() != 2))
      return info.Error(ErrorCode::NOT_IMPLEMENTED, "only 2-D DeformConv with positive group/offset_group is supported");
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* wt = ctx.Input(1);
    const Tensor* off = ctx.Input(2);
    const Tensor* bias = ctx.Input(3);
    const Tensor* mask = ctx.Input(4);
    const std::string node = ctx.node().Describe();
    RETURN_ERROR_IF(!x || !wt || !off, INVALID_ARGUMENT, node, ": inputs X, W and offset are required");
    for (const Tensor* t : {x, wt, off, bias, mask})
      RETURN_ERROR_IF(t && t->dtype() != DataType::kFloat, NOT_IMPLEMENTED, node, ": element type ",
                      DataTypeName(t->dtype()), " is not supported (float only)");
    RETURN_ERROR_IF(x->rank() != 4 || wt->rank() != 4 || off->rank() != 4, NOT_IMPLEMENTED, node,
                    ": only 2-D DeformConv is supported, got X ", ShapeToString(x->shape()));
    const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
    const int64_t oc = wt->dim(0), cg = wt->dim(1), kh = wt->dim(2), kw = wt->dim(3);
    const int64_t g = group_, og = offset_group_;
    RETURN_ERROR_IF(!kernel_.empty() && (kernel_[0] != kh || kernel_[1] != kw), INVALID_ARGUMENT, node,
                    ": kernel_shape differs from W ", ShapeToString(wt->shape()));
    RETURN_ERROR_IF(c != cg * g || oc % g != 0 || c % og != 0, INVALID_ARGUMENT, node, ": channels ", c, " / W ",
                    ShapeToString(wt->shape()), " do not fit group ", g, " and offset_group ", og);
    const int64_t oh = (h + pads_[0] + pads_[2] - (dil_[0] * (kh - 1) + 1)) / strides_[0] + 1;
    const int64_t ow = (w + pads_[1] + pads_[3] - (dil_[1] * (kw - 1) + 1)) / strides_[1] + 1;
    RETURN_ERROR_IF(oh <= 0 || ow <= 0, INVALID_ARGUMENT, node, ": the kernel does not fit X");
    const int64_t taps = kh * kw;
    RETURN_ERROR_IF(off->dim(0) != n || off->dim(1) != og * taps * 2 || off->dim(2) != oh || off->dim(3) != ow,
                    INVALID_ARGUMENT, node, ": offset ", ShapeToString(off->shape()), " must be (", n, ", ",
                    og * taps * 2, ", ", oh, ", ", ow, ")");
    RETURN_ERROR_IF(mask && (mask->dim(0) != n || mask->dim(1) != og * taps || mask->dim(2) != oh || mask->dim(3) != ow),
                    INVALID_ARGUMENT, node, ": mask ", ShapeToString(mask->shape()), " must be (", n, ", ", og * taps,
                    ", ", oh, ", ", ow, ")");
    RETURN_ERROR_IF(bias && bias->NumElements() != oc, INVALID_ARGUMENT, node, ": B must have ", oc, " values");
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kFloat, {n, oc, oh, ow}));
    const float* xp = x->data<float>();
    const float* wp = wt->data<float>();
    const float* op = off->data<float>();
    const float* mp = mask ? mask->data<float>() : nullptr;
    float* yp = y->data<float>();
    const int64_t cpo = c / og, ocg = oc / g, positions = oh * ow;
    ParallelFor(ctx.num_threads(), n * g, static_cast<double>(ocg * cg * taps * positions), [&](int64_t lo, int64_t hi) {
      std::vector<float> cols(static_cast<size_t>(cg * taps * positions));
      for (int64_t item = lo; item < hi; ++item) {
        const int64_t b = item / g, gi = item % g;
        // cols[(ci * taps + t) * positions + p]: the sampled input of channel gi*cg + ci for tap t at position p.
        for (int64_t ci = 0; ci < cg; ++ci) {
          const int64_t ch = gi * cg + ci, ogi = ch / cpo;
          const float* plane = xp + (b * c + ch) * h * w;
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t t = i * kw + j;
              const float* dy = op + ((b * og + ogi) * taps * 2 + 2 * t) * positions;
              const float* dx = dy + positions;
              const float* mk = mp ? mp + ((b * og + ogi) * taps + t) * positions : nullptr;
              float* col = cols.data() + (ci * taps + t) * positions;
              for (int64_t p = 0; p < positions; ++p) {
                const int64_t py = p / ow, px = p % ow;
                const float sy = static_cast<float>(py * strides_[0] - pads_[0] + i * dil_[0]) + dy[p];
                const float sx = static_cast<float>(px * strides_[1] - pads_[1] + j * dil_[1]) + dx[p];
                float v = 0;
                if (sy > -1 && sy < h && sx > -1 && sx < w) {
                  const int64_t y0 = static_cast<int64_t>(std::floor(sy)), x0 = static_cast<int64_t>(std::floor(sx));
                  const float ly = sy - y0, lx = sx - x0;
                  auto at = [&](int64_t yy, int64_t xx) -> float {
                    return yy >= 0 && yy < h && xx >= 0 && xx < w ? plane[yy * w + xx] : 0.0f;
                  };
                  v = (1 - ly) * (1 - lx) * at(y0, x0) + (1 - ly) * lx * at(y0, x0 + 1) + ly * (1 - lx) * at(y0 + 1, x0) +
                      ly * lx * at(y0 + 1, x0 + 1);
                }
                col[p] = mk ? v * mk[p] : v;
              }
            }
        }
        for (int64_t o = 0; o < ocg; ++o) {
          const int64_t oci = gi * ocg + o;
          float* out = yp + (b * oc + oci) * positions;
          const float b0 = bias ? bias->data<float>()[oci] : 0.0f;
          for (int64_t p = 0; p < positions; ++p) out[p] = b0;
          const float* wrow = wp + oci * cg * taps;
          for (int64_t k = 0; k < cg * taps; ++k) {
            const float wv = wrow[k];
            const float* col = cols.data() + k * positions;
#pragma omp simd
            for (int64_t p = 0; p < positions; ++p) out[p] += wv * col[p];
          }
        }
      }
    });
    return Status::OK();
  }

 private:
  DeformConvKernel() = default;
  std::vector<int64_t> kernel_, strides_, dil_, pads_;
  int64_t group_ = 1, offset_group_ = 1;
};

void RegisterSamplingKernels(KernelRegistry& r) {
  r.Register("", "MaxRoiPool", MaxRoiPoolKernel::Create);
  r.Register("", "DeformConv", DeformConvKernel::Create, 19);
  r.Register("", "AffineGrid", AffineGridKernel::Create, 20);
  r.Register("", "GridSample", GridSampleKernel::Create, 16);
  r.Register("", "RoiAlign", RoiAlignKernel::Create, 10);
}

}  // namespace misc
}  // namespace epctx
