// The weight-sharing workspaces (share.h): what a group stores once, what it keeps apart, and how graphs are handed
// between inference sessions.
#include "providers/aotcpu/binary/share.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace epctx {
namespace aotcpu {
namespace {

TensorInput Tensor(const std::string& name, const std::string& bytes) {
  TensorInput t;
  t.name = name;
  t.bytes = bytes;
  t.dtype = 1;
  t.dims = {bytes.size() / 4};
  return t;
}

GraphInput MakeGraph(const std::string& name, std::vector<std::string> tensors) {
  GraphInput g;
  g.name = name;
  g.tensor_names = std::move(tensors);
  g.records = "r";
  return g;
}

class AotCpuShareGroup : public ::testing::Test {
 protected:
  void SetUp() override { GenerationGroup::Instance().Clear(); }
  void TearDown() override { GenerationGroup::Instance().Clear(); }
};

TEST_F(AotCpuShareGroup, FirstJoinFixesTheBinaryPath) {
  GenerationGroup& g = GenerationGroup::Instance();
  bool started = false;
  EXPECT_EQ(g.Join("a/first_aotcpu.bin", &started), "a/first_aotcpu.bin");
  EXPECT_TRUE(started);
  EXPECT_EQ(g.Join("b/second_aotcpu.bin", &started), "a/first_aotcpu.bin");
  EXPECT_FALSE(started);
  g.Clear();
  EXPECT_FALSE(g.Active());
  EXPECT_EQ(g.Join("c/third_aotcpu.bin", &started), "c/third_aotcpu.bin");
  EXPECT_TRUE(started);
}

TEST_F(AotCpuShareGroup, EqualBytesAreStoredOnceWhateverTheirNamesAndEqualNamesWithOtherBytesTwice) {
  GenerationGroup& g = GenerationGroup::Instance();
  bool started = false;
  g.Join("x_aotcpu.bin", &started);
  const std::string w(4096, 'w'), v(4096, 'v');
  ASSERT_TRUE(g.Stage(1, {MakeGraph("g1", {"g1/w", "g1/v"})}, {Tensor("g1/w", w), Tensor("g1/v", v)}).ok);
  g.Commit(1);
  // g2: the same bytes as g1/w under another name (shared), and other bytes under g1's name for v (kept).
  std::string v2 = v;
  v2[7] = 'x';
  ASSERT_TRUE(g.Stage(2, {MakeGraph("g2", {"g2/renamed", "g1/v"})}, {Tensor("g2/renamed", w), Tensor("g1/v", v2)}).ok);
  const ContextBinaryContents c = g.Contents(2);
  ASSERT_EQ(c.graphs.size(), 2u);
  EXPECT_EQ(c.graphs[1].tensor_names[0], "g1/w");  // refers to the stored copy
  EXPECT_EQ(c.tensors.size(), 3u);                  // w, v, and v2 (same name as v, other bytes)
  EXPECT_EQ(g.deduplicated_bytes(), 4096u);
  std::string binary;
  ASSERT_TRUE(WriteContextBinary(ContextBinaryContents(c), &binary).ok);
}

TEST_F(AotCpuShareGroup, AGraphNameTwiceInAGroupIsRefused) {
  GenerationGroup& g = GenerationGroup::Instance();
  bool started = false;
  g.Join("x_aotcpu.bin", &started);
  ASSERT_TRUE(g.Stage(1, {MakeGraph("same", {})}, {}).ok);
  g.Commit(1);
  CheckResult r = g.Stage(2, {MakeGraph("same", {})}, {});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("ep.context_node_name_prefix"), std::string::npos) << r.reason;
}

TEST_F(AotCpuShareGroup, StagedGraphsOfAnotherSessionStayOutOfTheBinary) {
  GenerationGroup& g = GenerationGroup::Instance();
  bool started = false;
  g.Join("x_aotcpu.bin", &started);
  ASSERT_TRUE(g.Stage(1, {MakeGraph("a", {})}, {}).ok);  // never committed (its session failed)
  ASSERT_TRUE(g.Stage(2, {MakeGraph("b", {})}, {}).ok);
  const ContextBinaryContents c = g.Contents(2);
  ASSERT_EQ(c.graphs.size(), 1u);
  EXPECT_EQ(c.graphs[0].name, "b");
}

TEST_F(AotCpuShareGroup, LayoutsRecordedByOneGraphAreOfferedToTheNext) {
  GenerationGroup& g = GenerationGroup::Instance();
  dnnl::memory::desc d({512, 512}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ba);
  dnnl::memory::desc out;
  EXPECT_FALSE(g.FindLayout(42, &out));
  g.RecordLayout(42, d);
  ASSERT_TRUE(g.FindLayout(42, &out));
  EXPECT_TRUE(out == d);
}

TEST(AotCpuInferenceWorkspace, GraphsAreHandedOutOnceAndOnlyAllOrNothing) {
  // A real (tiny) binary with two graphs.
  ContextBinaryContents c;
  c.compat = {"0", "2.6.3", "avx2", {}};
  c.graphs = {MakeGraph("one", {"t"}), MakeGraph("two", {"t"})};
  c.tensors = {Tensor("t", std::string(64, 'a'))};
  auto bytes = std::make_shared<std::string>();
  ASSERT_TRUE(WriteContextBinary(c, bytes.get()).ok);
  auto shared = std::make_shared<SharedBinary>();
  shared->keep = bytes;
  shared->reader = std::make_shared<ContextBinaryReader>();
  ASSERT_TRUE(shared->reader->Open(bytes->data(), bytes->size()).ok);
  shared->from = "test";

  InferenceWorkspace& ws = InferenceWorkspace::Instance();
  const size_t before = ws.size();
  ws.Offer(shared, {"one"});  // a session ran "one"; "two" waits
  EXPECT_EQ(ws.size(), before + 1);
  std::vector<std::shared_ptr<SharedBinary>> got;
  EXPECT_FALSE(ws.TakeAll({"two", "missing"}, &got));  // not all there: nothing taken
  EXPECT_EQ(ws.size(), before + 1);
  ASSERT_TRUE(ws.TakeAll({"two"}, &got));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].get(), shared.get());
  EXPECT_FALSE(ws.TakeAll({"two"}, &got));  // handed out once
  EXPECT_EQ(ws.size(), before);
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
