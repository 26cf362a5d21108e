// Program records are read from files: every truncation is refused with a reason, and every single-bit flip either
// is refused (by ParseProgram or by the executor's operand checks) or yields a program that runs without touching
// memory outside its buffers (run this test under ASan to see the second half enforced).
#include "providers/aotcpu/runtime/program.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "providers/aotcpu/runtime/executor.h"

namespace epctx {
namespace aotcpu {
namespace {

Operand Op(Buf buf, uint32_t index, uint64_t offset, std::vector<int64_t> dims, std::vector<int64_t> strides) {
  Operand o;
  o.buf = buf;
  o.index = index;
  o.offset = offset;
  o.dims = std::move(dims);
  o.strides = std::move(strides);
  return o;
}

// Y[4,3,2] = Relu(Transpose(X[2,3,4])) + W[4,3,2]: a strided reorder into the arena, an eltwise step, a binary step
// reading a weight.
Program Sample() {
  Program p;
  p.inputs = {{"X", 1, {2, 3, 4}}};
  p.outputs = {{"Y", 1, {4, 3, 2}}};
  p.arena_bytes = 2 * 96;
  p.num_weights = 1;
  Step t;
  t.kind = StepKind::kReorder;
  t.name = "transpose";
  t.ops = {Op(Buf::kInput, 0, 0, {4, 3, 2}, {1, 4, 12}), Op(Buf::kArena, 0, 0, {4, 3, 2}, {6, 2, 1})};
  Step r;
  r.kind = StepKind::kEltwise;
  r.name = "relu";
  r.ops = {Op(Buf::kArena, 0, 0, {4, 3, 2}, {6, 2, 1}), Op(Buf::kArena, 0, 96, {4, 3, 2}, {6, 2, 1})};
  r.ints = {static_cast<int64_t>(dnnl::algorithm::eltwise_relu)};
  r.floats = {0.f, 0.f};
  Step a;
  a.kind = StepKind::kBinary;
  a.name = "add";
  a.ops = {Op(Buf::kArena, 0, 96, {4, 3, 2}, {6, 2, 1}), Op(Buf::kWeight, 0, 0, {4, 3, 2}, {6, 2, 1}),
           Op(Buf::kOutput, 0, 0, {4, 3, 2}, {6, 2, 1})};
  a.ints = {static_cast<int64_t>(dnnl::algorithm::binary_add)};
  p.steps = {t, r, a};
  return p;
}

std::vector<float> Weight() {
  std::vector<float> w(24);
  for (int i = 0; i < 24; ++i) w[i] = 0.5f * static_cast<float>(i % 5);
  return w;
}

TEST(AotCpuProgram, RoundTripsAndRuns) {
  const std::string records = SerializeProgram(Sample());
  Program p;
  CheckResult r = ParseProgram(records, 1, &p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(SerializeProgram(p), records);
  std::vector<float> w = Weight();
  std::unique_ptr<Executor> exec;
  r = Executor::Create(p, {{w.data(), w.size() * 4}}, 1, &exec);
  ASSERT_TRUE(r.ok) << r.reason;
  std::vector<float> x(24), y(24, -1.f);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i) - 10.f;
  r = exec->Run({x.data()}, {y.data()});
  ASSERT_TRUE(r.ok) << r.reason;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) {
        const float in = x[c * 12 + b * 4 + a];
        EXPECT_EQ(y[a * 6 + b * 2 + c], std::max(in, 0.f) + w[a * 6 + b * 2 + c]);
      }
}

// ONNX Clip (opset 11+) without a max clips at +inf: such a program is stored and loaded (it once compiled, ran JIT and
// was refused on load as "non-finite"); infinity anywhere but a clip bound, and NaN anywhere, are refused.
TEST(AotCpuProgram, ClipBoundsMayBeInfiniteButNothingElse) {
  const float inf = std::numeric_limits<float>::infinity();
  Program clip = Sample();
  clip.steps[1].ints = {static_cast<int64_t>(dnnl::algorithm::eltwise_clip_v2)};
  clip.steps[1].floats = {-1.5f, inf};
  clip.steps[2].post_ops.push_back(PostOp{PostOp::kEltwise, dnnl_eltwise_clip_v2, -inf, 2.f, 1.f, 0});
  Program p;
  CheckResult r = ParseProgram(SerializeProgram(clip), 1, &p);
  ASSERT_TRUE(r.ok) << r.reason;
  std::vector<float> w = Weight();
  std::unique_ptr<Executor> exec;
  r = Executor::Create(p, {{w.data(), w.size() * 4}}, 1, &exec);
  ASSERT_TRUE(r.ok) << r.reason;
  std::vector<float> x(24), y(24, -1.f);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i) - 10.f;
  ASSERT_TRUE(exec->Run({x.data()}, {y.data()}).ok);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) {
        const float in = x[c * 12 + b * 4 + a];
        EXPECT_EQ(y[a * 6 + b * 2 + c], std::min(std::max(in, -1.5f) + w[a * 6 + b * 2 + c], 2.f));
      }

  Program relu_inf = Sample();
  relu_inf.steps[1].floats = {inf, 0.f};  // relu's alpha is not a bound
  Program nan_bound = clip;
  nan_bound.steps[1].floats = {std::numeric_limits<float>::quiet_NaN(), 1.f};
  Program post_nan = clip;
  post_nan.steps[2].post_ops[0].beta = std::numeric_limits<float>::quiet_NaN();
  Program linear_inf = Sample();
  linear_inf.steps[2].post_ops.push_back(PostOp{PostOp::kEltwise, dnnl_eltwise_linear, inf, 0.f, 1.f, 0});
  for (const Program* bad : {&relu_inf, &nan_bound, &post_nan, &linear_inf}) {
    r = ParseProgram(SerializeProgram(*bad), 1, &p);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.reason.find("non-finite"), std::string::npos) << r.reason;
  }
}

TEST(AotCpuProgram, EveryTruncationIsRefusedWithAReason) {
  const std::string records = SerializeProgram(Sample());
  for (size_t n = 0; n < records.size(); ++n) {
    Program p;
    CheckResult r = ParseProgram(std::string_view(records.data(), n), 1, &p);
    EXPECT_FALSE(r.ok) << "cut at " << n;
    EXPECT_FALSE(r.reason.empty()) << "cut at " << n;
  }
  Program p;
  CheckResult r = ParseProgram(records + "x", 1, &p);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("trailing"), std::string::npos) << r.reason;
}

TEST(AotCpuProgram, WeightCountMustMatchTheGraph) {
  Program p;
  CheckResult r = ParseProgram(SerializeProgram(Sample()), 2, &p);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("weights"), std::string::npos) << r.reason;
}

TEST(AotCpuProgram, StepsMayNotWriteInputsOrWeights) {
  std::vector<float> w = Weight();
  for (Buf target : {Buf::kInput, Buf::kWeight}) {
    Program p = Sample();
    p.steps[1].ops[1].buf = target;  // relu's destination
    p.steps[1].ops[1].offset = 0;
    std::unique_ptr<Executor> exec;
    CheckResult r = Executor::Create(p, {{w.data(), w.size() * 4}}, 1, &exec);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.reason.find("destination"), std::string::npos) << r.reason;
  }
}

// Version 2 added kMaskedSoftmax: the writer stamps 1 for programs without it (older builds still read them), 2 with
// it; a reader refuses versions it does not know and a kind newer than the stamped version.
TEST(AotCpuProgram, VersionIsTheLowestThatHoldsTheStepKinds) {
  const std::string v1 = SerializeProgram(Sample());
  uint32_t version = 0;
  std::memcpy(&version, v1.data() + 8, 4);
  EXPECT_EQ(version, 1u);

  Program m = Sample();
  Step s;
  s.kind = StepKind::kMaskedSoftmax;
  s.name = "mask+softmax";
  s.ops = {Op(Buf::kArena, 0, 96, {4, 3, 2}, {6, 2, 1}), Op(Buf::kWeight, 0, 0, {1, 1, 2}, {2, 2, 1}),
           Op(Buf::kOutput, 0, 0, {4, 3, 2}, {6, 2, 1})};
  m.steps.back() = s;
  const std::string v2 = SerializeProgram(m);
  std::memcpy(&version, v2.data() + 8, 4);
  EXPECT_EQ(version, 2u);
  Program p;
  CheckResult r = ParseProgram(v2, 1, &p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(SerializeProgram(p), v2);

  std::string forged = v2;  // a version-1 stamp on a program using a version-2 kind
  version = 1;
  std::memcpy(&forged[8], &version, 4);
  r = ParseProgram(forged, 1, &p);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("step 2 has kind 17 (MaskedSoftmax), which program version 1 does not have"),
            std::string::npos) << r.reason;
  for (uint32_t bad : {0u, 10u, 0xffffffffu}) {
    std::memcpy(&forged[8], &bad, 4);
    r = ParseProgram(forged, 1, &p);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.reason.find("program version " + std::to_string(bad) + " is not supported (this build reads 1 to 9)"),
              std::string::npos) << r.reason;
  }
}

// Y[4,3,4] = Pad(X[2,3,4]) in `mode`, one row before and one after on axis 0 (constant value 2.5).
Program PadProgram(int64_t mode) {
  Program p;
  p.inputs = {{"X", 1, {2, 3, 4}}};
  p.outputs = {{"Y", 1, {4, 3, 4}}};
  p.num_weights = 0;
  Step s;
  s.kind = StepKind::kPad;
  s.name = "pad";
  s.ops = {Op(Buf::kInput, 0, 0, {2, 3, 4}, {12, 4, 1}), Op(Buf::kOutput, 0, 0, {4, 3, 4}, {12, 4, 1})};
  s.ints = {mode, 3, 1, 0, 0, 1, 0, 0};
  s.floats = {2.5f};
  p.steps = {s};
  return p;
}

// Version 3 added kPad: stamped 3, refused under a version-2 stamp; the step computes ONNX's Pad.
TEST(AotCpuProgram, PadIsVersion3AndPadsLikeOnnx) {
  const std::string v3 = SerializeProgram(PadProgram(1));
  uint32_t version = 0;
  std::memcpy(&version, v3.data() + 8, 4);
  EXPECT_EQ(version, 3u);
  Program p;
  CheckResult r = ParseProgram(v3, 0, &p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(SerializeProgram(p), v3);
  std::string forged = v3;
  version = 2;
  std::memcpy(&forged[8], &version, 4);
  r = ParseProgram(forged, 0, &p);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("has kind 18 (Pad), which program version 2 does not have"), std::string::npos) << r.reason;

  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i);
  for (int64_t mode : {0, 1, 2}) {
    std::unique_ptr<Executor> exec;
    r = Executor::Create(PadProgram(mode), {}, 1, &exec);
    ASSERT_TRUE(r.ok) << r.reason;
    std::vector<float> y(48, -1.f);
    r = exec->Run({x.data()}, {y.data()});
    ASSERT_TRUE(r.ok) << r.reason;
    // Rows of axis 0: before = constant / x[1] (reflect) / x[0] (edge); after = constant / x[0] / x[1].
    for (int k = 0; k < 12; ++k) {
      const float before = mode == 0 ? 2.5f : mode == 1 ? x[12 + k] : x[k];
      const float after = mode == 0 ? 2.5f : mode == 1 ? x[k] : x[12 + k];
      EXPECT_EQ(y[k], before) << "mode " << mode << " k " << k;
      EXPECT_EQ(y[12 + k], x[k]);
      EXPECT_EQ(y[24 + k], x[12 + k]);
      EXPECT_EQ(y[36 + k], after) << "mode " << mode << " k " << k;
    }
  }
}

// The pad builder reads only the step: every damaged parameter or operand is refused with a reason.
TEST(AotCpuProgram, PadBuilderRefusesDamagedSteps) {
  auto refused = [](const std::function<void(Step*)>& damage) {
    Program p = PadProgram(1);
    damage(&p.steps[0]);
    std::unique_ptr<Executor> exec;
    CheckResult r = Executor::Create(p, {}, 1, &exec);
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.reason.empty());
  };
  refused([](Step* s) { s->ints[0] = 4; });                 // unknown mode
  refused([](Step* s) { s->ints[1] = 2; });                 // rank disagrees with the operands
  refused([](Step* s) { s->ints[1] = 1000; });              // rank out of range
  refused([](Step* s) { s->ints.pop_back(); });             // pads missing
  refused([](Step* s) { s->ints.resize(1); });
  refused([](Step* s) { s->ints[2] = 2; });                 // reflect pad >= src dim (and dst no longer adds up)
  refused([](Step* s) { s->ints[2] = -1; s->ints[5] = 3; });  // negative pad
  refused([](Step* s) { s->ints[2] = 2; s->ints[5] = 0; });  // reflect pad >= src dim though dst adds up
  refused([](Step* s) { s->floats.clear(); });
  refused([](Step* s) { s->ops[1].dims = {5, 3, 4}; s->ops[1].strides = {12, 4, 1}; });  // does not fit output
  refused([](Step* s) { s->ops[0].strides = {1, 2, 6}; });  // not row-major
  refused([](Step* s) { s->ops[0].dtype = 6; });
  refused([](Step* s) { s->ops.pop_back(); });
  refused([](Step* s) { s->ops[0].offset = 8; });           // src passes the end of the input
}

// Y[2,3] = X[2,3] reversed on both axes: StridedCopy (version 3) with negative strides; damaged steps that would
// read outside X are refused.
Program ReverseProgram() {
  Program p;
  p.inputs = {{"X", 1, {2, 3}}};
  p.outputs = {{"Y", 1, {2, 3}}};
  Step s;
  s.kind = StepKind::kStridedCopy;
  s.name = "reverse";
  s.ops = {Op(Buf::kInput, 0, 0, {2, 3}, {3, 1}), Op(Buf::kOutput, 0, 0, {2, 3}, {3, 1})};
  s.ints = {5, -3, -1};
  p.steps = {s};
  return p;
}

TEST(AotCpuProgram, StridedCopyReversesAndStaysInBounds) {
  const std::string records = SerializeProgram(ReverseProgram());
  uint32_t version = 0;
  std::memcpy(&version, records.data() + 8, 4);
  EXPECT_EQ(version, 3u);
  Program p;
  ASSERT_TRUE(ParseProgram(records, 0, &p).ok);
  std::unique_ptr<Executor> exec;
  CheckResult r = Executor::Create(p, {}, 1, &exec);
  ASSERT_TRUE(r.ok) << r.reason;
  const std::vector<float> x = {0, 1, 2, 3, 4, 5};
  std::vector<float> y(6, -1.f);
  ASSERT_TRUE(exec->Run({x.data()}, {y.data()}).ok);
  EXPECT_EQ(y, (std::vector<float>{5, 4, 3, 2, 1, 0}));
  auto refused = [](const std::function<void(Step*)>& damage) {
    Program q = ReverseProgram();
    damage(&q.steps[0]);
    std::unique_ptr<Executor> e;
    CheckResult rr = Executor::Create(q, {}, 1, &e);
    EXPECT_FALSE(rr.ok);
    EXPECT_FALSE(rr.reason.empty());
  };
  refused([](Step* s) { s->ints[0] = 6; });        // the first element read is past X
  refused([](Step* s) { s->ints[0] = 4; });        // the last element read is before X
  refused([](Step* s) { s->ints[1] = -4; });
  refused([](Step* s) { s->ints[2] = INT64_MIN; });  // overflowing reach
  refused([](Step* s) { s->ints.pop_back(); });
  refused([](Step* s) { s->ops[1].dtype = 7; });
  refused([](Step* s) { s->ops[0].strides = {1, 2}; });
  refused([](Step* s) { s->ops.pop_back(); });
}

// `p` serializes with program version `version`, parses back, and the same records stamped `version - 1` are refused
// with `message`.
void ExpectStampedAndRefusedBelow(const Program& p, uint32_t weights, uint32_t version, const std::string& message) {
  const std::string records = SerializeProgram(p);
  uint32_t stamped = 0;
  std::memcpy(&stamped, records.data() + 8, 4);
  EXPECT_EQ(stamped, version);
  Program q;
  ASSERT_TRUE(ParseProgram(records, weights, &q).ok);
  std::string forged = records;
  const uint32_t older = version - 1;
  std::memcpy(&forged[8], &older, 4);
  CheckResult r = ParseProgram(forged, weights, &q);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find(message), std::string::npos) << r.reason;
}

// Comparison algorithms of kBinary came with version 3: stamped 3, refused under an older stamp.
TEST(AotCpuProgram, ComparisonsAreVersion3) {
  Program p = Sample();
  p.steps[2].ints[0] = dnnl_binary_ge;
  p.steps[2].ops[2].dtype = 9;
  p.outputs[0].dtype = 9;
  ExpectStampedAndRefusedBelow(p, 1, 3, "step 2 is a comparison, which program version 2 does not have");
  // A comparison with post-ops or a float dst is refused by the builder.
  std::vector<float> w = Weight();
  for (int damage = 0; damage < 2; ++damage) {
    Program d = p;
    if (damage == 0) d.steps[2].ops[2].dtype = 1, d.outputs[0].dtype = 1;
    if (damage == 1) d.steps[2].post_ops.push_back(PostOp());
    std::unique_ptr<Executor> exec;
    EXPECT_FALSE(Executor::Create(d, {{w.data(), w.size() * 4}}, 1, &exec).ok) << damage;
  }
}

// A batch normalization with a post-op (the fused ReLU) came with version 4: stamped 4, refused under an older
// stamp; the builder takes a ReLU only.
TEST(AotCpuProgram, BatchNormReluIsVersion4) {
  Program p;
  p.inputs = {{"x", 1, {1, 3, 2, 2}}};
  p.outputs = {{"y", 1, {1, 3, 2, 2}}};
  p.num_weights = 4;
  Step s;
  s.kind = StepKind::kBatchNorm;
  s.name = "bn";
  auto plain = [](Buf buf, uint32_t index, std::vector<int64_t> dims) {
    Operand o;
    o.buf = buf;
    o.index = index;
    o.dims = dims;
    o.strides.assign(dims.size(), 1);
    for (size_t i = dims.size(); i-- > 1;) o.strides[i - 1] = o.strides[i] * dims[i];
    return o;
  };
  s.ops.push_back(plain(Buf::kInput, 0, {1, 3, 2, 2}));
  for (uint32_t i = 0; i < 4; ++i) s.ops.push_back(plain(Buf::kWeight, i, {3}));
  s.ops.push_back(plain(Buf::kOutput, 0, {1, 3, 2, 2}));
  s.floats = {1e-5f};
  PostOp relu;
  relu.kind = PostOp::kEltwise;
  relu.alg = dnnl_eltwise_relu;
  s.post_ops = {relu};
  p.steps = {s};
  ExpectStampedAndRefusedBelow(p, 4, 4,
                               "is a batch normalization with a post-op, which program version 3 does not have");
  // Values: relu((x - mean) / sqrt(var + eps) * scale + shift); a post-op other than a plain ReLU is refused.
  const std::vector<float> scale = {1, 2, -1}, shift = {0.5f, -1, 0}, mean = {0, 1, -1}, var = {1, 4, 0.25f};
  std::vector<float> x(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 3;
  std::vector<WeightRef> w = {{scale.data(), 12}, {shift.data(), 12}, {mean.data(), 12}, {var.data(), 12}};
  std::unique_ptr<Executor> exec;
  ASSERT_TRUE(Executor::Create(p, w, 1, &exec).ok);
  std::vector<float> y(12);
  ASSERT_TRUE(exec->Run({x.data()}, {y.data()}).ok);
  for (size_t i = 0; i < 12; ++i) {
    const size_t c = i / 4;
    const double want = std::max(0.0, (x[i] - mean[c]) / std::sqrt(double(var[c]) + 1e-5) * scale[c] + shift[c]);
    EXPECT_NEAR(y[i], want, 1e-5) << i;
  }
  Program bad = p;
  bad.steps[0].post_ops[0].alpha = 0.1f;  // a leaky ReLU
  EXPECT_FALSE(Executor::Create(bad, w, 1, &exec).ok);
  bad = p;
  bad.steps[0].post_ops.push_back(relu);
  EXPECT_FALSE(Executor::Create(bad, w, 1, &exec).ok);
}

// Pad-19's wrap mode came with version 5: stamped 5, refused under a version-4 stamp. Y[8] = Pad(X[3]) with 2
// before and 3 after wraps around: x1 x2 | x0 x1 x2 | x0 x1 x2; pads beyond the dim keep wrapping.
TEST(AotCpuProgram, PadWrapIsVersion5) {
  Program p;
  p.inputs = {{"X", 1, {3}}};
  p.outputs = {{"Y", 1, {8}}};
  Step s;
  s.kind = StepKind::kPad;
  s.name = "wrap";
  s.ops = {Op(Buf::kInput, 0, 0, {3}, {1}), Op(Buf::kOutput, 0, 0, {8}, {1})};
  s.ints = {kPadWrap, 1, 2, 3};
  s.floats = {0.f};
  p.steps = {s};
  ExpectStampedAndRefusedBelow(p, 0, 5, "uses mish or a wrap pad, which program version 4 does not have");
  const std::vector<float> x = {10, 11, 12};
  std::unique_ptr<Executor> exec;
  CheckResult r = Executor::Create(p, {}, 1, &exec);
  ASSERT_TRUE(r.ok) << r.reason;
  std::vector<float> y(8, -1.f);
  ASSERT_TRUE(exec->Run({x.data()}, {y.data()}).ok);
  EXPECT_EQ(y, (std::vector<float>{11, 12, 10, 11, 12, 10, 11, 12}));
  Program far = p;  // 4 after a dim of 3: more than one turn, as numpy's and ONNX Runtime's wrap
  far.outputs[0].dims = {9};
  far.steps[0].ops[1] = Op(Buf::kOutput, 0, 0, {9}, {1});
  far.steps[0].ints = {kPadWrap, 1, 2, 4};
  ASSERT_TRUE(Executor::Create(far, {}, 1, &exec).ok);
  y.assign(9, -1.f);
  ASSERT_TRUE(exec->Run({x.data()}, {y.data()}).ok);
  EXPECT_EQ(y, (std::vector<float>{11, 12, 10, 11, 12, 10, 11, 12, 10}));
}

// A mish eltwise (ONNX Mish), as a step (Sample's step 1) or as a post-op (of its binary step 2), is version 5 too.
TEST(AotCpuProgram, MishIsVersion5) {
  Program step = Sample();
  ASSERT_EQ(step.steps[1].kind, StepKind::kEltwise);
  step.steps[1].ints[0] = dnnl_eltwise_mish;
  ExpectStampedAndRefusedBelow(step, 1, 5, "step 1 uses mish or a wrap pad, which program version 4 does not have");
  Program post = Sample();
  PostOp mish;
  mish.kind = PostOp::kEltwise;
  mish.alg = dnnl_eltwise_mish;
  post.steps[2].post_ops.push_back(mish);
  ExpectStampedAndRefusedBelow(post, 1, 5, "step 2 uses mish or a wrap pad, which program version 4 does not have");
}

// Float16 operands (a float16 graph's edges, ir/float16.h) came with version 6: Y[3] f16 = X[3] f32 rounded to
// float16 by a converting reorder; stamped 6, refused under a version-5 stamp.
TEST(AotCpuProgram, Float16OperandsAreVersion6) {
  Program p;
  p.inputs = {{"X", 1, {3}}};
  p.outputs = {{"Y", 10, {3}}};
  Step s;
  s.kind = StepKind::kReorder;
  s.name = "to_float16";
  s.ops = {Op(Buf::kInput, 0, 0, {3}, {1}), Op(Buf::kOutput, 0, 0, {3}, {1})};
  s.ops[1].dtype = 10;
  p.steps = {s};
  ExpectStampedAndRefusedBelow(p, 0, 6, "float16 operands, which program version 5 does not have");
  std::unique_ptr<Executor> exec;
  CheckResult r = Executor::Create(p, {}, 1, &exec);
  ASSERT_TRUE(r.ok) << r.reason;
  const std::vector<float> x = {1.0f, 1000.456f, 70000.f};  // exact, rounded to 1000.5, beyond float16: inf
  std::vector<uint16_t> y(3, 0);
  ASSERT_TRUE(exec->Run({x.data()}, {y.data()}).ok);
  EXPECT_EQ(y, (std::vector<uint16_t>{0x3c00, 0x63d1, 0x7c00}));
}

TEST(AotCpuProgram, BitFlipsAreRefusedOrStayInBounds) {
  const std::string records = SerializeProgram(Sample());
  std::vector<float> w = Weight();
  size_t refused = 0, ran = 0;
  for (size_t pos = 0; pos < records.size(); ++pos) {
    for (int bit : {0, 3, 6, 7}) {
      std::string g = records;
      g[pos] = static_cast<char>(g[pos] ^ (1 << bit));
      Program p;
      CheckResult r = ParseProgram(g, 1, &p);
      if (!r.ok) {
        EXPECT_FALSE(r.reason.empty());
        ++refused;
        continue;
      }
      std::unique_ptr<Executor> exec;
      r = Executor::Create(p, {{w.data(), w.size() * 4}}, 1, &exec);
      if (!r.ok) {
        EXPECT_FALSE(r.reason.empty());
        ++refused;
        continue;
      }
      // Inputs and outputs sized as the (possibly changed) program declares them.
      std::vector<std::vector<unsigned char>> ins, outs;
      std::vector<const void*> in_ptrs;
      std::vector<void*> out_ptrs;
      auto bytes = [](const IoInfo& io) {
        size_t n = io.dtype == 7 ? 8 : (io.dtype == 1 || io.dtype == 6) ? 4 : 1;
        for (int64_t d : io.dims) n *= static_cast<size_t>(d);
        return n;
      };
      bool huge = false;
      for (const IoInfo& io : p.inputs) huge |= bytes(io) > (1u << 20);
      for (const IoInfo& io : p.outputs) huge |= bytes(io) > (1u << 20);
      if (huge || p.arena_bytes > (1u << 20)) continue;  // a flipped size bit: would only allocate more
      for (const IoInfo& io : p.inputs) ins.emplace_back(bytes(io), 0), in_ptrs.push_back(ins.back().data());
      for (const IoInfo& io : p.outputs) outs.emplace_back(bytes(io), 0), out_ptrs.push_back(outs.back().data());
      exec->Run(in_ptrs, out_ptrs);  // may fail; must not crash or read out of bounds
      ++ran;
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GT(ran, 0u);  // flips in names, float parameters etc. still run
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
