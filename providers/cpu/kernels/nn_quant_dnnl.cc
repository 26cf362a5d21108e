// oneDNN int8 convolution and matmul for the quantized kernels; the rewrite of operands is in nn_quant_dnnl.h.
#include "providers/cpu/kernels/nn_quant_dnnl.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/parallel.h"
#include "providers/int8gemm/int8_gemm.h"

namespace epctx {
namespace nn {

using dnnl::memory;

bool Int8ProductsExact() {
  // avx2_vnni is left out on purpose: whether every oneDNN 2.6 int8 kernel uses VNNI there is not checked.
  static const bool exact = [] {
    const unsigned isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const unsigned vnni = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_vnni);
    return (isa & vnni) == vnni;
  }();
  return exact;
}

bool UseOwnInt8Gemm() {
  static const bool own = !Int8ProductsExact() && int8gemm::Available();
  return own;
}

void PackOwnWeights(const void* data, bool is_signed, int64_t k, int64_t n, int64_t stride_k, int64_t stride_n,
                    Int8Weights* out) {
  out->own = true;
  out->is_signed = is_signed;
  out->offset = 0;
  out->split = 1;
  out->data.resize(int8gemm::PackedBSize(k, n));
  out->sums.resize(static_cast<size_t>(n));
  int8gemm::PackB(data, is_signed, k, n, stride_k, stride_n, reinterpret_cast<uint8_t*>(out->data.data()),
                  out->sums.data());
}

namespace {

// The s8 value of weight byte `b` with `offset` removed, and its two halves in [-64, 64].
inline int32_t WeightValue(uint8_t b, bool is_signed) {
  return is_signed ? static_cast<int32_t>(static_cast<int8_t>(b)) : static_cast<int32_t>(b) - 128;
}
inline int8_t Half(int32_t v, int64_t s) {
  const int32_t lo = v >> 1;  // floor(v / 2) in [-64, 63]; v - lo in [-64, 64]
  return static_cast<int8_t>(s == 0 ? lo : v - lo);
}

// Tags of the channels-last layouts for 2-D and 3-D spatial.
memory::format_tag ChannelsLastTag(size_t spatial) {
  return spatial == 2 ? memory::format_tag::nhwc : memory::format_tag::ndhwc;
}

}  // namespace

void PrepareConvWeights(const Tensor& w, int64_t group, int split, Int8Weights* out) {
  const int64_t m = w.dim(0);
  const int64_t per = m ? w.NumElements() / m : 0;
  const int64_t mg = m / group;
  const bool is_signed = w.dtype() == DataType::kInt8;
  const uint8_t* raw = static_cast<const uint8_t*>(w.raw_data());
  out->offset = is_signed ? 0 : 128;
  out->split = split;
  out->data.resize(static_cast<size_t>(w.NumElements() * split));
  out->sums.assign(static_cast<size_t>(m), 0);
  for (int64_t oc = 0; oc < m; ++oc) {
    const int64_t g = oc / mg, j = oc % mg;
    const uint8_t* src = raw + oc * per;
    int32_t sum = 0;
    for (int64_t i = 0; i < per; ++i) sum += WeightValue(src[i], is_signed);
    out->sums[oc] = sum;
    for (int64_t s = 0; s < split; ++s) {
      int8_t* dst = out->data.data() + ((g * split + s) * mg + j) * per;
      for (int64_t i = 0; i < per; ++i) {
        const int32_t v = WeightValue(src[i], is_signed);
        dst[i] = split == 1 ? static_cast<int8_t>(v) : Half(v, s);
      }
    }
  }
}

void PrepareMatMulWeights(const void* data, bool is_signed, int64_t mats, int64_t k, int64_t n, int split,
                          Int8Weights* out) {
  const uint8_t* raw = static_cast<const uint8_t*>(data);
  out->offset = is_signed ? 0 : 128;
  out->split = split;
  out->data.resize(static_cast<size_t>(mats * k * n * split));
  out->sums.assign(static_cast<size_t>(mats * n), 0);
  for (int64_t b = 0; b < mats; ++b) {
    int32_t* sums = out->sums.data() + b * n;
    for (int64_t r = 0; r < k; ++r) {
      const uint8_t* src = raw + (b * k + r) * n;
      int8_t* dst = out->data.data() + (b * k + r) * n * split;
      for (int64_t j = 0; j < n; ++j) {
        const int32_t v = WeightValue(src[j], is_signed);
        sums[j] += v;
        if (split == 1) {
          dst[j] = static_cast<int8_t>(v);
        } else {
          dst[j] = Half(v, 0);
          dst[n + j] = Half(v, 1);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Convolution.

struct Int8ConvRunner::Plan {
  bool own = false;  // the product runs on int8gemm (OwnPointwise); prim, w_* and scratch_md are then unused
  dnnl::primitive prim;
  // src_md: the padded channels-last source; dst_md: the channels-last accumulators.
  memory::desc src_md, dst_md, w_user, w_prim, scratch_md;
  dnnl::reorder w_reorder;  // empty when the primitive takes the plain layout
  memory packed_w;          // constant weights in w_prim (else empty)
  // The geometry lifted to 3 spatial dims (leading 1s) for our own loops.
  int64_t in[3], out[3], padded[3], kernel[3], stride[3], dilation[3], pad_begin[3];
  size_t scratch_total = 0;
};

int ConvWeightSplit(int64_t c_per_group, int64_t m_per_group) {
  // oneDNN 2.6's depthwise int8 kernels (jit_uni_x8s8s32x_dw) widen every byte to int32 and multiply with vpmulld:
  // exact at every ISA (Int8Conv.DepthwiseWithoutSplitIsExactAtExtremes checks it with 255 x -128 windows). A split
  // depthwise convolution has 2 output channels per group, which no depthwise kernel takes: it ran as ref_int8,
  // 10-100x slower (the QDQ PP-OCR detector at AVX2: 240 ms against ORT's 24 ms).
  if (Int8ProductsExact() || (c_per_group == 1 && m_per_group == 1)) return 1;
  return 2;
}

bool ConvOnOwnGemm(int64_t group, int64_t kernel_size) {
  return group == 1 && kernel_size == 1 && UseOwnInt8Gemm();
}

namespace {

// Pointwise weights [M, C, 1...] packed for int8gemm as the [C, M] matrix of a product [pixels, C] x [C, M].
void PackPointwiseWeights(const Tensor& w, Int8Weights* out) {
  const int64_t m = w.dim(0), c = w.dim(1);
  PackOwnWeights(w.raw_data(), w.dtype() == DataType::kInt8, c, m, 1, c, out);
}

}  // namespace

Int8ConvRunner::Int8ConvRunner() = default;

void Int8ConvRunner::SetConstantWeights(const Tensor& w, int64_t group) {
  const_w_ = std::make_unique<Int8Weights>();
  const int64_t m = w.dim(0);
  if (ConvOnOwnGemm(group, m ? w.NumElements() / (m * w.dim(1)) : 0)) {
    PackPointwiseWeights(w, const_w_.get());
    return;
  }
  PrepareConvWeights(w, group, ConvWeightSplit(w.dim(1), w.dim(0) / group), const_w_.get());
}

StatusOr<std::shared_ptr<const Int8ConvRunner::Plan>> Int8ConvRunner::GetPlan(const Int8ConvProblem& p,
                                                                               int threads) const {
  const WindowGeom& g = p.g;
  const size_t r = g.rank();
  std::vector<int64_t> key{p.n, p.c, p.m, p.group, threads};
  for (const auto* v : {&g.in, &g.kernel, &g.stride, &g.dilation, &g.pad_begin, &g.pad_end, &g.out})
    key.insert(key.end(), v->begin(), v->end());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  auto plan = std::make_shared<Plan>();
  const size_t lift = 3 - r;
  for (size_t i = 0; i < 3; ++i) {
    const bool real = i >= lift;
    const size_t a = real ? i - lift : 0;
    plan->in[i] = real ? g.in[a] : 1;
    plan->out[i] = real ? g.out[a] : 1;
    plan->kernel[i] = real ? g.kernel[a] : 1;
    plan->stride[i] = real ? g.stride[a] : 1;
    plan->dilation[i] = real ? g.dilation[a] : 1;
    plan->pad_begin[i] = real ? g.pad_begin[a] : 0;
    plan->padded[i] = real ? g.in[a] + g.pad_begin[a] + g.pad_end[a] : 1;
  }
  // oneDNN runs 1-D as 2-D (H = 1); the padding is explicit, so the primitive has none.
  const size_t sr = std::max<size_t>(r, 2);
  const int64_t cg = p.c / p.group, ocs = p.m * ConvWeightSplit(cg, p.m / p.group);
  memory::dims src_dims{p.n, p.c}, dst_dims{p.n, ocs}, w_dims, strides, dil, zero(sr, 0);
  if (p.group > 1) w_dims = {p.group, ocs / p.group, cg};
  else w_dims = {ocs, p.c};
  for (size_t i = 3 - sr; i < 3; ++i) {
    src_dims.push_back(plan->padded[i]);
    dst_dims.push_back(plan->out[i]);
    w_dims.push_back(plan->kernel[i]);
    strides.push_back(plan->stride[i]);
    dil.push_back(plan->dilation[i] - 1);
  }
  plan->own = ConvOnOwnGemm(p.group, g.KernelSize());
  ScopedOmpThreads omp(threads);
  Status st = DnnlCall("int8 convolution setup", [&] {
    const dnnl::engine& eng = CpuEngine();
    plan->src_md = memory::desc(src_dims, memory::data_type::u8, ChannelsLastTag(sr));
    plan->dst_md = memory::desc(dst_dims, memory::data_type::s32, ChannelsLastTag(sr));
    if (plan->own) return;
    plan->w_user = PlainDesc(w_dims, memory::data_type::s8);
    const memory::desc w_any(w_dims, memory::data_type::s8, memory::format_tag::any);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      plan->src_md, w_any, memory::desc(), plan->dst_md, strides, dil, zero, zero);
    dnnl::convolution_forward::primitive_desc pd(d, UserScratchpadAttr(), eng);
    plan->w_prim = pd.weights_desc();
    plan->scratch_md = pd.scratchpad_desc();
    plan->prim = dnnl::convolution_forward(pd);
    if (plan->w_prim != plan->w_user)
      plan->w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->w_user, eng, plan->w_prim));
    if (const_w_)
      plan->packed_w = PackedConstantWeights(eng, plan->w_user, plan->w_prim, plan->w_reorder,
                                             const_cast<int8_t*>(const_w_->data.data()), &packed_);
  });
  std::shared_ptr<const Plan> result;
  if (st.ok()) {
    const int64_t in_size = plan->in[0] * plan->in[1] * plan->in[2];
    const int64_t out_size = plan->out[0] * plan->out[1] * plan->out[2];
    size_t total = ScratchCarver::Rounded(plan->src_md.get_size()) + ScratchCarver::Rounded(plan->dst_md.get_size()) +
                   ScratchCarver::Rounded(plan->scratch_md.get_size()) +
                   // int8gemm's strided source: the pixels the outputs read, gathered as rows of C bytes
                   (plan->own ? ScratchCarver::Rounded(static_cast<size_t>(p.n * g.OutSize() * p.c)) : 0) +
                   ScratchCarver::Rounded(static_cast<size_t>(p.n * p.group * in_size) * 4) +
                   ScratchCarver::Rounded(static_cast<size_t>(p.n * p.group * out_size) * 4);
    if (!const_w_ && plan->w_reorder) total += ScratchCarver::Rounded(plan->w_prim.get_size());
    plan->scratch_total = total;
    result = std::move(plan);
  }
  if (plans_.size() >= kMaxCachedShapes) plans_.clear();
  plans_[key] = result;
  return result;
}

void Int8ConvRunner::Prepare(const Int8ConvProblem& p, int threads) const {
  const WindowGeom& g = p.g;
  if (g.rank() < 1 || g.rank() > 3 || p.c == 0 || p.m == 0 || p.n == 0 || p.group < 1) return;
  const int split = ConvOnOwnGemm(p.group, g.KernelSize()) ? 1 : ConvWeightSplit(p.c / p.group, p.m / p.group);
  const int64_t macs = p.n * p.m * g.OutSize() * (p.c / p.group) * g.KernelSize() * split;
  (void)GetPlan(p, ThreadsForWork(macs, threads));
}

Status Int8ConvRunner::Run(const Int8ConvProblem& p, const Tensor& x, int32_t xz, const Tensor* w,
                           const std::vector<int32_t>& wz, const int32_t* bias, const Int8Output& out,
                           int threads) const {
  const WindowGeom& g = p.g;
  RETURN_ERROR_IF(g.rank() < 1 || g.rank() > 3, NOT_IMPLEMENTED, "int8 convolution with ", g.rank(),
                  " spatial dims");
  RETURN_ERROR_IF(p.c == 0 || p.m == 0 || p.n == 0, NOT_IMPLEMENTED, "int8 convolution of an empty tensor");
  const bool own = ConvOnOwnGemm(p.group, g.KernelSize());
  const int split = own ? 1 : ConvWeightSplit(p.c / p.group, p.m / p.group);
  RETURN_ERROR_IF(const_w_ && (const_w_->split != split || const_w_->own != own), FAIL,
                  "int8 convolution weights prepared for ", const_w_->split, " halves", const_w_->own ? " (int8gemm)" : "",
                  " but the problem needs ", split, own ? " (int8gemm)" : "", " (group ", p.group, ", ", p.c,
                  " channels)");
  const int64_t macs = p.n * p.m * g.OutSize() * (p.c / p.group) * g.KernelSize() * split;
  const int th = ThreadsForWork(macs, threads);
  ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, GetPlan(p, th));
  RETURN_ERROR_IF(!plan, NOT_IMPLEMENTED, "oneDNN has no int8 convolution for this problem");
  Int8Weights runtime_w;
  const Int8Weights* wt = const_w_.get();
  if (!wt) {
    if (own) PackPointwiseWeights(*w, &runtime_w);
    else PrepareConvWeights(*w, p.group, split, &runtime_w);
    wt = &runtime_w;
  }
  const bool x_signed = x.dtype() == DataType::kInt8;
  const uint8_t flip = x_signed ? 0x80 : 0;
  const int32_t xz_u = xz + (x_signed ? 128 : 0);
  const int64_t n = p.n, c = p.c, m = p.m, group = p.group, cg = c / group, mg = m / group;
  const int64_t D = plan->in[0], H = plan->in[1], W = plan->in[2];
  const int64_t in_size = D * H * W;
  const int64_t OD = plan->out[0], OH = plan->out[1], OW = plan->out[2];
  const int64_t out_size = OD * OH * OW;
  const int64_t ocs = m * split;

  ScratchCarver scratch(plan->scratch_total);
  RETURN_ERROR_IF(!scratch.ok(), FAIL, "out of memory for ", plan->scratch_total, " bytes of convolution scratch");
  uint8_t* src = static_cast<uint8_t*>(scratch.Take(plan->src_md.get_size()));
  int32_t* acc = static_cast<int32_t*>(scratch.Take(plan->dst_md.get_size()));
  int32_t* sums = static_cast<int32_t*>(scratch.Take(static_cast<size_t>(n * group * in_size) * 4));
  int32_t* win = static_cast<int32_t*>(scratch.Take(static_cast<size_t>(n * group * out_size) * 4));
  const uint8_t* xp = static_cast<const uint8_t*>(x.raw_data());

  RETURN_IF_ERROR(DnnlCall("int8 convolution", [&] {
    ScopedOmpThreads omp(th);
    const dnnl::engine& eng = CpuEngine();
    dnnl::stream s(eng);
    // The padded channels-last source, the padding holding the zero point; a signed source is copied as bytes
    // and then has its top bits flipped (x + 128), padding included.
    // Our own transposition, 64 pixels at a time (the block of the destination stays in L1): oneDNN 2.6's u8
    // plain -> nhwc reorder into the padded interior took as long as the convolutions (ISNet).
    std::memset(src, static_cast<uint8_t>(xz_u), plan->src_md.get_size());
    const int64_t Hp = plan->padded[1], Wp = plan->padded[2];
    const int64_t* pb = plan->pad_begin;
    ParallelFor(threads, n * D * H, static_cast<double>(W * c), [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row) {
        const int64_t b = row / (D * H), d = row / H % D, h = row % H;
        uint8_t* __restrict dst = src + (((b * plan->padded[0] + d + pb[0]) * Hp + h + pb[1]) * Wp + pb[2]) * c;
        const uint8_t* __restrict sp = xp + (b * c * D + d) * H * W + h * W;
        for (int64_t w0 = 0; w0 < W; w0 += 64) {
          const int64_t wn = std::min<int64_t>(64, W - w0);
          for (int64_t ch = 0; ch < c; ++ch) {
            const uint8_t* __restrict sc = sp + ch * in_size + w0;
            uint8_t* __restrict dc = dst + w0 * c + ch;
            for (int64_t i = 0; i < wn; ++i) dc[i * c] = sc[i] ^ flip;
          }
        }
      }
    });
    if (plan->own) {
      // [pixels, C] x [C, M]: with stride 1 the padded source is the matrix itself; otherwise the pixels the
      // outputs read are gathered first.
      const uint8_t* a = src;
      const int64_t* st3 = plan->stride;
      if (st3[0] != 1 || st3[1] != 1 || st3[2] != 1) {
        uint8_t* gathered = static_cast<uint8_t*>(scratch.Take(static_cast<size_t>(n * out_size * c)));
        const int64_t Dp = plan->padded[0];
        ParallelFor(threads, n * OD * OH, static_cast<double>(OW * c), [&](int64_t lo, int64_t hi) {
          for (int64_t row = lo; row < hi; ++row) {
            const int64_t b = row / (OD * OH), od = row / OH % OD, oh = row % OH;
            const uint8_t* sp = src + ((b * Dp + od * st3[0]) * Hp + oh * st3[1]) * Wp * c;
            uint8_t* dp = gathered + row * OW * c;
            for (int64_t ow = 0; ow < OW; ++ow) std::memcpy(dp + ow * c, sp + ow * st3[2] * c, static_cast<size_t>(c));
          }
        });
        a = gathered;
      }
      int8gemm::Gemm(a, c, n * out_size, c, m, reinterpret_cast<const uint8_t*>(wt->data.data()), wt->is_signed, acc,
                     m, th);
      return;
    }
    memory wts = plan->packed_w;
    if (!wts) {
      memory w_user(plan->w_user, eng, const_cast<int8_t*>(wt->data.data()));
      wts = w_user;
      if (plan->w_reorder) {
        wts = memory(plan->w_prim, eng, scratch.Take(plan->w_prim.get_size()));
        plan->w_reorder.execute(s, {{DNNL_ARG_FROM, w_user}, {DNNL_ARG_TO, wts}});
      }
    }
    memory dst(plan->dst_md, eng, acc);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(plan->src_md, eng, src)}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DST, dst}};
    if (plan->scratch_md.get_size() > 0)
      args[DNNL_ARG_SCRATCHPAD] = memory(plan->scratch_md, eng, scratch.Take(plan->scratch_md.get_size()));
    plan->prim.execute(s, args);
    s.wait();
  }));

  // (offset - wz[m]) * sum over the window of (x - xz): the sums per pixel over the group's channels, then per
  // window over the taps inside the input (the padding adds 0).
  std::vector<int32_t> corr(static_cast<size_t>(m));
  bool need_win = false;
  for (int64_t i = 0; i < m; ++i) {
    corr[i] = wt->offset - wz[wz.size() == 1 ? 0 : i];
    need_win |= corr[i] != 0;
  }
  if (need_win) {
    ParallelFor(threads, n * group, static_cast<double>(cg * in_size), [&](int64_t lo, int64_t hi) {
      for (int64_t bg = lo; bg < hi; ++bg) {
        int32_t* __restrict s = sums + bg * in_size;
        std::fill(s, s + in_size, -static_cast<int32_t>(cg) * xz_u);
        const int64_t b = bg / group, gi = bg % group;
        for (int64_t ch = gi * cg; ch < (gi + 1) * cg; ++ch) {
          const uint8_t* __restrict xs = xp + (b * c + ch) * in_size;
          for (int64_t q = 0; q < in_size; ++q) s[q] += static_cast<int32_t>(static_cast<uint8_t>(xs[q] ^ flip));
        }
      }
    });
    const int64_t* k = plan->kernel;
    const int64_t* st3 = plan->stride;
    const int64_t* dl = plan->dilation;
    const int64_t* pb = plan->pad_begin;
    ParallelFor(threads, n * group * OD * OH, static_cast<double>(OW * k[0] * k[1] * k[2]), [&](int64_t lo,
                                                                                               int64_t hi) {
      for (int64_t row = lo; row < hi; ++row) {
        const int64_t bg = row / (OD * OH), od = row / OH % OD, oh = row % OH;
        int32_t* __restrict t = win + bg * out_size + (od * OH + oh) * OW;
        std::fill(t, t + OW, 0);
        const int32_t* s = sums + bg * in_size;
        for (int64_t kd = 0; kd < k[0]; ++kd) {
          const int64_t id = od * st3[0] - pb[0] + kd * dl[0];
          if (id < 0 || id >= D) continue;
          for (int64_t kh = 0; kh < k[1]; ++kh) {
            const int64_t ih = oh * st3[1] - pb[1] + kh * dl[1];
            if (ih < 0 || ih >= H) continue;
            const int32_t* __restrict srow = s + (id * H + ih) * W;
            for (int64_t kw = 0; kw < k[2]; ++kw) {
              // ow with 0 <= ow * stride + off < W.
              const int64_t off = kw * dl[2] - pb[2], sw = st3[2];
              const int64_t ow_lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
              const int64_t ow_hi = std::min(OW, W - off <= 0 ? int64_t{0} : (W - off - 1) / sw + 1);
              if (sw == 1) {
                for (int64_t ow = ow_lo; ow < ow_hi; ++ow) t[ow] += srow[ow + off];
              } else {
                for (int64_t ow = ow_lo; ow < ow_hi; ++ow) t[ow] += srow[ow * sw + off];
              }
            }
          }
        }
      }
    });
  }

  // y[b, oc, p] = acc (both halves) - xz * sum w' + corr * window sum (+ bias), then the float epilogue. The
  // channels-last accumulators are transposed through a tile of kTile pixels x 16 channels (in L1; oneDNN 2.6's
  // s32 nhwc -> nchw reorder took as long as the convolutions), each channel row then finished with contiguous,
  // vectorized loops.
  constexpr int64_t kTile = 64, kCh = 16;
  const int64_t tiles = (out_size + kTile - 1) / kTile, cblocks = (m + kCh - 1) / kCh;
  ParallelFor(threads, n * tiles * cblocks, static_cast<double>(kTile * kCh * 3), [&](int64_t lo, int64_t hi) {
    alignas(64) uint32_t tile[kCh][kTile];
    for (int64_t job = lo; job < hi; ++job) {
      const int64_t b = job / (tiles * cblocks), tl = job / cblocks % tiles, cb = job % cblocks;
      const int64_t p0 = tl * kTile, cnt = std::min(kTile, out_size - p0);
      const int64_t oc0 = cb * kCh, ocn = std::min(kCh, m - oc0);
      const int32_t* __restrict a = acc + (b * out_size + p0) * ocs;
      // The accumulator column of each channel, computed once per tile. Channels of one group sit side by side
      // (always without the split): read them as a row, so g++ does not vectorize the gather of columns with
      // vpgatherqd, which Zen 4 runs slowly (this loop was a quarter of a QDQ detector's run).
      int64_t col[kCh];
      for (int64_t k = 0; k < ocn; ++k) col[k] = (oc0 + k) / mg * split * mg + (oc0 + k) % mg;
      if (col[ocn - 1] - col[0] == ocn - 1) {
        const int32_t* __restrict a0 = a + col[0];
        const int64_t second = split == 2 ? mg : 0;
        for (int64_t i = 0; i < cnt; ++i) {
          const int32_t* __restrict ar = a0 + i * ocs;
          for (int64_t k = 0; k < ocn; ++k)
            tile[k][i] = static_cast<uint32_t>(ar[k]) + (second ? static_cast<uint32_t>(ar[k + second]) : 0u);
        }
      } else {
        for (int64_t i = 0; i < cnt; ++i) {
          const int32_t* __restrict ar = a + i * ocs;
          for (int64_t k = 0; k < ocn; ++k) {
            const int64_t c0 = col[k];
            uint32_t v = static_cast<uint32_t>(ar[c0]);
            if (split == 2) v += static_cast<uint32_t>(ar[c0 + mg]);
            tile[k][i] = v;
          }
        }
      }
      for (int64_t k = 0; k < ocn; ++k) {
        const int64_t oc = oc0 + k, gi = oc / mg;
        uint32_t* __restrict v = tile[k];
        const int32_t* __restrict t = win + (b * group + gi) * out_size + p0;
        const uint32_t base = static_cast<uint32_t>(bias ? bias[oc] : 0) -
                              static_cast<uint32_t>(xz_u) * static_cast<uint32_t>(wt->sums[oc]);
        const uint32_t cr = static_cast<uint32_t>(corr[oc]);
        const int64_t y0 = (b * m + oc) * out_size + p0;
        if (need_win)
          for (int64_t i = 0; i < cnt; ++i) v[i] += base + cr * static_cast<uint32_t>(t[i]);
        else
          for (int64_t i = 0; i < cnt; ++i) v[i] += base;
        if (out.i32) {
          int32_t* __restrict y = out.i32 + y0;
          for (int64_t i = 0; i < cnt; ++i) y[i] = static_cast<int32_t>(v[i]);
        } else if (out.q) {
          const float qs = out.q_scale[oc], qz = out.q_zero_point;
          if (out.q_signed) {
            int8_t* __restrict y = static_cast<int8_t*>(out.q) + y0;
            for (int64_t i = 0; i < cnt; ++i) y[i] = QuantizeValue<int8_t>(static_cast<float>(static_cast<int32_t>(v[i])) * qs, qz);
          } else {
            uint8_t* __restrict y = static_cast<uint8_t*>(out.q) + y0;
            for (int64_t i = 0; i < cnt; ++i) y[i] = QuantizeValue<uint8_t>(static_cast<float>(static_cast<int32_t>(v[i])) * qs, qz);
          }
        } else {
          float* __restrict y = out.f32 + y0;
          const float scale = out.scale, fb = out.bias ? out.bias[oc] : 0.f;
          const bool has_bias = out.bias != nullptr, relu = out.relu;
          for (int64_t i = 0; i < cnt; ++i) {
            float f = static_cast<float>(static_cast<int32_t>(v[i])) * scale;
            if (has_bias) f = f + fb;
            if (relu) f = f > 0.f ? f : 0.f;
            y[i] = f;
          }
        }
      }
    }
  });
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------------------------
// Matmul.

struct Int8MatMulRunner::Plan {
  dnnl::primitive prim;
  memory::desc a_md, dst_md, w_user, w_prim, scratch_md;
  dnnl::reorder w_reorder;
  memory packed_w;
  size_t scratch_total = 0;
};

Int8MatMulRunner::Int8MatMulRunner() : split_(Int8ProductsExact() || UseOwnInt8Gemm() ? 1 : 2), own_(UseOwnInt8Gemm()) {}

void Int8MatMulRunner::SetConstantWeights(const Tensor& b) {
  const_w_ = std::make_unique<Int8Weights>();
  const_k_ = b.dim(0);
  const_n_ = b.dim(1);
  if (own_) {
    PackOwnWeights(b.raw_data(), b.dtype() == DataType::kInt8, const_k_, const_n_, const_n_, 1, const_w_.get());
    return;
  }
  PrepareMatMulWeights(b.raw_data(), b.dtype() == DataType::kInt8, 1, const_k_, const_n_, split_, const_w_.get());
}

StatusOr<std::shared_ptr<const Int8MatMulRunner::Plan>> Int8MatMulRunner::GetPlan(int64_t rows, int64_t k, int64_t n,
                                                                                   bool constant, int threads) const {
  std::vector<int64_t> key{rows, k, n, constant, threads};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  auto plan = std::make_shared<Plan>();
  ScopedOmpThreads omp(threads);
  Status st = DnnlCall("int8 matmul setup", [&] {
    const dnnl::engine& eng = CpuEngine();
    plan->a_md = PlainDesc({rows, k}, memory::data_type::u8);
    plan->dst_md = PlainDesc({rows, n * split_}, memory::data_type::s32);
    plan->w_user = PlainDesc({k, n * split_}, memory::data_type::s8);
    const memory::desc w_any = constant ? memory::desc({k, n * split_}, memory::data_type::s8, memory::format_tag::any)
                                        : plan->w_user;
    dnnl::matmul::desc d(plan->a_md, w_any, plan->dst_md);
    dnnl::matmul::primitive_desc pd(d, UserScratchpadAttr(), eng);
    plan->w_prim = pd.weights_desc();
    plan->scratch_md = pd.scratchpad_desc();
    plan->prim = dnnl::matmul(pd);
    if (plan->w_prim != plan->w_user)
      plan->w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->w_user, eng, plan->w_prim));
    if (constant)
      plan->packed_w = PackedConstantWeights(eng, plan->w_user, plan->w_prim, plan->w_reorder,
                                             const_cast<int8_t*>(const_w_->data.data()), &packed_);
  });
  std::shared_ptr<const Plan> result;
  if (st.ok()) {
    plan->scratch_total = ScratchCarver::Rounded(plan->a_md.get_size()) +
                          ScratchCarver::Rounded(plan->dst_md.get_size()) +
                          ScratchCarver::Rounded(plan->scratch_md.get_size()) +
                          ScratchCarver::Rounded(static_cast<size_t>(rows) * 4);
    if (!constant && plan->w_reorder) plan->scratch_total += ScratchCarver::Rounded(plan->w_prim.get_size());
    result = std::move(plan);
  }
  if (plans_.size() >= kMaxCachedShapes) plans_.clear();
  plans_[key] = result;
  return result;
}

void Int8MatMulRunner::Prepare(int64_t rows, int threads) const {
  // Our own kernel (own_) has no plan: its weights were packed by SetConstantWeights.
  if (own_ || !const_w_ || rows <= 0 || const_k_ == 0 || const_n_ == 0) return;
  (void)GetPlan(rows, const_k_, const_n_, true, ThreadsForWork(rows * const_k_ * const_n_ * split_, threads));
}

Status Int8MatMulRunner::Run(const void* a, bool a_signed, int64_t rows, int64_t k, int64_t n,
                             const std::vector<int32_t>& az, const void* b_data, bool b_signed,
                             const std::vector<int32_t>& bz, const Int8Output& out, int threads) const {
  RETURN_ERROR_IF(rows == 0 || k == 0 || n == 0, NOT_IMPLEMENTED, "int8 matmul of an empty matrix");
  const bool constant = const_w_ != nullptr;
  RETURN_ERROR_IF(constant && (k != const_k_ || n != const_n_), INVALID_ARGUMENT, "b is [", const_k_, ", ",
                  const_n_, "] but the product needs [", k, ", ", n, "]");
  const int th = ThreadsForWork(rows * k * n * split_, threads);
  std::shared_ptr<const Plan> plan;
  if (!own_) {
    ASSIGN_OR_RETURN(plan, GetPlan(rows, k, n, constant, th));
    RETURN_ERROR_IF(!plan, NOT_IMPLEMENTED, "oneDNN has no int8 matmul for this problem");
  }
  Int8Weights runtime_w;
  const Int8Weights* wt = const_w_.get();
  if (!wt) {
    if (own_)
      PackOwnWeights(b_data, b_signed, k, n, n, 1, &runtime_w);
    else
      PrepareMatMulWeights(b_data, b_signed, 1, k, n, split_, &runtime_w);
    wt = &runtime_w;
  }
  const size_t a_bytes = static_cast<size_t>(rows * k), acc_bytes = static_cast<size_t>(rows * n * split_) * 4;
  const size_t scratch_total =
      own_ ? ScratchCarver::Rounded(a_bytes) + ScratchCarver::Rounded(acc_bytes) : plan->scratch_total;
  ScratchCarver scratch(scratch_total);
  RETURN_ERROR_IF(!scratch.ok(), FAIL, "out of memory for ", scratch_total, " bytes of matmul scratch");
  const int64_t ns = n * split_;
  const uint8_t* au = static_cast<const uint8_t*>(a);
  if (a_signed) {
    uint8_t* flipped = static_cast<uint8_t*>(scratch.Take(a_bytes));
    const uint8_t* raw = au;
    ParallelFor(threads, rows, static_cast<double>(k), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo * k; i < hi * k; ++i) flipped[i] = raw[i] ^ 0x80;
    });
    au = flipped;
  }
  const int32_t a_shift = a_signed ? 128 : 0;
  // Accumulate in place when the output is int32 with no halves to add.
  const bool in_place = out.i32 && split_ == 1;
  int32_t* acc = in_place ? out.i32 : static_cast<int32_t*>(scratch.Take(acc_bytes));
  if (own_) {
    int8gemm::Gemm(au, k, rows, k, n, reinterpret_cast<const uint8_t*>(wt->data.data()), wt->is_signed, acc, n, th);
  } else {
    RETURN_IF_ERROR(DnnlCall("int8 matmul", [&] {
      ScopedOmpThreads omp(th);
      const dnnl::engine& eng = CpuEngine();
      dnnl::stream s(eng);
      memory wts = plan->packed_w;
      if (!wts) {
        memory w_user(plan->w_user, eng, const_cast<int8_t*>(wt->data.data()));
        wts = w_user;
        if (plan->w_reorder) {
          wts = memory(plan->w_prim, eng, scratch.Take(plan->w_prim.get_size()));
          plan->w_reorder.execute(s, {{DNNL_ARG_FROM, w_user}, {DNNL_ARG_TO, wts}});
        }
      }
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(plan->a_md, eng, const_cast<uint8_t*>(au))},
                                           {DNNL_ARG_WEIGHTS, wts},
                                           {DNNL_ARG_DST, memory(plan->dst_md, eng, acc)}};
      if (plan->scratch_md.get_size() > 0)
        args[DNNL_ARG_SCRATCHPAD] = memory(plan->scratch_md, eng, scratch.Take(plan->scratch_md.get_size()));
      plan->prim.execute(s, args);
      s.wait();
    }));
  }
  // (offset - bz[j]) * sum_k (a - az): row sums of A only when some column needs them.
  std::vector<uint32_t> corr(static_cast<size_t>(n));
  bool need_rows = false;
  for (int64_t j = 0; j < n; ++j) {
    corr[j] = static_cast<uint32_t>(wt->offset - bz[bz.size() == 1 ? 0 : j]);
    need_rows |= corr[j] != 0;
  }
  ParallelFor(threads, rows, static_cast<double>(n * 2 + (need_rows ? k : 0)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const uint32_t azi = static_cast<uint32_t>(az[az.size() == 1 ? 0 : i] + a_shift);
      uint32_t row_sum = 0;
      if (need_rows) {
        const uint8_t* ar = au + i * k;
        for (int64_t q = 0; q < k; ++q) row_sum += ar[q];
        row_sum -= azi * static_cast<uint32_t>(k);
      }
      // Locals and restrict pointers: stores through `out` would otherwise force reloads and keep the loop scalar.
      const int32_t* __restrict src = acc + i * ns;
      const int32_t* __restrict src2 = src + n;
      const uint32_t* __restrict bs = reinterpret_cast<const uint32_t*>(wt->sums.data());
      const uint32_t* __restrict cr = corr.data();
      const bool two = split_ == 2;
      if (out.i32) {
        int32_t* __restrict y = out.i32 + i * n;
        for (int64_t j = 0; j < n; ++j) {
          uint32_t v = static_cast<uint32_t>(src[j]) - azi * bs[j] + cr[j] * row_sum;
          if (two) v += static_cast<uint32_t>(src2[j]);
          y[j] = static_cast<int32_t>(v);
        }
      } else {
        float* __restrict y = out.f32 + i * n;
        const float scale = out.scale;
        const float* __restrict fb = out.bias;
        const bool relu = out.relu;
        for (int64_t j = 0; j < n; ++j) {
          uint32_t v = static_cast<uint32_t>(src[j]) - azi * bs[j] + cr[j] * row_sum;
          if (two) v += static_cast<uint32_t>(src2[j]);
          float f = static_cast<float>(static_cast<int32_t>(v)) * scale;
          if (fb) f = f + fb[j];
          if (relu) f = f > 0.f ? f : 0.f;
          y[j] = f;
        }
      }
    }
  });
  return Status::OK();
}

}  // namespace nn
}  // namespace epctx
