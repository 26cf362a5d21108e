// The shape-generic form of a dynamic graph (dynamic.h) and its kernels (generic_ops.h):
//   - kernels against references computed here (concat, transpose, slice with negative steps, gather, MatMul with
//     broadcast batches and transposed B, broadcast binaries, softmax in both opset meanings) and their errors;
//   - a decoder-shaped attention block (K/V concat with a free past, QK^T, scale, causal mask sliced by the past
//     length, softmax, PV, projections with weights) runs in the generic form at every past, without binding a shape,
//     against a reference computed here and against the per-shape form;
//   - a dim that is equal at every probe size but not always (a Slice of a constant) is checked at every run: a run
//     where it differs is bound per shape and still correct.
#include "providers/aotcpu/runtime/generic_ops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/runtime/dynamic.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;  // GraphBuilder, Dims, UniformFloats

// A tensor over a test vector: float (T) or int64 (TI).
template <typename V>
GTensor Over(std::vector<V>& v, Dims d, uint32_t dtype) {
  GTensor t;
  t.data = v.data();
  t.dims = std::move(d);
  t.dtype = dtype;
  return t;
}
GTensor T(std::vector<float>& v, Dims d) { return Over(v, std::move(d), kF32); }
GTensor TI(std::vector<int64_t>& v, Dims d) { return Over(v, std::move(d), kI64); }

// Runs the kernel for a node `op` built over float inputs of the given dims (and int64 constant inputs after them).
std::string RunKernel(const std::string& op, std::map<std::string, Attr> attrs, std::vector<GTensor> in,
                      std::vector<GTensor> out, int64_t opset = 17) {
  GraphBuilder b;
  std::vector<std::string> names;
  for (size_t i = 0; i < in.size(); ++i) {
    names.push_back("i" + std::to_string(i));
    const int v = b.Out(names.back(), in[i].dims);
    b.g.v(v).dtype = in[i].dtype;
  }
  std::vector<std::string> outs;
  for (size_t i = 0; i < out.size(); ++i) {
    outs.push_back("o" + std::to_string(i));
    const int v = b.Out(outs.back(), out[i].dims);
    b.g.v(v).dtype = out[i].dtype;
  }
  Node& n = b.N(op, names, outs, opset);
  n.attrs = std::move(attrs);
  std::string why;
  GenericKernel k = FindGenericKernel(b.g, n, &why);
  if (!k) return "unsupported: " + why;
  return k(b.g, n, in, out, 2);
}

TEST(AotCpuGenericOps, ConcatTransposeSliceGather) {
  std::vector<float> a = UniformFloats(2 * 3 * 4, 1), c = UniformFloats(2 * 1 * 4, 2), o(2 * 4 * 4);
  ASSERT_EQ(RunKernel("Concat", {{"axis", IntA(-2)}}, {T(a, {2, 3, 4}), T(c, {2, 1, 4})}, {T(o, {2, 4, 4})}), "");
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(o[(i * 4 + j) * 4 + k], j < 3 ? a[(i * 3 + j) * 4 + k] : c[i * 4 + k]);
  // Wrong output dims are an error, not a write past the buffer.
  EXPECT_NE(RunKernel("Concat", {{"axis", IntA(1)}}, {T(a, {2, 3, 4}), T(c, {2, 1, 4})}, {T(o, {2, 5, 4})}), "");

  std::vector<float> t(24);
  ASSERT_EQ(RunKernel("Transpose", {{"perm", IntsA({2, 0, 1})}}, {T(a, {2, 3, 4})}, {T(t, {4, 2, 3})}), "");
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(t[(k * 2 + i) * 3 + j], a[(i * 3 + j) * 4 + k]);

  // Slice rows 2..0 backwards (step -1) and columns 1..3 of a [3, 4]: the ONNX clamping rules.
  std::vector<int64_t> starts = {-1, 1}, ends = {INT64_MIN, 3}, axes = {0, 1}, steps = {-1, 1};
  std::vector<float> s(3 * 2);
  ASSERT_EQ(RunKernel("Slice", {}, {T(a, {3, 4}), TI(starts, {2}), TI(ends, {2}), TI(axes, {2}), TI(steps, {2})},
                      {T(s, {3, 2})}), "");
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 2; ++k) EXPECT_EQ(s[r * 2 + k], a[(2 - r) * 4 + 1 + k]);

  std::vector<int64_t> idx = {-1, 0, 2};
  std::vector<float> gth(3 * 4);
  ASSERT_EQ(RunKernel("Gather", {{"axis", IntA(0)}}, {T(a, {3, 4}), TI(idx, {3})}, {T(gth, {3, 4})}), "");
  for (int k = 0; k < 4; ++k) EXPECT_EQ(gth[k], a[8 + k]);
  idx[1] = 3;
  EXPECT_NE(RunKernel("Gather", {{"axis", IntA(0)}}, {T(a, {3, 4}), TI(idx, {3})}, {T(gth, {3, 4})}).find("out of range"),
            std::string::npos);
}

TEST(AotCpuGenericOps, MatMulBroadcastAndTransposedB) {
  // [2, 1, 3, 5] x [4, 5, 6] -> [2, 4, 3, 6]
  std::vector<float> a = UniformFloats(2 * 3 * 5, 3), b = UniformFloats(4 * 5 * 6, 4), c(2 * 4 * 3 * 6);
  ASSERT_EQ(RunKernel("MatMul", {}, {T(a, {2, 1, 3, 5}), T(b, {4, 5, 6})}, {T(c, {2, 4, 3, 6})}), "");
  std::vector<float> bt(4 * 6 * 5);  // b transposed in its last two dims
  for (int q = 0; q < 4; ++q)
    for (int k = 0; k < 5; ++k)
      for (int n = 0; n < 6; ++n) bt[(q * 6 + n) * 5 + k] = b[(q * 5 + k) * 6 + n];
  std::vector<float> ct(c.size());
  GraphBuilder g;
  g.Out("a", {2, 1, 3, 5});
  g.Out("b", {4, 6, 5});
  g.Out("c", {2, 4, 3, 6});
  Node& n = g.N("MatMul", {"a", "b"}, {"c"});
  ASSERT_EQ(MatMulTransposedB(g.g, n, {T(a, {2, 1, 3, 5}), T(bt, {4, 6, 5})}, {T(ct, {2, 4, 3, 6})}, 2), "");
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 4; ++q)
      for (int m = 0; m < 3; ++m)
        for (int j = 0; j < 6; ++j) {
          double want = 0;
          for (int k = 0; k < 5; ++k) want += double(a[(p * 3 + m) * 5 + k]) * b[(q * 5 + k) * 6 + j];
          const size_t at = static_cast<size_t>(((p * 4 + q) * 3 + m) * 6 + j);
          EXPECT_NEAR(c[at], want, 1e-5);
          EXPECT_NEAR(ct[at], want, 1e-5);
        }
  // 1-D operands: [5] x [5, 6] -> [6].
  std::vector<float> v(6);
  ASSERT_EQ(RunKernel("MatMul", {}, {T(a, {5}), T(b, {5, 6})}, {T(v, {6})}), "");
  for (int j = 0; j < 6; ++j) {
    double want = 0;
    for (int k = 0; k < 5; ++k) want += double(a[k]) * b[k * 6 + j];
    EXPECT_NEAR(v[j], want, 1e-5);
  }
  EXPECT_NE(RunKernel("MatMul", {}, {T(a, {3, 5}), T(b, {4, 6})}, {T(c, {3, 6})}).find("inner dims"), std::string::npos);
}

TEST(AotCpuGenericOps, BinarySoftmaxAndErrors) {
  std::vector<float> a = UniformFloats(2 * 3, 5), b = UniformFloats(3, 6), o(6);
  ASSERT_EQ(RunKernel("Sub", {}, {T(a, {2, 3}), T(b, {3})}, {T(o, {2, 3})}), "");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(o[i], a[i] - b[i % 3]);
  EXPECT_NE(RunKernel("Add", {}, {T(a, {2, 3}), T(b, {3})}, {T(o, {3, 2})}), "");
  std::vector<int64_t> x = {7, 8}, zero = {0};
  std::vector<int64_t> q(2);
  EXPECT_NE(RunKernel("Div", {}, {TI(x, {2}), TI(zero, {1})}, {TI(q, {2})}).find("division by zero"), std::string::npos);

  // Softmax over axis 1 of [2, 3, 2]: opset 13 normalizes along that axis only, opset 11 over the flattened 3 x 2.
  std::vector<float> s = UniformFloats(12, 7, -3, 3), y13(12), y11(12);
  ASSERT_EQ(RunKernel("Softmax", {{"axis", IntA(1)}}, {T(s, {2, 3, 2})}, {T(y13, {2, 3, 2})}, 13), "");
  ASSERT_EQ(RunKernel("Softmax", {{"axis", IntA(1)}}, {T(s, {2, 3, 2})}, {T(y11, {2, 3, 2})}, 11), "");
  for (int i = 0; i < 2; ++i) {
    double all = 0;
    for (int k = 0; k < 6; ++k) all += std::exp(double(s[i * 6 + k]));
    for (int j = 0; j < 2; ++j) {
      double col = 0;
      for (int k = 0; k < 3; ++k) col += std::exp(double(s[i * 6 + k * 2 + j]));
      for (int k = 0; k < 3; ++k) {
        EXPECT_NEAR(y13[i * 6 + k * 2 + j], std::exp(double(s[i * 6 + k * 2 + j])) / col, 1e-6);
        EXPECT_NEAR(y11[i * 6 + k * 2 + j], std::exp(double(s[i * 6 + k * 2 + j])) / all, 1e-6);
      }
    }
  }
  std::string why;
  GraphBuilder g;
  g.Out("a", {2, 2});
  g.Out("y", {2, 2});
  Node& n = g.N("Conv", {"a"}, {"y"});
  EXPECT_EQ(FindGenericKernel(g.g, n, &why), nullptr);
  EXPECT_NE(why.find("Conv"), std::string::npos);
}

// Issue 27 item 6: the typed elementwise kernels (RunElementwise, shared with the static kTypedEltwise step).
TEST(AotCpuGenericOps, TypedElementwiseInt64BoolAndCasts) {
  const int64_t mn = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> a = {7, -7, 7, -7, mn, 5}, b = {2, 2, -2, -2, 3, -1}, q(6);
  ASSERT_EQ(RunKernel("Div", {}, {TI(a, {6}), TI(b, {6})}, {TI(q, {6})}), "");
  EXPECT_EQ(q, (std::vector<int64_t>{3, -3, -3, 3, mn / 3, -5}));
  std::vector<int64_t> m1 = {-1};
  EXPECT_NE(RunKernel("Div", {}, {TI(a, {6}), TI(m1, {1})}, {TI(q, {6})}).find("division by zero"), std::string::npos);
  ASSERT_EQ(RunKernel("Neg", {}, {TI(a, {6})}, {TI(q, {6})}), "");
  EXPECT_EQ(q, (std::vector<int64_t>{-7, 7, -7, 7, mn, -5}));
  // Cast float -> int64: truncation toward zero, NaN and out-of-range values give the minimum (ORT on x86).
  std::vector<float> f = {-2.7f, 2.7f, std::nanf(""), 1e19f};
  std::vector<int64_t> fi(4);
  ASSERT_EQ(RunKernel("Cast", {{"to", IntA(7)}}, {T(f, {4})}, {TI(fi, {4})}), "");
  EXPECT_EQ(fi, (std::vector<int64_t>{-2, 2, mn, mn}));
  // Equal -> Not -> Xor, Where on int64 with broadcast.
  std::vector<uint8_t> eq(6), nt(6), flag = {1, 0, 1}, x(6);
  std::vector<int64_t> zero = {-7}, w(6);
  ASSERT_EQ(RunKernel("Equal", {}, {TI(a, {2, 3}), TI(zero, {1})}, {Over(eq, {2, 3}, kBool)}), "");
  EXPECT_EQ(eq, (std::vector<uint8_t>{0, 1, 0, 1, 0, 0}));
  ASSERT_EQ(RunKernel("Not", {}, {Over(eq, {2, 3}, kBool)}, {Over(nt, {2, 3}, kBool)}), "");
  ASSERT_EQ(RunKernel("Xor", {}, {Over(nt, {2, 3}, kBool), Over(flag, {3}, kBool)}, {Over(x, {2, 3}, kBool)}), "");
  EXPECT_EQ(x, (std::vector<uint8_t>{0, 0, 0, 1, 1, 0}));  // Not(eq) {1,0,1,0,1,1} xor flag {1,0,1} per row
  ASSERT_EQ(RunKernel("Where", {}, {Over(eq, {2, 3}, kBool), TI(b, {2, 3}), TI(zero, {1})}, {TI(w, {2, 3})}), "");
  EXPECT_EQ(w, (std::vector<int64_t>{-7, 2, -7, -2, -7, -7}));
  // Refused with a reason: float -> uint8, And of int64.
  std::vector<uint8_t> u(4);
  EXPECT_NE(RunKernel("Cast", {{"to", IntA(2)}}, {T(f, {4})}, {Over(u, {4}, kU8)}), "");
  EXPECT_NE(RunKernel("And", {}, {TI(a, {6}), TI(b, {6})}, {Over(x, {6}, kBool)}), "");
  // Trilu (upper, k 1) of [2, 3]; ReduceL2 over axis 1 of [2, 3] with keepdims 0 and 1.
  std::vector<float> m = {1, 2, 3, 4, 5, 6}, tu(6), l0(2), l1(2);
  std::vector<int64_t> one = {1};
  ASSERT_EQ(RunKernel("Trilu", {{"upper", IntA(1)}}, {T(m, {2, 3}), TI(one, {})}, {T(tu, {2, 3})}), "");
  EXPECT_EQ(tu, (std::vector<float>{0, 2, 3, 0, 0, 6}));
  ASSERT_EQ(RunKernel("ReduceL2", {{"axes", IntsA({1})}, {"keepdims", IntA(0)}}, {T(m, {2, 3})}, {T(l0, {2})}), "");
  ASSERT_EQ(RunKernel("ReduceL2", {{"axes", IntsA({-1})}}, {T(m, {2, 3})}, {T(l1, {2, 1})}), "");
  for (std::vector<float>* l : {&l0, &l1}) {
    EXPECT_FLOAT_EQ((*l)[0], std::sqrt(14.f));
    EXPECT_FLOAT_EQ((*l)[1], std::sqrt(77.f));
  }
  EXPECT_NE(RunKernel("ReduceL2", {{"axes", IntsA({1})}}, {T(m, {2, 3})}, {T(l0, {2})}), "");  // keepdims 1: [2, 1]
}

// ---- the generic form of a dynamic graph ---------------------------------------------------------------------------

constexpr int64_t kD = 16, kH = 2, kHd = 8, kMaxSeq = 128;

// One attention block with a KV cache: x [1, 1, D]; past_k/past_v [1, H, past, Hd]. q/k/v = x @ W (then heads),
// present = concat(past, new), scores = q K^T * scale + causal mask row `past` (sliced from a constant [S, S] by the
// past length, computed in the graph), y = softmax(scores) V (heads merged) @ Wo.
struct Attention {
  GraphBuilder b;
  std::vector<float> wq = UniformFloats(kD * kD, 21), wk = UniformFloats(kD * kD, 22), wv = UniformFloats(kD * kD, 23),
                     wo = UniformFloats(kD * kD, 24), mask;
  Attention() {
    for (int64_t r = 0; r < kMaxSeq; ++r)
      for (int64_t c = 0; c < kMaxSeq; ++c) mask.push_back(c <= r ? 0.f : -1e9f);
    b.Input("x", {1, 1, kD});
    b.SymInput("past_k", {1, kH, -1, kHd}, {"", "", "past", ""});
    b.SymInput("past_v", {1, kH, -1, kHd}, {"", "", "past", ""});
    b.F32("Wq", {kD, kD}, wq);
    b.F32("Wk", {kD, kD}, wk);
    b.F32("Wv", {kD, kD}, wv);
    b.F32("Wo", {kD, kD}, wo);
    b.F32("mask", {kMaxSeq, kMaxSeq}, mask);
    b.F32("scale", {}, {1.f / std::sqrt(float(kHd))});
    b.I64("heads", {1, 1, kH, kHd});
    b.I64("merged", {1, 1, kD});
    b.I64("zero", {0});
    b.I64("one", {1});
    b.I64("ax0", {0});
    b.I64("ax1", {1});
    b.I64("two_idx", {2});
    for (const char* n : {"q", "k", "v"}) {
      const std::string s = n;
      b.Out(s + "_mm", {1, 1, kD});
      b.Out(s + "_r", {1, 1, kH, kHd});
      b.Out(s + "_h", {1, kH, 1, kHd});
      b.N("MatMul", {"x", "W" + s}, {s + "_mm"});
      b.N("Reshape", {s + "_mm", "heads"}, {s + "_r"});
      b.N("Transpose", {s + "_r"}, {s + "_h"}).attrs["perm"] = IntsA({0, 2, 1, 3});
    }
    b.FreeOut("present_k", {1, kH, -1, kHd});
    b.FreeOut("present_v", {1, kH, -1, kHd});
    b.N("Concat", {"past_k", "k_h"}, {"present_k"}).attrs["axis"] = IntA(2);
    b.N("Concat", {"past_v", "v_h"}, {"present_v"}).attrs["axis"] = IntA(2);
    b.g.v(b.Out("shape", {4})).dtype = kI64;
    b.g.v(b.Out("past_1d", {1})).dtype = kI64;
    b.g.v(b.Out("end_1d", {1})).dtype = kI64;
    b.N("Shape", {"past_k"}, {"shape"});
    b.N("Gather", {"shape", "two_idx"}, {"past_1d"}).attrs["axis"] = IntA(0);
    b.N("Add", {"past_1d", "one"}, {"end_1d"});
    b.FreeOut("mask_rows", {-1, kMaxSeq});
    b.FreeOut("mask_row", {-1, -1});
    b.N("Slice", {"mask", "past_1d", "end_1d", "ax0"}, {"mask_rows"});
    b.N("Slice", {"mask_rows", "zero", "end_1d", "ax1"}, {"mask_row"});
    b.FreeOut("kt", {1, kH, kHd, -1});
    b.FreeOut("scores", {1, kH, 1, -1});
    b.FreeOut("scaled", {1, kH, 1, -1});
    b.FreeOut("masked", {1, kH, 1, -1});
    b.FreeOut("probs", {1, kH, 1, -1});
    b.N("Transpose", {"present_k"}, {"kt"}).attrs["perm"] = IntsA({0, 1, 3, 2});
    b.N("MatMul", {"q_h", "kt"}, {"scores"});
    b.N("Mul", {"scores", "scale"}, {"scaled"});
    b.N("Add", {"scaled", "mask_row"}, {"masked"});
    b.N("Softmax", {"masked"}, {"probs"}).attrs["axis"] = IntA(-1);
    b.Out("ctx", {1, kH, 1, kHd});
    b.Out("ctx_t", {1, 1, kH, kHd});
    b.Out("ctx_m", {1, 1, kD});
    b.Out("y", {1, 1, kD});
    b.N("MatMul", {"probs", "present_v"}, {"ctx"});
    b.N("Transpose", {"ctx"}, {"ctx_t"}).attrs["perm"] = IntsA({0, 2, 1, 3});
    b.N("Reshape", {"ctx_t", "merged"}, {"ctx_m"});
    b.N("MatMul", {"ctx_m", "Wo"}, {"y"});
    b.Output("y");
    b.Output("present_k");
    b.Output("present_v");
  }
};

std::unique_ptr<DynamicGraph> MakeAttention(const GraphBuilder& b, bool generic) {
  DynamicGraph::Options o;
  o.threads = 1;
  o.generic = generic;
  std::unique_ptr<DynamicGraph> d;
  static const char kOwner = 0;
  CheckResult r = DynamicGraph::Create(b.g, {"x", "past_k", "past_v"}, {"y", "present_k", "present_v"}, o,
                                       std::shared_ptr<const void>(&kOwner, [](const void*) {}), &d);
  EXPECT_TRUE(r.ok) << r.reason;
  return d;
}

struct Outputs {
  std::vector<std::vector<float>> data;
  std::vector<Dims> dims;
};

CheckResult RunGraph(DynamicGraph* d, const std::vector<std::vector<float>*>& in, const std::vector<Dims>& dims,
                     Outputs* out, bool* invalid) {
  out->data.assign(d->outputs().size(), {});
  out->dims.assign(d->outputs().size(), {});
  std::vector<const void*> ptrs;
  for (auto* v : in) ptrs.push_back(v->data());
  return d->Run(ptrs, dims, std::vector<uint32_t>(in.size(), kF32),
                [&](size_t i, const std::vector<int64_t>& od, void** data) {
                  out->dims[i] = od;
                  out->data[i].assign(static_cast<size_t>(Numel(od)), NAN);
                  *data = out->data[i].data();
                  return CheckResult::Ok();
                },
                invalid);
}

// y for one decode step, computed here in double.
std::vector<float> AttentionReference(const Attention& m, const std::vector<float>& x, const std::vector<float>& pk,
                                      const std::vector<float>& pv, int64_t past) {
  auto proj = [&](const std::vector<float>& w) {
    std::vector<double> r(kD);
    for (int64_t j = 0; j < kD; ++j)
      for (int64_t k = 0; k < kD; ++k) r[j] += double(x[k]) * w[k * kD + j];
    return r;
  };
  const std::vector<double> q = proj(m.wq), k = proj(m.wk), v = proj(m.wv);
  std::vector<double> ctx(kD);
  const int64_t total = past + 1;
  for (int64_t h = 0; h < kH; ++h) {
    auto key = [&](int64_t t, int64_t e) { return t < past ? double(pk[(h * past + t) * kHd + e]) : k[h * kHd + e]; };
    auto val = [&](int64_t t, int64_t e) { return t < past ? double(pv[(h * past + t) * kHd + e]) : v[h * kHd + e]; };
    std::vector<double> s(static_cast<size_t>(total));
    double mx = -1e300;
    for (int64_t t = 0; t < total; ++t) {
      for (int64_t e = 0; e < kHd; ++e) s[t] += q[h * kHd + e] * key(t, e);
      s[t] = s[t] / std::sqrt(double(kHd)) + m.mask[past * kMaxSeq + t];
      mx = std::max(mx, s[t]);
    }
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - mx));
    for (int64_t e = 0; e < kHd; ++e)
      for (int64_t t = 0; t < total; ++t) ctx[h * kHd + e] += s[t] / sum * val(t, e);
  }
  std::vector<float> y(kD);
  for (int64_t j = 0; j < kD; ++j) {
    double acc = 0;
    for (int64_t e = 0; e < kD; ++e) acc += ctx[e] * m.wo[e * kD + j];
    y[j] = static_cast<float>(acc);
  }
  return y;
}

Attention& Model() {
  static Attention m;
  return m;
}

TEST(AotCpuGeneric, AttentionRunsAtEveryPastWithoutBindingAShape) {
  Attention& m = Model();
  auto gen = MakeAttention(m.b, true), per_shape = MakeAttention(m.b, false);
  ASSERT_TRUE(gen && per_shape);
  ASSERT_TRUE(gen->generic()) << gen->why_not_generic();
  EXPECT_FALSE(per_shape->generic());
  EXPECT_NE(gen->GenericSummary().find("static segment"), std::string::npos) << gen->GenericSummary();
  const std::vector<int64_t> pasts = {1, 2, 7, 31, 64, 100, 127, 3};
  for (size_t i = 0; i < pasts.size(); ++i) {
    const int64_t past = pasts[i];
    std::vector<float> x = UniformFloats(kD, 100 + static_cast<uint32_t>(i));
    std::vector<float> pk = UniformFloats(kH * past * kHd, 200 + static_cast<uint32_t>(i));
    std::vector<float> pv = UniformFloats(kH * past * kHd, 300 + static_cast<uint32_t>(i));
    const std::vector<Dims> dims = {{1, 1, kD}, {1, kH, past, kHd}, {1, kH, past, kHd}};
    Outputs a, b;
    bool invalid = true;
    CheckResult r = RunGraph(gen.get(), {&x, &pk, &pv}, dims, &a, &invalid);
    ASSERT_TRUE(r.ok) << "past " << past << ": " << r.reason;
    r = RunGraph(per_shape.get(), {&x, &pk, &pv}, dims, &b, &invalid);
    ASSERT_TRUE(r.ok) << "past " << past << ": " << r.reason;
    ASSERT_EQ(a.dims, b.dims);
    EXPECT_EQ(a.dims[1], (Dims{1, kH, past + 1, kHd}));
    const std::vector<float> want = AttentionReference(m, x, pk, pv, past);
    for (int64_t j = 0; j < kD; ++j) {
      EXPECT_NEAR(a.data[0][j], want[j], 1e-4f) << "past " << past << " y[" << j << "] (generic)";
      EXPECT_NEAR(b.data[0][j], want[j], 1e-4f) << "past " << past << " y[" << j << "] (per shape)";
    }
    EXPECT_EQ(a.data[1], b.data[1]) << "present_k at past " << past;
    EXPECT_EQ(a.data[2], b.data[2]) << "present_v at past " << past;
  }
  const DynamicGraph::Stats s = gen->stats();
  EXPECT_EQ(s.generic_runs, pasts.size());
  EXPECT_EQ(s.generic_fallbacks, 0u);
  EXPECT_EQ(s.binds, 0u) << "the generic form bound a shape";
  EXPECT_EQ(per_shape->stats().binds, pasts.size());
}

// Concurrent runs at different past lengths share the segments' executors and take their own buffers.
TEST(AotCpuGeneric, ConcurrentRunsAtDifferentPasts) {
  Attention& m = Model();
  auto gen = MakeAttention(m.b, true);
  ASSERT_TRUE(gen && gen->generic());
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        const int64_t past = 1 + (t * 13 + i * 7) % 100;
        std::vector<float> x = UniformFloats(kD, 1000 + static_cast<uint32_t>(t * 100 + i));
        std::vector<float> pk = UniformFloats(kH * past * kHd, 2000 + static_cast<uint32_t>(t * 100 + i));
        std::vector<float> pv = UniformFloats(kH * past * kHd, 3000 + static_cast<uint32_t>(t * 100 + i));
        Outputs o;
        bool invalid = false;
        CheckResult r = RunGraph(gen.get(), {&x, &pk, &pv}, {{1, 1, kD}, {1, kH, past, kHd}, {1, kH, past, kHd}}, &o,
                                 &invalid);
        if (!r.ok) {
          ++bad;
          continue;
        }
        const std::vector<float> want = AttentionReference(m, x, pk, pv, past);
        for (int64_t j = 0; j < kD; ++j)
          if (std::fabs(o.data[0][j] - want[j]) > 1e-4f) ++bad;
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(gen->stats().generic_runs, 48u);
  EXPECT_EQ(gen->stats().binds, 0u);
}

TEST(AotCpuGeneric, ShapeErrorsAreInvalidArguments) {
  Attention& m = Model();
  auto gen = MakeAttention(m.b, true);
  ASSERT_TRUE(gen && gen->generic());
  std::vector<float> x(kD), pk(kH * 4 * kHd), pv(kH * 5 * kHd);
  Outputs o;
  bool invalid = false;
  // past_k and past_v disagree on `past`.
  CheckResult r = RunGraph(gen.get(), {&x, &pk, &pv}, {{1, 1, kD}, {1, kH, 4, kHd}, {1, kH, 5, kHd}}, &o, &invalid);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(invalid);
  EXPECT_NE(r.reason.find("past"), std::string::npos) << r.reason;
  // A past beyond the mask's rows: the mask row is empty and does not broadcast with the scores.
  std::vector<float> big(kH * 200 * kHd);
  r = RunGraph(gen.get(), {&x, &big, &big}, {{1, 1, kD}, {1, kH, 200, kHd}, {1, kH, 200, kHd}}, &o, &invalid);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(invalid) << r.reason;
  // Wrong element type.
  std::vector<const void*> ptrs = {x.data(), pk.data(), pk.data()};
  r = gen->Run(ptrs, {{1, 1, kD}, {1, kH, 4, kHd}, {1, kH, 4, kHd}}, {kF32, kI64, kF32},
               [](size_t, const std::vector<int64_t>&, void**) { return CheckResult::Ok(); }, &invalid);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(invalid);
}

// y = Slice(C, [n], [n + 2]) @ W for an input p [n]: the slice has 2 rows at every probe size (n < 198), so the
// MatMul is compiled in a static segment for 2 rows; at n = 199 it has 1, and that run is bound per shape.
TEST(AotCpuGeneric, ADimEqualAtEveryProbeButNotAlwaysIsCheckedEveryRun) {
  GraphBuilder b;
  const std::vector<float> c = UniformFloats(200 * 4, 31), w = UniformFloats(4 * 3, 32);
  b.SymInput("p", {-1}, {"n"});
  b.F32("C", {200, 4}, c);
  b.F32("W", {4, 3}, w);
  b.I64("two", {2});
  b.I64("ax0", {0});
  b.g.v(b.Out("len", {1})).dtype = kI64;
  b.g.v(b.Out("end", {1})).dtype = kI64;
  b.FreeOut("rows", {-1, 4});
  b.FreeOut("y", {-1, 3});
  b.N("Shape", {"p"}, {"len"});
  b.N("Add", {"len", "two"}, {"end"});
  b.N("Slice", {"C", "len", "end", "ax0"}, {"rows"});
  b.N("MatMul", {"rows", "W"}, {"y"});
  b.Output("y");
  DynamicGraph::Options o;
  o.threads = 1;
  std::unique_ptr<DynamicGraph> d;
  static const char kOwner = 0;
  CheckResult r = DynamicGraph::Create(b.g, {"p"}, {"y"}, o, std::shared_ptr<const void>(&kOwner, [](const void*) {}), &d);
  ASSERT_TRUE(r.ok) << r.reason;
  ASSERT_TRUE(d->generic()) << d->why_not_generic();
  for (int64_t n : {5, 199, 7, 198}) {
    std::vector<float> p(static_cast<size_t>(n));
    Outputs out;
    bool invalid = false;
    r = RunGraph(d.get(), {&p}, {{n}}, &out, &invalid);
    ASSERT_TRUE(r.ok) << "n " << n << ": " << r.reason;
    const int64_t rows = std::min<int64_t>(n + 2, 200) - n;
    ASSERT_EQ(out.dims[0], (Dims{rows, 3})) << "n " << n;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        double want = 0;
        for (int64_t k = 0; k < 4; ++k) want += double(c[(n + i) * 4 + k]) * w[k * 3 + j];
        EXPECT_NEAR(out.data[0][i * 3 + j], want, 1e-5) << "n " << n;
      }
  }
  const DynamicGraph::Stats s = d->stats();
  EXPECT_EQ(s.generic_runs, 3u);
  EXPECT_EQ(s.generic_fallbacks, 1u);
  EXPECT_EQ(s.binds, 1u);
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
