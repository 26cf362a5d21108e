// Unit tests of the recurrent, text, random and training kernels: behaviours the ONNX backend suite does not cover
// (reverse/bidirectional with sequence_lens, layout 1, peepholes, linear_before_reset, UTF-8 case changes, IDF
// weights, seeded generators, optimizer state) and the error statuses for bad attributes and inputs.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/kernel_test_util.h"

namespace epctx {
namespace {

using namespace ::epctx::testing;  // NOLINT

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// ---------------------------------------------------------------------------------------------------------------
// RNN family

// With identity (Affine) activations and W = R = 1 the hidden state is a running sum, so the expected values of
// reverse and bidirectional runs with per-batch sequence lengths are easy to write down.
TEST(RecurrentKernels, RnnReverseWithSequenceLens) {
  std::vector<IValue> in = {MakeTensor<float>({3, 2, 1}, {1, 10, 2, 20, 3, 30}), MakeTensor<float>({1, 1, 1}, {1}),
                            MakeTensor<float>({1, 1, 1}, {1}), IValue(), MakeTensor<int32_t>({2}, {3, 2})};
  Node node = MakeNode("RNN", 14, in.size(), 2,
                       {IntAttr("hidden_size", 1), StringAttr("direction", "reverse"),
                        StringsAttr("activations", {"Affine"}), FloatsAttr("activation_alpha", {1.f}),
                        FloatsAttr("activation_beta", {0.f})},
                       "", Present(in));
  auto out = RunNode(node, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tensor().shape(), (Shape{3, 1, 2, 1}));
  // batch 0 (len 3): 6, 5, 3; batch 1 (len 2): 30, 20, then zero padding.
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{6, 30, 5, 20, 3, 0}));
  EXPECT_EQ(Values<float>((*out)[1]), (std::vector<float>{6, 30}));
}

TEST(RecurrentKernels, RnnBidirectionalLayout1) {
  // layout 1: X is [batch, seq, input].
  std::vector<IValue> in = {MakeTensor<double>({2, 3, 1}, {1, 2, 3, 10, 20, 30}),
                            MakeTensor<double>({2, 1, 1}, {1, 1}), MakeTensor<double>({2, 1, 1}, {1, 1}), IValue(),
                            MakeTensor<int32_t>({2}, {3, 2})};
  Node node = MakeNode("RNN", 14, in.size(), 2,
                       {IntAttr("hidden_size", 1), IntAttr("layout", 1), StringAttr("direction", "bidirectional"),
                        StringsAttr("activations", {"Affine", "Affine"}), FloatsAttr("activation_alpha", {1.f, 1.f}),
                        FloatsAttr("activation_beta", {0.f, 0.f})},
                       "", Present(in));
  auto out = RunNode(node, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tensor().shape(), (Shape{2, 3, 2, 1}));
  // Y[b][t][dir]: forward running sums and reverse running sums per batch row.
  EXPECT_EQ(Values<double>((*out)[0]), (std::vector<double>{1, 6, 3, 5, 6, 3, 10, 30, 30, 20, 0, 0}));
  EXPECT_EQ((*out)[1].tensor().shape(), (Shape{2, 2, 1}));
  EXPECT_EQ(Values<double>((*out)[1]), (std::vector<double>{6, 6, 30, 30}));
}

TEST(RecurrentKernels, LstmPeepholesAndGateOrder) {
  const float x = 0.5f, wi = 0.1f, wo = 0.2f, wf = 0.3f, wc = 0.4f, c0 = 0.7f, h0 = 0.f;
  const float pi = 0.5f, po = -0.6f, pf = 0.9f;
  std::vector<IValue> in = {MakeTensor<float>({1, 1, 1}, {x}),
                            MakeTensor<float>({1, 4, 1}, {wi, wo, wf, wc}),
                            MakeTensor<float>({1, 4, 1}, {0, 0, 0, 0}),
                            IValue(),
                            IValue(),
                            MakeTensor<float>({1, 1, 1}, {h0}),
                            MakeTensor<float>({1, 1, 1}, {c0}),
                            MakeTensor<float>({1, 3}, {pi, po, pf})};
  Node node = MakeNode("LSTM", 7, in.size(), 3, {IntAttr("hidden_size", 1)}, "", Present(in));
  auto out = RunNode(node, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const float i = Sigmoid(wi * x + pi * c0), f = Sigmoid(wf * x + pf * c0), c = std::tanh(wc * x);
  const float cell = f * c0 + i * c;
  const float o = Sigmoid(wo * x + po * cell);
  EXPECT_NEAR(Values<float>((*out)[0])[0], o * std::tanh(cell), 1e-6);
  EXPECT_NEAR(Values<float>((*out)[1])[0], o * std::tanh(cell), 1e-6);
  EXPECT_NEAR(Values<float>((*out)[2])[0], cell, 1e-6);
}

TEST(RecurrentKernels, GruLinearBeforeResetBothWays) {
  const float x = 0.8f, h0 = 0.3f;
  const float wz = 0.1f, wr = -0.2f, wh = 0.3f, rz = 0.4f, rr = 0.5f, rh = -0.6f;
  const std::vector<float> b = {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f};  // Wb[zrh], Rb[zrh]
  for (int lbr = 0; lbr <= 1; ++lbr) {
    std::vector<IValue> in = {MakeTensor<float>({1, 1, 1}, {x}), MakeTensor<float>({1, 3, 1}, {wz, wr, wh}),
                              MakeTensor<float>({1, 3, 1}, {rz, rr, rh}), MakeTensor<float>({1, 6}, b), IValue(),
                              MakeTensor<float>({1, 1, 1}, {h0})};
    Node node = MakeNode("GRU", 14, in.size(), 2, {IntAttr("hidden_size", 1), IntAttr("linear_before_reset", lbr)},
                         "", Present(in));
    auto out = RunNode(node, in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const float z = Sigmoid(wz * x + rz * h0 + b[0] + b[3]);
    const float r = Sigmoid(wr * x + rr * h0 + b[1] + b[4]);
    const float hh = lbr ? std::tanh(wh * x + r * (rh * h0 + b[5]) + b[2]) : std::tanh(wh * x + (r * h0) * rh + b[5] + b[2]);
    const float expected = (1 - z) * hh + z * h0;
    EXPECT_NEAR(Values<float>((*out)[1])[0], expected, 1e-6) << "linear_before_reset=" << lbr;
  }
}

TEST(RecurrentKernels, Float16ComputesThroughFloat) {
  std::vector<IValue> in = {MakeTensor<Float16>({2, 1, 1}, {Float16(1.f), Float16(2.f)}),
                            MakeTensor<Float16>({1, 1, 1}, {Float16(1.f)}),
                            MakeTensor<Float16>({1, 1, 1}, {Float16(1.f)})};
  Node node = MakeNode("RNN", 14, in.size(), 2, {IntAttr("hidden_size", 1), StringsAttr("activations", {"Relu"})});
  auto out = RunNode(node, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[1].tensor().dtype(), DataType::kFloat16);
  EXPECT_EQ(float(Values<Float16>((*out)[1])[0]), 3.f);
}

TEST(RecurrentKernels, BadInputsReturnInvalidArgument) {
  // X of rank 2.
  {
    std::vector<IValue> in = {MakeTensor<float>({1, 1}, {1}), MakeTensor<float>({1, 1, 1}, {1}),
                              MakeTensor<float>({1, 1, 1}, {1})};
    auto out = RunNode(MakeNode("RNN", 14, 3, 2, {IntAttr("hidden_size", 1)}), in);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), ErrorCode::INVALID_ARGUMENT);
  }
  // W with the wrong number of gate rows for LSTM.
  {
    std::vector<IValue> in = {MakeTensor<float>({1, 1, 1}, {1}), MakeTensor<float>({1, 3, 1}, {1, 1, 1}),
                              MakeTensor<float>({1, 4, 1}, {1, 1, 1, 1})};
    auto out = RunNode(MakeNode("LSTM", 14, 3, 2, {IntAttr("hidden_size", 1)}), in);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_NE(out.status().message().find("W"), std::string::npos);
  }
  // An empty X (input_size 0) whose batch dim would need terabytes of scratch.
  {
    std::vector<IValue> in = {MakeTensor<float>({1, int64_t{1} << 40, 0}, {}), MakeTensor<float>({1, 1, 0}, {}),
                              MakeTensor<float>({1, 1, 1}, {1})};
    auto out = RunNode(MakeNode("RNN", 14, 3, 2, {IntAttr("hidden_size", 1)}), in);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), ErrorCode::INVALID_ARGUMENT);
  }
  // sequence_lens larger than seq_length.
  {
    std::vector<IValue> in = {MakeTensor<float>({1, 1, 1}, {1}), MakeTensor<float>({1, 1, 1}, {1}),
                              MakeTensor<float>({1, 1, 1}, {1}), IValue(), MakeTensor<int32_t>({1}, {5})};
    auto out = RunNode(MakeNode("RNN", 14, 5, 2, {IntAttr("hidden_size", 1)}, "", Present(in)), in);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), ErrorCode::INVALID_ARGUMENT);
  }
}

TEST(RecurrentKernels, BadAttributesReturnInvalidGraph) {
  EXPECT_EQ(CreateKernel(MakeNode("GRU", 14, 3, 2, {})).status().code(), ErrorCode::INVALID_GRAPH);  // no hidden_size
  EXPECT_EQ(CreateKernel(MakeNode("GRU", 14, 3, 2, {IntAttr("hidden_size", 2), StringAttr("direction", "sideways")}))
                .status()
                .code(),
            ErrorCode::INVALID_GRAPH);
  EXPECT_EQ(CreateKernel(MakeNode("LSTM", 14, 3, 2,
                                  {IntAttr("hidden_size", 2), StringsAttr("activations", {"Gelu", "Tanh", "Tanh"})}))
                .status()
                .code(),
            ErrorCode::INVALID_GRAPH);
  EXPECT_EQ(CreateKernel(MakeNode("LSTM", 14, 3, 2,
                                  {IntAttr("hidden_size", 2), StringAttr("direction", "bidirectional"),
                                   StringsAttr("activations", {"Sigmoid", "Tanh", "Tanh", "Sigmoid"})}))
                .status()
                .code(),
            ErrorCode::INVALID_GRAPH);
}

// ---------------------------------------------------------------------------------------------------------------
// Constant weights: W, R (and B, P) given as initializers are packed once for oneDNN matmul primitives; given as
// run-time inputs (or in double) they go through the plain loops. Both must agree for every attribute.

std::vector<float> Pseudorandom(size_t n, uint32_t seed, float scale = 0.5f) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 2.f - 1.f);
  }
  return v;
}

template <typename T>
Tensor Cast(const std::vector<float>& v, const Shape& shape) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return MakeTensor<T>(shape, out);
}

template <typename T>
std::vector<double> AsDoubles(const IValue& v) {
  std::vector<double> out;
  for (T x : Values<T>(v)) out.push_back(static_cast<double>(static_cast<float>(x)));
  return out;
}

struct RecurrentCase {
  std::string op;
  std::vector<Attribute> attrs;
  int64_t seq, batch, input, hidden;
  int layout = 0;
  bool seq_lens = false, bias = true, initial = true, peepholes = false;
};

// Runs the case with the weights constant (packed, oneDNN) and as plain inputs (loops), in float and in double;
// expects every output to agree.
void ExpectPathsAgree(const RecurrentCase& c, uint32_t seed) {
  const bool lstm = c.op == "LSTM";
  const int64_t gates = c.op == "RNN" ? 1 : c.op == "GRU" ? 3 : 4;
  int64_t nd = 1;
  for (const Attribute& a : c.attrs)
    if (a.name == "direction" && a.s == "bidirectional") nd = 2;
  const Shape x_shape = c.layout == 0 ? Shape{c.seq, c.batch, c.input} : Shape{c.batch, c.seq, c.input};
  const Shape state_shape = c.layout == 0 ? Shape{nd, c.batch, c.hidden} : Shape{c.batch, nd, c.hidden};
  struct Slot {
    Shape shape;
    std::vector<float> v;
  };
  std::vector<Slot> slots = {
      {x_shape, Pseudorandom(ShapeSize(x_shape), seed, 1.f)},
      {{nd, gates * c.hidden, c.input}, Pseudorandom(nd * gates * c.hidden * c.input, seed + 1)},
      {{nd, gates * c.hidden, c.hidden}, Pseudorandom(nd * gates * c.hidden * c.hidden, seed + 2)},
  };
  slots.push_back(c.bias ? Slot{{nd, 2 * gates * c.hidden}, Pseudorandom(nd * 2 * gates * c.hidden, seed + 3)}
                         : Slot{});
  slots.push_back(Slot{});  // sequence_lens: int32, filled below
  slots.push_back(c.initial ? Slot{state_shape, Pseudorandom(ShapeSize(state_shape), seed + 4)} : Slot{});
  if (lstm) {
    slots.push_back(c.initial ? Slot{state_shape, Pseudorandom(ShapeSize(state_shape), seed + 5)} : Slot{});
    slots.push_back(c.peepholes ? Slot{{nd, 3 * c.hidden}, Pseudorandom(nd * 3 * c.hidden, seed + 6)} : Slot{});
  }
  std::vector<int32_t> lens;
  for (int64_t b = 0; b < c.batch; ++b) lens.push_back(static_cast<int32_t>((c.seq - b) > 0 ? c.seq - b : 0));
  auto inputs = [&](auto tag) {
    using T = decltype(tag);
    std::vector<IValue> in;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (i == 4) {
        in.push_back(c.seq_lens ? IValue(MakeTensor<int32_t>({c.batch}, lens)) : IValue());
      } else {
        in.push_back(slots[i].v.empty() ? IValue() : IValue(Cast<T>(slots[i].v, slots[i].shape)));
      }
    }
    return in;
  };
  const size_t num_outputs = lstm ? 3 : 2;
  std::vector<size_t> constant = {1, 2};
  if (c.bias) constant.push_back(3);
  if (c.peepholes) constant.push_back(7);

  auto run = [&](const std::vector<IValue>& in, const std::vector<size_t>& consts) {
    OpRunner runner(c.op, 14, in, c.attrs, num_outputs, consts);
    std::vector<IValue> out;
    Status st = runner.Run(in, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  };
  const std::vector<IValue> in_f = inputs(float()), in_d = inputs(double()), in_h = inputs(Float16());
  const std::vector<IValue> packed = run(in_f, constant), loops = run(in_f, {}), dbl = run(in_d, constant),
                            half = run(in_h, constant);
  ASSERT_EQ(packed.size(), num_outputs);
  for (size_t o = 0; o < num_outputs; ++o) {
    SCOPED_TRACE("output " + std::to_string(o));
    ASSERT_EQ(packed[o].tensor().shape(), loops[o].tensor().shape());
    ASSERT_EQ(packed[o].tensor().shape(), dbl[o].tensor().shape());
    const std::vector<double> a = AsDoubles<float>(packed[o]), b = AsDoubles<float>(loops[o]),
                              d = AsDoubles<double>(dbl[o]), h = AsDoubles<Float16>(half[o]);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(a[i], b[i], 2e-5) << "packed vs loops at " << i;
      EXPECT_NEAR(a[i], d[i], 2e-5) << "packed vs double at " << i;
      EXPECT_NEAR(h[i], d[i], 2e-2) << "float16 vs double at " << i;  // inputs rounded to float16
    }
  }
}

TEST(RecurrentKernels, ConstantWeightsMatchPlainLoops) {
  const std::vector<std::vector<Attribute>> directions = {
      {StringAttr("direction", "forward")}, {StringAttr("direction", "reverse")},
      {StringAttr("direction", "bidirectional")}};
  uint32_t seed = 1;
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    for (const auto& dir : directions) {
      for (int layout = 0; layout <= 1; ++layout) {
        for (bool lens : {false, true}) {
          RecurrentCase c{op, dir, 4, 3, 5, 7};
          c.attrs.push_back(IntAttr("hidden_size", 7));
          c.attrs.push_back(IntAttr("layout", layout));
          c.layout = layout;
          c.seq_lens = lens;
          c.peepholes = c.op == "LSTM";
          SCOPED_TRACE(std::string(op) + " " + dir[0].s + " layout " + std::to_string(layout) +
                       (lens ? " with sequence_lens" : ""));
          ExpectPathsAgree(c, seed++);
        }
      }
    }
  }
}

TEST(RecurrentKernels, ConstantWeightsMatchPlainLoopsForCellAttributes) {
  uint32_t seed = 100;
  auto check = [&](const std::string& op, std::vector<Attribute> attrs, const std::string& what) {
    SCOPED_TRACE(op + " " + what);
    attrs.push_back(IntAttr("hidden_size", 16));
    RecurrentCase c{op, attrs, 3, 2, 16, 16};
    ExpectPathsAgree(c, seed++);
    c.bias = false;
    c.initial = false;
    ExpectPathsAgree(c, seed++);
  };
  check("GRU", {IntAttr("linear_before_reset", 1)}, "linear_before_reset");
  check("GRU", {IntAttr("linear_before_reset", 1), StringAttr("direction", "bidirectional")},
        "linear_before_reset bidirectional");
  check("GRU", {FloatAttr("clip", 0.3f)}, "clip");
  check("LSTM", {FloatAttr("clip", 0.25f)}, "clip");
  check("LSTM", {IntAttr("input_forget", 1)}, "input_forget");
  check("RNN", {StringsAttr("activations", {"Relu"})}, "Relu");
  check("LSTM",
        {StringsAttr("activations", {"HardSigmoid", "LeakyRelu", "Softsign"}),
         FloatsAttr("activation_alpha", {0.3f, 0.1f}), FloatsAttr("activation_beta", {0.4f})},
        "HardSigmoid/LeakyRelu/Softsign");
  check("GRU", {StringsAttr("activations", {"Sigmoid", "ScaledTanh"}), FloatsAttr("activation_alpha", {0.7f}),
                FloatsAttr("activation_beta", {1.3f})},
        "ScaledTanh");
  // Silero VAD's LSTM: one step, batch 1, hidden 64 and 128.
  for (int64_t hidden : {64, 128}) {
    RecurrentCase c{"LSTM", {IntAttr("hidden_size", hidden)}, 1, 1, hidden, hidden};
    SCOPED_TRACE("LSTM hidden " + std::to_string(hidden));
    ExpectPathsAgree(c, seed++);
  }
}

// An independent LSTM in double (ONNX's equations, default activations) against the packed path, batch 2 with
// peepholes and an initial state.
TEST(RecurrentKernels, PackedLstmMatchesReference) {
  const int64_t seq = 3, batch = 2, in_size = 4, hs = 5;
  const std::vector<float> x = Pseudorandom(seq * batch * in_size, 7, 1.f), w = Pseudorandom(4 * hs * in_size, 8),
                           r = Pseudorandom(4 * hs * hs, 9), b = Pseudorandom(8 * hs, 10),
                           h0 = Pseudorandom(batch * hs, 11), c0 = Pseudorandom(batch * hs, 12),
                           p = Pseudorandom(3 * hs, 13);
  std::vector<IValue> in = {MakeTensor<float>({seq, batch, in_size}, x), MakeTensor<float>({1, 4 * hs, in_size}, w),
                            MakeTensor<float>({1, 4 * hs, hs}, r),       MakeTensor<float>({1, 8 * hs}, b),
                            IValue(),                                    MakeTensor<float>({1, batch, hs}, h0),
                            MakeTensor<float>({1, batch, hs}, c0),       MakeTensor<float>({1, 3 * hs}, p)};
  OpRunner runner("LSTM", 14, in, {IntAttr("hidden_size", hs)}, 3, {1, 2, 3, 7});
  std::vector<IValue> out;
  ASSERT_TRUE(runner.Run(in, &out).ok());
  const std::vector<float> y = Values<float>(out[0]);
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  std::vector<double> h(h0.begin(), h0.end()), c(c0.begin(), c0.end());
  for (int64_t t = 0; t < seq; ++t) {
    for (int64_t bi = 0; bi < batch; ++bi) {
      std::vector<double> g(4 * hs);
      for (int64_t j = 0; j < 4 * hs; ++j) {
        double v = b[j] + b[4 * hs + j];
        for (int64_t k = 0; k < in_size; ++k) v += x[(t * batch + bi) * in_size + k] * w[j * in_size + k];
        for (int64_t k = 0; k < hs; ++k) v += h[bi * hs + k] * r[j * hs + k];
        g[j] = v;
      }
      for (int64_t j = 0; j < hs; ++j) {  // gate order i, o, f, c; peepholes i, o, f
        double& cell = c[bi * hs + j];
        const double i = sig(g[j] + p[j] * cell), f = sig(g[2 * hs + j] + p[2 * hs + j] * cell);
        cell = f * cell + i * std::tanh(g[3 * hs + j]);
        const double o = sig(g[hs + j] + p[hs + j] * cell);
        h[bi * hs + j] = o * std::tanh(cell);
      }
    }
    for (int64_t k = 0; k < batch * hs; ++k) EXPECT_NEAR(y[t * batch * hs + k], h[k], 1e-5) << "t " << t;
  }
  const std::vector<float> yc = Values<float>(out[2]);
  for (int64_t k = 0; k < batch * hs; ++k) EXPECT_NEAR(yc[k], c[k], 1e-5);
}

// float Sigmoid and Tanh use their own vectorized exp: within 3e-7 relative of the double functions over the
// whole range, NaN stays NaN and infinities give the limits. With W = 1 and R = 0 an RNN's Y is the activation of X.
TEST(RecurrentKernels, FloatSigmoidAndTanhAccuracy) {
  std::vector<float> x;
  for (float v = -30.f; v <= 30.f; v += 0.0137f) x.push_back(v);
  for (float v = 1e-30f; v < 1.f; v *= 1.7f) x.push_back(v);
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  const int64_t n = static_cast<int64_t>(x.size());
  for (const char* act : {"Sigmoid", "Tanh"}) {
    SCOPED_TRACE(act);
    std::vector<IValue> in = {MakeTensor<float>({1, n, 1}, x), MakeTensor<float>({1, 1, 1}, {1.f}),
                              MakeTensor<float>({1, 1, 1}, {0.f})};
    OpRunner runner("RNN", 14, in, {IntAttr("hidden_size", 1), StringsAttr("activations", {act})}, 1, {1, 2});
    std::vector<IValue> out;
    ASSERT_TRUE(runner.Run(in, &out).ok());
    const std::vector<float> y = Values<float>(out[0]);
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i];
      const double want = act[0] == 'S' ? 1.0 / (1.0 + std::exp(-v)) : std::tanh(v);
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(y[i]));
      } else {
        EXPECT_NEAR(y[i], want, 3e-7 * std::fabs(want) + 1e-37) << "x = " << v;
      }
    }
  }
}

// One kernel with packed weights serves several shapes (a plan per shape) and runs on several threads at once.
TEST(RecurrentKernels, PackedWeightsAcrossShapesAndThreads) {
  const int64_t hs = 8, in_size = 6;
  const std::vector<float> w = Pseudorandom(3 * hs * in_size, 20), r = Pseudorandom(3 * hs * hs, 21);
  auto make_inputs = [&](int64_t seq, int64_t batch, uint32_t seed) {
    return std::vector<IValue>{
        MakeTensor<float>({seq, batch, in_size}, Pseudorandom(seq * batch * in_size, seed, 1.f)),
        MakeTensor<float>({1, 3 * hs, in_size}, w), MakeTensor<float>({1, 3 * hs, hs}, r)};
  };
  const std::vector<Attribute> attrs = {IntAttr("hidden_size", hs)};
  OpRunner packed("GRU", 14, make_inputs(1, 1, 0), attrs, 2, {1, 2});
  OpRunner loops("GRU", 14, make_inputs(1, 1, 0), attrs, 2, {});
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {5, 1}, {1, 4}, {3, 2}, {0, 2}, {2, 0}};
  std::vector<std::vector<float>> expected;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<IValue> out;
    ASSERT_TRUE(loops.Run(make_inputs(shapes[i].first, shapes[i].second, 30 + i), &out).ok());
    expected.push_back(Values<float>(out[0]));
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int rep = 0; rep < 20; ++rep) {
        const size_t i = static_cast<size_t>(th + rep) % shapes.size();
        std::vector<IValue> out;
        if (!packed.Run(make_inputs(shapes[i].first, shapes[i].second, 30 + i), &out).ok()) {
          ++failures;
          continue;
        }
        const std::vector<float> got = Values<float>(out[0]);
        if (got.size() != expected[i].size()) {
          ++failures;
          continue;
        }
        for (size_t k = 0; k < got.size(); ++k)
          if (std::fabs(got[k] - expected[i][k]) > 1e-5f) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// Constant weights whose shapes do not match hidden_size are not packed: the run reports the mismatch.
TEST(RecurrentKernels, ConstantWeightsOfTheWrongShapeReportAtRun) {
  std::vector<IValue> in = {MakeTensor<float>({1, 1, 2}, {1, 2}), MakeTensor<float>({1, 4, 2}, Pseudorandom(8, 1)),
                            MakeTensor<float>({1, 4, 2}, Pseudorandom(8, 2))};
  OpRunner runner("LSTM", 14, in, {IntAttr("hidden_size", 1)}, 3, {1, 2});
  ASSERT_TRUE(runner.create_status().ok());
  std::vector<IValue> out;
  Status st = runner.Run(in, &out);
  EXPECT_EQ(st.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(st.ToString().find("R"), std::string::npos) << st.ToString();
}

// ---------------------------------------------------------------------------------------------------------------
// Text

TEST(TextKernels, StringNormalizerCaseInsensitiveUtf8) {
  std::vector<IValue> in = {MakeTensor<std::string>({4}, {"ÉCOLE", "Straße", "Über", "\xff" "Ab"})};
  Node node = MakeNode("StringNormalizer", 10, 1, 1,
                       {StringAttr("case_change_action", "LOWER"), StringsAttr("stopwords", {"über"})});
  auto out = RunNode(node, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // "Über" matches the stopword "über" case-insensitively; invalid UTF-8 bytes pass through.
  EXPECT_EQ(Values<std::string>((*out)[0]), (std::vector<std::string>{"école", "straße", "\xff" "ab"}));

  Node upper = MakeNode("StringNormalizer", 10, 1, 1, {StringAttr("case_change_action", "UPPER")});
  auto up = RunNode(upper, {MakeTensor<std::string>({1, 2}, {"привет", "ǆx"})});
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ((*up)[0].tensor().shape(), (Shape{1, 2}));
  // Code points outside the mapped blocks (U+01C6) pass through.
  EXPECT_EQ(Values<std::string>((*up)[0]), (std::vector<std::string>{"ПРИВЕТ", "ǆX"}));
}

TEST(TextKernels, StringNormalizerErrors) {
  auto out = RunNode(MakeNode("StringNormalizer", 10, 1, 1, {}), {MakeTensor<std::string>({2, 2}, {"a", "b", "c", "d"})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(
      CreateKernel(MakeNode("StringNormalizer", 10, 1, 1, {StringAttr("case_change_action", "TITLE")})).status().code(),
      ErrorCode::INVALID_GRAPH);
}

TEST(TextKernels, TfIdfStringPoolIdfAndTfIdf) {
  // Pool: unigrams "a", "b"; bigram ("a", "b"). Output coordinates 2, 0, 1.
  std::vector<Attribute> attrs = {IntAttr("min_gram_length", 1), IntAttr("max_gram_length", 2),
                                  IntAttr("max_skip_count", 1), IntsAttr("ngram_counts", {0, 2}),
                                  IntsAttr("ngram_indexes", {2, 0, 1}), StringsAttr("pool_strings", {"a", "b", "a", "b"}),
                                  FloatsAttr("weights", {0.5f, 2.f, 3.f})};
  IValue x = MakeTensor<std::string>({2, 4}, {"a", "b", "b", "c", "c", "c", "a", "c"});
  attrs.push_back(StringAttr("mode", "TFIDF"));
  auto tfidf = RunNode(MakeNode("TfIdfVectorizer", 9, 1, 1, attrs), {x});
  ASSERT_TRUE(tfidf.ok()) << tfidf.status().ToString();
  // Row 0: a x1, b x2, (a,b) once at skip 0 and once at skip 1. Row 1: a x1.
  EXPECT_EQ(Values<float>((*tfidf)[0]), (std::vector<float>{2 * 2.f, 2 * 3.f, 1 * 0.5f, 0, 0, 1 * 0.5f}));
  attrs.back() = StringAttr("mode", "IDF");
  auto idf = RunNode(MakeNode("TfIdfVectorizer", 9, 1, 1, attrs), {x});
  ASSERT_TRUE(idf.ok()) << idf.status().ToString();
  EXPECT_EQ(Values<float>((*idf)[0]), (std::vector<float>{2.f, 3.f, 0.5f, 0, 0, 0.5f}));
  // An int input against a string pool is rejected.
  auto bad = RunNode(MakeNode("TfIdfVectorizer", 9, 1, 1, attrs), {MakeTensor<int64_t>({2}, {1, 2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(TextKernels, TfIdfInconsistentPoolIsInvalidGraph) {
  std::vector<Attribute> attrs = {IntAttr("min_gram_length", 1), IntAttr("max_gram_length", 2),
                                  IntAttr("max_skip_count", 0), StringAttr("mode", "TF"),
                                  IntsAttr("ngram_counts", {0, 2}), IntsAttr("ngram_indexes", {0, 1}),
                                  IntsAttr("pool_int64s", {1, 2, 3})};  // bigram section of 1 item
  EXPECT_EQ(CreateKernel(MakeNode("TfIdfVectorizer", 9, 1, 1, attrs)).status().code(), ErrorCode::INVALID_GRAPH);
}

// ---------------------------------------------------------------------------------------------------------------
// Random

TEST(RandomKernels, SeededUniformIsReproducibleAndInRange) {
  Node node = MakeNode("RandomUniform", 1, 0, 1,
                       {IntsAttr("shape", {3, 50}), FloatAttr("low", -2.f), FloatAttr("high", 5.f),
                        FloatAttr("seed", 7.f), IntAttr("dtype", static_cast<int64_t>(DataType::kDouble))});
  auto a = RunNode(node, {});
  auto b = RunNode(node, {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[0].tensor().dtype(), DataType::kDouble);
  const std::vector<double> va = Values<double>((*a)[0]);
  EXPECT_EQ(va, Values<double>((*b)[0]));
  double lo = 1e9, hi = -1e9;
  for (double v : va) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -2.0);
  EXPECT_LT(hi, 5.0);
  EXPECT_LT(lo, 0.0);  // 150 draws cover the range
  EXPECT_GT(hi, 3.0);
}

TEST(RandomKernels, LikeVariantsAndErrors) {
  auto normal = RunNode(MakeNode("RandomNormalLike", 1, 1, 1, {FloatAttr("mean", 10.f), FloatAttr("scale", 0.f)}),
                    {MakeTensor<float>({2, 2}, {0, 0, 0, 0})});
  ASSERT_TRUE(normal.ok()) << normal.status().ToString();
  EXPECT_EQ(Values<float>((*normal)[0]), (std::vector<float>{10, 10, 10, 10}));
  // An int input without dtype cannot give the output type.
  auto bad = RunNode(MakeNode("RandomUniformLike", 1, 1, 1, {}), {MakeTensor<int64_t>({2}, {1, 2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(CreateKernel(MakeNode("RandomNormal", 1, 0, 1, {})).status().code(), ErrorCode::INVALID_GRAPH);  // no shape
}

TEST(RandomKernels, BernoulliAndMultinomialExtremes) {
  auto bern = RunNode(MakeNode("Bernoulli", 15, 1, 1, {IntAttr("dtype", static_cast<int64_t>(DataType::kBool))}),
                  {MakeTensor<double>({4}, {0, 1, 1, 0})});
  ASSERT_TRUE(bern.ok()) << bern.status().ToString();
  EXPECT_EQ(Values<bool>((*bern)[0]), (std::vector<bool>{false, true, true, false}));

  auto multi = RunNode(MakeNode("Multinomial", 7, 1, 1, {IntAttr("sample_size", 5), FloatAttr("seed", 1.f),
                                                        IntAttr("dtype", static_cast<int64_t>(DataType::kInt64))}),
                   {MakeTensor<float>({2, 3}, {-1000, 0, -1000, 0, -1000, -1000})});
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  EXPECT_EQ((*multi)[0].tensor().shape(), (Shape{2, 5}));
  EXPECT_EQ(Values<int64_t>((*multi)[0]), (std::vector<int64_t>{1, 1, 1, 1, 1, 0, 0, 0, 0, 0}));
  auto bad = RunNode(MakeNode("Multinomial", 7, 1, 1, {}), {MakeTensor<float>({3}, {0, 0, 0})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------------------------------------------
// Training

TEST(TrainingKernels, AdamBiasCorrectionAfterFirstStep) {
  const char* kDomain = "ai.onnx.preview.training";
  const float r = 0.1f, x = 1.f, g = -1.f, v = 0.5f, h = 2.f, alpha = 0.9f, beta = 0.99f, eps = 1e-6f;
  const int64_t t = 3;
  Node node = MakeNode("Adam", 1, 6, 3,
                       {FloatAttr("alpha", alpha), FloatAttr("beta", beta), FloatAttr("epsilon", eps),
                        FloatAttr("norm_coefficient_post", 0.1f)},
                       kDomain);
  auto out = RunNode(node, {MakeTensor<float>({}, {r}), MakeTensor<int64_t>({}, {t}), MakeTensor<float>({1}, {x}),
                        MakeTensor<float>({1}, {g}), MakeTensor<float>({1}, {v}), MakeTensor<float>({1}, {h})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double v_new = alpha * v + (1 - alpha) * g, h_new = beta * h + (1 - beta) * g * g;
  const double rate = r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t));
  const double x_new = 0.9 * (x - rate * v_new / (std::sqrt(h_new) + eps));
  EXPECT_NEAR(Values<float>((*out)[0])[0], x_new, 1e-5);
  EXPECT_NEAR(Values<float>((*out)[1])[0], v_new, 1e-6);
  EXPECT_NEAR(Values<float>((*out)[2])[0], h_new, 1e-6);
}

TEST(TrainingKernels, ErrorsForBadNodesAndInputs) {
  const char* kDomain = "ai.onnx.preview.training";
  // Momentum has no defaults for alpha/beta/norm_coefficient/mode.
  EXPECT_EQ(CreateKernel(MakeNode("Momentum", 1, 5, 2, {FloatAttr("alpha", 0.9f)}, kDomain)).status().code(),
            ErrorCode::INVALID_GRAPH);
  // Adagrad needs inputs in groups of three after R and T.
  EXPECT_EQ(CreateKernel(MakeNode("Adagrad", 1, 6, 2, {}, kDomain)).status().code(), ErrorCode::INVALID_GRAPH);
  // Gradient shape differs from X.
  auto out = RunNode(MakeNode("Adagrad", 1, 5, 2, {}, kDomain),
                 {MakeTensor<float>({}, {0.1f}), MakeTensor<int64_t>({}, {0}), MakeTensor<float>({2}, {1, 2}),
                  MakeTensor<float>({1}, {1}), MakeTensor<float>({2}, {1, 1})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace epctx
