// Tensor storage: Allocate zero-fills even when it reuses a cached block another tensor dirtied;
// AllocateForOverwrite (the CPU EP's outputs of kernels that write every element) gives the same size and alignment.
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace epctx {
namespace {

TEST(TensorStorage, AllocateZeroesAReusedDirtyBlock) {
  for (int64_t n : {int64_t{100}, int64_t{40000}, int64_t{300000}}) {  // malloc'd, and two cached block sizes
    SCOPED_TRACE(n);
    {
      auto dirty = Tensor::AllocateForOverwrite(DataType::kFloat, {n});
      ASSERT_TRUE(dirty.ok());
      EXPECT_EQ(dirty.value().NumElements(), n);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(dirty.value().raw_data()) % 64, 0u);
      std::memset(dirty.value().raw_data(), 0xff, static_cast<size_t>(n) * sizeof(float));
    }  // back to the block cache (sizes from 64 KiB) or to malloc
    auto clean = Tensor::Allocate(DataType::kFloat, {n});
    ASSERT_TRUE(clean.ok());
    const float* p = clean.value().data<float>();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 0.f) << "element " << i;
  }
}

TEST(TensorStorage, AllocateForOverwriteChecksShapesAsAllocate) {
  EXPECT_FALSE(Tensor::AllocateForOverwrite(DataType::kFloat, {2, -1}).ok());
  EXPECT_FALSE(Tensor::AllocateForOverwrite(DataType::kFloat, {int64_t{1} << 40, int64_t{1} << 20}).ok());
  auto s = Tensor::AllocateForOverwrite(DataType::kString, {3});  // strings are still constructed
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s.value().data<std::string>()[2].empty());
}

}  // namespace
}  // namespace epctx
