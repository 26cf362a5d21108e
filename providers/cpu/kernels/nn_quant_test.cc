// The quantized products on oneDNN (nn_quant_dnnl.h) against plain int64 references written here: ConvInteger and
// QLinearConv with padding, strides, groups, dilations, 1-3 spatial dims, per-channel weight zero points, every
// int8/uint8 combination and the extreme values that saturate vpmaddubsw; MatMulInteger and QLinearMatMul with
// broadcast batches and per-row/per-column zero points; constant (pre-packed) and runtime weights; and the
// vectorized DynamicQuantizeLinear/QuantizeLinear loops against the scalar formula.
// Run under ONEDNN_MAX_CPU_ISA=AVX2 too: that takes the split-weight path (no VNNI).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/kernel_test_util.h"

namespace epctx {
namespace {

using namespace ::epctx::testing;  // NOLINT

// An 8-bit tensor of `shape` (int8 when is_signed) with values from `gen`, or all `fill` when fill >= -128.
Tensor Int8Tensor(const Shape& shape, bool is_signed, std::mt19937& gen, int fill = -1000) {
  Tensor t = Tensor::Allocate(is_signed ? DataType::kInt8 : DataType::kUint8, shape).value();
  std::uniform_int_distribution<int> d(is_signed ? -128 : 0, is_signed ? 127 : 255);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const int v = fill >= -128 ? fill : d(gen);
    if (is_signed) t.data<int8_t>()[i] = static_cast<int8_t>(v);
    else t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
  }
  return t;
}

int32_t At(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kInt8 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
}

struct ConvCase {
  std::vector<int64_t> in, kernel, stride, dilation, pads;  // pads: begins then ends
  int64_t n = 1, c = 4, m = 4, group = 1;
};

// int64 reference: y[n, m, o...] = sum (x - xz)(w - wz[m]) over each window, padding contributing 0.
std::vector<int64_t> RefConvInteger(const ConvCase& cc, const Tensor& x, int32_t xz, const Tensor& w,
                                    const std::vector<int32_t>& wz, std::vector<int64_t>* out_dims) {
  const size_t r = cc.in.size();
  std::vector<int64_t> in(3, 1), k(3, 1), st(3, 1), dl(3, 1), pb(3, 0), pe(3, 0), out(3, 1);
  for (size_t i = 0; i < r; ++i) {
    const size_t a = 3 - r + i;
    in[a] = cc.in[i];
    k[a] = cc.kernel[i];
    st[a] = cc.stride[i];
    dl[a] = cc.dilation[i];
    pb[a] = cc.pads[i];
    pe[a] = cc.pads[r + i];
    out[a] = (in[a] + pb[a] + pe[a] - ((k[a] - 1) * dl[a] + 1)) / st[a] + 1;
  }
  out_dims->assign(out.begin() + (3 - r), out.end());
  const int64_t cg = cc.c / cc.group, mg = cc.m / cc.group, insz = in[0] * in[1] * in[2];
  const int64_t outsz = out[0] * out[1] * out[2], ksz = k[0] * k[1] * k[2];
  std::vector<int64_t> y(cc.n * cc.m * outsz, 0);
  for (int64_t b = 0; b < cc.n; ++b)
    for (int64_t oc = 0; oc < cc.m; ++oc) {
      const int64_t gi = oc / mg;
      const int32_t wzv = wz[wz.size() == 1 ? 0 : oc];
      for (int64_t od = 0; od < out[0]; ++od)
        for (int64_t oh = 0; oh < out[1]; ++oh)
          for (int64_t ow = 0; ow < out[2]; ++ow) {
            int64_t acc = 0;
            for (int64_t ic = 0; ic < cg; ++ic)
              for (int64_t kd = 0; kd < k[0]; ++kd)
                for (int64_t kh = 0; kh < k[1]; ++kh)
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    const int64_t id = od * st[0] - pb[0] + kd * dl[0], ih = oh * st[1] - pb[1] + kh * dl[1],
                                  iw = ow * st[2] - pb[2] + kw * dl[2];
                    if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2]) continue;
                    const int64_t xi = (b * cc.c + gi * cg + ic) * insz + (id * in[1] + ih) * in[2] + iw;
                    const int64_t wi = (oc * cg + ic) * ksz + (kd * k[1] + kh) * k[2] + kw;
                    acc += static_cast<int64_t>(At(x, xi) - xz) * (At(w, wi) - wzv);
                  }
            y[(b * cc.m + oc) * outsz + (od * out[1] + oh) * out[2] + ow] = acc;
          }
    }
  return y;
}

std::vector<Attribute> ConvAttrs(const ConvCase& cc) {
  return {IntsAttr("kernel_shape", cc.kernel), IntsAttr("strides", cc.stride), IntsAttr("dilations", cc.dilation),
          IntsAttr("pads", cc.pads), IntAttr("group", cc.group)};
}

std::vector<ConvCase> ConvCases() {
  std::vector<ConvCase> cases;
  ConvCase a;  // 3x3 "same" like ISNet
  a.in = {9, 11};
  a.kernel = {3, 3};
  a.stride = {1, 1};
  a.dilation = {1, 1};
  a.pads = {1, 1, 1, 1};
  a.n = 2;
  a.c = 5;
  a.m = 7;
  cases.push_back(a);
  ConvCase b = a;  // dilated, strided, asymmetric pads
  b.dilation = {2, 3};
  b.stride = {2, 1};
  b.pads = {2, 0, 3, 4};
  b.in = {13, 10};
  cases.push_back(b);
  ConvCase g = a;  // groups
  g.c = 6;
  g.m = 9;
  g.group = 3;
  g.pads = {0, 2, 1, 0};
  cases.push_back(g);
  ConvCase dw = a;  // depthwise, stride 2
  dw.c = dw.m = dw.group = 8;
  dw.stride = {2, 2};
  cases.push_back(dw);
  ConvCase one;  // 1-D
  one.in = {17};
  one.kernel = {5};
  one.stride = {2};
  one.dilation = {2};
  one.pads = {4, 3};
  one.c = 3;
  one.m = 5;
  cases.push_back(one);
  ConvCase three;  // 3-D
  three.in = {4, 5, 6};
  three.kernel = {2, 3, 3};
  three.stride = {1, 2, 1};
  three.dilation = {1, 1, 2};
  three.pads = {1, 1, 2, 0, 1, 2};
  three.c = 4;
  three.m = 6;
  three.group = 2;
  cases.push_back(three);
  ConvCase deep = a;  // many channels: long sums, the saturation case of vpmaddubsw
  deep.c = 64;
  deep.m = 32;
  deep.in = {6, 6};
  cases.push_back(deep);
  // Pointwise, one group: int8gemm below VNNI (ConvOnOwnGemm). Stride 1 with padding (the padded source is the
  // matrix), and strides 2/3 on a deep input (the strided pixels gathered; long sums of extremes).
  ConvCase pw = a;
  pw.kernel = {1, 1};
  pw.pads = {1, 0, 0, 2};
  pw.c = 19;
  pw.m = 21;
  cases.push_back(pw);
  ConvCase pws = pw;
  pws.stride = {2, 3};
  pws.pads = {0, 0, 0, 0};
  pws.c = 200;
  pws.m = 33;
  cases.push_back(pws);
  return cases;
}

TEST(NnQuantInt8, ConvIntegerMatchesReference) {
  std::mt19937 gen(7);
  int checked = 0;
  for (const ConvCase& cc : ConvCases())
    for (int types = 0; types < 4; ++types)
      for (int mode = 0; mode < 3; ++mode) {  // random / extreme (x max, w min+max) / per-channel zero points
        const bool xs = types & 1, ws = types & 2;
        Shape xshape{cc.n, cc.c}, wshape{cc.m, cc.c / cc.group};
        xshape.insert(xshape.end(), cc.in.begin(), cc.in.end());
        wshape.insert(wshape.end(), cc.kernel.begin(), cc.kernel.end());
        Tensor x = mode == 1 ? Int8Tensor(xshape, xs, gen, xs ? -128 : 255) : Int8Tensor(xshape, xs, gen);
        Tensor w = Int8Tensor(wshape, ws, gen);
        if (mode == 1)
          for (int64_t i = 0; i < w.NumElements(); ++i) {
            if (ws) w.data<int8_t>()[i] = i % 3 ? 127 : -128;
            else w.data<uint8_t>()[i] = i % 3 ? 255 : 0;
          }
        const int32_t xz = xs ? (mode == 1 ? 127 : -3) : (mode == 1 ? 0 : 131);
        std::vector<int32_t> wz{ws ? 5 : 143};
        if (mode == 2) {
          wz.clear();
          for (int64_t i = 0; i < cc.m; ++i) wz.push_back(ws ? static_cast<int32_t>(i * 13 % 50) - 25 : static_cast<int32_t>(100 + i * 7 % 150));
        }
        Tensor xzt = xs ? MakeTensor<int8_t>({}, {static_cast<int8_t>(xz)}) : MakeTensor<uint8_t>({}, {static_cast<uint8_t>(xz)});
        Tensor wzt;
        const Shape wz_shape = wz.size() == 1 ? Shape{} : Shape{static_cast<int64_t>(wz.size())};
        if (ws) {
          std::vector<int8_t> v(wz.begin(), wz.end());
          wzt = MakeTensor<int8_t>(wz_shape, v);
        } else {
          std::vector<uint8_t> v(wz.begin(), wz.end());
          wzt = MakeTensor<uint8_t>(wz_shape, v);
        }
        std::vector<int64_t> out_dims;
        const std::vector<int64_t> want = RefConvInteger(cc, x, xz, w, wz, &out_dims);
        for (bool constant : {false, true}) {
          SCOPED_TRACE("case in=" + ShapeToString(cc.in) + " group=" + std::to_string(cc.group) + " types=" +
                       std::to_string(types) + " mode=" + std::to_string(mode) + " constant=" +
                       std::to_string(constant));
          OpResult r = RunOp("ConvInteger", 10, {x, w, xzt, wzt}, ConvAttrs(cc), 1,
                             constant ? std::vector<size_t>{1, 3} : std::vector<size_t>{});
          ASSERT_TRUE(r.status.ok()) << r.status.ToString();
          Shape ys{cc.n, cc.m};
          ys.insert(ys.end(), out_dims.begin(), out_dims.end());
          ASSERT_EQ(r.out().shape(), ys);
          const std::vector<int32_t> got = Values<int32_t>(r.out());
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
          ++checked;
        }
      }
  EXPECT_EQ(checked, 9 * 4 * 3 * 2);
}

// Depthwise convolutions keep whole weights below VNNI (ConvWeightSplit): oneDNN's depthwise int8 kernels widen
// every product. Windows where every pair of products is 255 x 127 or 255 x -128 (vpmaddubsw would saturate them),
// kernel sizes 3 and 5, strides 1 and 2, channel counts that are not a multiple of the vector width, and the
// ConvInteger/QLinearConv shapes of a detector's depthwise layers.
TEST(NnQuantInt8, DepthwiseConvIsExactAtExtremes) {
  std::mt19937 gen(11);
  int checked = 0;
  for (int64_t k : {3, 5})
    for (int64_t stride : {1, 2})
      for (int64_t c : {16, 21, 48})
        for (int pattern = 0; pattern < 3; ++pattern) {  // all -128, alternating 127/-128, random
          ConvCase cc;
          cc.in = {19, 23};
          cc.kernel = {k, k};
          cc.stride = {stride, stride};
          cc.dilation = {1, 1};
          cc.pads = {k / 2, k / 2, k / 2, k / 2};
          cc.c = cc.m = cc.group = c;
          Tensor x = pattern == 2 ? Int8Tensor({1, c, 19, 23}, false, gen) : Int8Tensor({1, c, 19, 23}, false, gen, 255);
          Tensor w = Int8Tensor({c, 1, k, k}, true, gen);
          if (pattern < 2)
            for (int64_t i = 0; i < w.NumElements(); ++i)
              w.data<int8_t>()[i] = static_cast<int8_t>(pattern == 0 || i % 2 ? -128 : 127);
          const int32_t xz = pattern == 2 ? 97 : 0;
          std::vector<int64_t> out_dims;
          const std::vector<int64_t> want = RefConvInteger(cc, x, xz, w, {0}, &out_dims);
          for (bool constant : {false, true}) {
            SCOPED_TRACE("k=" + std::to_string(k) + " stride=" + std::to_string(stride) + " c=" + std::to_string(c) +
                         " pattern=" + std::to_string(pattern) + " constant=" + std::to_string(constant));
            OpResult r = RunOp("ConvInteger", 10,
                               {x, w, MakeTensor<uint8_t>({}, {static_cast<uint8_t>(xz)}), MakeTensor<int8_t>({}, {0})},
                               ConvAttrs(cc), 1, constant ? std::vector<size_t>{1, 3} : std::vector<size_t>{});
            ASSERT_TRUE(r.status.ok()) << r.status.ToString();
            const std::vector<int32_t> got = Values<int32_t>(r.out());
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
            ++checked;
          }
        }
  EXPECT_EQ(checked, 2 * 2 * 3 * 3 * 2);
}

TEST(NnQuantInt8, QLinearConvRequantizesWithBias) {
  std::mt19937 gen(11);
  ConvCase cc = ConvCases()[1];
  for (bool ys : {false, true}) {
    Shape xshape{cc.n, cc.c}, wshape{cc.m, cc.c};
    xshape.insert(xshape.end(), cc.in.begin(), cc.in.end());
    wshape.insert(wshape.end(), cc.kernel.begin(), cc.kernel.end());
    Tensor x = Int8Tensor(xshape, false, gen);
    Tensor w = Int8Tensor(wshape, true, gen);
    std::vector<int32_t> bias(cc.m), wz(cc.m, 0);
    std::vector<float> w_sc(cc.m);
    for (int64_t i = 0; i < cc.m; ++i) {
      bias[i] = static_cast<int32_t>(i * 977) - 3000;
      w_sc[i] = 0.01f + 0.003f * i;
    }
    const float x_sc = 0.02f, y_sc = 0.5f;
    const int32_t xz = 120, yz = ys ? -10 : 100;
    std::vector<int64_t> out_dims;
    std::vector<int64_t> acc = RefConvInteger(cc, x, xz, w, wz, &out_dims);
    int64_t plane = 1;
    for (int64_t d : out_dims) plane *= d;
    Tensor yzt = ys ? MakeTensor<int8_t>({}, {static_cast<int8_t>(yz)}) : MakeTensor<uint8_t>({}, {static_cast<uint8_t>(yz)});
    OpResult r = RunOp("QLinearConv", 10,
                       {x, MakeTensor<float>({}, {x_sc}), MakeTensor<uint8_t>({}, {static_cast<uint8_t>(xz)}), w,
                        MakeTensor<float>({cc.m}, w_sc), MakeTensor<int8_t>({cc.m}, std::vector<int8_t>(cc.m, 0)),
                        MakeTensor<float>({}, {y_sc}), yzt, MakeTensor<int32_t>({cc.m}, bias)},
                       ConvAttrs(cc), 1, {3});
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i) {
      const int64_t ch = i / plane % cc.m;
      const float scale = x_sc * w_sc[ch] / y_sc;
      const float v = std::nearbyint(static_cast<float>(acc[i] + bias[ch]) * scale) + static_cast<float>(yz);
      const float lo = ys ? -128.f : 0.f, hi = ys ? 127.f : 255.f;
      const int32_t want = static_cast<int32_t>(std::min(hi, std::max(lo, v)));
      const int32_t got = ys ? r.out().data<int8_t>()[i] : r.out().data<uint8_t>()[i];
      ASSERT_EQ(got, want) << "element " << i;
    }
  }
}

// int64 reference of a broadcast batched MatMulInteger with per-row (A) / per-column (B) zero points, which may
// differ per batch matrix.
std::vector<int64_t> RefMatMulInteger(const Tensor& a, const Tensor& b, const std::vector<int32_t>& az,
                                      const std::vector<int32_t>& bz, int64_t batch, int64_t a_mats, int64_t b_mats,
                                      int64_t m, int64_t k, int64_t n) {
  std::vector<int64_t> y(batch * m * n, 0);
  for (int64_t t = 0; t < batch; ++t) {
    const int64_t ai = a_mats == 1 ? 0 : t, bi = b_mats == 1 ? 0 : t;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t azi = az.size() == 1 ? 0 : static_cast<int64_t>(az.size()) == m ? i : ai * m + i;
        const int64_t bzi = bz.size() == 1 ? 0 : static_cast<int64_t>(bz.size()) == n ? j : bi * n + j;
        int64_t acc = 0;
        for (int64_t q = 0; q < k; ++q)
          acc += static_cast<int64_t>(At(a, (ai * m + i) * k + q) - az[azi]) * (At(b, (bi * k + q) * n + j) - bz[bzi]);
        y[(t * m + i) * n + j] = acc;
      }
  }
  return y;
}

template <typename T>
Tensor ZeroPoints(const std::vector<int32_t>& v, bool scalar) {
  std::vector<T> c(v.begin(), v.end());
  return MakeTensor<T>(scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())}, c);
}

TEST(NnQuantInt8, MatMulIntegerMatchesReference) {
  std::mt19937 gen(3);
  struct MmCase {
    int64_t batch, a_mats, b_mats, m, k, n;
  };
  // One B for all rows (turn_detector's form), a batched B, a broadcast A, and a long K.
  const MmCase cases[] = {{3, 3, 1, 5, 19, 23}, {2, 2, 2, 4, 17, 9}, {3, 1, 3, 6, 8, 5}, {1, 1, 1, 7, 1000, 33}};
  for (const MmCase& mc : cases)
    for (int types = 0; types < 4; ++types)
      for (int mode = 0; mode < 3; ++mode) {  // scalar zero points / extreme values / per-row and per-column
        const bool as = types & 1, bs = types & 2;
        const Shape a_shape = mc.a_mats == 1 && mc.batch > 1 ? Shape{mc.m, mc.k} : Shape{mc.a_mats, mc.m, mc.k};
        const Shape b_shape = mc.b_mats == 1 ? Shape{mc.k, mc.n} : Shape{mc.b_mats, mc.k, mc.n};
        Tensor a = mode == 1 ? Int8Tensor(a_shape, as, gen, as ? -128 : 255) : Int8Tensor(a_shape, as, gen);
        Tensor b = Int8Tensor(b_shape, bs, gen);
        if (mode == 1)
          for (int64_t i = 0; i < b.NumElements(); ++i) {
            if (bs) b.data<int8_t>()[i] = i % 5 ? 127 : -128;
            else b.data<uint8_t>()[i] = i % 5 ? 255 : 0;
          }
        std::vector<int32_t> az{as ? 7 : 129}, bz{bs ? 0 : 128};
        if (mode == 1) bz = {bs ? -100 : 3};
        if (mode == 2) {
          az.clear();
          bz.clear();
          for (int64_t i = 0; i < mc.m * mc.a_mats; ++i) az.push_back(as ? static_cast<int32_t>(i % 9) - 4 : 120 + i % 11);
          for (int64_t j = 0; j < mc.n; ++j) bz.push_back(bs ? static_cast<int32_t>(j % 7) - 3 : 140 + j % 13);
        }
        const std::vector<int64_t> want =
            RefMatMulInteger(a, b, az, bz, mc.batch, mc.a_mats, mc.b_mats, mc.m, mc.k, mc.n);
        Tensor azt = as ? ZeroPoints<int8_t>(az, mode != 2) : ZeroPoints<uint8_t>(az, mode != 2);
        Tensor bzt = bs ? ZeroPoints<int8_t>(bz, mode != 2) : ZeroPoints<uint8_t>(bz, mode != 2);
        for (bool constant : {false, true}) {
          SCOPED_TRACE("batch=" + std::to_string(mc.batch) + " b_mats=" + std::to_string(mc.b_mats) + " k=" +
                       std::to_string(mc.k) + " types=" + std::to_string(types) + " mode=" + std::to_string(mode) +
                       " constant=" + std::to_string(constant));
          OpResult r = RunOp("MatMulInteger", 10, {a, b, azt, bzt}, {}, 1,
                             constant ? std::vector<size_t>{1, 3} : std::vector<size_t>{});
          ASSERT_TRUE(r.status.ok()) << r.status.ToString();
          const std::vector<int32_t> got = Values<int32_t>(r.out());
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
        }
      }
}

TEST(NnQuantInt8, QLinearMatMulPerColumnScales) {
  std::mt19937 gen(5);
  const int64_t m = 6, k = 40, n = 7;
  Tensor a = Int8Tensor({2, m, k}, false, gen);
  Tensor b = Int8Tensor({k, n}, true, gen);
  std::vector<float> b_sc(n);
  for (int64_t j = 0; j < n; ++j) b_sc[j] = 0.002f * (j + 1);
  const float a_sc = 0.05f, y_sc = 0.1f;
  const std::vector<int64_t> acc = RefMatMulInteger(a, b, {100}, {0}, 2, 2, 1, m, k, n);
  OpResult r = RunOp("QLinearMatMul", 10,
                     {a, MakeTensor<float>({}, {a_sc}), MakeTensor<uint8_t>({}, {100}), b,
                      MakeTensor<float>({n}, b_sc), MakeTensor<int8_t>({n}, std::vector<int8_t>(n, 0)),
                      MakeTensor<float>({}, {y_sc}), MakeTensor<uint8_t>({}, {128})},
                     {}, 1, {3});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i) {
    const float scale = a_sc * b_sc[i % n] / y_sc;
    const float v = std::nearbyint(static_cast<float>(acc[i]) * scale) + 128.f;
    const int32_t want = static_cast<int32_t>(std::min(255.f, std::max(0.f, v)));
    ASSERT_EQ(r.out().data<uint8_t>()[i], want) << "element " << i;
  }
}

TEST(NnQuantInt8, DynamicQuantizeLinearMatchesScalarFormula) {
  std::mt19937 gen(9);
  for (int64_t size : {int64_t{1}, int64_t{13}, int64_t{200003}}) {
    Tensor x = Tensor::Allocate(DataType::kFloat, {size}).value();
    std::uniform_real_distribution<float> d(-3.f, 5.f);
    for (int64_t i = 0; i < size; ++i) x.data<float>()[i] = d(gen);
    if (size > 100) x.data<float>()[size / 2] = -7.5f;  // the minimum far from the start
    OpResult r = RunOp("DynamicQuantizeLinear", 11, {x}, {}, 3);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    float lo = 0.f, hi = 0.f;
    for (int64_t i = 0; i < size; ++i) {
      lo = std::min(lo, x.data<float>()[i]);
      hi = std::max(hi, x.data<float>()[i]);
    }
    const float scale = (hi - lo) / 255.f;
    const float zp = std::nearbyint(std::min(255.f, std::max(0.f, -lo / scale)));
    EXPECT_EQ(r.outputs[1].tensor().data<float>()[0], scale);
    EXPECT_EQ(r.outputs[2].tensor().data<uint8_t>()[0], static_cast<uint8_t>(zp));
    for (int64_t i = 0; i < size; ++i) {
      const float v = std::min(255.f, std::max(0.f, std::nearbyint(x.data<float>()[i] / scale) + zp));
      ASSERT_EQ(r.outputs[0].tensor().data<uint8_t>()[i], static_cast<uint8_t>(v)) << "element " << i;
    }
  }
  // All zeros: scale 0, zero point 0, y 0.
  OpResult r = RunOp("DynamicQuantizeLinear", 11, {MakeTensor<float>({3}, {0.f, 0.f, 0.f})}, {}, 3);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs[1].tensor().data<float>()[0], 0.f);
  EXPECT_EQ(Values<uint8_t>(r.outputs[0].tensor()), (std::vector<uint8_t>{0, 0, 0}));
}

TEST(NnQuantInt8, QuantizeLinearTiesNanAndSaturation) {
  // Ties go to even, NaN to the minimum, out-of-range values saturate (the vectorized loop).
  std::vector<float> xs;
  for (int i = -700; i <= 700; ++i) xs.push_back(i * 0.25f);
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  xs.push_back(std::numeric_limits<float>::infinity());
  xs.push_back(-std::numeric_limits<float>::infinity());
  const int64_t count = static_cast<int64_t>(xs.size());
  Tensor x = MakeTensor<float>({count}, xs);
  OpResult r = RunOp("QuantizeLinear", 13, {x, MakeTensor<float>({}, {0.5f}), MakeTensor<int8_t>({}, {3})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (int64_t i = 0; i < count; ++i) {
    const float v = std::nearbyint(xs[i] / 0.5f) + 3.f;
    const int32_t want = std::isnan(v) ? -128 : static_cast<int32_t>(std::min(127.f, std::max(-128.f, v)));
    ASSERT_EQ(r.out().data<int8_t>()[i], want) << "x = " << xs[i];
  }
}

}  // namespace
}  // namespace epctx
