// The layout-preserving nn ops: MaxPool/AveragePool/GlobalAveragePool/GlobalMaxPool, Resize and inference
// BatchNormalization: support checks, lowering (src in its current layout when oneDNN takes it), the kPool,
// kResample and kBatchNorm step builders, and the rewrite FoldAddIntoBatchNorm. Step parameters: nn_common.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <omp.h>

#include "providers/aotcpu/lower/nn_common.h"
#include "providers/common/bilinear_taps.h"

namespace epctx {
namespace aotcpu {
namespace {

bool TryPoolPd(const PoolSpec& s, const Md& src, const Md& dst) {
  try {
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(s.alg), src, dst,
                                     s.w.stride, s.w.kernel, DnnlDilations(s.w), s.w.pad_begin, s.w.pad_end_dnnl);
    dnnl::pooling_v2_forward::primitive_desc pd(d, ProbeEngine());
    return pd.src_desc() == src && pd.dst_desc() == dst;
  } catch (const dnnl::error&) {
    return false;
  }
}

// Shared by layout-preserving ops (pooling, resampling, batch norm): src in its current tagged layout and dst in the
// same tag when `try_fn` accepts that, else both plain. Returns false when even plain is refused.
// Shared by layout-preserving ops (pooling, resampling, batch norm): src in its current layout and dst in the same
// layout when `try_fn` accepts that, else both plain. Returns false when even plain is refused.
template <typename TryFn>
bool ChooseSameLayout(LowerContext& ctx, int x, const std::vector<int64_t>& src_dims,
                      const std::vector<int64_t>& dst_dims, TryFn try_fn, bool* plain, Md* src, Md* dst) {
  const Operand* op = ctx.Peek(x);
  const Md plain_src = PlainDesc(src_dims, kF32);
  if (!ctx.options().portable_layouts && op != nullptr) {
    const Md s = DescOfOperand(*op);
    const Md d = SameLayoutAs(s, dst_dims);
    if (s.data.ndims != 0 && d.data.ndims != 0 && !(s == plain_src) && try_fn(s, d)) {
      *plain = false;
      *src = s;
      *dst = d;
      return true;
    }
  }
  *plain = true;
  *src = plain_src;
  *dst = PlainDesc(dst_dims, kF32);
  return try_fn(*src, *dst);
}

// ---- resize ----------------------------------------------------------------------------------------------------

struct ResizeSpec {
  dnnl_alg_kind_t alg = dnnl_resampling_nearest;
  std::vector<int64_t> src_dims, dst_dims;
  // Linear over H and W of a 4-D tensor: our kBilinear step (ONNX Runtime's summation order) instead of oneDNN's
  // resampling, whose different rounding a DynamicQuantizeLinear after the Resize turns into quantization steps.
  bool bilinear = false;
  int64_t bilinear_mode = 0;  // 0 half_pixel, 1 pytorch_half_pixel
  float scale_h = 1, scale_w = 1;
};

int64_t RoundNearest(double x, const std::string& mode, bool downsample) {
  const double fl = std::floor(x);
  if (mode == "floor") return static_cast<int64_t>(fl);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (mode == "simple") return downsample ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(std::trunc(x));
  if (x - fl == 0.5) return static_cast<int64_t>(mode == "round_prefer_ceil" ? fl + 1 : fl);
  return static_cast<int64_t>(std::round(x));
}

// Whether ONNX's nearest index (computed in float like ONNX Runtime and in double) equals oneDNN's
// round(((y + 0.5) * in / out) - 0.5) for every output position of one dimension.
// `length_resized` is align_corners' output length: the output dim when sizes are given, in * scale with scales (the
// CPU EP's and the ONNX reference's rule; ONNX Runtime 1.30 takes the output dim there too, so with a fractional
// in * scale the three disagree and the node stays on the CPU EP: found by tests/difftest).
bool NearestMatches(int64_t in, int64_t out, float scale, float length_resized, const std::string& ctm,
                    const std::string& mode) {
  const bool down = scale < 1.f;
  for (int64_t y = 0; y < out; ++y) {
    const float yf = static_cast<float>(y);
    const double yd = static_cast<double>(y);
    float xf;
    double xd;
    if (ctm == "half_pixel" || (ctm == "pytorch_half_pixel" && out > 1)) {
      xf = (yf + 0.5f) / scale - 0.5f;
      xd = (yd + 0.5) / scale - 0.5;
    } else if (ctm == "pytorch_half_pixel") {
      xf = 0.f;
      xd = 0.0;
    } else if (ctm == "align_corners") {
      xf = out == 1 || length_resized == 1.f ? 0.f : yf * static_cast<float>(in - 1) / (length_resized - 1.f);
      xd = out == 1 || length_resized == 1.f ? 0.0 : yd * static_cast<double>(in - 1) / (length_resized - 1.0);
    } else if (ctm == "asymmetric") {
      xf = yf / scale;
      xd = yd / scale;
    } else if (ctm == "tf_half_pixel_for_nn") {
      xf = (yf + 0.5f) / scale;
      xd = (yd + 0.5) / scale;
    } else {
      return false;
    }
    const int64_t a = std::min(std::max<int64_t>(RoundNearest(xf, mode, down), 0), in - 1);
    const int64_t b = std::min(std::max<int64_t>(RoundNearest(xd, mode, down), 0), in - 1);
    const float m = ((yf + 0.5f) * static_cast<float>(in) / static_cast<float>(out)) - 0.5f;
    const int64_t c = static_cast<int64_t>(std::roundf(m));
    if (c < 0 || c >= in || a != b || a != c) return false;
  }
  return true;
}

bool ResolveResize(const Graph& g, const Node& n, ResizeSpec* s, std::string* why) {
  if (!IsOnnx(n)) return Reject(why, "not an ONNX op");
  if (n.opset < 10) return Reject(why, "opset below 10");
  if (!SingleOutput(n)) return Reject(why, "expected one output");
  const int x = In(n, 0), y = Out(n, 0);
  if (!StaticF32(g, x) || !StaticF32(g, y)) return Reject(why, "input/output must be float32 with static shapes");
  const std::vector<int64_t>& xd = g.v(x).dims;
  const std::vector<int64_t>& yd = g.v(y).dims;
  if (xd.size() < 3 || xd.size() > 5 || yd.size() != xd.size()) return Reject(why, "spatial rank must be 1..3");
  if (yd[0] != xd[0] || yd[1] != xd[1]) return Reject(why, "batch/channel dims are resized");
  if (n.opset >= 18) {
    if (n.Int("antialias", 0) != 0) return Reject(why, "antialias");
    if (n.Has("axes")) return Reject(why, "axes");
    if (n.Str("keep_aspect_ratio_policy", "stretch") != "stretch") return Reject(why, "keep_aspect_ratio_policy");
  }
  const std::string mode = n.Str("mode", "nearest");
  const std::string ctm = n.opset >= 11 ? n.Str("coordinate_transformation_mode", "half_pixel") : "asymmetric";
  const std::string nmode = n.opset >= 11 ? n.Str("nearest_mode", "round_prefer_floor") : "simple";
  if (ctm == "tf_crop_and_resize") return Reject(why, "tf_crop_and_resize");
  if (mode != "nearest" && mode != "linear") return Reject(why, "mode '" + mode + "'");
  const int scales_v = n.opset == 10 ? In(n, 1) : In(n, 2);
  const int sizes_v = n.opset == 10 ? -1 : In(n, 3);
  const size_t rank = xd.size();
  std::vector<float> scale(rank, 1.f);
  bool have = false, from_sizes = false;
  if (sizes_v >= 0 && g.v(sizes_v).has_shape && g.v(sizes_v).numel() > 0) {
    std::vector<int64_t> sizes;
    if (!g.ConstInts(sizes_v, &sizes)) return Reject(why, "sizes are not constant");
    if (sizes != yd) return Reject(why, "sizes differ from the output shape");
    for (size_t i = 0; i < rank; ++i) scale[i] = static_cast<float>(yd[i]) / static_cast<float>(xd[i]);
    have = from_sizes = true;
  }
  if (!have && scales_v >= 0) {
    const float* sc = ConstF32(g, scales_v);
    if (sc == nullptr) return Reject(why, "scales are not a constant float32 tensor");
    if (g.v(scales_v).numel() != static_cast<int64_t>(rank)) return Reject(why, "scales has the wrong length");
    for (size_t i = 0; i < rank; ++i) {
      scale[i] = sc[i];
      if (!(scale[i] > 0.f) || !std::isfinite(scale[i])) return Reject(why, "scale is not positive");
      const double expect = std::floor(static_cast<double>(xd[i]) * scale[i]);
      if (std::fabs(expect - static_cast<double>(yd[i])) > 0.5) return Reject(why, "scales disagree with the output");
    }
    have = true;
  }
  if (!have) return Reject(why, "neither scales nor sizes given");
  if (scale[0] != 1.f || scale[1] != 1.f) return Reject(why, "batch/channel dims are resized");
  for (size_t i = 2; i < rank; ++i) {
    const int64_t in = xd[i], out = yd[i];
    if (in == out && scale[i] == 1.f) continue;  // every mode maps identically
    if (mode == "linear") {
      if (ctm != "half_pixel" && !(ctm == "pytorch_half_pixel" && out > 1))
        return Reject(why, "linear resize with coordinate_transformation_mode '" + ctm + "'");
      const double ratio = static_cast<double>(out) / static_cast<double>(in);
      if (std::fabs(ratio - scale[i]) > 1e-6 * ratio) return Reject(why, "scale differs from output/input");
    } else if (!NearestMatches(in, out, scale[i],
                               from_sizes ? static_cast<float>(out) : scale[i] * static_cast<float>(in), ctm, nmode)) {
      return Reject(why, "nearest resize with " + ctm + "/" + nmode + " differs from oneDNN's rounding");
    }
  }
  s->alg = mode == "linear" ? dnnl_resampling_linear : dnnl_resampling_nearest;
  s->src_dims = xd;
  s->dst_dims = yd;
  if (mode == "linear" && rank == 4) {
    s->bilinear = true;
    s->bilinear_mode = ctm == "pytorch_half_pixel" ? 1 : 0;
    s->scale_h = scale[2];
    s->scale_w = scale[3];
  }
  return true;
}

// ---- bilinear (kBilinear) ----------------------------------------------------------------------------------------

using common::BilinearTaps;

// One axis of kBilinear: the coordinate rule of its mode (0 half_pixel, 1 pytorch_half_pixel).
BilinearTaps PlanBilinearTaps(int64_t in, int64_t out, float scale, int64_t mode) {
  return common::PlanBilinearTaps(in, out, [&](int64_t j) {
    const float c = static_cast<float>(j);
    if (scale == 1.0f) return c;
    return mode == 1 && out == 1 ? 0.0f : (c + 0.5f) / scale - 0.5f;
  });
}

// Strides (elements) of a plain strided 4-D descriptor; false for a blocked one.
bool PlainStrides(const Md& d, int64_t st[4]) {
  if (d.data.format_kind != dnnl_blocked || d.data.ndims != 4 || d.data.format_desc.blocking.inner_nblks != 0)
    return false;
  for (int i = 0; i < 4; ++i) st[i] = d.data.format_desc.blocking.strides[i];
  return true;
}

// Every output element is w11 * x11 + w21 * x21 + w12 * x12 + w22 * x22 in that order (ONNX Runtime's floats);
// only the loop order follows the layout: with channels innermost (nhwc) a pixel's channels are one contiguous
// vector; otherwise (nchw, or any order with W inner) each channel plane is swept row by row, so every read and
// write walks memory forwards instead of jumping a whole plane per element.
class BilinearExec : public StepExec {
 public:
  BilinearExec(int src, int dst, const int64_t* ss, const int64_t* ds, const int64_t* dd, BilinearTaps ty,
               BilinearTaps tx)
      : src_(src), dst_(dst), ty_(std::move(ty)), tx_(std::move(tx)) {
    for (int i = 0; i < 4; ++i) sst_[i] = ss[i], dst_st_[i] = ds[i], ddims_[i] = dd[i];
    const size_t ow = static_cast<size_t>(ddims_[3]);
    ox1_.resize(ow);
    ox2_.resize(ow);
    for (size_t j = 0; j < ow; ++j) ox1_[j] = tx_.c1[j] * sst_[3], ox2_[j] = tx_.c2[j] * sst_[3];
  }
  void Run(RunContext& rc) override {
    const float* x = static_cast<const float*>(rc.ptr(src_));
    float* y = static_cast<float*>(rc.ptr(dst_));
    if (sst_[1] < sst_[3])
      RunChannelsInner(x, y);
    else
      RunPlanes(x, y);
  }

 private:
  void RunChannelsInner(const float* x, float* y) const {
    const int64_t n = ddims_[0], c = ddims_[1], oh = ddims_[2], ow = ddims_[3];
    const int64_t sc = sst_[1], dc = dst_st_[1];
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < oh; ++i) {
        const float dy1 = ty_.d1[i], dy2 = ty_.d2[i];
        const float* r1 = x + b * sst_[0] + ty_.c1[i] * sst_[2];
        const float* r2 = x + b * sst_[0] + ty_.c2[i] * sst_[2];
        float* out = y + b * dst_st_[0] + i * dst_st_[2];
        for (int64_t j = 0; j < ow; ++j) {
          const float dx1 = tx_.d1[j], dx2 = tx_.d2[j];
          const float w11 = dx2 * dy2, w21 = dx1 * dy2, w12 = dx2 * dy1, w22 = dx1 * dy1;
          const float *a = r1 + ox1_[j], *bb = r1 + ox2_[j], *cc = r2 + ox1_[j], *d = r2 + ox2_[j];
          float* o = out + j * dst_st_[3];
          if (sc == 1 && dc == 1) {  // contiguous channels: one vector loop
            for (int64_t k = 0; k < c; ++k) o[k] = w11 * a[k] + w21 * bb[k] + w12 * cc[k] + w22 * d[k];
          } else {
            for (int64_t k = 0; k < c; ++k)
              o[k * dc] = w11 * a[k * sc] + w21 * bb[k * sc] + w12 * cc[k * sc] + w22 * d[k * sc];
          }
        }
      }
  }
  void RunPlanes(const float* x, float* y) const {
    const int64_t n = ddims_[0], c = ddims_[1], oh = ddims_[2], ow = ddims_[3];
    const int64_t dw = dst_st_[3];
    const float* dx1 = tx_.d1.data();
    const float* dx2 = tx_.d2.data();
    const int64_t* o1 = ox1_.data();
    const int64_t* o2 = ox2_.data();
#pragma omp parallel for collapse(3) schedule(static)
    for (int64_t b = 0; b < n; ++b)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t i = 0; i < oh; ++i) {
          const float dy1 = ty_.d1[i], dy2 = ty_.d2[i];
          const float* plane = x + b * sst_[0] + k * sst_[1];
          const float* r1 = plane + ty_.c1[i] * sst_[2];
          const float* r2 = plane + ty_.c2[i] * sst_[2];
          float* out = y + b * dst_st_[0] + k * dst_st_[1] + i * dst_st_[2];
          if (dw == 1) {
            for (int64_t j = 0; j < ow; ++j)
              out[j] = dx2[j] * dy2 * r1[o1[j]] + dx1[j] * dy2 * r1[o2[j]] + dx2[j] * dy1 * r2[o1[j]] +
                       dx1[j] * dy1 * r2[o2[j]];
          } else {
            for (int64_t j = 0; j < ow; ++j)
              out[j * dw] = dx2[j] * dy2 * r1[o1[j]] + dx1[j] * dy2 * r1[o2[j]] + dx2[j] * dy1 * r2[o1[j]] +
                            dx1[j] * dy1 * r2[o2[j]];
          }
        }
  }

  int src_, dst_;
  int64_t sst_[4], dst_st_[4], ddims_[4];
  BilinearTaps ty_, tx_;
  std::vector<int64_t> ox1_, ox2_;  // tx's taps times the source's W stride
};


bool TryResamplePd(const ResizeSpec& s, const Md& src, const Md& dst) {
  try {
    dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(s.alg), src, dst);
    dnnl::resampling_forward::primitive_desc pd(d, ProbeEngine());
    return pd.src_desc() == src && pd.dst_desc() == dst;
  } catch (const dnnl::error&) {
    return false;
  }
}

// ---- batch normalization ---------------------------------------------------------------------------------------

bool ResolveBatchNorm(const Graph& g, const Node& n, std::string* why) {
  if (!IsOnnx(n)) return Reject(why, "not an ONNX op");
  if (n.opset < 7) return Reject(why, "opset below 7");
  if (!SingleOutput(n) || n.num_inputs() != 5) return Reject(why, "expected 5 inputs and only the Y output");
  if (n.Int("training_mode", 0) != 0) return Reject(why, "training_mode");
  if (n.Int("spatial", 1) != 1) return Reject(why, "spatial=0");
  const int x = In(n, 0), y = Out(n, 0);
  if (!StaticF32(g, x) || !StaticF32(g, y)) return Reject(why, "input/output must be float32 with static shapes");
  const std::vector<int64_t>& xd = g.v(x).dims;
  if (xd.size() < 2 || xd.size() > 5 || g.v(y).dims != xd) return Reject(why, "rank must be 2..5");
  for (size_t i = 1; i < 5; ++i) {
    const int v = In(n, i);
    if (!StaticF32(g, v) || g.v(v).dims != std::vector<int64_t>{xd[1]})
      return Reject(why, "parameters must be float32 [C]");
  }
  return true;
}

// With `relu`, oneDNN's fused ReLU after the normalization (a step's single post-op: eltwise relu, alpha 0).
dnnl::normalization_flags BnFlags(bool relu = false) {
  dnnl::normalization_flags f = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                                dnnl::normalization_flags::use_shift;
  return relu ? f | dnnl::normalization_flags::fuse_norm_relu : f;
}

bool TryBnPd(const Md& data, float eps, bool relu = false) {
  try {
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, data, eps, BnFlags(relu));
    dnnl::batch_normalization_forward::primitive_desc pd(d, ProbeEngine());
    return pd.src_desc() == data && pd.dst_desc() == data;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

int FoldAddIntoBatchNorm(Graph* g, std::vector<bool>* folded) {
  int count = 0;
  folded->resize(g->nodes.size(), false);
  for (size_t bi = 0; bi < g->nodes.size(); ++bi) {
    if ((*folded)[bi]) continue;
    const Node& bn = g->nodes[bi];
    std::string why;
    if (bn.op != "BatchNormalization" || !ResolveBatchNorm(*g, bn, &why)) continue;
    const int x = In(bn, 0), mean = In(bn, 3);
    const int a = g->v(x).producer;
    if (a < 0 || (*folded)[static_cast<size_t>(a)] || g->v(x).is_graph_output || g->v(x).consumers.size() != 1 ||
        !ConstF32(*g, mean))
      continue;
    const Node& add = g->nodes[static_cast<size_t>(a)];
    if (!IsOnnx(add) || add.op != "Add" || !SingleOutput(add) || add.num_inputs() != 2) continue;
    const int c = ConstF32(*g, add.inputs[1]) ? add.inputs[1] : add.inputs[0];
    const int u = c == add.inputs[1] ? add.inputs[0] : add.inputs[1];
    const std::vector<int64_t> xd = g->v(x).dims;
    if (u == c || g->v(u).is_const() || !StaticF32(*g, u) || g->v(u).dims != xd) continue;
    std::vector<double> scale, shift;  // x = u + c, c per channel: shift
    if (!ChannelAffine(*g, add, u, xd[1], &scale, &shift)) continue;
    // mean' = mean - c, a new constant owned by the graph.
    auto data = std::make_shared<std::string>(static_cast<size_t>(xd[1]) * sizeof(float), '\0');
    const float* m = ConstF32(*g, mean);
    bool finite = true;
    for (int64_t ch = 0; ch < xd[1]; ++ch) {
      const float v = static_cast<float>(static_cast<double>(m[ch]) - shift[static_cast<size_t>(ch)]);
      finite = finite && std::isfinite(v);
      std::memcpy(&(*data)[static_cast<size_t>(ch) * sizeof(float)], &v, sizeof(float));
    }
    if (!finite) continue;
    Value nv;
    nv.name = g->v(mean).name + ":minus:" + g->v(c).name;
    while (g->by_name.count(nv.name)) nv.name += "'";
    nv.dtype = kF32;
    nv.has_shape = true;
    nv.dims = {xd[1]};
    nv.folded = data;
    nv.data = data->data();
    nv.consumers = {static_cast<int>(bi)};
    const int nvi = static_cast<int>(g->values.size());
    g->by_name[nv.name] = nvi;
    g->values.push_back(std::move(nv));
    auto drop = [g](int value, int node) {
      std::vector<int>& cs = g->v(value).consumers;
      auto it = std::find(cs.begin(), cs.end(), node);
      if (it != cs.end()) cs.erase(it);
    };
    drop(mean, static_cast<int>(bi));
    drop(u, a);
    drop(c, a);
    g->v(x).consumers.clear();
    g->v(u).consumers.push_back(static_cast<int>(bi));
    Node& b = g->nodes[bi];
    b.inputs[0] = u;
    b.inputs[3] = nvi;
    b.name = g->nodes[static_cast<size_t>(a)].name + "+" + b.name;
    (*folded)[static_cast<size_t>(a)] = true;
    ++count;
  }
  return count;
}


bool SupportBatchNorm(const Graph& g, const Node& n, std::string* why) {
  if (!ResolveBatchNorm(g, n, why)) return false;
  if (!TryBnPd(PlainDesc(g.v(In(n, 0)).dims, kF32), n.Float("epsilon", 1e-5f)))
    return Reject(why, "oneDNN refuses this batch normalization");
  return true;
}

CheckResult LowerBatchNorm(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  std::string why;
  if (!ResolveBatchNorm(g, n, &why)) return ctx.Fail(node, why);
  const float eps = n.Float("epsilon", 1e-5f);
  const int x = In(n, 0);
  int y = Out(n, 0);
  // A Relu reading only the result runs inside the normalization (PP-OCRv4's upsampling path: a step less).
  const int relu = ctx.SoleConsumer(y);
  const bool fuse_relu = relu >= 0 && !ctx.IsAbsorbed(relu) && IsOnnx(ctx.node(relu)) && ctx.node(relu).op == "Relu" &&
                         SingleOutput(ctx.node(relu)) && StaticF32(g, Out(ctx.node(relu), 0)) &&
                         g.v(Out(ctx.node(relu), 0)).dims == g.v(y).dims;
  bool plain;
  Md src, dst;
  auto try_fn = [&](const Md& s, const Md& d) { return s == d && TryBnPd(s, eps, fuse_relu); };
  if (!ChooseSameLayout(ctx, x, g.v(x).dims, g.v(y).dims, try_fn, &plain, &src, &dst))
    return ctx.Fail(node, "oneDNN refuses this batch normalization");
  Step st;
  st.kind = StepKind::kBatchNorm;
  st.name = NodeName(ctx, node);
  st.ops.push_back(plain ? ctx.UsePlain(x) : ctx.Use(x));
  if (!(DescOfOperand(st.ops[0]) == src)) return ctx.Fail(node, "source operand layout mismatch");
  for (size_t i = 1; i < 5; ++i) st.ops.push_back(ctx.UsePlain(In(n, i)));
  if (fuse_relu) {
    st.name = JoinNames(ctx, node, {relu});
    st.post_ops.push_back(EltwisePostOp(dnnl_eltwise_relu, 0, 0));
    ctx.Absorb(relu);
    y = Out(ctx.node(relu), 0);
  }
  st.ops.push_back(ctx.Define(y, dst));
  st.floats.push_back(eps);
  ctx.Emit(std::move(st));
  return Ok();
}

bool SupportPool(const Graph& g, const Node& n, std::string* why) {
  PoolSpec spec;
  if (!ResolvePool(g, n, &spec, why)) return false;
  if (!TryPoolPd(spec, PlainDesc(spec.src_dims, kF32), PlainDesc(spec.dst_dims, kF32)))
    return Reject(why, "oneDNN refuses this pooling");
  return true;
}

CheckResult LowerPool(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  PoolSpec spec;
  std::string why;
  if (!ResolvePool(ctx.graph(), n, &spec, &why)) return ctx.Fail(node, why);
  const int x = In(n, 0), y = Out(n, 0);
  bool plain;
  Md src, dst;
  auto try_fn = [&](const Md& s, const Md& d) { return TryPoolPd(spec, s, d); };
  if (!ChooseSameLayout(ctx, x, spec.src_dims, spec.dst_dims, try_fn, &plain, &src, &dst))
    return ctx.Fail(node, "oneDNN refuses this pooling");
  // On a plain layout oneDNN 2.6 pools with its simple_nchw (or reference) kernel: 2.2 ms for a MaxPool that ONNX
  // Runtime runs in 0.17 ms (issue 24's performance tester, a pool of a plain graph input; also the TensorFlow face
  // detector's pools at AVX2). Then the source is reordered once into the first layout with a jit kernel
  // (channels-last, then channel blocks of 16 and 8), and the result keeps that layout.
  bool moved = false;
  if (plain && !ctx.options().portable_layouts) {
    auto impl_of = [&](const Md& s, const Md& d) -> std::string {
      try {
        dnnl::pooling_v2_forward::desc pdd(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(spec.alg),
                                           s, d, spec.w.stride, spec.w.kernel, DnnlDilations(spec.w), spec.w.pad_begin,
                                           spec.w.pad_end_dnnl);
        dnnl::pooling_v2_forward::primitive_desc pd(pdd, ProbeEngine());
        if (pd.src_desc() == s && pd.dst_desc() == d) return pd.impl_info_str();
      } catch (const dnnl::error&) {
      }
      return std::string();
    };
    auto slow = [](const std::string& impl) { return impl.rfind("simple", 0) == 0 || impl.rfind("ref", 0) == 0; };
    if (slow(impl_of(src, dst))) {
      const size_t rank = spec.src_dims.size();
      for (uint32_t tag : {ChannelsLastTag(rank), ChannelBlockedTag(rank, 16), ChannelBlockedTag(rank, 8)}) {
        if (tag == 0) continue;
        const Md s2 = F32Desc(spec.src_dims, tag), d2 = F32Desc(spec.dst_dims, tag);
        const std::string impl = impl_of(s2, d2);
        if (impl.empty() || slow(impl)) continue;
        src = AsStored(s2);
        dst = AsStored(d2);
        plain = false;
        moved = true;
        break;
      }
    }
  }
  Step st;
  st.kind = StepKind::kPool;
  st.name = NodeName(ctx, node);
  st.ops.push_back(moved ? ctx.UseAs(x, src) : plain ? ctx.UsePlain(x) : ctx.Use(x));
  if (!(DescOfOperand(st.ops[0]) == src)) return ctx.Fail(node, "source operand layout mismatch");
  st.ops.push_back(ctx.Define(y, dst));
  st.ints.push_back(static_cast<int64_t>(spec.alg));
  st.ints.push_back(static_cast<int64_t>(spec.w.rank()));
  std::vector<int64_t> dil = DnnlDilations(spec.w);
  for (const std::vector<int64_t>* v : {&spec.w.kernel, &spec.w.stride, &spec.w.pad_begin, &spec.w.pad_end_dnnl, &dil})
    st.ints.insert(st.ints.end(), v->begin(), v->end());
  ctx.Emit(std::move(st));
  return Ok();
}

bool SupportResize(const Graph& g, const Node& n, std::string* why) {
  ResizeSpec spec;
  if (!ResolveResize(g, n, &spec, why)) return false;
  if (!TryResamplePd(spec, PlainDesc(spec.src_dims, kF32), PlainDesc(spec.dst_dims, kF32)))
    return Reject(why, "oneDNN refuses this resampling");
  return true;
}

CheckResult LowerResize(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  ResizeSpec spec;
  std::string why;
  if (!ResolveResize(ctx.graph(), n, &spec, &why)) return ctx.Fail(node, why);
  const int x = In(n, 0), y = Out(n, 0);
  if (spec.bilinear) {
    // kBilinear reads any strided layout in place and writes the same dimension order (a strided operand has tag 0
    // and strides). A blocked source (nChw16c) is reordered to channels-last rather than to plain: the same copy,
    // and then each pixel's channels are one contiguous vector for the kernel. Portable layouts stay plain.
    Step st;
    st.kind = StepKind::kBilinear;
    st.name = NodeName(ctx, node);
    const Operand* cur = ctx.Peek(x);
    const Md cur_desc = cur ? DescOfOperand(*cur) : Md();
    const bool strided = cur && cur->tag == 0 && cur_desc.data.ndims == 4 && cur_desc.data.format_kind == dnnl_blocked &&
                         cur_desc.data.format_desc.blocking.inner_nblks == 0;
    if (strided) {
      st.ops.push_back(ctx.Use(x));
      const Md dst = SameLayoutAs(DescOfOperand(st.ops[0]), spec.dst_dims);
      if (dst.data.ndims != 4) return ctx.Fail(node, "no destination layout like the source's");
      st.ops.push_back(ctx.Define(y, dst));
    } else if (cur && !ctx.options().portable_layouts) {
      st.ops.push_back(ctx.UseAs(x, F32Desc(spec.src_dims, static_cast<uint32_t>(dnnl_nhwc))));
      if (!st.ops[0].present()) return ctx.Fail(node, "source not available in channels-last layout");
      st.ops.push_back(ctx.Define(y, F32Desc(spec.dst_dims, static_cast<uint32_t>(dnnl_nhwc))));
    } else {
      st.ops.push_back(ctx.UsePlain(x));
      st.ops.push_back(ctx.DefinePlain(y));
    }
    st.ints.push_back(spec.bilinear_mode);
    st.floats = {spec.scale_h, spec.scale_w};
    ctx.Emit(std::move(st));
    return Ok();
  }
  bool plain;
  Md src, dst;
  auto try_fn = [&](const Md& s, const Md& d) { return TryResamplePd(spec, s, d); };
  if (!ChooseSameLayout(ctx, x, spec.src_dims, spec.dst_dims, try_fn, &plain, &src, &dst))
    return ctx.Fail(node, "oneDNN refuses this resampling");
  Step st;
  st.kind = StepKind::kResample;
  st.name = NodeName(ctx, node);
  st.ops.push_back(plain ? ctx.UsePlain(x) : ctx.Use(x));
  if (!(DescOfOperand(st.ops[0]) == src)) return ctx.Fail(node, "source operand layout mismatch");
  st.ops.push_back(ctx.Define(y, dst));
  st.ints.push_back(static_cast<int64_t>(spec.alg));
  ctx.Emit(std::move(st));
  return Ok();
}


CheckResult BuildPool(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    const Step& s = bc.step();
    if (s.ints.size() < 2) return bc.Fail("expected alg and spatial rank in ints");
    const int64_t alg = s.ints[0], r64 = s.ints[1];
    if (r64 < 1 || r64 > 3) return bc.Fail("spatial rank " + I2S(r64) + " is outside 1..3");
    const size_t r = static_cast<size_t>(r64);
    CheckResult c = bc.ExpectCounts(2, false, 2 + 5 * r, 0);
    if (!c.ok) return c;
    if (!s.post_ops.empty()) return bc.Fail("pooling takes no post-ops");
    if (alg != dnnl_pooling_max && alg != dnnl_pooling_avg_include_padding && alg != dnnl_pooling_avg_exclude_padding)
      return bc.Fail("unknown pooling algorithm " + I2S(alg));
    if (!InRange(s.ints, 2, 2 * r, 1, kMaxWindow)) return bc.Fail("kernel or stride out of range");
    if (!InRange(s.ints, 2 + 2 * r, 3 * r, 0, kMaxWindow)) return bc.Fail("pads or dilation out of range");
    std::vector<Md> md;
    c = DescsOf(bc, 2, &md);
    if (!c.ok) return c;
    size_t nr = 0;
    c = CheckSpatialPair(bc, md[0], md[1], &nr);
    if (!c.ok) return c;
    if (nr != r) return bc.Fail("operand rank does not match the spatial rank");
    dnnl::primitive prim;
    try {
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(alg), md[0],
                                       md[1], Slice(s.ints, 2 + r, r), Slice(s.ints, 2, r), Slice(s.ints, 2 + 4 * r, r),
                                       Slice(s.ints, 2 + 2 * r, r), Slice(s.ints, 2 + 3 * r, r));
      dnnl::pooling_v2_forward::primitive_desc pd(d, UserScratchpad(), bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.dst_desc() == md[1]))
        return bc.Fail("the pooling chose other layouts than the step's operands");
      prim = dnnl::pooling_v2_forward(pd);
    } catch (const dnnl::error& e) {
      return bc.Fail(std::string("oneDNN refused the step: ") + e.what());
    }
    std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, bc.Slot(0, md[0])}, {DNNL_ARG_DST, bc.Slot(1, md[1])}};
    *out = std::make_unique<PrimitiveExec>(std::move(prim), std::move(args));
    return CheckResult::Ok();
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

CheckResult BuildResample(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    const Step& s = bc.step();
    CheckResult c = bc.ExpectCounts(2, false, 1, 0);
    if (!c.ok) return c;
    if (!s.post_ops.empty()) return bc.Fail("resampling takes no post-ops");
    const int64_t alg = s.ints[0];
    if (alg != dnnl_resampling_nearest && alg != dnnl_resampling_linear)
      return bc.Fail("unknown resampling algorithm " + I2S(alg));
    std::vector<Md> md;
    c = DescsOf(bc, 2, &md);
    if (!c.ok) return c;
    size_t r = 0;
    c = CheckSpatialPair(bc, md[0], md[1], &r);
    if (!c.ok) return c;
    dnnl::primitive prim;
    try {
      dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(alg), md[0],
                                       md[1]);
      dnnl::resampling_forward::primitive_desc pd(d, UserScratchpad(), bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.dst_desc() == md[1]))
        return bc.Fail("the resampling chose other layouts than the step's operands");
      prim = dnnl::resampling_forward(pd);
    } catch (const dnnl::error& e) {
      return bc.Fail(std::string("oneDNN refused the step: ") + e.what());
    }
    std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, bc.Slot(0, md[0])}, {DNNL_ARG_DST, bc.Slot(1, md[1])}};
    *out = std::make_unique<PrimitiveExec>(std::move(prim), std::move(args));
    return CheckResult::Ok();
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}


CheckResult BuildBilinear(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult c = bc.ExpectCounts(2, false, 1, 2);
  if (!c.ok) return c;
  const Step& s = bc.step();
  if (!s.post_ops.empty()) return bc.Fail("takes no post-ops");
  if (s.ints[0] != 0 && s.ints[0] != 1) return bc.Fail("unknown coordinate mode " + I2S(s.ints[0]));
  for (float f : s.floats)
    if (!(f > 0) || !std::isfinite(f)) return bc.Fail("scales must be finite and positive");
  const Operand &src = s.ops[0], &dst = s.ops[1];
  if (src.dtype != kF32 || dst.dtype != kF32) return bc.Fail("src and dst must be float");
  if (src.dims.size() != 4 || dst.dims.size() != 4) return bc.Fail("src and dst must be 4-D");
  if (src.dims[0] != dst.dims[0] || src.dims[1] != dst.dims[1]) return bc.Fail("batch and channel dims must match");
  for (int64_t d : src.dims)
    if (d <= 0) return bc.Fail("empty operand");
  for (int64_t d : dst.dims)
    if (d <= 0) return bc.Fail("empty operand");
  Md ms, md;
  if (!(c = bc.Desc(0, &ms)).ok || !(c = bc.Desc(1, &md)).ok) return c;
  int64_t ss[4], ds[4];
  if (!PlainStrides(ms, ss) || !PlainStrides(md, ds)) return bc.Fail("src and dst must be plain strided (no blocking)");
  const int a = bc.Slot(0, ms), b = bc.Slot(1, md);
  *out = std::make_unique<BilinearExec>(
      a, b, ss, ds, dst.dims.data(),
      PlanBilinearTaps(src.dims[2], dst.dims[2], s.floats[0], s.ints[0]),
      PlanBilinearTaps(src.dims[3], dst.dims[3], s.floats[1], s.ints[0]));
  return Ok();
}

CheckResult BuildBatchNorm(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    const Step& s = bc.step();
    CheckResult c = bc.ExpectCounts(6, false, 0, 1);
    if (!c.ok) return c;
    // One post-op at most: a ReLU (alpha 0), run by oneDNN's fused ReLU.
    const bool relu = s.post_ops.size() == 1;
    if (s.post_ops.size() > 1 || (relu && (s.post_ops[0].kind != PostOp::kEltwise ||
                                          s.post_ops[0].alg != dnnl_eltwise_relu || s.post_ops[0].alpha != 0 ||
                                          s.post_ops[0].beta != 0 || s.post_ops[0].scale != 1)))
      return bc.Fail("batch normalization takes no post-op but a ReLU");
    const float eps = s.floats[0];
    if (!std::isfinite(eps) || eps < 0) return bc.Fail("epsilon must be finite and >= 0");
    std::vector<Md> md;
    c = DescsOf(bc, 6, &md);
    if (!c.ok) return c;
    const int nd = md[0].data.ndims;
    if (nd < 2 || nd > 5 || !IsF32(md[0])) return bc.Fail("src must be f32 of rank 2..5");
    if (!(md[5] == md[0])) return bc.Fail("dst layout differs from src");
    const int64_t ch = md[0].dims()[1];
    const Md param = PlainDesc({ch}, kF32);
    for (size_t i = 1; i < 5; ++i)
      if (!(md[i] == param)) return bc.Fail("scale/shift/mean/variance must be plain f32 [C]");
    dnnl::primitive prim;
    try {
      dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md[0], eps, BnFlags(relu));
      dnnl::batch_normalization_forward::primitive_desc pd(d, UserScratchpad(), bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.dst_desc() == md[5]) || !(pd.mean_desc() == md[3]) ||
          !(pd.variance_desc() == md[4]))
        return bc.Fail("the batch normalization chose other layouts than the step's operands");
      prim = dnnl::batch_normalization_forward(pd);
    } catch (const dnnl::error& e) {
      return bc.Fail(std::string("oneDNN refused the step: ") + e.what());
    }
    std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, bc.Slot(0, md[0])},      {DNNL_ARG_SCALE, bc.Slot(1, md[1])},
                                          {DNNL_ARG_SHIFT, bc.Slot(2, md[2])},    {DNNL_ARG_MEAN, bc.Slot(3, md[3])},
                                          {DNNL_ARG_VARIANCE, bc.Slot(4, md[4])}, {DNNL_ARG_DST, bc.Slot(5, md[5])}};
    *out = std::make_unique<PrimitiveExec>(std::move(prim), std::move(args));
    return CheckResult::Ok();
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

}  // namespace aotcpu
}  // namespace epctx
