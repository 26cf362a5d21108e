// Signal-processing kernels of opset 17: HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix, DFT, STFT.
//
// Transforms run in double: radix-2 FFT for power-of-two lengths, a direct sum for short other lengths, and
// Bluestein's chirp-z algorithm (three power-of-two FFTs) for long ones, so every length costs O(n log n).
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace misc {
namespace {

using Complex = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

// Reads a scalar (shape [] or [1]) integer input of type int32 or int64.
Status ReadIntScalar(const KernelContext& ctx, size_t i, const char* name, int64_t* value) {
  const Tensor* t = ctx.Input(i);
  RETURN_ERROR_IF(t == nullptr, INVALID_ARGUMENT, ctx.node().Describe(), ": input '", name, "' is missing");
  RETURN_ERROR_IF(t->NumElements() != 1, INVALID_ARGUMENT, ctx.node().Describe(), ": input '", name,
                  "' must be a scalar, got shape ", ShapeToString(t->shape()));
  if (t->dtype() == DataType::kInt64) {
    *value = t->data<int64_t>()[0];
  } else if (t->dtype() == DataType::kInt32) {
    *value = t->data<int32_t>()[0];
  } else {
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input '", name, "' must be int32 or int64, got ",
                     DataTypeName(t->dtype()));
  }
  return Status::OK();
}

Status ReadFloatScalar(const KernelContext& ctx, size_t i, const char* name, double* value) {
  const Tensor* t = ctx.Input(i);
  RETURN_ERROR_IF(t == nullptr, INVALID_ARGUMENT, ctx.node().Describe(), ": input '", name, "' is missing");
  RETURN_ERROR_IF(t->NumElements() != 1, INVALID_ARGUMENT, ctx.node().Describe(), ": input '", name,
                  "' must be a scalar, got shape ", ShapeToString(t->shape()));
  return DispatchType<EPCTX_FLOAT_TYPES>(t->dtype(), name, [&](auto tag) {
           using T = decltype(tag);
           if constexpr (std::is_same_v<T, double>) {
             *value = t->data<T>()[0];
           } else {
             *value = static_cast<float>(t->data<T>()[0]);
           }
           return Status::OK();
         }).WithContext(ctx.node().Describe());
}

template <typename T>
double ToDouble(const T& v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return static_cast<float>(v);
  }
}

template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T(0);
    v = std::trunc(v);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

#define EPCTX_SIGNAL_OUTPUT_TYPES EPCTX_NUMERIC_TYPES

StatusOr<DataType> OutputDatatype(const KernelInfo& info) {
  const int64_t v = info.GetInt("output_datatype", 1);
  const DataType dt = static_cast<DataType>(v);
  Status st = IsValidDataType(static_cast<int32_t>(v))
                  ? DispatchType<EPCTX_SIGNAL_OUTPUT_TYPES>(dt, "output_datatype", [](auto) { return Status::OK(); })
                  : MakeStatus(ErrorCode::INVALID_ARGUMENT, "invalid value");
  if (!st.ok())
    return info.Error(ErrorCode::INVALID_ARGUMENT, "output_datatype ", v,
                      " is not a numeric tensor type (float, double, float16, bfloat16 or an integer type)");
  return dt;
}

// ---------------------------------------------------------------------------------------------------------------
// Windows: w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1 (symmetric).

class WindowKernel final : public OpKernel {
 public:
  WindowKernel(double a0, double a1, double a2, bool periodic, DataType out)
      : a0_(a0), a1_(a1), a2_(a2), periodic_(periodic), out_(out) {}

  static KernelFactory Factory(double a0, double a1, double a2) {
    return [a0, a1, a2](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
      ASSIGN_OR_RETURN(DataType out, OutputDatatype(info));
      return std::unique_ptr<OpKernel>(new WindowKernel(a0, a1, a2, info.GetInt("periodic", 1) != 0, out));
    };
  }

  Status Compute(KernelContext& ctx) const override {
    int64_t size;
    RETURN_IF_ERROR(ReadIntScalar(ctx, 0, "size", &size));
    RETURN_ERROR_IF(size < 0 || size > (int64_t{1} << 32), INVALID_ARGUMENT, ctx.node().Describe(),
                    ": window size ", size, " is out of range [0, 2^32]");
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_, {size}));
    const double denom = static_cast<double>(periodic_ ? size : size - 1);
    return DispatchType<EPCTX_SIGNAL_OUTPUT_TYPES>(out_, "window", [&](auto tag) {
      using T = decltype(tag);
      T* d = y->data<T>();
      for (int64_t n = 0; n < size; ++n) {
        // A one-point symmetric window divides 0 by 0: NaN, as in the ONNX reference and ONNX Runtime.
        const double t = 2 * kPi * static_cast<double>(n) / denom;
        d[n] = FromDouble<T>(a0_ - a1_ * std::cos(t) + a2_ * std::cos(2 * t));
      }
      return Status::OK();
    });
  }

 private:
  double a0_, a1_, a2_;
  bool periodic_;
  DataType out_;
};

// ---------------------------------------------------------------------------------------------------------------
// MelWeightMatrix: triangular filters between mel-spaced FFT bins, peak 1.

class MelWeightMatrixKernel final : public OpKernel {
 public:
  explicit MelWeightMatrixKernel(DataType out) : out_(out) {}

  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    ASSIGN_OR_RETURN(DataType out, OutputDatatype(info));
    return std::unique_ptr<OpKernel>(new MelWeightMatrixKernel(out));
  }

  Status Compute(KernelContext& ctx) const override {
    int64_t num_mel_bins, dft_length, sample_rate;
    double lower_hz, upper_hz;
    RETURN_IF_ERROR(ReadIntScalar(ctx, 0, "num_mel_bins", &num_mel_bins));
    RETURN_IF_ERROR(ReadIntScalar(ctx, 1, "dft_length", &dft_length));
    RETURN_IF_ERROR(ReadIntScalar(ctx, 2, "sample_rate", &sample_rate));
    RETURN_IF_ERROR(ReadFloatScalar(ctx, 3, "lower_edge_hertz", &lower_hz));
    RETURN_IF_ERROR(ReadFloatScalar(ctx, 4, "upper_edge_hertz", &upper_hz));
    RETURN_ERROR_IF(num_mel_bins < 0 || num_mel_bins > (int64_t{1} << 24), INVALID_ARGUMENT, ctx.node().Describe(),
                    ": num_mel_bins ", num_mel_bins, " is out of range [0, 2^24]");
    RETURN_ERROR_IF(dft_length <= 0 || dft_length > (int64_t{1} << 32), INVALID_ARGUMENT, ctx.node().Describe(),
                    ": dft_length ", dft_length, " is out of range [1, 2^32]");
    RETURN_ERROR_IF(sample_rate <= 0, INVALID_ARGUMENT, ctx.node().Describe(), ": sample_rate ", sample_rate,
                    " must be > 0");
    RETURN_ERROR_IF(!std::isfinite(lower_hz) || !std::isfinite(upper_hz), INVALID_ARGUMENT, ctx.node().Describe(),
                    ": the edge frequencies must be finite");
    const int64_t bins = dft_length / 2 + 1;
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_, {bins, num_mel_bins}));
    auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
    const double low_mel = to_mel(lower_hz), high_mel = to_mel(upper_hz);
    const double step = (high_mel - low_mel) / static_cast<double>(num_mel_bins + 2);
    std::vector<int64_t> points(static_cast<size_t>(num_mel_bins + 2));
    for (int64_t i = 0; i < num_mel_bins + 2; ++i) {
      const double hz = 700.0 * (std::pow(10.0, (low_mel + step * static_cast<double>(i)) / 2595.0) - 1.0);
      double bin = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
      if (std::isnan(bin)) bin = -1;
      points[i] = static_cast<int64_t>(std::min(std::max(bin, -1e15), 1e15));
    }
    return DispatchType<EPCTX_SIGNAL_OUTPUT_TYPES>(out_, "MelWeightMatrix", [&](auto tag) {
      using T = decltype(tag);
      T* d = y->data<T>();  // zero-filled
      auto set = [&](int64_t row, int64_t col, double v) {
        if (row >= 0 && row < bins) d[row * num_mel_bins + col] = FromDouble<T>(v);
      };
      for (int64_t i = 0; i < num_mel_bins; ++i) {
        const int64_t lo = points[i], center = points[i + 1], hi = points[i + 2];
        if (center == lo) {
          set(center, i, 1.0);
        } else {
          for (int64_t j = std::max<int64_t>(lo, 0); j <= std::min(center, bins - 1); ++j)
            set(j, i, static_cast<double>(j - lo) / static_cast<double>(center - lo));
        }
        if (hi > center) {
          for (int64_t j = std::max<int64_t>(center, 0); j < std::min(hi, bins); ++j)
            set(j, i, static_cast<double>(hi - j) / static_cast<double>(hi - center));
        }
      }
      return Status::OK();
    });
  }

 private:
  DataType out_;
};

// ---------------------------------------------------------------------------------------------------------------
// Discrete Fourier transform of one length; sign -1 forward, +1 inverse (unnormalised).

class FourierPlan {
 public:
  FourierPlan(int64_t n, bool inverse) : n_(n), sign_(inverse ? 1.0 : -1.0) {
    if (n_ <= 1) return;
    if (IsPowerOfTwo(n_)) {
      kind_ = Kind::kRadix2;
      MakeTwiddles(n_, sign_, &twiddles_);
    } else if (n_ <= 32) {
      kind_ = Kind::kDirect;
      roots_.resize(static_cast<size_t>(n_));
      for (int64_t k = 0; k < n_; ++k) roots_[k] = std::polar(1.0, sign_ * 2 * kPi * static_cast<double>(k) / n_);
    } else {
      kind_ = Kind::kBluestein;
      m_ = 1;
      while (m_ < 2 * n_ - 1) m_ <<= 1;
      MakeTwiddles(m_, -1.0, &m_fwd_);
      MakeTwiddles(m_, 1.0, &m_inv_);
      chirp_.resize(static_cast<size_t>(n_));
      for (int64_t k = 0; k < n_; ++k) {
        // k^2 mod 2n keeps the angle argument small and exact.
        const int64_t k2 = static_cast<int64_t>((static_cast<unsigned __int128>(k) * k) % (2 * n_));
        chirp_[k] = std::polar(1.0, sign_ * kPi * static_cast<double>(k2) / static_cast<double>(n_));
      }
      kernel_.assign(static_cast<size_t>(m_), Complex(0, 0));
      kernel_[0] = std::conj(chirp_[0]);
      for (int64_t k = 1; k < n_; ++k) kernel_[k] = kernel_[m_ - k] = std::conj(chirp_[k]);
      Radix2(kernel_.data(), m_, m_fwd_);
    }
  }

  // Scratch needed by Run (per thread).
  size_t scratch_size() const { return kind_ == Kind::kBluestein ? static_cast<size_t>(m_) : static_cast<size_t>(n_); }

  // Transforms data[0, n) in place.
  void Run(Complex* data, Complex* scratch) const {
    switch (kind_) {
      case Kind::kTrivial: return;
      case Kind::kRadix2: Radix2(data, n_, twiddles_); return;
      case Kind::kDirect:
        for (int64_t k = 0; k < n_; ++k) {
          Complex s(0, 0);
          int64_t idx = 0;
          for (int64_t j = 0; j < n_; ++j) {
            s += data[j] * roots_[idx];
            idx += k;
            if (idx >= n_) idx -= n_;
          }
          scratch[k] = s;
        }
        std::copy(scratch, scratch + n_, data);
        return;
      case Kind::kBluestein:
        std::fill(scratch, scratch + m_, Complex(0, 0));
        for (int64_t k = 0; k < n_; ++k) scratch[k] = data[k] * chirp_[k];
        Radix2(scratch, m_, m_fwd_);
        for (int64_t k = 0; k < m_; ++k) scratch[k] *= kernel_[k];
        Radix2(scratch, m_, m_inv_);
        for (int64_t k = 0; k < n_; ++k) data[k] = scratch[k] * chirp_[k] / static_cast<double>(m_);
        return;
    }
  }

 private:
  enum class Kind { kTrivial, kRadix2, kDirect, kBluestein };

  static bool IsPowerOfTwo(int64_t n) { return (n & (n - 1)) == 0; }

  static void MakeTwiddles(int64_t n, double sign, std::vector<Complex>* tw) {
    tw->resize(static_cast<size_t>(n / 2));
    for (int64_t k = 0; k < n / 2; ++k) (*tw)[k] = std::polar(1.0, sign * 2 * kPi * static_cast<double>(k) / n);
  }

  // Iterative in-place radix-2 FFT; tw[k] = exp(sign * 2 pi i k / n).
  static void Radix2(Complex* a, int64_t n, const std::vector<Complex>& tw) {
    for (int64_t i = 1, j = 0; i < n; ++i) {
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      const int64_t half = len / 2, step = n / len;
      for (int64_t i = 0; i < n; i += len) {
        for (int64_t k = 0; k < half; ++k) {
          const Complex u = a[i + k], v = a[i + k + half] * tw[k * step];
          a[i + k] = u + v;
          a[i + k + half] = u - v;
        }
      }
    }
  }

  int64_t n_;
  double sign_;
  Kind kind_ = Kind::kTrivial;
  std::vector<Complex> twiddles_, roots_;
  int64_t m_ = 0;
  std::vector<Complex> m_fwd_, m_inv_, chirp_, kernel_;
};

constexpr int64_t kMaxDftLength = int64_t{1} << 22;  // bounds the Bluestein buffers (4 x 2^24 complex doubles)

class DftKernel final : public OpKernel {
 public:
  DftKernel(int64_t axis, bool inverse, bool onesided, bool axis_input)
      : axis_(axis), inverse_(inverse), onesided_(onesided), axis_input_(axis_input) {}

  // DFT-17 takes axis as an attribute (default 1); DFT-20 as the optional scalar input 2 (default -2, the last
  // signal axis), where any axis but the last (the complex one) is allowed.
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    const bool v20 = info.opset() >= 20;
    return std::unique_ptr<OpKernel>(new DftKernel(v20 ? -2 : info.GetInt("axis", 1), info.GetInt("inverse", 0) != 0,
                                                   info.GetInt("onesided", 0) != 0, v20));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    RETURN_ERROR_IF(x == nullptr, INVALID_ARGUMENT, ctx.node().Describe(), ": input is missing");
    const int64_t rank = static_cast<int64_t>(x->rank());
    RETURN_ERROR_IF(rank < 3 || (x->dim(rank - 1) != 1 && x->dim(rank - 1) != 2), INVALID_ARGUMENT,
                    ctx.node().Describe(), ": input must have shape [batch, signal dims..., 1 or 2], got ",
                    ShapeToString(x->shape()));
    int64_t axis_value = axis_;
    if (axis_input_ && ctx.Input(2) != nullptr) RETURN_IF_ERROR(ReadIntScalar(ctx, 2, "axis", &axis_value));
    int64_t axis = axis_value < 0 ? axis_value + rank : axis_value;
    const int64_t lowest = axis_input_ ? 0 : 1;
    RETURN_ERROR_IF(axis < lowest || axis > rank - 2, INVALID_ARGUMENT, ctx.node().Describe(), ": axis ", axis_value,
                    " is not a signal axis of an input of rank ", rank, " (valid: ", lowest, "..", rank - 2, ")");
    const int64_t len = x->dim(axis);
    int64_t n = len;
    if (ctx.Input(1) != nullptr) {
      RETURN_IF_ERROR(ReadIntScalar(ctx, 1, "dft_length", &n));
      RETURN_ERROR_IF(n <= 0 || n > kMaxDftLength, INVALID_ARGUMENT, ctx.node().Describe(), ": dft_length ", n,
                      " is out of range [1, 2^22]");
    }
    RETURN_ERROR_IF(n == 0, INVALID_ARGUMENT, ctx.node().Describe(), ": the signal axis is empty");
    RETURN_ERROR_IF(n > kMaxDftLength, INVALID_ARGUMENT, ctx.node().Describe(), ": DFT length ", n, " exceeds 2^22");
    const int64_t out_len = onesided_ ? n / 2 + 1 : n;
    Shape out_shape = x->shape();
    out_shape[axis] = out_len;
    out_shape[rank - 1] = 2;
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x->dim(d);
    for (int64_t d = axis + 1; d < rank - 1; ++d) inner *= x->dim(d);
    const int64_t comps = x->dim(rank - 1);
    const FourierPlan plan(n, inverse_);
    const double scale = inverse_ ? 1.0 / static_cast<double>(n) : 1.0;
    return DispatchType<float, double, Float16, BFloat16>(x->dtype(), "DFT", [&](auto tag) {
             using T = decltype(tag);
             const T* src = x->data<T>();
             T* dst = y->data<T>();
             ParallelFor(ctx.num_threads(), outer * inner, static_cast<double>(n) * 16, [&](int64_t b, int64_t e) {
               std::vector<Complex> buf(static_cast<size_t>(n)), scratch(plan.scratch_size());
               for (int64_t line = b; line < e; ++line) {
                 const int64_t o = line / inner, i = line % inner;
                 const int64_t m = std::min(n, len);
                 for (int64_t k = 0; k < m; ++k) {
                   const T* p = src + ((o * len + k) * inner + i) * comps;
                   buf[k] = Complex(ToDouble(p[0]), comps == 2 ? ToDouble(p[1]) : 0.0);
                 }
                 std::fill(buf.begin() + m, buf.end(), Complex(0, 0));
                 plan.Run(buf.data(), scratch.data());
                 for (int64_t k = 0; k < out_len; ++k) {
                   T* q = dst + ((o * out_len + k) * inner + i) * 2;
                   q[0] = FromDouble<T>(buf[k].real() * scale);
                   q[1] = FromDouble<T>(buf[k].imag() * scale);
                 }
               }
             });
             return Status::OK();
           }).WithContext(ctx.node().Describe());
  }

 private:
  int64_t axis_;
  bool inverse_, onesided_, axis_input_;
};

class StftKernel final : public OpKernel {
 public:
  explicit StftKernel(bool onesided) : onesided_(onesided) {}

  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    return std::unique_ptr<OpKernel>(new StftKernel(info.GetInt("onesided", 1) != 0));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* signal = ctx.Input(0);
    RETURN_ERROR_IF(signal == nullptr, INVALID_ARGUMENT, ctx.node().Describe(), ": input 'signal' is missing");
    const size_t rank = signal->rank();
    RETURN_ERROR_IF(!(rank == 2 || (rank == 3 && (signal->dim(2) == 1 || signal->dim(2) == 2))), INVALID_ARGUMENT,
                    ctx.node().Describe(), ": signal must have shape [batch, length, 1 or 2], got ",
                    ShapeToString(signal->shape()));
    const int64_t batch = signal->dim(0), length = signal->dim(1), comps = rank == 3 ? signal->dim(2) : 1;
    int64_t step;
    RETURN_IF_ERROR(ReadIntScalar(ctx, 1, "frame_step", &step));
    RETURN_ERROR_IF(step <= 0, INVALID_ARGUMENT, ctx.node().Describe(), ": frame_step ", step, " must be > 0");
    const Tensor* window = ctx.Input(2);
    int64_t n = -1;
    if (window != nullptr) {
      RETURN_ERROR_IF(window->rank() != 1, INVALID_ARGUMENT, ctx.node().Describe(), ": window must be 1-D, got ",
                      ShapeToString(window->shape()));
      n = window->dim(0);
    }
    if (ctx.Input(3) != nullptr) {
      int64_t fl;
      RETURN_IF_ERROR(ReadIntScalar(ctx, 3, "frame_length", &fl));
      RETURN_ERROR_IF(n >= 0 && fl != n, INVALID_ARGUMENT, ctx.node().Describe(), ": frame_length ", fl,
                      " differs from the window length ", n);
      n = fl;
    }
    RETURN_ERROR_IF(n < 0, INVALID_ARGUMENT, ctx.node().Describe(), ": one of window and frame_length is required");
    RETURN_ERROR_IF(n == 0 || n > kMaxDftLength, INVALID_ARGUMENT, ctx.node().Describe(), ": frame length ", n,
                    " is out of range [1, 2^22]");
    RETURN_ERROR_IF(n > length, INVALID_ARGUMENT, ctx.node().Describe(), ": frame length ", n,
                    " exceeds the signal length ", length);
    const int64_t frames = (length - n) / step + 1;
    const int64_t out_len = onesided_ ? n / 2 + 1 : n;
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, signal->dtype(), {batch, frames, out_len, 2}));
    std::vector<double> win(static_cast<size_t>(n), 1.0);
    if (window != nullptr) {
      RETURN_IF_ERROR(DispatchType<EPCTX_FLOAT_TYPES>(window->dtype(), "STFT window", [&](auto tag) {
                        using W = decltype(tag);
                        for (int64_t k = 0; k < n; ++k) win[k] = ToDouble(window->data<W>()[k]);
                        return Status::OK();
                      }).WithContext(ctx.node().Describe()));
    }
    const FourierPlan plan(n, false);
    return DispatchType<float, double, Float16, BFloat16>(signal->dtype(), "STFT", [&](auto tag) {
             using T = decltype(tag);
             const T* src = signal->data<T>();
             T* dst = y->data<T>();
             ParallelFor(ctx.num_threads(), batch * frames, static_cast<double>(n) * 16, [&](int64_t b, int64_t e) {
               std::vector<Complex> buf(static_cast<size_t>(n)), scratch(plan.scratch_size());
               for (int64_t bf = b; bf < e; ++bf) {
                 const int64_t bi = bf / frames, f = bf % frames;
                 const T* p = src + (bi * length + f * step) * comps;
                 for (int64_t k = 0; k < n; ++k)
                   buf[k] = Complex(ToDouble(p[k * comps]), comps == 2 ? ToDouble(p[k * comps + 1]) : 0.0) * win[k];
                 plan.Run(buf.data(), scratch.data());
                 T* q = dst + bf * out_len * 2;
                 for (int64_t k = 0; k < out_len; ++k) {
                   q[2 * k] = FromDouble<T>(buf[k].real());
                   q[2 * k + 1] = FromDouble<T>(buf[k].imag());
                 }
               }
             });
             return Status::OK();
           }).WithContext(ctx.node().Describe());
  }

 private:
  bool onesided_;
};

}  // namespace

void RegisterSignalKernels(KernelRegistry& r) {
  r.Register("", "HannWindow", WindowKernel::Factory(0.5, 0.5, 0.0), 17);
  r.Register("", "HammingWindow", WindowKernel::Factory(25.0 / 46.0, 21.0 / 46.0, 0.0), 17);
  r.Register("", "BlackmanWindow", WindowKernel::Factory(0.42, 0.5, 0.08), 17);
  r.Register("", "MelWeightMatrix", MelWeightMatrixKernel::Create, 17);
  r.Register("", "DFT", DftKernel::Create, 17);
  r.Register("", "STFT", StftKernel::Create, 17);
}

}  // namespace misc
}  // namespace epctx
