#include "epcontext/stale_temporaries.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>

#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::Exists;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;

TEST(StaleTemporaries, NamesAreRecognisedStrictly) {
  EXPECT_EQ(TemporaryPid("m_ctx.onnx.tmp.123", "m_ctx.onnx"), 123);
  EXPECT_EQ(TemporaryPid("m_ctx.onnx.tmp.", "m_ctx.onnx"), -1);
  EXPECT_EQ(TemporaryPid("m_ctx.onnx.tmp.12x", "m_ctx.onnx"), -1);
  EXPECT_EQ(TemporaryPid("m_ctx.onnx.tmp.1234567890", "m_ctx.onnx"), -1);  // longer than any pid
  EXPECT_EQ(TemporaryPid("x_ctx.onnx.tmp.123", "m_ctx.onnx"), -1);
  EXPECT_EQ(TemporaryPid("m_ctx.onnx", "m_ctx.onnx"), -1);
  EXPECT_EQ(TemporaryPid("m_ctx.onnx.tmp.12.3", "m_ctx.onnx"), -1);
}

TEST(StaleTemporaries, OnlyDeadProcessesFilesOfThatPathAreRemoved) {
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(dead, &status, 0), dead);  // reaped: its pid names no process (until reused)
  TempDir dir;
  const std::string d = std::to_string(dead);
  const std::string stale = "m_ctx.onnx.tmp." + d;
  const std::set<std::string> kept = {
      "m_ctx.onnx.tmp." + std::to_string(::getpid()),   // this process's own write in progress
      "m_ctx.onnx.tmp." + std::to_string(::getppid()),  // a live process
      "other_ctx.onnx.tmp." + d,                        // another file's temporary: not this writer's business
      "m_ctx.onnx.tmp." + d + ".1",                     // not the writer's name shape
      "m_ctx.onnx"};
  WriteFile(dir / stale, "partial");
  for (const auto& f : kept) WriteFile(dir / f, "x");
  EXPECT_EQ(RemoveStaleTemporaries(dir / "m_ctx.onnx"), 1);
  EXPECT_FALSE(Exists(dir / stale));
  for (const auto& f : kept) EXPECT_TRUE(Exists(dir / f)) << f;
  EXPECT_EQ(RemoveStaleTemporaries(dir / "missing/m_ctx.onnx"), 0);
}

}  // namespace
}  // namespace epctx
