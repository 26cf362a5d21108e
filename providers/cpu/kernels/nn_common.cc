#include "providers/cpu/kernels/nn_common.h"

#include "core/window.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

namespace epctx {
namespace nn {

namespace {

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

Status CheckPositive(const KernelInfo& info, const char* name, const std::vector<int64_t>& v) {
  for (int64_t d : v)
    if (d <= 0) return info.Error(ErrorCode::INVALID_GRAPH, "attribute '", name, "' must be positive, got ", d);
  return Status::OK();
}

}  // namespace

Status WindowAttrs::Parse(const KernelInfo& info, bool has_dilations, bool has_ceil_mode) {
  std::string ap = info.GetString("auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap.empty()) {
    auto_pad = AutoPad::kNotSet;
  } else if (ap == "SAME_UPPER") {
    auto_pad = AutoPad::kSameUpper;
  } else if (ap == "SAME_LOWER") {
    auto_pad = AutoPad::kSameLower;
  } else if (ap == "VALID") {
    auto_pad = AutoPad::kValid;
  } else {
    return info.Error(ErrorCode::INVALID_GRAPH, "unknown auto_pad '", ap,
                      "' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)");
  }
  kernel_shape = info.GetInts("kernel_shape");
  strides = info.GetInts("strides");
  if (has_dilations) dilations = info.GetInts("dilations");
  pads = info.GetInts("pads");
  if (has_ceil_mode) ceil_mode = info.GetInt("ceil_mode", 0) != 0;
  RETURN_IF_ERROR(CheckPositive(info, "kernel_shape", kernel_shape));
  RETURN_IF_ERROR(CheckPositive(info, "strides", strides));
  RETURN_IF_ERROR(CheckPositive(info, "dilations", dilations));
  for (int64_t p : pads)
    if (p < 0) return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'pads' must not be negative, got ", p);
  if (pads.size() % 2 != 0)
    return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'pads' has odd length ", pads.size());
  return Status::OK();
}

int64_t WindowGeom::InSize() const { return Product(in); }
int64_t WindowGeom::OutSize() const { return Product(out); }
int64_t WindowGeom::KernelSize() const { return Product(kernel); }

Status ResolveWindow(const WindowAttrs& a, const Shape& in_spatial, const Shape& kernel, bool is_pool,
                     WindowGeom* g) {
  const size_t r = in_spatial.size();
  RETURN_ERROR_IF(r == 0, INVALID_ARGUMENT, "input has no spatial dimensions");
  RETURN_ERROR_IF(kernel.size() != r, INVALID_ARGUMENT, "kernel has ", kernel.size(), " spatial dims but the input has ",
                  r);
  RETURN_ERROR_IF(!a.strides.empty() && a.strides.size() != r, INVALID_ARGUMENT, "strides has ", a.strides.size(),
                  " values for ", r, " spatial dims");
  RETURN_ERROR_IF(!a.dilations.empty() && a.dilations.size() != r, INVALID_ARGUMENT, "dilations has ",
                  a.dilations.size(), " values for ", r, " spatial dims");
  RETURN_ERROR_IF(!a.pads.empty() && a.pads.size() != 2 * r, INVALID_ARGUMENT, "pads has ", a.pads.size(),
                  " values for ", r, " spatial dims (expected ", 2 * r, ")");
  g->in = in_spatial;
  g->kernel = kernel;
  g->stride = a.strides.empty() ? std::vector<int64_t>(r, 1) : a.strides;
  g->dilation = a.dilations.empty() ? std::vector<int64_t>(r, 1) : a.dilations;
  g->pad_begin.assign(r, 0);
  g->pad_end.assign(r, 0);
  g->out.assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = in_spatial[i], s = g->stride[i];
    RETURN_ERROR_IF(kernel[i] <= 0, INVALID_ARGUMENT, "kernel dim ", i, " is ", kernel[i]);
    RETURN_ERROR_IF(in < 0, INVALID_ARGUMENT, "negative input dim ", in);
    const int64_t ek = g->Extent(i);
    switch (a.auto_pad) {
      case AutoPad::kNotSet: {
        int64_t pb = a.pads.empty() ? 0 : a.pads[i], pe = a.pads.empty() ? 0 : a.pads[i + r];
        g->pad_begin[i] = pb;
        g->pad_end[i] = pe;
        int64_t span = in + pb + pe - ek;
        RETURN_ERROR_IF(span < 0, INVALID_ARGUMENT, "spatial dim ", i, " of size ", in, " plus pads ", pb, "+", pe,
                        " is smaller than the window extent ", ek);
        g->out[i] = WindowOutputSize(in, ek, s, pb, pe, is_pool && a.ceil_mode);
        break;
      }
      case AutoPad::kValid: {
        int64_t span = in - ek;
        RETURN_ERROR_IF(span < 0, INVALID_ARGUMENT, "spatial dim ", i, " of size ", in,
                        " is smaller than the window extent ", ek, " (auto_pad VALID)");
        // ceil_mode applies to VALID too, as in ONNX Runtime 1.30 (a last window starting past the input dropped).
        g->out[i] = WindowOutputSize(in, ek, s, 0, 0, is_pool && a.ceil_mode);
        break;
      }
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: {
        int64_t out = CeilDiv(in, s);
        int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
        int64_t small = total / 2, big = total - small;
        g->pad_begin[i] = a.auto_pad == AutoPad::kSameUpper ? small : big;
        g->pad_end[i] = a.auto_pad == AutoPad::kSameUpper ? big : small;
        g->out[i] = out;
        break;
      }
    }
  }
  return Status::OK();
}

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

ScopedOmpThreads::ScopedOmpThreads(int num_threads) : saved_(omp_get_max_threads()) {
  if (num_threads > 0 && num_threads != saved_) omp_set_num_threads(num_threads);
}
ScopedOmpThreads::~ScopedOmpThreads() {
  if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims, dnnl::memory::data_type dt) {
  dnnl::memory::dims strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(dims[i], 1);
  }
  return dnnl::memory::desc(dims, dt, strides);
}

dnnl::primitive_attr UserScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {
struct ThreadBuffer {
  char* data = nullptr;
  size_t capacity = 0;
  ~ThreadBuffer() { std::free(data); }
};
thread_local ThreadBuffer t_scratch;
}  // namespace

ScratchCarver::ScratchCarver(size_t total_bytes) : total_(total_bytes) {
  if (total_bytes == 0) return;
  if (t_scratch.capacity < total_bytes) {
    std::free(t_scratch.data);
    size_t cap = Rounded(total_bytes + total_bytes / 4);
    t_scratch.data = static_cast<char*>(std::aligned_alloc(64, cap));
    t_scratch.capacity = t_scratch.data ? cap : 0;
  }
  base_ = t_scratch.data;
}

void* ScratchCarver::Take(size_t bytes) {
  size_t r = Rounded(bytes);
  if (base_ == nullptr || used_ + r > total_ || r == 0) return nullptr;
  void* p = base_ + used_;
  used_ += r;
  return p;
}

StatusOr<Tensor> AsFloat(const Tensor& t) {
  if (t.dtype() == DataType::kFloat) return t;
  ASSIGN_OR_RETURN(Tensor f, Tensor::Allocate(DataType::kFloat, t.shape()));
  switch (t.dtype()) {
    case DataType::kFloat16:
      ToFloat(t.data<Float16>(), f.data<float>(), t.NumElements());
      break;
    case DataType::kBFloat16:
      ToFloat(t.data<BFloat16>(), f.data<float>(), t.NumElements());
      break;
    case DataType::kDouble:
      ToFloat(t.data<double>(), f.data<float>(), t.NumElements());
      break;
    default:
      return MakeStatus(ErrorCode::NOT_IMPLEMENTED, "cannot compute element type ", DataTypeName(t.dtype()),
                        " via float");
  }
  return f;
}

void StoreFloat(const Tensor& src, Tensor* dst) {
  const float* s = src.data<float>();
  int64_t n = std::min(src.NumElements(), dst->NumElements());
  switch (dst->dtype()) {
    case DataType::kFloat:
      if (dst->raw_data() != src.raw_data()) std::memcpy(dst->raw_data(), s, n * sizeof(float));
      break;
    case DataType::kFloat16:
      FromFloat(s, dst->data<Float16>(), n);
      break;
    case DataType::kBFloat16:
      FromFloat(s, dst->data<BFloat16>(), n);
      break;
    case DataType::kDouble:
      for (int64_t i = 0; i < n; ++i) dst->data<double>()[i] = s[i];
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------------------------------

namespace {

// Visits the output positions of a window op with a fixed kernel offset `koff` (one index per spatial dim):
// for every output position, fn(out_index, in_index or -1 when the tap falls into padding). The last spatial dim
// is the inner loop so callers' bodies stay simple.
template <typename Fn>
void ForEachTap(const WindowGeom& g, const int64_t* koff, Fn&& fn) {
  const size_t r = g.rank();
  std::vector<int64_t> o(r, 0);
  const size_t last = r - 1;
  const int64_t out_last = g.out[last];
  const int64_t s_last = g.stride[last];
  const int64_t base_last = koff[last] * g.dilation[last] - g.pad_begin[last];
  const int64_t in_last = g.in[last];
  int64_t out_index = 0;
  const int64_t outer = out_last == 0 ? 0 : g.OutSize() / out_last;
  for (int64_t it = 0; it < outer; ++it) {
    // Input offset of the outer dims (or -1 when any of them is in the padding).
    int64_t in_off = 0;
    bool valid = true;
    for (size_t d = 0; d < last; ++d) {
      int64_t id = o[d] * g.stride[d] + koff[d] * g.dilation[d] - g.pad_begin[d];
      if (id < 0 || id >= g.in[d]) valid = false;
      in_off = in_off * g.in[d] + id;
    }
    in_off *= in_last;
    for (int64_t ol = 0; ol < out_last; ++ol, ++out_index) {
      int64_t il = ol * s_last + base_last;
      fn(out_index, valid && il >= 0 && il < in_last ? in_off + il : -1);
    }
    for (size_t d = last; d-- > 0;) {
      if (++o[d] < g.out[d]) break;
      o[d] = 0;
    }
  }
}

// acc + a * b; integer accumulations wrap (two's complement) as ONNX allows, without signed-overflow UB.
template <typename T>
inline T MulAdd(T acc, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(acc) + static_cast<U>(a) * static_cast<U>(b));
  } else {
    return acc + a * b;
  }
}

void UnravelKernel(const WindowGeom& g, int64_t kidx, int64_t* koff) {
  for (size_t d = g.rank(); d-- > 0;) {
    koff[d] = kidx % g.kernel[d];
    kidx /= g.kernel[d];
  }
}

}  // namespace

template <typename T>
Status ConvPlain(const WindowGeom& g, int64_t n, int64_t c, int64_t m, int64_t group, const T* x, const T* w,
               const T* bias, T* y, int num_threads) {
  const int64_t cg = c / group, mg = m / group;
  const int64_t ks = g.KernelSize(), in_size = g.InSize(), out_size = g.OutSize();
  const int64_t ck = cg * ks;
  if (out_size == 0) return Status::OK();
  std::unique_ptr<T[]> col(new (std::nothrow) T[static_cast<size_t>(ck * out_size)]);
  RETURN_ERROR_IF(!col, FAIL, "out of memory for a ", ck, "x", out_size, " im2col buffer");
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < group; ++gi) {
      const T* xg = x + (b * c + gi * cg) * in_size;
      T* colp = col.get();
      ParallelFor(num_threads, ck, static_cast<double>(out_size), [&](int64_t lo, int64_t hi) {
        std::vector<int64_t> koff(g.rank());
        for (int64_t row = lo; row < hi; ++row) {
          const int64_t ci = row / ks;
          UnravelKernel(g, row % ks, koff.data());
          const T* src = xg + ci * in_size;
          T* dst = colp + row * out_size;
          ForEachTap(g, koff.data(), [&](int64_t oi, int64_t ii) { dst[oi] = ii >= 0 ? src[ii] : T(0); });
        }
      });
      T* yg = y + (b * m + gi * mg) * out_size;
      const T* wg = w + gi * mg * ck;
      ParallelFor(num_threads, mg, static_cast<double>(ck * out_size), [&](int64_t lo, int64_t hi) {
        for (int64_t mi = lo; mi < hi; ++mi) {
          T* yr = yg + mi * out_size;
          const T bv = bias ? bias[gi * mg + mi] : T(0);
          for (int64_t p = 0; p < out_size; ++p) yr[p] = bv;
          for (int64_t kk = 0; kk < ck; ++kk) {
            const T wv = wg[mi * ck + kk];
            if (wv == T(0)) continue;
            const T* cr = colp + kk * out_size;
            for (int64_t p = 0; p < out_size; ++p) yr[p] = MulAdd(yr[p], wv, cr[p]);
          }
        }
      });
    }
  }
  return Status::OK();
}

template <typename T>
Status ConvTransposePlain(const WindowGeom& g, int64_t n, int64_t c, int64_t m, int64_t group, const T* x, const T* w,
                        const T* bias, T* y, int num_threads) {
  const int64_t cg = c / group, mg = m / group;
  const int64_t ks = g.KernelSize(), in_size = g.InSize(), out_size = g.OutSize();
  const int64_t rows = mg * ks;
  const size_t r = g.rank();
  std::unique_ptr<T[]> col(new (std::nothrow) T[static_cast<size_t>(std::max<int64_t>(rows * in_size, 1))]);
  RETURN_ERROR_IF(!col, FAIL, "out of memory for a ", rows, "x", in_size, " col2im buffer");
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < group; ++gi) {
      const T* xg = x + (b * c + gi * cg) * in_size;
      const T* wg = w + gi * cg * rows;  // [cg, mg * ks]
      T* colp = col.get();
      ParallelFor(num_threads, rows, static_cast<double>(cg * in_size), [&](int64_t lo, int64_t hi) {
        for (int64_t row = lo; row < hi; ++row) {
          T* cr = colp + row * in_size;
          for (int64_t p = 0; p < in_size; ++p) cr[p] = T(0);
          for (int64_t ci = 0; ci < cg; ++ci) {
            const T wv = wg[ci * rows + row];
            if (wv == T(0)) continue;
            const T* xr = xg + ci * in_size;
            for (int64_t p = 0; p < in_size; ++p) cr[p] = MulAdd(cr[p], wv, xr[p]);
          }
        }
      });
      T* yg = y + (b * m + gi * mg) * out_size;
      ParallelFor(num_threads, mg, static_cast<double>(ks * in_size), [&](int64_t lo, int64_t hi) {
        std::vector<int64_t> koff(r), ii(r);
        for (int64_t mi = lo; mi < hi; ++mi) {
          T* yr = yg + mi * out_size;
          for (int64_t kidx = 0; kidx < ks; ++kidx) {
            UnravelKernel(g, kidx, koff.data());
            const T* cr = colp + (mi * ks + kidx) * in_size;
            std::fill(ii.begin(), ii.end(), 0);
            for (int64_t p = 0; p < in_size; ++p) {
              int64_t off = 0;
              bool valid = true;
              for (size_t d = 0; d < r; ++d) {
                int64_t od = ii[d] * g.stride[d] + koff[d] * g.dilation[d] - g.pad_begin[d];
                if (od < 0 || od >= g.out[d]) {
                  valid = false;
                  break;
                }
                off = off * g.out[d] + od;
              }
              if (valid) yr[off] = MulAdd(yr[off], T(1), cr[p]);
              for (size_t d = r; d-- > 0;) {
                if (++ii[d] < g.in[d]) break;
                ii[d] = 0;
              }
            }
          }
          if (bias) {
            const T bv = bias[gi * mg + mi];
            for (int64_t p = 0; p < out_size; ++p) yr[p] = MulAdd(yr[p], T(1), bv);
          }
        }
      });
    }
  }
  return Status::OK();
}

template <typename T>
void GemmPlain(int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c, bool accumulate, int num_threads) {
  ParallelFor(num_threads, m, static_cast<double>(n * k), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      T* cr = c + i * n;
      if (!accumulate)
        for (int64_t j = 0; j < n; ++j) cr[j] = T(0);
      for (int64_t kk = 0; kk < k; ++kk) {
        const T av = a[i * k + kk];
        const T* br = b + kk * n;
        for (int64_t j = 0; j < n; ++j) cr[j] = MulAdd(cr[j], av, br[j]);
      }
    }
  });
}

#define EPCTX_NN_INSTANTIATE(T)                                                                                 \
  template Status ConvPlain<T>(const WindowGeom&, int64_t, int64_t, int64_t, int64_t, const T*, const T*, const T*, \
                             T*, int);                                                                          \
  template Status ConvTransposePlain<T>(const WindowGeom&, int64_t, int64_t, int64_t, int64_t, const T*, const T*,  \
                                      const T*, T*, int);                                                       \
  template void GemmPlain<T>(int64_t, int64_t, int64_t, const T*, const T*, T*, bool, int);
EPCTX_NN_INSTANTIATE(float)
EPCTX_NN_INSTANTIATE(double)
EPCTX_NN_INSTANTIATE(int32_t)
EPCTX_NN_INSTANTIATE(int64_t)
EPCTX_NN_INSTANTIATE(uint32_t)
EPCTX_NN_INSTANTIATE(uint64_t)
#undef EPCTX_NN_INSTANTIATE

dnnl::memory PackedConstantWeights(const dnnl::engine& eng, const dnnl::memory::desc& user,
                                   const dnnl::memory::desc& prim, const dnnl::reorder& reorder, void* data,
                                   std::vector<std::pair<dnnl::memory::desc, dnnl::memory>>* cache) {
  if (!reorder) return dnnl::memory(user, eng, data);
  for (const auto& [md, mem] : *cache)
    if (md == prim) return mem;
  dnnl::memory packed(prim, eng);
  dnnl::stream s(eng);
  dnnl::memory src(user, eng, data);
  reorder.execute(s, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, packed}});
  s.wait();
  cache->emplace_back(prim, packed);
  return packed;
}

}  // namespace nn
}  // namespace epctx
