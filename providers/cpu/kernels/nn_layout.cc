// The activation layouts of providers/cpu/layout.h: shape mapping, the question to oneDNN, and the internal ops the
// session's layout pass inserts (epctx.cpu::Reorder, epctx.cpu::GlobalAveragePool on a laid-out value).
#include <map>
#include <mutex>

#include "core/parallel.h"
#include "providers/cpu/kernels/nn_common.h"
#include "providers/cpu/layout.h"

namespace epctx {

namespace {

struct LayoutEntry {
  CpuLayout layout;
  const char* name;
  int64_t block;
};
constexpr LayoutEntry kLayouts[] = {{CpuLayout::kPlain, "plain", 0},
                                    {CpuLayout::kChannelsLast, "nhwc", 0},
                                    {CpuLayout::kBlocked8, "nChw8c", 8},
                                    {CpuLayout::kBlocked16, "nChw16c", 16}};

const LayoutEntry& Entry(CpuLayout layout) {
  for (const LayoutEntry& e : kLayouts)
    if (e.layout == layout) return e;
  return kLayouts[0];
}

}  // namespace

const char* CpuLayoutName(CpuLayout layout) { return Entry(layout).name; }

bool ParseCpuLayout(const std::string& name, CpuLayout* layout) {
  for (const LayoutEntry& e : kLayouts)
    if (name == e.name) {
      *layout = e.layout;
      return true;
    }
  return false;
}

int64_t CpuLayoutBlock(CpuLayout layout) { return Entry(layout).block; }

bool CpuLayoutFits(CpuLayout layout, int64_t channels) {
  if (layout == CpuLayout::kPlain || channels <= 0) return false;
  const int64_t b = CpuLayoutBlock(layout);
  return b == 0 || channels % b == 0;
}

size_t PhysicalAxis(size_t logical_rank, size_t axis, CpuLayout layout) {
  if (layout == CpuLayout::kChannelsLast) return axis == 0 ? 0 : axis == 1 ? logical_rank - 1 : axis - 1;
  return axis;  // plain, and blocked: [N, C/B, S..., B] keeps N, the channel blocks and S in place
}

Status PhysicalShape(const Shape& logical, CpuLayout layout, Shape* physical) {
  RETURN_ERROR_IF(logical.size() < 2, INVALID_ARGUMENT, "a laid-out tensor needs rank >= 2, got ",
                  ShapeToString(logical));
  if (layout == CpuLayout::kPlain) {
    *physical = logical;
    return Status::OK();
  }
  const int64_t c = logical[1], b = CpuLayoutBlock(layout);
  RETURN_ERROR_IF(!CpuLayoutFits(layout, c), INVALID_ARGUMENT, "channel count ", c, " of ", ShapeToString(logical),
                  " does not fit layout ", CpuLayoutName(layout));
  Shape p(logical.size() + (b ? 1 : 0));
  for (size_t i = 0; i < logical.size(); ++i) p[PhysicalAxis(logical.size(), i, layout)] = logical[i];
  if (b) {
    p[1] = c / b;
    p.back() = b;
  }
  *physical = std::move(p);
  return Status::OK();
}

Status LogicalShape(const Shape& physical, CpuLayout layout, int64_t channels, Shape* logical) {
  if (layout == CpuLayout::kPlain) {
    *logical = physical;
    return Status::OK();
  }
  const int64_t b = CpuLayoutBlock(layout);
  const size_t rank = physical.size() - (b ? 1 : 0);
  auto bad = [&]() {
    return MakeStatus(ErrorCode::INVALID_ARGUMENT, "a tensor of shape ", ShapeToString(physical),
                      " is not a layout-", CpuLayoutName(layout), " tensor of ", channels, " channels");
  };
  if (physical.size() < 2 + (b ? 1u : 0u) || !CpuLayoutFits(layout, channels)) return bad();
  Shape l(rank);
  for (size_t i = 0; i < rank; ++i) l[i] = physical[PhysicalAxis(rank, i, layout)];
  if (b) {
    if (physical[1] != channels / b || physical.back() != b) return bad();
    l[1] = channels;
  } else if (l[1] != channels) {
    return bad();
  }
  *logical = std::move(l);
  return Status::OK();
}

namespace nn {

dnnl::memory::desc LayoutDesc(const dnnl::memory::dims& logical, CpuLayout layout) {
  using tag = dnnl::memory::format_tag;
  const size_t r = logical.size();
  tag t = tag::undef;
  if (layout == CpuLayout::kChannelsLast) t = r == 3 ? tag::nwc : r == 4 ? tag::nhwc : r == 5 ? tag::ndhwc : tag::undef;
  if (layout == CpuLayout::kBlocked8) t = r == 3 ? tag::nCw8c : r == 4 ? tag::nChw8c : r == 5 ? tag::nCdhw8c : tag::undef;
  if (layout == CpuLayout::kBlocked16)
    t = r == 3 ? tag::nCw16c : r == 4 ? tag::nChw16c : r == 5 ? tag::nCdhw16c : tag::undef;
  if (t == tag::undef) return PlainDesc(logical);
  return dnnl::memory::desc(logical, dnnl::memory::data_type::f32, t);
}

namespace {

// Reorder primitives by (logical dims, from, to), built once per shape.
class ReorderCache {
 public:
  StatusOr<dnnl::reorder> Get(const dnnl::memory::dims& logical, CpuLayout from, CpuLayout to) {
    std::vector<int64_t> key(logical.begin(), logical.end());
    key.push_back(static_cast<int64_t>(from));
    key.push_back(static_cast<int64_t>(to));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    dnnl::reorder r;
    RETURN_IF_ERROR(DnnlCall("reorder setup", [&] {
      const dnnl::engine& eng = CpuEngine();
      r = dnnl::reorder(dnnl::reorder::primitive_desc(eng, LayoutDesc(logical, from), eng, LayoutDesc(logical, to)));
    }));
    if (cache_.size() >= kMaxCachedShapes) cache_.clear();
    cache_[key] = r;
    return r;
  }

 private:
  std::mutex mu_;
  std::map<std::vector<int64_t>, dnnl::reorder> cache_;
};

}  // namespace

Status ReorderLayout(const Shape& logical, const float* src, CpuLayout from, float* dst, CpuLayout to, int threads) {
  static ReorderCache* cache = new ReorderCache();  // process lifetime: kernels of any session share it
  RETURN_ERROR_IF(logical.size() < 3 || logical.size() > 5, INVALID_ARGUMENT, "layouts are defined for ranks 3 to 5, got ",
                  ShapeToString(logical));
  int64_t n = 1;
  for (int64_t d : logical) n *= d;
  if (n == 0) return Status::OK();
  const dnnl::memory::dims dims(logical.begin(), logical.end());
  ASSIGN_OR_RETURN(dnnl::reorder r, cache->Get(dims, from, to));
  ScopedOmpThreads omp(threads);
  return DnnlCall("reorder", [&] {
    const dnnl::engine& eng = CpuEngine();
    dnnl::stream s(eng);
    dnnl::memory a(LayoutDesc(dims, from), eng, const_cast<float*>(src)), b(LayoutDesc(dims, to), eng, dst);
    r.execute(s, {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}});
    s.wait();
  });
}

namespace {

StatusOr<CpuLayout> LayoutAttr(const KernelInfo& info, const char* name) {
  CpuLayout l;
  const std::string s = info.GetString(name, "");
  if (!ParseCpuLayout(s, &l)) return info.Error(ErrorCode::INVALID_GRAPH, "attribute '", name, "' is '", s,
                                                "', not a layout (plain, nhwc, nChw8c, nChw16c)");
  return l;
}

class ReorderKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    std::unique_ptr<ReorderKernel> k(new ReorderKernel());
    ASSIGN_OR_RETURN(k->from_, LayoutAttr(info, "from"));
    ASSIGN_OR_RETURN(k->to_, LayoutAttr(info, "to"));
    k->channels_ = info.GetInt("channels", 0);
    if (info.num_inputs() != 1 || info.num_outputs() != 1 || (k->from_ == CpuLayout::kPlain) == (k->to_ == CpuLayout::kPlain) ||
        !CpuLayoutFits(k->from_ == CpuLayout::kPlain ? k->to_ : k->from_, k->channels_))
      return info.Error(ErrorCode::INVALID_GRAPH, "needs one input, one output, one plain side and a channel count "
                        "that fits the other layout");
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    RETURN_ERROR_IF(!x || x->dtype() != DataType::kFloat, INVALID_ARGUMENT, ctx.node().Describe(),
                    ": needs a float input");
    Shape logical, out;
    RETURN_IF_ERROR_CTX(LogicalShape(x->shape(), from_, channels_, &logical), ctx.node().Describe());
    RETURN_IF_ERROR_CTX(PhysicalShape(logical, to_, &out), ctx.node().Describe());
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, DataType::kFloat, out));
    return ReorderLayout(logical, x->data<float>(), from_, y->data<float>(), to_, ctx.num_threads())
        .WithContext(ctx.node().Describe());
  }

 private:
  CpuLayout from_ = CpuLayout::kPlain, to_ = CpuLayout::kPlain;
  int64_t channels_ = 0;
};

// GlobalAveragePool of a laid-out tensor: the physical tensor is [outer, spatial, lanes] with lanes the channels
// (channels-last) or one block (blocked), so the mean runs over the middle axis with contiguous lanes.
class LaidOutGlobalAveragePool final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    std::unique_ptr<LaidOutGlobalAveragePool> k(new LaidOutGlobalAveragePool());
    ASSIGN_OR_RETURN(k->layout_, LayoutAttr(info, "layout"));
    if (k->layout_ == CpuLayout::kPlain) return info.Error(ErrorCode::INVALID_GRAPH, "needs a laid-out input");
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const size_t r = x ? x->rank() : 0;
    RETURN_ERROR_IF(!x || x->dtype() != DataType::kFloat || r < 3, INVALID_ARGUMENT, ctx.node().Describe(),
                    ": needs a float input of rank >= 3");
    const Shape& xs = x->shape();
    const bool last = layout_ == CpuLayout::kChannelsLast;
    // Spatial axes: 1..r-2 (channels-last) or 2..r-2 (blocked).
    const size_t first = last ? 1 : 2, end = r - 1;
    int64_t outer = 1, spatial = 1;
    for (size_t i = 0; i < first; ++i) outer *= xs[i];
    for (size_t i = first; i < end; ++i) spatial *= xs[i];
    const int64_t lanes = xs.back();
    Shape ys = xs;
    for (size_t i = first; i < end; ++i) ys[i] = 1;
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, DataType::kFloat, ys));
    RETURN_ERROR_IF(spatial == 0 && y->NumElements() > 0, INVALID_ARGUMENT, ctx.node().Describe(),
                    ": empty spatial dims in ", ShapeToString(xs));
    const float* src = x->data<float>();
    float* dst = y->data<float>();
    const float inv = 1.f / static_cast<float>(spatial);
    ParallelFor(ctx.num_threads(), outer, static_cast<double>(spatial * lanes), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        float* acc = dst + o * lanes;
        for (int64_t l = 0; l < lanes; ++l) acc[l] = 0.f;
        const float* p = src + o * spatial * lanes;
        for (int64_t s = 0; s < spatial; ++s, p += lanes)
          for (int64_t l = 0; l < lanes; ++l) acc[l] += p[l];
        for (int64_t l = 0; l < lanes; ++l) acc[l] *= inv;
      }
    });
    return Status::OK();
  }

 private:
  CpuLayout layout_ = CpuLayout::kPlain;
};

}  // namespace

void RegisterLayoutKernels(KernelRegistry& r) {
  r.Register(kCpuInternalDomain, kReorderOp, [](const KernelInfo& info) { return ReorderKernel::Create(info); });
  r.Register(kCpuInternalDomain, kLaidOutGlobalAveragePoolOp,
             [](const KernelInfo& info) { return LaidOutGlobalAveragePool::Create(info); });
}

}  // namespace nn

CpuLayout PreferredCpuLayout() {
  // A 3x3 convolution of 64 channels on 56x56 (a typical CNN body layer) with every layout left to oneDNN.
  static const CpuLayout preferred = [] {
    CpuLayout found = CpuLayout::kPlain;
    Status st = nn::DnnlCall("layout query", [&] {
      using dnnl::memory;
      const memory::dims src{1, 64, 56, 56}, w{64, 64, 3, 3};
      auto any = [](const memory::dims& d) { return memory::desc(d, memory::data_type::f32, memory::format_tag::any); };
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        any(src), any(w), any(src), {1, 1}, {0, 0}, {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(d, nn::CpuEngine());
      for (CpuLayout l : {CpuLayout::kChannelsLast, CpuLayout::kBlocked16, CpuLayout::kBlocked8})
        if (pd.src_desc() == nn::LayoutDesc(src, l) && pd.dst_desc() == nn::LayoutDesc(src, l)) found = l;
    });
    return st.ok() ? found : CpuLayout::kPlain;
  }();
  return preferred;
}

}  // namespace epctx
