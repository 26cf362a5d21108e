// Resize (opset 10+) and Upsample (opset 7-9).
//
// Every interpolation mode is separable: an output element is a weighted sum over a small set of input
// positions per axis ("taps": 1 for nearest, 2 for linear, 4 for cubic). A plan per axis holds, for each output
// coordinate, its clamped input indices and weights. Nearest copies elements directly (any element type);
// linear/cubic run one 1-D pass per resized axis, accumulating in float (double for 32/64-bit ints and double).
// Passes over an axis with contiguous inner rows are plain weighted row sums, which the compiler vectorizes.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/common/bilinear_taps.h"
#include "providers/cpu/kernel.h"

namespace epctx {
namespace misc {
namespace {

enum class Interp { kNearest, kLinear, kCubic };
enum class CoordMode {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
  kHalfPixelSymmetric  // Resize-19
};
// Resize-18's keep_aspect_ratio_policy (with sizes).
enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };
// kLegacy: Upsample and Resize-10, which had no nearest_mode: floor when upsampling, ceil when downsampling.
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };

struct ResizeConfig {
  bool is_upsample = false;
  int opset = 0;
  Interp interp = Interp::kNearest;
  CoordMode coord = CoordMode::kAsymmetric;
  NearestMode nearest = NearestMode::kLegacy;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  float extrapolation_value = 0;
  bool has_attr_scales = false;
  std::vector<float> attr_scales;  // Upsample-7
  // Resize-18.
  bool antialias = false;
  std::vector<int64_t> axes;  // empty: every axis
  AspectPolicy policy = AspectPolicy::kStretch;
};

// The sampling plan of one axis. For output coordinate j: taps input indices index[j*taps + t] (clamped into
// [0, in_len)) with weights weight[j*taps + t]; outside[j] when tf_crop_and_resize maps j outside the input.
struct AxisPlan {
  int64_t in_len = 0;
  int64_t out_len = 0;
  int taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
  bool any_outside = false;
  bool identity = false;  // output j reads exactly input j with weight 1
};

void CubicCoeffs(double r, double a, double* c) {
  // Keys' cubic convolution kernel evaluated at distances 1+r, r, 1-r, 2-r.
  auto k = [a](double d) {
    d = std::fabs(d);
    if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
    if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    return 0.0;
  };
  c[0] = k(1 + r);
  c[1] = k(r);
  c[2] = k(1 - r);
  c[3] = k(2 - r);
}

// The input coordinate of output coordinate x (the formulas of coordinate_transformation_mode).
float OriginalCoordinate(const ResizeConfig& cfg, float x, float scale, int64_t in_len, int64_t out_len,
                         float length_resized, float roi_start, float roi_end) {
  const float in_f = static_cast<float>(in_len);
  switch (cfg.coord) {
    case CoordMode::kHalfPixel: return (x + 0.5f) / scale - 0.5f;
    case CoordMode::kPytorchHalfPixel: return out_len > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case CoordMode::kAlignCorners:
      return out_len == 1 || length_resized == 1.0f ? 0.0f : x * (in_f - 1) / (length_resized - 1);
    case CoordMode::kAsymmetric: return x / scale;
    case CoordMode::kTfHalfPixelForNn: return (x + 0.5f) / scale;
    case CoordMode::kTfCropAndResize:
      return out_len > 1 ? roi_start * (in_f - 1) + x * (roi_end - roi_start) * (in_f - 1) / (length_resized - 1)
                         : static_cast<float>(0.5 * (roi_start + roi_end) * (in_f - 1));
    case CoordMode::kHalfPixelSymmetric: {
      const float adjustment = static_cast<float>(out_len) / length_resized;
      const float center = in_f / 2;
      const float offset = center * (1 - adjustment);
      return offset + (x + 0.5f) / scale - 0.5f;
    }
  }
  return x;
}

// Antialiased linear/cubic (Resize-18), as ONNX's reference and ONNX Runtime 1.30 compute it: when downsampling
// (scale < 1) the filter is stretched by 1/scale, so an output takes 2 - 2 * floor(-support / scale + 1) taps
// around its input coordinate (support 1 for linear, 2 for cubic), weights filter((tap - ratio) * scale)
// normalized to sum 1, taps outside the input clamped to the edge (excluded with exclude_outside).
AxisPlan PlanAxisAntialias(const ResizeConfig& cfg, int64_t in_len, int64_t out_len, float scale, float length_resized,
                           float roi_start, float roi_end) {
  AxisPlan p;
  p.in_len = in_len;
  p.out_len = out_len;
  const bool cubic = cfg.interp == Interp::kCubic;
  const double sc = std::min(static_cast<double>(scale), 1.0);
  const double support = cubic ? 2.0 : 1.0;
  const int64_t start = static_cast<int64_t>(std::floor(-support / sc)) + 1;
  const int64_t window = 2 - 2 * start;
  p.taps = static_cast<int>(window);
  p.index.assign(static_cast<size_t>(out_len * window), 0);
  p.weight.assign(static_cast<size_t>(out_len * window), 0.0);
  p.outside.assign(static_cast<size_t>(out_len), 0);
  const double a = cfg.cubic_a;
  auto filter = [cubic, a](double d) -> double {
    d = std::fabs(d);
    if (!cubic) return d < 1.0 ? 1.0 - d : 0.0;
    if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
    if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    return 0.0;
  };
  const float in_f = static_cast<float>(in_len);
  for (int64_t j = 0; j < out_len; ++j) {
    float xo = static_cast<float>(j);
    if (scale != 1.0f) xo = OriginalCoordinate(cfg, xo, scale, in_len, out_len, length_resized, roi_start, roi_end);
    if (std::isnan(xo)) xo = 0;
    xo = std::min(std::max(xo, -8.0f), in_f + 8.0f);
    // As the non-antialiased plan: an integral coordinate is the right end of its interval (ratio 1).
    const double base = std::ceil(static_cast<double>(xo)) - 1;
    const double r = static_cast<double>(xo) - base;
    int64_t* idx = &p.index[j * window];
    double* w = &p.weight[j * window];
    double total = 0;
    for (int64_t t = 0; t < window; ++t) {
      const int64_t k = start + t;
      const int64_t i = static_cast<int64_t>(base) + k;
      w[t] = filter((static_cast<double>(k) - r) * sc);
      if (cfg.exclude_outside && (i < 0 || i >= in_len)) w[t] = 0;
      idx[t] = std::min(std::max<int64_t>(i, 0), in_len - 1);
      total += w[t];
    }
    if (total != 0)
      for (int64_t t = 0; t < window; ++t) w[t] /= total;
  }
  p.identity = false;
  return p;
}

AxisPlan PlanAxis(const ResizeConfig& cfg, int64_t in_len, int64_t out_len, float scale, float length_resized,
                  float roi_start, float roi_end) {
  if (cfg.antialias && cfg.interp != Interp::kNearest && !(scale == 1.0f && in_len == out_len))
    return PlanAxisAntialias(cfg, in_len, out_len, scale, length_resized, roi_start, roi_end);
  AxisPlan p;
  p.in_len = in_len;
  p.out_len = out_len;
  p.taps = cfg.interp == Interp::kNearest ? 1 : cfg.interp == Interp::kLinear ? 2 : 4;
  p.index.resize(static_cast<size_t>(out_len) * p.taps);
  p.weight.resize(static_cast<size_t>(out_len) * p.taps);
  p.outside.assign(static_cast<size_t>(out_len), 0);
  const float in_f = static_cast<float>(in_len);
  bool identity = in_len == out_len;
  for (int64_t j = 0; j < out_len; ++j) {
    const float x = static_cast<float>(j);
    float xo = x;
    // An axis with scale 1 keeps its coordinates (as ONNX Runtime does; the formula for tf_half_pixel_for_nn would
    // shift it by half a pixel). Only tf_crop_and_resize, whose roi may crop any axis, maps it.
    if (scale != 1.0f || cfg.coord == CoordMode::kTfCropAndResize)
      xo = OriginalCoordinate(cfg, x, scale, in_len, out_len, length_resized, roi_start, roi_end);
    if (cfg.coord == CoordMode::kTfCropAndResize && !(xo >= 0 && xo <= in_f - 1)) {
      p.outside[j] = 1;
      p.any_outside = true;
    }
    // Keep the integer conversions below defined for absurd coordinates (they clamp to the edge anyway).
    if (std::isnan(xo)) xo = 0;
    xo = std::min(std::max(xo, -8.0f), in_f + 8.0f);
    int64_t* idx = &p.index[j * p.taps];
    double* w = &p.weight[j * p.taps];
    if (cfg.interp == Interp::kNearest) {
      const float fl = std::floor(xo);
      int64_t k;
      if (cfg.nearest == NearestMode::kLegacy) {
        k = static_cast<int64_t>(scale < 1 ? std::ceil(xo) : fl);
      } else if (xo == fl) {
        k = static_cast<int64_t>(fl);
      } else {
        const float r = xo - fl;
        bool up = false;
        switch (cfg.nearest) {
          case NearestMode::kRoundPreferFloor: up = r > 0.5f; break;
          case NearestMode::kRoundPreferCeil: up = r >= 0.5f; break;
          case NearestMode::kFloor: up = false; break;
          case NearestMode::kCeil: up = true; break;
          case NearestMode::kLegacy: break;
        }
        k = static_cast<int64_t>(fl) + (up ? 1 : 0);
      }
      idx[0] = std::min(std::max<int64_t>(k, 0), in_len - 1);
      w[0] = 1;
    } else {
      // Taps start left of xo; an integral xo is the right end of its interval (ratio 1), as in the ONNX reference.
      const double base = std::ceil(static_cast<double>(xo)) - 1;
      const double r = static_cast<double>(xo) - base;  // in (0, 1]
      const int64_t b = static_cast<int64_t>(base);
      if (cfg.interp == Interp::kLinear) {
        idx[0] = b;
        idx[1] = b + 1;
        w[0] = 1 - r;
        w[1] = r;
      } else {
        CubicCoeffs(r, cfg.cubic_a, w);
        for (int t = 0; t < 4; ++t) idx[t] = b - 1 + t;
        if (cfg.exclude_outside) {
          double sum = 0;
          for (int t = 0; t < 4; ++t) {
            if (idx[t] < 0 || idx[t] >= in_len) w[t] = 0;
            sum += w[t];
          }
          if (sum != 0)
            for (int t = 0; t < 4; ++t) w[t] /= sum;
        }
      }
      for (int t = 0; t < p.taps; ++t) idx[t] = std::min(std::max<int64_t>(idx[t], 0), in_len - 1);
    }
    if (identity) {
      double self = 0, other = 0;
      for (int t = 0; t < p.taps; ++t) (idx[t] == j ? self : other) += std::fabs(w[t]);
      if (p.outside[j] || std::fabs(self - 1) > 1e-12 || other > 1e-12) identity = false;
    }
  }
  p.identity = identity;
  return p;
}

// Element conversions through the accumulation type.
template <typename Acc, typename T>
inline Acc ToAcc(const T& v) {
  return static_cast<Acc>(static_cast<std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>,
                                                         float, T>>(v));
}

template <typename T, typename Acc>
inline T FromAcc(Acc v) {
  if constexpr (std::is_same_v<T, Acc>) {
    return v;
  } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    // Integers: truncate like ONNX Runtime, and saturate (a plain cast of an out-of-range float is undefined).
    double d = std::trunc(static_cast<double>(v));
    if (std::isnan(d)) return T(0);
    if (d <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (d >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(d);
  }
}

// The extrapolation value as an element of type T (nearest mode supports every element type).
template <typename T>
T FillValue(float v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string();
  } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    return T(v, 0);
  } else {
    return FromAcc<T, double>(v);
  }
}

template <typename T>
using AccFor = std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, int32_t> ||
                                      std::is_same_v<T, int64_t> || std::is_same_v<T, uint32_t> ||
                                      std::is_same_v<T, uint64_t>,
                                  double, float>;

// One line of the innermost axis: d[j] = sum_t w[j,t] * s[index[j,t]] (K taps known at compile time).
template <int K, typename Src, typename Dst, typename Acc>
inline void ResampleLine(const Src* s, Dst* d, int64_t out_len, const int64_t* idx, const Acc* w) {
#pragma omp simd
  for (int64_t j = 0; j < out_len; ++j) {
    Acc sum = w[j * K] * ToAcc<Acc>(s[idx[j * K]]);
    for (int t = 1; t < K; ++t) sum += w[j * K + t] * ToAcc<Acc>(s[idx[j * K + t]]);
    d[j] = FromAcc<Dst, Acc>(sum);
  }
}

// dst[o, j, i] = sum_t w[j,t] * src[o, index[j,t], i] for a tensor viewed as [outer, len, inner].
template <typename Src, typename Dst, typename Acc>
void ResamplePass(const Src* src, Dst* dst, int64_t outer, int64_t inner, const AxisPlan& p, float extrapolation,
                  int num_threads) {
  const int K = p.taps;
  const int64_t in_len = p.in_len, out_len = p.out_len;
  const std::vector<Acc> w(p.weight.begin(), p.weight.end());
  const Dst fill = FromAcc<Dst, Acc>(static_cast<Acc>(extrapolation));
  if (inner == 1) {
    // The innermost axis: a gather per output element, one input line at a time.
    ParallelFor(num_threads, outer, static_cast<double>(out_len) * K * 2, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const Src* s = src + o * in_len;
        Dst* d = dst + o * out_len;
        switch (K) {
          case 1: ResampleLine<1>(s, d, out_len, p.index.data(), w.data()); break;
          case 2: ResampleLine<2>(s, d, out_len, p.index.data(), w.data()); break;
          case 4: ResampleLine<4>(s, d, out_len, p.index.data(), w.data()); break;
          default:  // antialias windows
            for (int64_t j = 0; j < out_len; ++j) {
              Acc sum = 0;
              for (int t = 0; t < K; ++t) sum += w[j * K + t] * ToAcc<Acc>(s[p.index[j * K + t]]);
              d[j] = FromAcc<Dst, Acc>(sum);
            }
            break;
        }
        if (p.any_outside)
          for (int64_t j = 0; j < out_len; ++j)
            if (p.outside[j]) d[j] = fill;
      }
    });
    return;
  }
  // An outer axis: each output row is a weighted sum of K contiguous input rows.
  ParallelFor(num_threads, outer * out_len, static_cast<double>(K) * inner * 2, [&](int64_t begin, int64_t end) {
    std::vector<Acc> scratch;
    if constexpr (!std::is_same_v<Dst, Acc>) scratch.resize(static_cast<size_t>(inner));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / out_len, j = r % out_len;
      Dst* d = dst + r * inner;
      if (p.outside[j]) {
        std::fill(d, d + inner, fill);
        continue;
      }
      const Src* s = src + o * in_len * inner;
      const int64_t* idx = &p.index[j * K];
      const Acc* wj = &w[j * K];
      Acc* a;
      if constexpr (std::is_same_v<Dst, Acc>) {
        a = d;
      } else {
        a = scratch.data();
      }
      {
        const Src* row = s + idx[0] * inner;
        const Acc w0 = wj[0];
#pragma omp simd
        for (int64_t i = 0; i < inner; ++i) a[i] = w0 * ToAcc<Acc>(row[i]);
      }
      for (int t = 1; t < K; ++t) {
        const Src* row = s + idx[t] * inner;
        const Acc wt = wj[t];
        if (wt == 0) continue;
#pragma omp simd
        for (int64_t i = 0; i < inner; ++i) a[i] += wt * ToAcc<Acc>(row[i]);
      }
      if constexpr (!std::is_same_v<Dst, Acc>) {
#pragma omp simd
        for (int64_t i = 0; i < inner; ++i) d[i] = FromAcc<Dst, Acc>(a[i]);
      }
    }
  });
}

// Relative cost of resizing `axes` in this order: elements produced per pass times taps, gathers (the innermost
// axis) weighted as three times a contiguous row pass.
double PassOrderCost(const std::vector<AxisPlan>& plans, Shape shape, const std::vector<size_t>& axes) {
  double cost = 0;
  for (size_t a : axes) {
    shape[a] = plans[a].out_len;
    double n = 1;
    for (int64_t d : shape) n *= static_cast<double>(d);
    cost += n * plans[a].taps * (a + 1 == shape.size() ? 3.0 : 1.0);
  }
  return cost;
}

// Bilinear over the last two axes of float data (rank 2, or rank 4 with the first two axes unscaled: ONNX Runtime's
// UpsampleBilinear), summed in ONNX Runtime's order so that the results are the same floats: per axis the clamped
// coordinate c, taps c1 = trunc(c) and c2 = min(c1 + 1, len - 1), weights d1 = |c - c1| and d2 = |c - c2| (0.5 each
// at the last pixel), then y = d2x*d2y*x11 + d1x*d2y*x21 + d2x*d1y*x12 + d1x*d1y*x22 evaluated left to right in float.
// The separable passes round after each axis instead, which moves some results by one ulp; a quantized model then
// moves by a whole quantization step (ISNet uint8's first Resize feeds a DynamicQuantizeLinear: its masks differed
// from ONNX Runtime by 0.48 at edges before this path). The file is compiled without floating-point contraction
// (CMakeLists.txt) so that the products and sums stay separate roundings, as in ONNX Runtime's x86 build.
using BilinearAxis = common::BilinearTaps;

BilinearAxis PlanBilinearAxis(const ResizeConfig& cfg, int64_t in_len, int64_t out_len, float scale,
                              float length_resized) {
  return common::PlanBilinearTaps(in_len, out_len, [&](int64_t j) {
    const float x = static_cast<float>(j);
    return scale == 1.0f ? x : OriginalCoordinate(cfg, x, scale, in_len, out_len, length_resized, 0.0f, 1.0f);
  });
}

// x viewed as [planes, H, W] -> y [planes, OH, OW].
void Bilinear2D(const float* x, float* y, int64_t planes, int64_t h, int64_t w, const BilinearAxis& ay,
                const BilinearAxis& ax, int num_threads) {
  const int64_t oh = static_cast<int64_t>(ay.c1.size()), ow = static_cast<int64_t>(ax.c1.size());
  ParallelFor(num_threads, planes * oh, static_cast<double>(ow) * 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t p = r / oh, i = r % oh;
      const float* row1 = x + (p * h + ay.c1[i]) * w;
      const float* row2 = x + (p * h + ay.c2[i]) * w;
      const float dy1 = ay.d1[i], dy2 = ay.d2[i];
      float* out = y + r * ow;
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t x1 = ax.c1[j], x2 = ax.c2[j];
        const float dx1 = ax.d1[j], dx2 = ax.d2[j];
        out[j] = dx2 * dy2 * row1[x1] + dx1 * dy2 * row1[x2] + dx2 * dy1 * row2[x1] + dx1 * dy1 * row2[x2];
      }
    }
  });
}

// Linear / cubic: one pass per resized axis, in the order that produces the fewest intermediate elements.
template <typename T>
Status InterpolateSeparable(const Tensor& x, Tensor* y, const std::vector<AxisPlan>& plans, float extrapolation,
                            int num_threads) {
  using Acc = AccFor<T>;
  const size_t rank = plans.size();
  std::vector<size_t> axes;
  for (size_t a = 0; a < rank; ++a)
    if (!plans[a].identity) axes.push_back(a);
  const T* src = x.data<T>();
  T* dst = y->data<T>();
  if (axes.empty()) {
    std::copy(src, src + x.NumElements(), dst);
    return Status::OK();
  }
  if (axes.size() <= 5) {
    std::vector<size_t> best = axes, perm = axes;
    double best_cost = PassOrderCost(plans, x.shape(), best);
    while (std::next_permutation(perm.begin(), perm.end())) {
      const double c = PassOrderCost(plans, x.shape(), perm);
      if (c < best_cost) {
        best_cost = c;
        best = perm;
      }
    }
    axes = best;
  }
  Shape cur = x.shape();
  // Intermediate buffers (uninitialised: every element is written by its pass).
  std::unique_ptr<Acc[]> buf_a, buf_b;
  const Acc* cur_acc = nullptr;
  for (size_t step = 0; step < axes.size(); ++step) {
    const size_t a = axes[step];
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < a; ++i) outer *= cur[i];
    for (size_t i = a + 1; i < rank; ++i) inner *= cur[i];
    const bool first = step == 0, last = step + 1 == axes.size();
    Shape next = cur;
    next[a] = plans[a].out_len;
    std::unique_ptr<Acc[]>& out_buf = (step % 2 == 0) ? buf_a : buf_b;
    if (!last) {
      out_buf.reset(new (std::nothrow) Acc[static_cast<size_t>(ShapeSize(next))]);
      RETURN_ERROR_IF(out_buf == nullptr, FAIL, "out of memory for an intermediate of shape ", ShapeToString(next));
    }
    if (first && last) {
      ResamplePass<T, T, Acc>(src, dst, outer, inner, plans[a], extrapolation, num_threads);
    } else if (first) {
      ResamplePass<T, Acc, Acc>(src, out_buf.get(), outer, inner, plans[a], extrapolation, num_threads);
    } else if (last) {
      ResamplePass<Acc, T, Acc>(cur_acc, dst, outer, inner, plans[a], extrapolation, num_threads);
    } else {
      ResamplePass<Acc, Acc, Acc>(cur_acc, out_buf.get(), outer, inner, plans[a], extrapolation, num_threads);
    }
    cur_acc = out_buf.get();
    cur = next;
  }
  return Status::OK();
}

// Nearest: every output element copies one input element (or takes the extrapolation value).
template <typename T>
Status NearestGather(const Tensor& x, Tensor* y, const std::vector<AxisPlan>& plans, float extrapolation,
                     int num_threads) {
  const size_t rank = plans.size();
  const T* src = x.data<T>();
  T* dst = y->data<T>();
  const Shape& out_shape = y->shape();
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * x.shape()[i];
  // Per-axis input offsets, precomputed.
  std::vector<std::vector<int64_t>> offs(rank);
  for (size_t a = 0; a < rank; ++a) {
    offs[a].resize(static_cast<size_t>(plans[a].out_len));
    for (int64_t j = 0; j < plans[a].out_len; ++j) offs[a][j] = plans[a].index[j] * in_strides[a];
  }
  const int64_t w = out_shape[rank - 1];
  const int64_t rows = w == 0 ? 0 : y->NumElements() / w;
  const T fill = FillValue<T>(extrapolation);
  const std::vector<int64_t>& last_off = offs[rank - 1];
  const std::vector<uint8_t>& last_out = plans[rank - 1].outside;
  const bool last_any_outside = plans[rank - 1].any_outside;
  // The innermost axis kept as it is (the channels of a channels-last tensor from the session's layout pass): rows
  // are copied whole.
  bool last_identity = !last_any_outside && plans[rank - 1].out_len == x.shape()[rank - 1];
  for (int64_t i = 0; last_identity && i < w; ++i) last_identity = last_off[i] == i;
  ParallelFor(num_threads, rows, static_cast<double>(w) + rank, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t rem = r, base = 0;
      bool outside = false;
      for (size_t a = rank - 1; a-- > 0;) {
        const int64_t j = rem % out_shape[a];
        rem /= out_shape[a];
        base += offs[a][j];
        outside = outside || plans[a].outside[j];
      }
      T* d = dst + r * w;
      if (outside) {
        for (int64_t i = 0; i < w; ++i) d[i] = fill;
        continue;
      }
      const T* s = src + base;
      if (last_identity) {
        std::copy(s, s + w, d);
      } else if (last_any_outside) {
        for (int64_t i = 0; i < w; ++i) d[i] = last_out[i] ? fill : s[last_off[i]];
      } else {
        for (int64_t i = 0; i < w; ++i) d[i] = s[last_off[i]];
      }
    }
  });
  return Status::OK();
}

// Reads a 1-D float-like tensor (float, double, float16, bfloat16) as floats.
Status ReadFloatValues(const KernelContext& ctx, const Tensor& t, const char* what, std::vector<float>* out) {
  out->resize(static_cast<size_t>(t.NumElements()));
  return DispatchType<EPCTX_FLOAT_TYPES>(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.NumElements(); ++i) (*out)[i] = static_cast<float>(p[i]);
    return Status::OK();
  }).WithContext(ctx.node().Describe());
}

class ResizeKernel final : public OpKernel {
 public:
  explicit ResizeKernel(ResizeConfig cfg) : cfg_(std::move(cfg)) {}

  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info, bool is_upsample) {
    ResizeConfig c;
    c.is_upsample = is_upsample;
    c.opset = info.opset();
    const std::string mode = info.GetString("mode", "nearest");
    if (mode == "nearest") {
      c.interp = Interp::kNearest;
    } else if (mode == "linear" || (is_upsample && mode == "bilinear")) {
      c.interp = Interp::kLinear;
    } else if (mode == "cubic" && !is_upsample) {
      c.interp = Interp::kCubic;
    } else {
      return info.Error(ErrorCode::INVALID_ARGUMENT, "mode '", mode, "' is not supported (expected nearest, linear",
                        is_upsample ? "" : " or cubic", ")");
    }
    const bool modern = !is_upsample && c.opset >= 11;
    if (modern) {
      const std::string ct = info.GetString("coordinate_transformation_mode", "half_pixel");
      if (ct == "half_pixel") c.coord = CoordMode::kHalfPixel;
      else if (ct == "pytorch_half_pixel") c.coord = CoordMode::kPytorchHalfPixel;
      else if (ct == "align_corners") c.coord = CoordMode::kAlignCorners;
      else if (ct == "asymmetric") c.coord = CoordMode::kAsymmetric;
      else if (ct == "tf_half_pixel_for_nn") c.coord = CoordMode::kTfHalfPixelForNn;
      else if (ct == "tf_crop_and_resize") c.coord = CoordMode::kTfCropAndResize;
      else if (ct == "half_pixel_symmetric" && c.opset >= 19) c.coord = CoordMode::kHalfPixelSymmetric;
      else
        return info.Error(ErrorCode::INVALID_ARGUMENT, "coordinate_transformation_mode '", ct, "' is not supported",
                          c.opset < 19 && ct == "half_pixel_symmetric" ? " before opset 19" : "");
      const std::string nm = info.GetString("nearest_mode", "round_prefer_floor");
      if (nm == "round_prefer_floor") c.nearest = NearestMode::kRoundPreferFloor;
      else if (nm == "round_prefer_ceil") c.nearest = NearestMode::kRoundPreferCeil;
      else if (nm == "floor") c.nearest = NearestMode::kFloor;
      else if (nm == "ceil") c.nearest = NearestMode::kCeil;
      else return info.Error(ErrorCode::INVALID_ARGUMENT, "nearest_mode '", nm, "' is not supported");
      c.cubic_a = info.GetFloat("cubic_coeff_a", -0.75f);
      c.exclude_outside = info.GetInt("exclude_outside", 0) != 0;
      c.extrapolation_value = info.GetFloat("extrapolation_value", 0.0f);
      if (c.opset >= 18) {
        c.antialias = info.GetInt("antialias", 0) != 0;
        c.axes = info.GetInts("axes");
        const std::string pol = info.GetString("keep_aspect_ratio_policy", "stretch");
        if (pol == "stretch") c.policy = AspectPolicy::kStretch;
        else if (pol == "not_larger") c.policy = AspectPolicy::kNotLarger;
        else if (pol == "not_smaller") c.policy = AspectPolicy::kNotSmaller;
        else return info.Error(ErrorCode::INVALID_ARGUMENT, "keep_aspect_ratio_policy '", pol, "' is not supported");
        if (c.antialias && c.coord == CoordMode::kTfCropAndResize)
          return info.Error(ErrorCode::NOT_IMPLEMENTED, "antialias with tf_crop_and_resize is not supported");
      }
    }
    if (is_upsample && c.opset < 9) {
      if (!info.HasAttr("scales"))
        return info.Error(ErrorCode::INVALID_GRAPH, "required attribute 'scales' is missing");
      c.has_attr_scales = true;
      c.attr_scales = info.GetFloats("scales");
    }
    return std::unique_ptr<OpKernel>(new ResizeKernel(std::move(c)));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    RETURN_ERROR_IF(x == nullptr, INVALID_ARGUMENT, ctx.node().Describe(), ": input X is missing");
    const size_t rank = x->rank();
    RETURN_ERROR_IF(rank == 0, INVALID_ARGUMENT, ctx.node().Describe(), ": input X must have rank >= 1");
    const Shape& in_shape = x->shape();

    std::vector<float> scales, roi;
    std::vector<int64_t> sizes;
    bool have_sizes = false;
    const bool modern = !cfg_.is_upsample && cfg_.opset >= 11;
    if (cfg_.has_attr_scales) {
      scales = cfg_.attr_scales;
    } else if (!modern) {
      const Tensor* s = ctx.Input(1);
      RETURN_ERROR_IF(s == nullptr, INVALID_ARGUMENT, ctx.node().Describe(), ": input 'scales' is missing");
      RETURN_IF_ERROR(ReadFloatValues(ctx, *s, "scales", &scales));
    } else {
      if (const Tensor* r = ctx.Input(1); r != nullptr && r->NumElements() > 0 &&
                                          cfg_.coord == CoordMode::kTfCropAndResize)
        RETURN_IF_ERROR(ReadFloatValues(ctx, *r, "roi", &roi));
      if (const Tensor* s = ctx.Input(2); s != nullptr && s->NumElements() > 0)
        RETURN_IF_ERROR(ReadFloatValues(ctx, *s, "scales", &scales));
      if (const Tensor* z = ctx.Input(3); z != nullptr && z->NumElements() > 0) {
        RETURN_ERROR_IF(z->dtype() != DataType::kInt64, INVALID_ARGUMENT, ctx.node().Describe(),
                        ": 'sizes' must be int64, got ", DataTypeName(z->dtype()));
        RETURN_ERROR_IF(!scales.empty(), INVALID_ARGUMENT, ctx.node().Describe(),
                        ": only one of 'scales' and 'sizes' may be given");
        sizes.assign(z->data<int64_t>(), z->data<int64_t>() + z->NumElements());
        have_sizes = true;
      }
      RETURN_ERROR_IF(scales.empty() && !have_sizes, INVALID_ARGUMENT, ctx.node().Describe(),
                      ": one of 'scales' and 'sizes' must be given (non-empty)");
      // Resize-18 axes: scales/sizes/roi list only those axes; the others keep scale 1, their size, roi [0, 1].
      if (!cfg_.axes.empty()) {
        const size_t na = cfg_.axes.size();
        std::vector<size_t> ax;
        std::vector<bool> seen(rank, false);
        for (int64_t a : cfg_.axes) {
          const int64_t r = static_cast<int64_t>(rank);
          RETURN_ERROR_IF(a < -r || a >= r, INVALID_ARGUMENT, ctx.node().Describe(), ": axis ", a,
                          " is out of range for rank ", rank);
          const size_t u = static_cast<size_t>(a < 0 ? a + r : a);
          RETURN_ERROR_IF(seen[u], INVALID_ARGUMENT, ctx.node().Describe(), ": axes repeat axis ", u);
          seen[u] = true;
          ax.push_back(u);
        }
        if (!scales.empty()) {
          RETURN_ERROR_IF(scales.size() != na, INVALID_ARGUMENT, ctx.node().Describe(), ": 'scales' has ",
                          scales.size(), " values for ", na, " axes");
          std::vector<float> full(rank, 1.0f);
          for (size_t k = 0; k < na; ++k) full[ax[k]] = scales[k];
          scales = std::move(full);
        }
        if (have_sizes) {
          RETURN_ERROR_IF(sizes.size() != na, INVALID_ARGUMENT, ctx.node().Describe(), ": 'sizes' has ",
                          sizes.size(), " values for ", na, " axes");
          std::vector<int64_t> full(in_shape.begin(), in_shape.end());
          for (size_t k = 0; k < na; ++k) full[ax[k]] = sizes[k];
          sizes = std::move(full);
        }
        if (!roi.empty()) {
          RETURN_ERROR_IF(roi.size() != 2 * na, INVALID_ARGUMENT, ctx.node().Describe(), ": 'roi' has ", roi.size(),
                          " values for ", na, " axes");
          std::vector<float> full(2 * rank, 0.0f);
          std::fill(full.begin() + rank, full.end(), 1.0f);
          for (size_t k = 0; k < na; ++k) {
            full[ax[k]] = roi[k];
            full[rank + ax[k]] = roi[na + k];
          }
          roi = std::move(full);
        }
      }
    }

    Shape out_shape(rank);
    std::vector<float> length_resized(rank);
    if (have_sizes && cfg_.policy != AspectPolicy::kStretch) {
      // keep_aspect_ratio_policy: one scale for the listed axes (all axes without `axes`), the smallest
      // (not_larger) or largest (not_smaller) of sizes / input, and output sizes round(scale * input).
      RETURN_ERROR_IF(sizes.size() != rank, INVALID_ARGUMENT, ctx.node().Describe(), ": 'sizes' has ",
                      sizes.size(), " values but X has rank ", rank);
      std::vector<bool> listed(rank, cfg_.axes.empty());
      for (int64_t a : cfg_.axes) listed[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(rank) : a)] = true;
      float sc = cfg_.policy == AspectPolicy::kNotLarger ? std::numeric_limits<float>::max() : 0.0f;
      for (size_t i = 0; i < rank; ++i) {
        if (!listed[i]) continue;
        RETURN_ERROR_IF(in_shape[i] <= 0 || sizes[i] < 0, INVALID_ARGUMENT, ctx.node().Describe(),
                        ": cannot keep the aspect ratio of dimension ", i, " (", in_shape[i], " -> ", sizes[i], ")");
        const float r = static_cast<float>(sizes[i]) / static_cast<float>(in_shape[i]);
        sc = cfg_.policy == AspectPolicy::kNotLarger ? std::min(sc, r) : std::max(sc, r);
      }
      scales.assign(rank, 1.0f);
      for (size_t i = 0; i < rank; ++i) {
        if (listed[i]) {
          scales[i] = sc;
          sizes[i] = static_cast<int64_t>(std::round(sc * static_cast<float>(in_shape[i])));
        } else {
          sizes[i] = in_shape[i];
        }
        out_shape[i] = sizes[i];
        length_resized[i] = static_cast<float>(sizes[i]);
      }
    } else if (have_sizes) {
      RETURN_ERROR_IF(sizes.size() != rank, INVALID_ARGUMENT, ctx.node().Describe(), ": 'sizes' has ",
                      sizes.size(), " values but X has rank ", rank);
      scales.resize(rank);
      for (size_t i = 0; i < rank; ++i) {
        RETURN_ERROR_IF(sizes[i] < 0, INVALID_ARGUMENT, ctx.node().Describe(), ": sizes[", i, "] = ", sizes[i],
                        " is negative");
        RETURN_ERROR_IF(in_shape[i] == 0 && sizes[i] != 0, INVALID_ARGUMENT, ctx.node().Describe(),
                        ": cannot resize the empty dimension ", i, " to ", sizes[i]);
        out_shape[i] = sizes[i];
        scales[i] = in_shape[i] == 0 ? 1.0f : static_cast<float>(sizes[i]) / static_cast<float>(in_shape[i]);
        length_resized[i] = static_cast<float>(sizes[i]);
      }
    } else {
      RETURN_ERROR_IF(scales.size() != rank, INVALID_ARGUMENT, ctx.node().Describe(), ": 'scales' has ",
                      scales.size(), " values but X has rank ", rank);
      for (size_t i = 0; i < rank; ++i) {
        const float s = scales[i];
        RETURN_ERROR_IF(!(s > 0) || !std::isfinite(s), INVALID_ARGUMENT, ctx.node().Describe(), ": scales[", i,
                        "] = ", s, " must be a finite value > 0");
        RETURN_ERROR_IF(cfg_.is_upsample && s < 1, INVALID_ARGUMENT, ctx.node().Describe(), ": scales[", i,
                        "] = ", s, " must be >= 1 for Upsample");
        const double len = static_cast<double>(s) * static_cast<double>(in_shape[i]);
        RETURN_ERROR_IF(len >= 9.0e15, INVALID_ARGUMENT, ctx.node().Describe(), ": output dimension ", i,
                        " (", len, ") is too large");
        out_shape[i] = static_cast<int64_t>(std::floor(len));
        length_resized[i] = s * static_cast<float>(in_shape[i]);
      }
    }
    if (cfg_.coord == CoordMode::kTfCropAndResize) {
      if (roi.empty()) {
        roi.assign(2 * rank, 0.0f);
        std::fill(roi.begin() + rank, roi.end(), 1.0f);
      }
      RETURN_ERROR_IF(roi.size() != 2 * rank, INVALID_ARGUMENT, ctx.node().Describe(), ": 'roi' has ", roi.size(),
                      " values but X has rank ", rank, " (expected ", 2 * rank, ")");
    }

    // Nearest writes every element (a gathered or extrapolated value); the separable passes may not.
    ASSIGN_OR_RETURN(Tensor * y, cfg_.interp == Interp::kNearest ? ctx.OutputForOverwrite(0, x->dtype(), out_shape)
                                                                  : ctx.Output(0, x->dtype(), out_shape));
    if (y->NumElements() == 0) return Status::OK();

    std::vector<AxisPlan> plans(rank);
    for (size_t i = 0; i < rank; ++i) {
      const float rs = roi.empty() ? 0.0f : roi[i], re = roi.empty() ? 1.0f : roi[rank + i];
      plans[i] = PlanAxis(cfg_, in_shape[i], out_shape[i], scales[i], length_resized[i], rs, re);
    }
    const float ev = cfg_.extrapolation_value;
    if (cfg_.interp == Interp::kNearest) {
      return DispatchType<EPCTX_ALL_TYPES, std::complex<float>, std::complex<double>>(
          x->dtype(), "Resize", [&](auto tag) {
            using T = decltype(tag);
            return NearestGather<T>(*x, y, plans, ev, ctx.num_threads());
          }).WithContext(ctx.node().Describe());
    }
    const bool outer_unscaled = rank == 2 || (rank == 4 && scales[0] == 1.0f && scales[1] == 1.0f &&
                                              out_shape[0] == in_shape[0] && out_shape[1] == in_shape[1]);
    if (cfg_.interp == Interp::kLinear && !cfg_.antialias && cfg_.coord != CoordMode::kTfCropAndResize &&
        x->dtype() == DataType::kFloat && outer_unscaled) {
      const size_t hi = rank - 2, wi = rank - 1;
      const BilinearAxis ay = PlanBilinearAxis(cfg_, in_shape[hi], out_shape[hi], scales[hi], length_resized[hi]);
      const BilinearAxis ax = PlanBilinearAxis(cfg_, in_shape[wi], out_shape[wi], scales[wi], length_resized[wi]);
      const int64_t planes = rank == 4 ? in_shape[0] * in_shape[1] : 1;
      Bilinear2D(x->data<float>(), y->data<float>(), planes, in_shape[hi], in_shape[wi], ay, ax,
                 ctx.num_threads());
      return Status::OK();
    }
    return DispatchType<EPCTX_NUMERIC_TYPES>(x->dtype(), "Resize (linear/cubic)", [&](auto tag) {
             using T = decltype(tag);
             return InterpolateSeparable<T>(*x, y, plans, ev, ctx.num_threads());
           }).WithContext(ctx.node().Describe());
  }

 private:
  ResizeConfig cfg_;
};

}  // namespace

void RegisterResizeKernels(KernelRegistry& r) {
  r.Register("", "Resize", [](const KernelInfo& info) { return ResizeKernel::Create(info, false); }, 10);
  r.Register("", "Upsample", [](const KernelInfo& info) { return ResizeKernel::Create(info, true); }, 7, 9);
}

}  // namespace misc
}  // namespace epctx
