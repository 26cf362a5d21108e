// Installed-plugin discovery (EpRegistry::RegisterFolder, InstalledPluginFolder) on a folder laid out as an install
// puts it: <dir>/libepctx_<name>.so. The whole installed package is tested by tests/install/install_test.sh.
#include "plugin/ep_library.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/test_util.h"

namespace epctx {
namespace {

using testing::TempDir;

void CopyFile(const std::string& from, const std::string& to) { testing::WriteFile(to, testing::ReadFile(from)); }

std::vector<std::string> EpNames(const EpRegistry& r) {
  std::vector<std::string> out;
  for (const EpctxEpDevice* d : r.Devices()) out.push_back(d->ep_name);
  return out;
}

TEST(PluginDiscovery, RegistersEachLibraryUnderItsName) {
  TempDir dir;
  CopyFile(testing::kExampleLib, dir / "libepctx_example.so");
  CopyFile(EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so", dir / "libepctx_aotcpu.so");
  testing::WriteFile(dir / "README", "not a library");        // ignored: not libepctx_<name>.so
  testing::WriteFile(dir / "libepctx_.so", "no name");        // ignored: empty name
  EpRegistry registry({});
  EXPECT_EQ(registry.RegisterFolder(dir.path()), 2u);
  ASSERT_NE(registry.Find("aotcpu"), nullptr);
  ASSERT_NE(registry.Find("example"), nullptr);
  EXPECT_TRUE(registry.Find("aotcpu")->discovered());
  // Name order: aotcpu before example, after the built-in CPU EP.
  EXPECT_EQ(EpNames(registry), (std::vector<std::string>{"CPUExecutionProvider", "AotCpuExecutionProvider",
                                                         "ExampleExecutionProvider"}));
  // A second scan changes nothing (the names are taken).
  EXPECT_EQ(registry.RegisterFolder(dir.path()), 0u);
  EXPECT_EQ(EpNames(registry).size(), 3u);
}

TEST(PluginDiscovery, SameNameSameFileIsANoOpAnotherFileIsADuplicate) {
  TempDir dir;
  CopyFile(testing::kExampleLib, dir / "libepctx_example.so");
  ASSERT_EQ(symlink((dir / "libepctx_example.so").c_str(), (dir / "link.so").c_str()), 0);
  EpRegistry registry({});
  ASSERT_EQ(registry.RegisterFolder(dir.path()), 1u);
  // The same file, by its path or through a link: OK, nothing added.
  EXPECT_TRUE(registry.Register("example", dir / "libepctx_example.so").ok());
  EXPECT_TRUE(registry.Register("example", dir / "link.so").ok());
  EXPECT_EQ(EpNames(registry).size(), 2u);
  // Another file (the build tree's copy) under that name: ONNX Runtime's duplicate error.
  Status dup = registry.Register("example", testing::kExampleLib);
  EXPECT_EQ(dup.code(), ErrorCode::FAIL);
  EXPECT_EQ(dup.message(), "library is already registered under example");
  // Unregistering a discovered library works like any other.
  EXPECT_TRUE(registry.Unregister("example").ok());
  EXPECT_EQ(EpNames(registry).size(), 1u);
}

TEST(PluginDiscovery, ExplicitRegistrationsKeepTheDuplicateError) {
  EpRegistry registry({});
  ASSERT_TRUE(registry.Register("example", testing::kExampleLib).ok());
  EXPECT_EQ(registry.Register("example", testing::kExampleLib).code(), ErrorCode::FAIL);
}

TEST(PluginDiscovery, BrokenLibrariesAreSkippedMissingFoldersAreEmpty) {
  TempDir dir;
  testing::WriteFile(dir / "libepctx_broken.so", "not an ELF file");
  CopyFile(testing::kExampleLib, dir / "libepctx_example.so");
  EpRegistry registry({});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(registry.RegisterFolder(dir.path()), 1u);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("WARNING"), std::string::npos) << log;
  EXPECT_NE(log.find("libepctx_broken.so' not registered as 'broken'"), std::string::npos) << log;
  EXPECT_EQ(registry.Find("broken"), nullptr);
  EXPECT_NE(registry.Find("example"), nullptr);

  EXPECT_EQ(registry.RegisterFolder(dir / "missing"), 0u);
  EXPECT_EQ(registry.RegisterFolder(""), 0u);
}

TEST(PluginDiscovery, InstalledFolderIsBesideLibepctx) {
  // In the build tree libepctx.so is build/lib/libepctx.so(.0.1.0): the folder is build/lib/epctx, which does not
  // exist, so the tests' Envs start with the CPU EP only.
  char lib[4096];
  ASSERT_NE(realpath(EPCTX_BINARY_DIR "/lib", lib), nullptr);
  EXPECT_EQ(InstalledPluginFolder(), std::string(lib) + "/epctx");
  EXPECT_FALSE(testing::Exists(InstalledPluginFolder()));
}

}  // namespace
}  // namespace epctx
