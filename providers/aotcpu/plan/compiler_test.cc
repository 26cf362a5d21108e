// Layout naming (FormatTagOf): a program stores each operand's layout as a oneDNN format tag, and the executor
// recreates primitives from it; the tag must describe the layout oneDNN chose exactly, or the recreated primitive
// may be another (slower) implementation.
#include "providers/aotcpu/plan/compiler.h"

#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <string>

namespace epctx {
namespace aotcpu {
namespace {

using dnnl::memory;

// openWakeWord's embedding model starts with a 3x3 convolution of one input channel: oneDNN's avx2 kernel wants its
// weights [24, 1, 3, 3] in Acdb8a, which oneDNN's equality also finds "equal" to Abcd8a (strides of the size-1
// input-channel dim are ignored). Named Abcd8a, the executor's convolution became ref:any (100 ms instead of 0.4).
TEST(AotCpuLayoutNames, TheTagWhoseStridesMatchExactlyIsChosen) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const memory::desc src({2, 1, 76, 32}, memory::data_type::f32, memory::format_tag::abcd);
  const memory::desc wei({24, 1, 3, 3}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc bias({24}, memory::data_type::f32, memory::format_tag::a);
  const memory::desc dst({2, 24, 74, 32}, memory::data_type::f32, memory::format_tag::any);
  dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                      wei, bias, dst, {1, 1}, {0, 1}, {0, 1}),
      eng);
  const std::string impl = pd.impl_info_str();
  if (impl.rfind("ref", 0) == 0) GTEST_SKIP() << "oneDNN has no optimized kernel for this convolution on this host";
  const memory::desc chosen = pd.weights_desc();
  const uint32_t tag = FormatTagOf(chosen);
  ASSERT_NE(tag, 0u);
  const memory::desc named({24, 1, 3, 3}, memory::data_type::f32, static_cast<memory::format_tag>(tag));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(named.data.format_desc.blocking.strides[i], chosen.data.format_desc.blocking.strides[i]) << "dim " << i;
  // Recreated from the named layouts, the primitive is the same implementation.
  dnnl::convolution_forward::primitive_desc again(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                      named, bias, pd.dst_desc(), {1, 1}, {0, 1}, {0, 1}),
      eng);
  EXPECT_EQ(std::string(again.impl_info_str()), impl);
}

TEST(AotCpuLayoutNames, PlainAndBlockedActivationsKeepTheirUsualTags) {
  EXPECT_EQ(FormatTagOf(memory::desc({2, 16, 8, 8}, memory::data_type::f32, memory::format_tag::abcd)),
            static_cast<uint32_t>(dnnl_abcd));
  EXPECT_EQ(FormatTagOf(memory::desc({2, 16, 8, 8}, memory::data_type::f32, memory::format_tag::aBcd8b)),
            static_cast<uint32_t>(dnnl_aBcd8b));
  EXPECT_EQ(FormatTagOf(memory::desc({2, 16, 8, 8}, memory::data_type::f32, memory::format_tag::acdb)),
            static_cast<uint32_t>(dnnl_acdb));
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
