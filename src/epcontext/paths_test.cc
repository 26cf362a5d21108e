#include "epcontext/paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/test_util.h"

namespace epctx {
namespace {

TEST(EpContextPaths, DerivedFromTheFileNameNotTheFolder) {
  EXPECT_EQ(ValidatedEpContextPath("", "/p/my_model.onnx", true).value(), "/p/my_model_ctx.onnx");
  EXPECT_EQ(ValidatedEpContextPath("", "/p/my_model", true).value(), "/p/my_model_ctx.onnx");
  // A dot in a folder name must not matter (ONNX Runtime would produce "/p/v1_ctx.onnx").
  EXPECT_EQ(ValidatedEpContextPath("", "/p/v1.2/model", true).value(), "/p/v1.2/model_ctx.onnx");
  EXPECT_EQ(ValidatedEpContextPath("", "m.onnx", true).value(), "m_ctx.onnx");
  EXPECT_EQ(ValidatedEpContextPath("out/x.onnx", "/p/m.onnx", true).value(), "out/x.onnx");
}

TEST(EpContextPaths, FolderAndEmptyAreRefused) {
  epctx::testing::TempDir dir;
  for (const std::string& p : {dir.path() + "/", dir.path(), dir.path() + "/no_extension"}) {
    auto r = ValidatedEpContextPath(p, "m.onnx", true);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_EQ(r.status().code(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_EQ(r.status().message(), "context_file_path should not point to a folder.");
  }
  auto both = ValidatedEpContextPath("", "", true);
  EXPECT_EQ(both.status().code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(both.status().message(), "Both ep_context_path and model_path are empty.");
}

TEST(EpContextPaths, ExistingOutputIsNeverOverwritten) {
  epctx::testing::TempDir dir;
  std::string p = dir / "m_ctx.onnx";
  std::ofstream(p) << "old";
  auto r = ValidatedEpContextPath("", dir / "m.onnx", true);
  EXPECT_EQ(r.status().code(), ErrorCode::FAIL);
  EXPECT_EQ(r.status().message(), "Failed to generate EP context model since the file '" + p +
                                      "' exists already. Please remove the EP context model if you want to "
                                      "re-generate it.");
  EXPECT_TRUE(ValidatedEpContextPath("", dir / "m.onnx", false).ok());
  EXPECT_EQ(ContextBinaryPath(p, "aotcpu"), dir / "m_ctx_aotcpu.bin");
  EXPECT_EQ(ContextBinaryPath("m_ctx.onnx", "example"), "m_ctx_example.bin");
}

}  // namespace
}  // namespace epctx
