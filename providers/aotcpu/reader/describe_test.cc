// The reader describes what it validated, and nothing of what it refused.
#include "providers/aotcpu/reader/describe.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/runtime/program.h"

namespace epctx::aotcpu_reader {
namespace {

// A binary of two graphs: "relu" (a one-step program over one weight) and "broken" (records that do not parse).
std::string TwoGraphs() {
  aotcpu::Program p;
  p.inputs = {{"X", 1, {2, 3}}};
  p.outputs = {{"Y", 1, {2, 3}}};
  p.num_weights = 1;
  aotcpu::Step s;
  s.kind = aotcpu::StepKind::kBinary;
  s.name = "add";
  for (aotcpu::Buf buf : {aotcpu::Buf::kInput, aotcpu::Buf::kWeight, aotcpu::Buf::kOutput}) {
    aotcpu::Operand o;
    o.buf = buf;
    o.dims = {2, 3};
    o.strides = {3, 1};
    s.ops.push_back(o);
  }
  s.ints = {static_cast<int64_t>(dnnl::algorithm::binary_add)};
  p.steps = {s};
  aotcpu::ContextBinaryContents c;
  c.compat = {"0.1.0", "3.6.0", "avx2", {{"threads", "4"}}};
  c.tensors.push_back({"w", std::string(24, '\1'), 1, {2, 3}, 0});
  c.graphs.push_back({"relu", {"w"}, aotcpu::SerializeProgram(p)});
  c.graphs.push_back({"broken", {"w"}, "not records"});
  std::string out;
  EXPECT_TRUE(aotcpu::WriteContextBinary(c, &out).ok);
  return out;
}

TEST(AotCpuReader, DescribesWhatItValidated) {
  const std::string bin = TwoGraphs();
  ASSERT_TRUE(HasContextBinaryMagic(bin.data(), bin.size()));
  const BinaryDescription d = DescribeContextBinary(bin.data(), bin.size(), /*with_steps=*/true);
  ASSERT_TRUE(d.valid) << d.invalid;
  EXPECT_EQ(d.size, bin.size());
  EXPECT_EQ(d.isa, "avx2");
  EXPECT_EQ(d.options.size(), 1u);
  EXPECT_FALSE(d.sections.empty());
  EXPECT_EQ(d.tensor_count, 1u);
  EXPECT_EQ(d.tensor_bytes, 24u);
  ASSERT_EQ(d.graphs.size(), 2u);
  const GraphDescription& g = d.graphs[0];
  ASSERT_TRUE(g.parsed) << g.error;
  EXPECT_FALSE(g.dynamic);
  EXPECT_EQ(g.name, "relu");
  EXPECT_EQ(g.weight_count, 1u);
  EXPECT_EQ(g.weight_bytes, 24u);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.step_count, 1u);
  EXPECT_EQ(g.steps_by_kind.size(), 1u);
  EXPECT_EQ(g.steps.size(), 1u);
  EXPECT_FALSE(d.graphs[1].parsed);
  EXPECT_FALSE(d.graphs[1].error.empty());
  EXPECT_TRUE(DescribeContextBinary(bin.data(), bin.size(), /*with_steps=*/false).graphs[0].steps.empty());
}

TEST(AotCpuReader, RefusedBytesYieldOnlyTheReason) {
  std::string bin = TwoGraphs();
  EXPECT_FALSE(HasContextBinaryMagic(bin.data(), 7));
  EXPECT_FALSE(HasContextBinaryMagic(nullptr, 0));
  for (size_t size : {size_t{0}, size_t{8}, size_t{64}, bin.size() - 1}) {
    const BinaryDescription d = DescribeContextBinary(size ? bin.data() : nullptr, size, true);
    EXPECT_FALSE(d.valid) << size;
    EXPECT_FALSE(d.invalid.empty()) << size;
    EXPECT_EQ(d.size, size);
    EXPECT_TRUE(d.graphs.empty() && d.sections.empty()) << size;
  }
  const size_t weight = bin.find(std::string(24, '\1'));
  ASSERT_NE(weight, std::string::npos);
  bin[weight] ^= 2;  // a flipped weight bit: the tensor's content hash no longer matches
  EXPECT_FALSE(DescribeContextBinary(bin.data(), bin.size(), true).valid);
}

}  // namespace
}  // namespace epctx::aotcpu_reader
