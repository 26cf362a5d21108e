// Integer, bool and cast ops on AotCpu (issue 27 item 6; lower/math_int.cc, steps kTypedEltwise and kTrilu), and
// ReduceL2: each model must be taken whole (no CPU EP node) and give values computed here, in a JIT session and from
// its _ctx.onnx (embed 0 and 1; CheckAllClaimed). ONNX Runtime's semantics: int64 Div truncates toward zero, integer
// arithmetic wraps, Cast float -> int64/int32 truncates and gives the minimum for NaN, infinities and values out of
// range (x86's conversion instructions, what ONNX Runtime 1.30 returns: checked with tests/ort/run_model.js), bool is
// one byte.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <limits>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/onnx_build.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::onnx_build::AddInt64s;
using epctx::onnx_build::SetInt;
using epctx::onnx_build::SetInts;
using epctx::testing::AddNode;
using epctx::testing::AddTensorValueInfo;
using epctx::testing::NewModel;
using epctx::testing::Serialize;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;

// Each model computes several independent outputs: islands of one node that the partition-cost rule would leave on
// the CPU EP (partition_cost.h). The rule is turned off (partition_switch_us 0) so that every node is claimed;
// otherwise as AotCpuSuite::CheckJitAndFromContext: JIT, then the _ctx.onnx at embed 0 and 1 loaded with model
// compilation disabled, `check` on each session.
class AotCpuIntOps : public epctx::testing::AotCpuSuite {
 protected:
  static void CheckAllClaimed(const std::string& path, const TempDir& dir,
                              const std::function<void(Session&, const std::string&)>& check) {
    const std::map<std::string, std::string> every = {{"ep.aotcpuexecutionprovider.partition_switch_us", "0"}};
    Session jit(*env_, path.c_str(), Options(1, true, every));
    const std::string report = jit.GetSessionReport();
    EXPECT_NE(report.find("\"cpu_nodes\":0"), std::string::npos) << report;
    EXPECT_GE(jit.GetPartitionAssignments().size(), 1u) << report;
    check(jit, "JIT");
    for (int embed : {0, 1}) {
      const std::string ctx = dir / ("model_e" + std::to_string(embed) + "_ctx.onnx");
      {
        std::map<std::string, std::string> config = every;
        config["ep.context_enable"] = "1";
        config["ep.context_file_path"] = ctx;
        config["ep.context_embed_mode"] = std::to_string(embed);
        Session gen(*env_, path.c_str(), Options(1, true, config));
      }
      std::map<std::string, std::string> load = every;
      load["session.disable_model_compile"] = "1";
      Session loaded(*env_, ctx.c_str(), Options(1, true, load));
      check(loaded, "loaded from _ctx.onnx, embed " + std::to_string(embed));
    }
  }
};
constexpr int kI64 = onnx::TensorProto::INT64, kI32 = onnx::TensorProto::INT32, kBool = onnx::TensorProto::BOOL,
              kF32 = onnx::TensorProto::FLOAT;
constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min(), kMax64 = std::numeric_limits<int64_t>::max();

template <typename T>
Value Tensor(ElementType t, std::vector<T>& v, std::vector<int64_t>& dims) {
  return Value::CreateTensor(t, v.data(), v.size() * sizeof(T), dims.data(), dims.size());
}

template <typename T>
std::vector<T> Read(const Value& v) {
  const auto* p = static_cast<const T*>(v.GetTensorRawData());
  return std::vector<T>(p, p + v.GetTensorTypeAndShapeInfo().GetElementCount());
}

TEST_F(AotCpuIntOps, Int64ArithmeticTruncatesAndWraps) {
  // A [2, 4] and B [4] (broadcast): Div, Mul, Add, Sub, Neg, Abs of int64.
  onnx::ModelProto m = NewModel("int64_arith");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "A", {2, 4}, kI64);
  AddTensorValueInfo(g->add_input(), "B", {4}, kI64);
  for (const char* y : {"div", "mul", "add", "sub", "neg", "abs"}) AddTensorValueInfo(g->add_output(), y, {2, 4}, kI64);
  AddNode(g, "Div", "d", {"A", "B"}, "div");
  AddNode(g, "Mul", "m", {"A", "B"}, "mul");
  AddNode(g, "Add", "a", {"A", "B"}, "add");
  AddNode(g, "Sub", "s", {"A", "B"}, "sub");
  AddNode(g, "Neg", "n", {"A"}, "neg");
  AddNode(g, "Abs", "ab", {"A"}, "abs");
  TempDir dir;
  const std::string path = dir / "model.onnx";
  WriteFile(path, Serialize(m));
  std::vector<int64_t> a = {7, -7, 7, -7, kMax64, kMin64, -1, 1}, b = {2, 2, -2, -2};
  std::vector<int64_t> ad = {2, 4}, bd = {4};
  auto check = [&](Session& s, const std::string& what) {
    std::vector<Value> in;
    in.push_back(Tensor(ElementType::INT64, a, ad));
    in.push_back(Tensor(ElementType::INT64, b, bd));
    std::vector<Value> out = s.Run({"A", "B"}, in, {"div", "mul", "add", "sub", "neg", "abs"});
    ASSERT_EQ(out.size(), 6u) << what;
    EXPECT_EQ(Read<int64_t>(out[0]), (std::vector<int64_t>{3, -3, -3, 3, kMax64 / 2, kMin64 / 2, 0, 0})) << what;
    std::vector<int64_t> mul, add, sub, neg, abs;
    for (size_t i = 0; i < a.size(); ++i) {
      const uint64_t x = static_cast<uint64_t>(a[i]), y = static_cast<uint64_t>(b[i % 4]);
      mul.push_back(static_cast<int64_t>(x * y));  // wraps
      add.push_back(static_cast<int64_t>(x + y));
      sub.push_back(static_cast<int64_t>(x - y));
      neg.push_back(static_cast<int64_t>(0 - x));  // Neg of the minimum is the minimum
      abs.push_back(a[i] < 0 ? static_cast<int64_t>(0 - x) : a[i]);
    }
    EXPECT_EQ(Read<int64_t>(out[1]), mul) << what;
    EXPECT_EQ(Read<int64_t>(out[2]), add) << what;
    EXPECT_EQ(Read<int64_t>(out[3]), sub) << what;
    EXPECT_EQ(Read<int64_t>(out[4]), neg) << what;
    EXPECT_EQ(Read<int64_t>(out[5]), abs) << what;
    // A zero divisor fails the run with a message naming the step, never a trap.
    std::vector<int64_t> z = {1, 0, 3, 4};
    std::vector<Value> bad;
    bad.push_back(Tensor(ElementType::INT64, a, ad));
    bad.push_back(Tensor(ElementType::INT64, z, bd));
    try {
      s.Run({"A", "B"}, bad, {"div"});
      ADD_FAILURE() << what << ": a division by zero ran";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << what << ": " << e.what();
    }
  };
  CheckAllClaimed(path, dir, check);
}

TEST_F(AotCpuIntOps, CastBetweenFloatInt64Int32AndBool) {
  onnx::ModelProto m = NewModel("casts");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {10}, kF32);
  AddTensorValueInfo(g->add_input(), "I", {5}, kI64);
  AddTensorValueInfo(g->add_output(), "x64", {10}, kI64);
  AddTensorValueInfo(g->add_output(), "x32", {10}, kI32);
  AddTensorValueInfo(g->add_output(), "xb", {10}, kBool);
  AddTensorValueInfo(g->add_output(), "if", {5}, kF32);
  AddTensorValueInfo(g->add_output(), "i32", {5}, kI32);
  AddTensorValueInfo(g->add_output(), "bf", {5}, kF32);
  SetInt(AddNode(g, "Cast", "c0", {"X"}, "x64"), "to", kI64);
  SetInt(AddNode(g, "Cast", "c1", {"X"}, "x32"), "to", kI32);
  SetInt(AddNode(g, "Cast", "c2", {"X"}, "xb"), "to", kBool);
  SetInt(AddNode(g, "Cast", "c3", {"I"}, "if"), "to", kF32);
  SetInt(AddNode(g, "Cast", "c4", {"I"}, "i32"), "to", kI32);
  SetInt(AddNode(g, "Cast", "c5", {"I"}, "ib"), "to", kBool);
  SetInt(AddNode(g, "Cast", "c6", {"ib"}, "bf"), "to", kF32);
  TempDir dir;
  const std::string path = dir / "model.onnx";
  WriteFile(path, Serialize(m));
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-2.7f, 2.7f, -0.5f, 0.f, 1e10f, 3e18f, -1e19f, nan, inf, -inf};
  std::vector<int64_t> iv = {-3, 0, (int64_t{1} << 40) + 5, kMin64, (int64_t{1} << 53) + 1};
  std::vector<int64_t> xd = {10}, id = {5};
  const int32_t min32 = std::numeric_limits<int32_t>::min();
  auto check = [&](Session& s, const std::string& what) {
    std::vector<Value> in;
    in.push_back(Tensor(ElementType::FLOAT, x, xd));
    in.push_back(Tensor(ElementType::INT64, iv, id));
    std::vector<Value> out = s.Run({"X", "I"}, in, {"x64", "x32", "xb", "if", "i32", "bf"});
    ASSERT_EQ(out.size(), 6u) << what;
    EXPECT_EQ(Read<int64_t>(out[0]), (std::vector<int64_t>{-2, 2, 0, 0, 10000000000, static_cast<int64_t>(3e18f), kMin64,
                                                           kMin64, kMin64, kMin64}))
        << what;
    EXPECT_EQ(Read<int32_t>(out[1]), (std::vector<int32_t>{-2, 2, 0, 0, min32, min32, min32, min32, min32, min32}))
        << what;
    EXPECT_EQ(Read<uint8_t>(out[2]), (std::vector<uint8_t>{1, 1, 1, 0, 1, 1, 1, 1, 1, 1})) << what;
    std::vector<float> f;
    for (int64_t v : iv) f.push_back(static_cast<float>(v));
    EXPECT_EQ(Read<float>(out[3]), f) << what;
    EXPECT_EQ(Read<int32_t>(out[4]), (std::vector<int32_t>{-3, 0, 5, 0, 1})) << what;  // the low 32 bits
    EXPECT_EQ(Read<float>(out[5]), (std::vector<float>{1, 0, 1, 1, 1})) << what;
  };
  CheckAllClaimed(path, dir, check);
}

TEST_F(AotCpuIntOps, ComparisonsLogicAndWhere) {
  // The attention-mask idiom of exported transformers: Equal(int64 ids, 0) -> Not -> And/Or/Xor with a bool input
  // -> Where(cond, int64 x, int64 y) and Where(cond, float scores, -inf), broadcast.
  onnx::ModelProto m = NewModel("logic");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "ids", {2, 3}, kI64);
  AddTensorValueInfo(g->add_input(), "flag", {3}, kBool);
  AddTensorValueInfo(g->add_input(), "S", {2, 2, 3}, kF32);
  for (const char* y : {"and", "or", "xor", "less"}) AddTensorValueInfo(g->add_output(), y, {2, 3}, kBool);
  AddTensorValueInfo(g->add_output(), "wi", {2, 3}, kI64);
  AddTensorValueInfo(g->add_output(), "wf", {2, 2, 3}, kF32);
  AddInt64s(g, "zero", {}, {0});
  AddInt64s(g, "big", {1}, {100});
  onnx_build::AddFloats(g, "ninf", {1}, {-std::numeric_limits<float>::infinity()});
  AddNode(g, "Equal", "eq", {"ids", "zero"}, "pad");
  AddNode(g, "Not", "not", {"pad"}, "keep");
  AddNode(g, "And", "and_", {"keep", "flag"}, "and");
  AddNode(g, "Or", "or_", {"keep", "flag"}, "or");
  AddNode(g, "Xor", "xor_", {"keep", "flag"}, "xor");
  AddNode(g, "Less", "lt", {"ids", "big"}, "less");
  AddNode(g, "Where", "w0", {"keep", "ids", "big"}, "wi");
  AddNode(g, "Where", "w1", {"keep", "S", "ninf"}, "wf");
  TempDir dir;
  const std::string path = dir / "model.onnx";
  WriteFile(path, Serialize(m));
  std::vector<int64_t> ids = {5, 0, 200, 0, -1, 7};
  std::vector<uint8_t> flag = {1, 0, 1};
  std::vector<float> sc(12);
  for (size_t i = 0; i < sc.size(); ++i) sc[i] = 0.25f * static_cast<float>(i) - 1.f;
  std::vector<int64_t> idd = {2, 3}, fd = {3}, sd = {2, 2, 3};
  auto check = [&](Session& s, const std::string& what) {
    std::vector<Value> in;
    in.push_back(Tensor(ElementType::INT64, ids, idd));
    in.push_back(Tensor(ElementType::BOOL, flag, fd));
    in.push_back(Tensor(ElementType::FLOAT, sc, sd));
    std::vector<Value> out = s.Run({"ids", "flag", "S"}, in, {"and", "or", "xor", "less", "wi", "wf"});
    ASSERT_EQ(out.size(), 6u) << what;
    std::vector<uint8_t> andv, orv, xorv, lessv;
    std::vector<int64_t> wi;
    std::vector<float> wf;
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool keep = ids[i] != 0, f = flag[i % 3] != 0;
      andv.push_back(keep && f);
      orv.push_back(keep || f);
      xorv.push_back(keep != f);
      lessv.push_back(ids[i] < 100);
      wi.push_back(keep ? ids[i] : 100);
    }
    for (size_t i = 0; i < sc.size(); ++i) {
      const size_t b = i / 6, col = i % 3;  // S [2, 2, 3] against keep [2, 3] broadcast as [1, 2, 3]
      const size_t k = ((i / 3) % 2) * 3 + col;
      (void)b;
      wf.push_back(ids[k] != 0 ? sc[i] : -std::numeric_limits<float>::infinity());
    }
    EXPECT_EQ(Read<uint8_t>(out[0]), andv) << what;
    EXPECT_EQ(Read<uint8_t>(out[1]), orv) << what;
    EXPECT_EQ(Read<uint8_t>(out[2]), xorv) << what;
    EXPECT_EQ(Read<uint8_t>(out[3]), lessv) << what;
    EXPECT_EQ(Read<int64_t>(out[4]), wi) << what;
    EXPECT_EQ(Read<float>(out[5]), wf) << what;
  };
  CheckAllClaimed(path, dir, check);
}

TEST_F(AotCpuIntOps, ExpandBroadcastsInt64BoolAndFloat) {
  onnx::ModelProto m = NewModel("expand");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "A", {3, 1}, kI64);
  AddTensorValueInfo(g->add_input(), "M", {1, 4}, kBool);
  AddTensorValueInfo(g->add_input(), "F", {4}, kF32);
  AddTensorValueInfo(g->add_output(), "ea", {2, 3, 4}, kI64);
  AddTensorValueInfo(g->add_output(), "em", {3, 4}, kBool);
  AddTensorValueInfo(g->add_output(), "ef", {2, 4}, kF32);
  AddInt64s(g, "s0", {3}, {2, 1, 4});
  AddInt64s(g, "s1", {2}, {3, 1});
  AddInt64s(g, "s2", {2}, {2, 4});
  AddNode(g, "Expand", "x0", {"A", "s0"}, "ea");
  AddNode(g, "Expand", "x1", {"M", "s1"}, "em");
  AddNode(g, "Expand", "x2", {"F", "s2"}, "ef0");
  onnx_build::AddFloats(g, "one", {1}, {1.f});
  AddNode(g, "Add", "plus", {"ef0", "one"}, "ef");  // something to compute beside the copies
  TempDir dir;
  const std::string path = dir / "model.onnx";
  WriteFile(path, Serialize(m));
  std::vector<int64_t> a = {-1, 2, kMax64};
  std::vector<uint8_t> mk = {1, 0, 0, 1};
  std::vector<float> f = {0.5f, -1.f, 2.f, 3.f};
  std::vector<int64_t> ad = {3, 1}, md = {1, 4}, fd = {4};
  auto check = [&](Session& s, const std::string& what) {
    std::vector<Value> in;
    in.push_back(Tensor(ElementType::INT64, a, ad));
    in.push_back(Tensor(ElementType::BOOL, mk, md));
    in.push_back(Tensor(ElementType::FLOAT, f, fd));
    std::vector<Value> out = s.Run({"A", "M", "F"}, in, {"ea", "em", "ef"});
    ASSERT_EQ(out.size(), 3u) << what;
    std::vector<int64_t> ea;
    for (int b = 0; b < 2; ++b)
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 4; ++c) ea.push_back(a[static_cast<size_t>(r)]);
    std::vector<uint8_t> em;
    for (int r = 0; r < 3; ++r) em.insert(em.end(), mk.begin(), mk.end());
    std::vector<float> ef;
    for (int r = 0; r < 2; ++r)
      for (float v : f) ef.push_back(v + 1.f);
    EXPECT_EQ(Read<int64_t>(out[0]), ea) << what;
    EXPECT_EQ(Read<uint8_t>(out[1]), em) << what;
    EXPECT_EQ(Read<float>(out[2]), ef) << what;
  };
  CheckAllClaimed(path, dir, check);
}

TEST_F(AotCpuIntOps, ReduceL2WithKeepdimsAndAxes) {
  onnx::ModelProto m = NewModel("reduce_l2");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 3, 4}, kF32);
  AddTensorValueInfo(g->add_output(), "k1", {2, 1, 4}, kF32);
  AddTensorValueInfo(g->add_output(), "k0", {3}, kF32);
  AddTensorValueInfo(g->add_output(), "all", {1, 1, 1}, kF32);
  AddTensorValueInfo(g->add_output(), "last", {2, 3}, kF32);
  AddTensorValueInfo(g->add_output(), "sq", {2, 3, 1}, kF32);
  SetInts(AddNode(g, "ReduceL2", "r0", {"X"}, "k1"), "axes", {1});
  auto* r1 = AddNode(g, "ReduceL2", "r1", {"X"}, "k0");
  SetInts(r1, "axes", {0, -1});
  SetInt(r1, "keepdims", 0);
  AddNode(g, "ReduceL2", "r2", {"X"}, "all");
  auto* r3 = AddNode(g, "ReduceL2", "r3", {"X"}, "last");
  SetInts(r3, "axes", {2});
  SetInt(r3, "keepdims", 0);
  SetInts(AddNode(g, "ReduceSumSquare", "r4", {"X"}, "sq"), "axes", {-1});
  TempDir dir;
  const std::string path = dir / "model.onnx";
  WriteFile(path, Serialize(m));
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5) * 0.37f;
  std::vector<int64_t> xd = {2, 3, 4};
  auto at = [&](int a, int b, int c) { return static_cast<double>(x[static_cast<size_t>((a * 3 + b) * 4 + c)]); };
  std::vector<double> k1(8, 0), k0(3, 0), last(6, 0);
  double all = 0;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) {
        const double v = at(a, b, c) * at(a, b, c);
        k1[static_cast<size_t>(a * 4 + c)] += v;
        k0[static_cast<size_t>(b)] += v;
        last[static_cast<size_t>(a * 3 + b)] += v;
        all += v;
      }
  auto near = [](const std::vector<float>& got, const std::vector<double>& want, bool root, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      const double w = root ? std::sqrt(want[i]) : want[i];
      EXPECT_NEAR(got[i], w, 2e-6 * std::fabs(w) + 1e-7) << what << " " << i;
    }
  };
  auto check = [&](Session& s, const std::string& what) {
    std::vector<Value> in;
    in.push_back(Tensor(ElementType::FLOAT, x, xd));
    std::vector<Value> out = s.Run({"X"}, in, {"k1", "k0", "all", "last", "sq"});
    ASSERT_EQ(out.size(), 5u) << what;
    near(Read<float>(out[0]), k1, true, what + " axes [1] keepdims 1");
    near(Read<float>(out[1]), k0, true, what + " axes [0, -1] keepdims 0");
    near(Read<float>(out[2]), {all}, true, what + " all axes");
    near(Read<float>(out[3]), last, true, what + " axes [2] keepdims 0");
    near(Read<float>(out[4]), last, false, what + " ReduceSumSquare");
  };
  CheckAllClaimed(path, dir, check);
}

TEST_F(AotCpuIntOps, TriluAndFloatRoundingAndTrig) {
  // A decoder's causal mask: Trilu(upper, k 1) of a float matrix stack, Trilu(lower, k -1) of int64; Sin, Cos,
  // Floor and Ceil of float (our loops: std::sin etc., as the references here).
  onnx::ModelProto m = NewModel("trilu");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 3, 4}, kF32);
  AddTensorValueInfo(g->add_input(), "I", {3, 3}, kI64);
  AddTensorValueInfo(g->add_output(), "up", {2, 3, 4}, kF32);
  AddTensorValueInfo(g->add_output(), "lo", {3, 3}, kI64);
  for (const char* y : {"sin", "cos", "floor", "ceil"}) AddTensorValueInfo(g->add_output(), y, {2, 3, 4}, kF32);
  AddInt64s(g, "k1", {}, {1});
  AddInt64s(g, "km1", {}, {-1});
  SetInt(AddNode(g, "Trilu", "t0", {"X", "k1"}, "up"), "upper", 1);
  SetInt(AddNode(g, "Trilu", "t1", {"I", "km1"}, "lo"), "upper", 0);
  AddNode(g, "Sin", "s", {"X"}, "sin");
  AddNode(g, "Cos", "c", {"X"}, "cos");
  AddNode(g, "Floor", "f", {"X"}, "floor");
  AddNode(g, "Ceil", "e", {"X"}, "ceil");
  TempDir dir;
  const std::string path = dir / "model.onnx";
  WriteFile(path, Serialize(m));
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.7f * static_cast<float>(i) - 8.3f;
  std::vector<int64_t> iv = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int64_t> xd = {2, 3, 4}, id = {3, 3};
  auto check = [&](Session& s, const std::string& what) {
    std::vector<Value> in;
    in.push_back(Tensor(ElementType::FLOAT, x, xd));
    in.push_back(Tensor(ElementType::INT64, iv, id));
    std::vector<Value> out = s.Run({"X", "I"}, in, {"up", "lo", "sin", "cos", "floor", "ceil"});
    ASSERT_EQ(out.size(), 6u) << what;
    std::vector<float> up, sn, cs, fl, ce;
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t r = static_cast<int64_t>(i / 4 % 3), c = static_cast<int64_t>(i % 4);
      up.push_back(c - r >= 1 ? x[i] : 0.f);
      sn.push_back(std::sin(x[i]));
      cs.push_back(std::cos(x[i]));
      fl.push_back(std::floor(x[i]));
      ce.push_back(std::ceil(x[i]));
    }
    EXPECT_EQ(Read<float>(out[0]), up) << what;
    EXPECT_EQ(Read<int64_t>(out[1]), (std::vector<int64_t>{0, 0, 0, 4, 0, 0, 7, 8, 0})) << what;
    EXPECT_EQ(Read<float>(out[2]), sn) << what;
    EXPECT_EQ(Read<float>(out[3]), cs) << what;
    EXPECT_EQ(Read<float>(out[4]), fl) << what;
    EXPECT_EQ(Read<float>(out[5]), ce) << what;
  };
  CheckAllClaimed(path, dir, check);
}

}  // namespace
}  // namespace epctx
