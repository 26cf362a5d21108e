// The AotCpu EP's support code: providers/common/context_util (shared with the example EP), isa.h and options.h.
// The EPContext helpers run against the runtime's real EpctxApi table; oneDNN's process-wide ISA limit is tested
// in re-executed child processes (gtest "threadsafe" death tests), since it only works before oneDNN's first use.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <climits>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/context_util.h"
#include "plugin/ep_objects.h"
#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/ir/test_graph.h"  // ConfigFromMap
#include "providers/aotcpu/plugin/options.h"
#include "tests/test_util.h"

namespace epctx {
namespace aotcpu {
namespace {

using epctx::testing::Contains;
using epctx::testing::FilesIn;
using epctx::testing::ReadFile;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;
namespace plugin = epctx::plugin;

constexpr const char* kEp = "TestExecutionProvider";

const EpctxApi* Api() { return GetEpctxApi(); }

// Takes ownership of a status; "" for OK, else "<code>|<message>".
std::string Text(EpctxStatus* st) {
  if (!st) return "";
  const std::string s = std::to_string(Api()->GetErrorCode(st)) + "|" + Api()->GetErrorMessage(st);
  Api()->ReleaseStatus(st);
  return s;
}
std::string LoadText(const std::string& message) {
  return std::to_string(EPCTX_INVALID_GRAPH) + "|Failed to load from EpContext model. " + kEp + ": " + message;
}

struct NodeDeleter {
  void operator()(EpctxNode* n) const { Api()->ReleaseNode(n); }
};
using NodePtr = std::unique_ptr<EpctxNode, NodeDeleter>;

EpctxOpAttr* IntAttribute(const char* name, int64_t v) {
  EpctxOpAttr* a = nullptr;
  EXPECT_EQ(Text(Api()->CreateOpAttr(name, &v, 1, EPCTX_ATTR_INT, &a)), "");
  return a;
}
EpctxOpAttr* StringAttribute(const char* name, const std::string& v) {
  EpctxOpAttr* a = nullptr;
  EXPECT_EQ(Text(Api()->CreateOpAttr(name, v.data(), v.size(), EPCTX_ATTR_STRING, &a)), "");
  return a;
}
NodePtr Node(const char* op, const char* domain, std::vector<EpctxOpAttr*> attrs, const char* name = "ctx_node") {
  EpctxNode* n = nullptr;
  EXPECT_EQ(Text(Api()->CreateNode(op, domain, name, nullptr, 0, nullptr, 0, attrs.data(), attrs.size(), &n)), "");
  return NodePtr(n);
}

// ---- context_util: paths ----

TEST(AotCpuSupportContextUtil, PathHelpers) {
  EXPECT_EQ(plugin::FolderOf("a/b/c.onnx"), "a/b");
  EXPECT_EQ(plugin::FolderOf("/c.onnx"), "/");
  EXPECT_EQ(plugin::FolderOf("c.onnx"), "");
  EXPECT_EQ(plugin::FileNameOf("a/b/c.onnx"), "c.onnx");
  EXPECT_EQ(plugin::FileNameOf("c.onnx"), "c.onnx");
  EXPECT_EQ(plugin::FileNameOf("a/"), "");
  EXPECT_EQ(plugin::JoinPath("", "n"), "n");
  EXPECT_EQ(plugin::JoinPath("a", "n"), "a/n");
  EXPECT_EQ(plugin::JoinPath("a/", "n"), "a/n");
  EXPECT_EQ(plugin::JoinPath("/", "n"), "/n");
}

TEST(AotCpuSupportContextUtil, ContextBinaryPathReplacesTheLastExtension) {
  EXPECT_EQ(plugin::ContextBinaryPath("out/m_ctx.onnx", "_aotcpu.bin"), "out/m_ctx_aotcpu.bin");
  EXPECT_EQ(plugin::ContextBinaryPath("m_ctx.onnx", "_example.bin"), "m_ctx_example.bin");
  EXPECT_EQ(plugin::ContextBinaryPath("/m.v2.onnx", "_x.bin"), "/m.v2_x.bin");
  EXPECT_EQ(plugin::ContextBinaryPath("dir/m_ctx", "_x.bin"), "dir/m_ctx_x.bin");
  EXPECT_EQ(plugin::ContextBinaryPath("dir/.onnx", "_x.bin"), "dir/.onnx_x.bin");
}

TEST(AotCpuSupportContextUtil, ErrorsNameTheEp) {
  EXPECT_EQ(Text(plugin::EpError(Api(), kEp, EPCTX_EP_FAIL, "boom")),
            std::to_string(EPCTX_EP_FAIL) + "|TestExecutionProvider: boom");
  EXPECT_EQ(Text(plugin::LoadError(Api(), kEp, "bad")), LoadText("bad"));
}

// ---- context_util: atomic writes ----

TEST(AotCpuSupportContextUtil, WriteFileAtomicallyWritesAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir / "m_ctx_x.bin";
  ASSERT_EQ(Text(plugin::WriteFileAtomically(Api(), kEp, path, std::string("first"))), "");
  ASSERT_EQ(Text(plugin::WriteFileAtomically(Api(), kEp, path, std::string("second, longer"))), "");
  EXPECT_EQ(ReadFile(path), "second, longer");
  EXPECT_EQ(FilesIn(dir.path()), std::set<std::string>{"m_ctx_x.bin"});
  const std::string zero = dir / "zero.bin";
  ASSERT_EQ(Text(plugin::WriteFileAtomically(Api(), kEp, zero, nullptr, 0)), "");
  EXPECT_EQ(ReadFile(zero), "");
}

TEST(AotCpuSupportContextUtil, WriteFileAtomicallyFailureNamesThePathAndCleansUp) {
  TempDir dir;
  const std::string missing = dir / "no/such/folder/x.bin";
  EXPECT_EQ(Text(plugin::WriteFileAtomically(Api(), kEp, missing, std::string("x"))),
            std::to_string(EPCTX_EP_FAIL) + "|TestExecutionProvider: failed to write the context binary '" + missing +
                "': cannot create a temporary file in its folder: No such file or directory");
  // The target is a folder: the rename fails, and the temporary file is removed.
  ASSERT_EQ(mkdir((dir / "taken").c_str(), 0755), 0);
  const std::string st = Text(plugin::WriteFileAtomically(Api(), kEp, dir / "taken", std::string("x")));
  EXPECT_TRUE(Contains(st, "failed to write the context binary '" + (dir / "taken") + "': rename: ")) << st;
  EXPECT_EQ(FilesIn(dir.path()), std::set<std::string>{"taken"});
}

// ---- context_util: EPContext nodes ----

TEST(AotCpuSupportContextUtil, EpContextNodeAndSourceMatching) {
  NodePtr ctx = Node("EPContext", "com.microsoft", {StringAttribute("source", "AotCpuExecutionProvider")});
  NodePtr other_domain = Node("EPContext", "", {StringAttribute("source", "AotCpuExecutionProvider")});
  NodePtr no_source = Node("EPContext", "com.microsoft", {});
  NodePtr int_source = Node("EPContext", "com.microsoft", {IntAttribute("source", 1)});
  NodePtr relu = Node("Relu", "", {});
  const std::vector<std::string> ours = {"AotCpuExecutionProvider", "aotcpu"};
  EXPECT_TRUE(plugin::IsEpContextNode(Api(), ctx.get()));
  EXPECT_FALSE(plugin::IsEpContextNode(Api(), other_domain.get()));
  EXPECT_FALSE(plugin::IsEpContextNode(Api(), relu.get()));
  EXPECT_TRUE(plugin::IsEpContextNodeFrom(Api(), ctx.get(), ours));
  EXPECT_FALSE(plugin::IsEpContextNodeFrom(Api(), ctx.get(), {"ExampleExecutionProvider"}));
  EXPECT_FALSE(plugin::IsEpContextNodeFrom(Api(), other_domain.get(), ours));
  EXPECT_FALSE(plugin::IsEpContextNodeFrom(Api(), no_source.get(), ours));
  EXPECT_FALSE(plugin::IsEpContextNodeFrom(Api(), int_source.get(), ours));
  NodePtr shouting = Node("EPContext", "com.microsoft", {StringAttribute("source", "AOTCPU")});
  EXPECT_TRUE(plugin::IsEpContextNodeFrom(Api(), shouting.get(), ours));
}

TEST(AotCpuSupportContextUtil, IntAttrDefaultsChecksTypeAndRange) {
  NodePtr n = Node("EPContext", "com.microsoft",
                   {IntAttribute("main_context", 0), StringAttribute("embed_mode", "1"), IntAttribute("max", 2)},
                   "ctx_1");
  int64_t v = -7;
  EXPECT_EQ(Text(plugin::IntAttr(Api(), kEp, n.get(), "main_context", 1, &v)), "");
  EXPECT_EQ(v, 0);
  EXPECT_EQ(Text(plugin::IntAttr(Api(), kEp, n.get(), "absent", 1, &v)), "");
  EXPECT_EQ(v, 1);
  EXPECT_EQ(Text(plugin::IntAttr(Api(), kEp, n.get(), "embed_mode", 1, &v)),
            LoadText("node 'ctx_1': attribute embed_mode is not an integer"));
  EXPECT_EQ(Text(plugin::IntAttr(Api(), kEp, n.get(), "max", 1, &v)),
            LoadText("node 'ctx_1': attribute max is 2; it must be 0 or 1"));
}

TEST(AotCpuSupportContextUtil, StringAttrKeepsBinaryBytes) {
  const std::string payload("a\0b\xff", 4);
  NodePtr n = Node("EPContext", "com.microsoft",
                   {StringAttribute("ep_cache_context", payload), IntAttribute("partition_name", 3)}, "ctx_2");
  bool present = false;
  std::string v;
  EXPECT_EQ(Text(plugin::StringAttr(Api(), kEp, n.get(), "ep_cache_context", &present, &v)), "");
  EXPECT_TRUE(present);
  EXPECT_EQ(v, payload);
  EXPECT_EQ(Text(plugin::StringAttr(Api(), kEp, n.get(), "notes", &present, &v)), "");
  EXPECT_FALSE(present);
  EXPECT_EQ(Text(plugin::StringAttr(Api(), kEp, n.get(), "partition_name", &present, &v)),
            LoadText("node 'ctx_2': attribute partition_name is not a string"));
}

TEST(AotCpuSupportContextUtil, MakeEpContextNodeSetsAttributesInOrder) {
  plugin::EpContextNodeSpec spec;
  spec.name = "pre_fused_0";
  spec.main_context = 1, spec.embed_mode = 0;
  spec.cache = "m_ctx_aotcpu.bin";
  spec.source = "AotCpuExecutionProvider";
  spec.sdk_version = "0.1.0";
  spec.hardware_architecture = "avx2";
  spec.inputs = {"X", "W"};
  spec.outputs = {"Y"};
  EpctxNode* raw = nullptr;
  ASSERT_EQ(Text(plugin::MakeEpContextNode(Api(), spec, &raw)), "");
  NodePtr n(raw);
  EXPECT_EQ(std::string(Api()->Node_GetOperatorType(raw)), "EPContext");
  EXPECT_EQ(std::string(Api()->Node_GetDomain(raw)), "com.microsoft");
  EXPECT_EQ(std::string(Api()->Node_GetName(raw)), "pre_fused_0");
  EXPECT_EQ(raw->get().inputs, (std::vector<std::string>{"X", "W"}));
  EXPECT_EQ(raw->get().outputs, (std::vector<std::string>{"Y"}));
  std::vector<std::string> names;
  for (const auto& a : raw->attrs) names.push_back(a->get().name);
  EXPECT_EQ(names, (std::vector<std::string>{"main_context", "embed_mode", "source", "ep_sdk_version", "partition_name",
                                             "ep_cache_context", "hardware_architecture"}));
  int64_t v = -1;
  bool present = false;
  std::string s;
  EXPECT_EQ(Text(plugin::IntAttr(Api(), kEp, raw, "embed_mode", 1, &v)), "");
  EXPECT_EQ(v, 0);
  EXPECT_EQ(Text(plugin::StringAttr(Api(), kEp, raw, "partition_name", &present, &s)), "");
  EXPECT_EQ(s, "pre_fused_0");
  EXPECT_EQ(Text(plugin::StringAttr(Api(), kEp, raw, "ep_cache_context", &present, &s)), "");
  EXPECT_EQ(s, "m_ctx_aotcpu.bin");
  EXPECT_TRUE(plugin::IsEpContextNodeFrom(Api(), raw, {"aotcpuexecutionprovider"}));

  // A secondary node: no ep_cache_context; empty optional strings are left out.
  spec.main_context = 0, spec.has_cache = false, spec.sdk_version.clear(), spec.hardware_architecture.clear();
  ASSERT_EQ(Text(plugin::MakeEpContextNode(Api(), spec, &raw)), "");
  NodePtr secondary(raw);
  names.clear();
  for (const auto& a : raw->attrs) names.push_back(a->get().name);
  EXPECT_EQ(names, (std::vector<std::string>{"main_context", "embed_mode", "source", "partition_name"}));
}

// ---- context_util: where a context binary is ----

TEST(AotCpuSupportContextUtil, ContextFolderFromModelPathOrContextFilePath) {
  TempDir dir;
  EpctxGraph g;
  std::string folder;
  g.model_path = dir / "m.onnx";
  ASSERT_TRUE(plugin::ContextFolder(Api(), &g, "ignored/x.onnx", &folder));
  EXPECT_EQ(folder, dir.path());
  g.model_path = "m.onnx";
  ASSERT_TRUE(plugin::ContextFolder(Api(), &g, "", &folder));
  EXPECT_EQ(folder, ".");
  g.model_path = "";  // loaded from bytes
  EXPECT_FALSE(plugin::ContextFolder(Api(), &g, "", &folder));
  ASSERT_TRUE(plugin::ContextFolder(Api(), &g, dir / "out_ctx.onnx", &folder));
  EXPECT_EQ(folder, dir.path());
  ASSERT_TRUE(plugin::ContextFolder(Api(), &g, dir.path(), &folder));  // an existing folder names itself
  EXPECT_EQ(folder, dir.path());
  ASSERT_TRUE(plugin::ContextFolder(Api(), &g, "x_ctx.onnx", &folder));
  EXPECT_EQ(folder, ".");
}

class AotCpuSupportResolve : public ::testing::Test {
 protected:
  void SetUp() override {
    g_.model_path = dir_ / "m.onnx";
    ASSERT_EQ(mkdir((dir_ / "sub").c_str(), 0755), 0);
    WriteFile(dir_ / "m_ctx.bin", "bytes");
    WriteFile(dir_ / "sub/b.bin", "bytes");
  }
  std::string Resolve(const std::string& relative, const std::string& file_path = "") {
    path_.clear(), real_.clear();
    return Text(plugin::ResolveContextBinary(Api(), kEp, &g_, "ctx", relative, file_path, &path_, &real_));
  }
  std::string Real(const std::string& p) {
    char buf[PATH_MAX];
    return realpath(p.c_str(), buf) ? buf : "";
  }
  TempDir dir_;
  EpctxGraph g_;
  std::string path_, real_;
};

TEST_F(AotCpuSupportResolve, AcceptsFilesAndSubfoldersInsideTheModelFolder) {
  EXPECT_EQ(Resolve("m_ctx.bin"), "");
  EXPECT_EQ(path_, dir_ / "m_ctx.bin");
  EXPECT_EQ(real_, Real(dir_ / "m_ctx.bin"));
  EXPECT_EQ(Resolve("sub/b.bin"), "");
  EXPECT_EQ(real_, Real(dir_ / "sub/b.bin"));
  ASSERT_EQ(symlink("sub/b.bin", (dir_ / "inside_link.bin").c_str()), 0);
  EXPECT_EQ(Resolve("inside_link.bin"), "");
  EXPECT_EQ(real_, Real(dir_ / "sub/b.bin"));
  EXPECT_EQ(Resolve("./m_ctx.bin"), "");  // '.' is harmless
}

TEST_F(AotCpuSupportResolve, RefusesEveryPathRuleWithItsMessage) {
  EXPECT_EQ(Resolve(""), LoadText("node 'ctx': the file path in ep_cache_context is empty"));
  EXPECT_EQ(Resolve("/etc/hostname"),
            LoadText("node 'ctx': ep_cache_context must hold a path relative to the model's folder, but "
                     "'/etc/hostname' is an absolute path"));
  for (const std::string bad : {"../x.bin", "sub/../../x.bin", "sub/.."})
    EXPECT_EQ(Resolve(bad), LoadText("node 'ctx': the file path '" + bad +
                                     "' in ep_cache_context has a '..' component; it may not point outside the "
                                     "model's folder"));
  EXPECT_EQ(Resolve("..x.bin"), LoadText("node 'ctx': the context binary '" + (dir_ / "..x.bin") +
                                         "' does not exist"));  // only a whole '..' component is refused
  EXPECT_EQ(Resolve("missing.bin"),
            LoadText("node 'ctx': the context binary '" + (dir_ / "missing.bin") + "' does not exist"));
  EXPECT_EQ(path_, dir_ / "missing.bin");  // known once the folder is
  EXPECT_EQ(real_, "");
  EXPECT_EQ(Resolve("sub"), LoadText("node 'ctx': the context binary '" + (dir_ / "sub") + "' is not a regular file"));
  TempDir outside;
  WriteFile(outside / "secret.bin", "x");
  ASSERT_EQ(symlink((outside / "secret.bin").c_str(), (dir_ / "escape.bin").c_str()), 0);
  EXPECT_EQ(Resolve("escape.bin"),
            LoadText("node 'ctx': the context binary '" + (dir_ / "escape.bin") + "' resolves to '" +
                     Real(outside / "secret.bin") + "', outside the model's folder '" + Real(dir_.path()) + "'"));
  g_.model_path = "";
  EXPECT_EQ(Resolve("m_ctx.bin"), LoadText("node 'ctx': cannot locate the context binary 'm_ctx.bin': the model was "
                                           "loaded from bytes and ep.context_file_path is not set"));
  EXPECT_EQ(Resolve("m_ctx.bin", dir_ / "m_ctx.onnx"), "");  // from bytes: beside ep.context_file_path
  EXPECT_EQ(real_, Real(dir_ / "m_ctx.bin"));
}

// ---- context_util: mapping ----

TEST(AotCpuSupportContextUtil, MapFileMapsReadOnlyAndUnmapsOnDestruction) {
  TempDir dir;
  const std::string content = std::string(10000, 'a') + "end";
  WriteFile(dir / "b.bin", content);
  plugin::MappedFile m;
  std::string why;
  ASSERT_TRUE(plugin::MapFile(dir / "b.bin", &m, &why, /*will_need=*/true)) << why;
  ASSERT_EQ(m.size(), content.size());
  EXPECT_EQ(std::string(static_cast<const char*>(m.data()), m.size()), content);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data()) % 4096, 0u);
  // Moves hand the mapping over; the file can go away while it is mapped.
  plugin::MappedFile moved(std::move(m));
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.data(), nullptr);
  ASSERT_EQ(unlink((dir / "b.bin").c_str()), 0);
  EXPECT_EQ(static_cast<const char*>(moved.data())[content.size() - 1], 'd');
  plugin::MappedFile assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.size(), content.size());
  assigned.Reset();
  EXPECT_TRUE(assigned.empty());
}

// A file of 2 MiB or more is advised MADV_HUGEPAGE: advice only, its bytes read the same (also past the first
// 2 MiB and at an odd size).
TEST(AotCpuSupportContextUtil, LargeFilesMapTheSameBytes) {
  TempDir dir;
  std::string content((5u << 20) + 123, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7 + (i >> 20));
  WriteFile(dir / "big.bin", content);
  plugin::MappedFile m;
  std::string why;
  ASSERT_TRUE(plugin::MapFile(dir / "big.bin", &m, &why)) << why;
  ASSERT_EQ(m.size(), content.size());
  EXPECT_EQ(std::memcmp(m.data(), content.data(), content.size()), 0);
}

TEST(AotCpuSupportContextUtil, MapFileRefusesWithAReasonAndLeavesTheOutputAlone) {
  TempDir dir;
  WriteFile(dir / "ok.bin", "xyz");
  WriteFile(dir / "empty.bin", "");
  plugin::MappedFile m;
  std::string why;
  ASSERT_TRUE(plugin::MapFile(dir / "ok.bin", &m, &why));
  const void* before = m.data();
  EXPECT_FALSE(plugin::MapFile(dir / "empty.bin", &m, &why));
  EXPECT_EQ(why, "'" + (dir / "empty.bin") + "' is empty");
  EXPECT_FALSE(plugin::MapFile(dir / "missing.bin", &m, &why));
  EXPECT_EQ(why, "cannot open '" + (dir / "missing.bin") + "': No such file or directory");
  EXPECT_FALSE(plugin::MapFile(dir.path(), &m, &why));
  EXPECT_EQ(why, "'" + dir.path() + "' is not a regular file");
  EXPECT_EQ(m.data(), before);
  EXPECT_EQ(std::string(static_cast<const char*>(m.data()), m.size()), "xyz");
}

// ---- isa ----

TEST(AotCpuSupportIsa, NamesRanksAndParsing) {
  const std::vector<std::string> names = {"sse41",           "avx",          "avx2",           "avx512_core",
                                          "avx512_core_vnni", "avx512_core_bf16", "avx512_core_amx"};
  ASSERT_EQ(AllIsas().size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(IsaName(AllIsas()[i]), names[i]);
    EXPECT_EQ(IsaRank(AllIsas()[i]), static_cast<int>(i));
    Isa parsed;
    ASSERT_TRUE(ParseIsa(names[i], &parsed));
    EXPECT_EQ(parsed, AllIsas()[i]);
  }
  Isa isa;
  for (const char* bad : {"", "AVX2", "avx512", "avx2_vnni", "avx512_mic", " avx2", "x86-64"})
    EXPECT_FALSE(ParseIsa(bad, &isa)) << bad;
  EXPECT_EQ(IsaNameList(), "sse41, avx, avx2, avx512_core, avx512_core_vnni, avx512_core_bf16, avx512_core_amx");
}

TEST(AotCpuSupportIsa, VirtualDevicesAreAvx2AndAvx512CoreBelowTheHost) {
  EXPECT_EQ(IsasBelow(Isa::kSse41), std::vector<Isa>{});
  EXPECT_EQ(IsasBelow(Isa::kAvx2), std::vector<Isa>{});
  EXPECT_EQ(IsasBelow(Isa::kAvx512Core), std::vector<Isa>{Isa::kAvx2});
  EXPECT_EQ(IsasBelow(Isa::kAvx512CoreVnni), (std::vector<Isa>{Isa::kAvx2, Isa::kAvx512Core}));
  EXPECT_EQ(IsasBelow(Isa::kAvx512CoreAmx), (std::vector<Isa>{Isa::kAvx2, Isa::kAvx512Core}));
}

TEST(AotCpuSupportIsa, OneDnnIsaValues) {
  for (Isa isa : AllIsas()) {
    Isa back;
    ASSERT_TRUE(IsaFromOneDnn(OneDnnIsaOf(isa), &back)) << IsaName(isa);
    EXPECT_EQ(back, isa);
  }
  EXPECT_EQ(OneDnnIsaOf(Isa::kAvx2), static_cast<unsigned>(dnnl::cpu_isa::avx2));
  EXPECT_EQ(OneDnnIsaOf(Isa::kAvx512CoreAmx), static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx));
  Isa isa = Isa::kSse41;
  for (dnnl::cpu_isa off_chain : {dnnl::cpu_isa::avx2_vnni, dnnl::cpu_isa::avx512_mic, dnnl::cpu_isa::avx512_mic_4ops}) {
    ASSERT_TRUE(IsaFromOneDnn(static_cast<unsigned>(off_chain), &isa));
    EXPECT_EQ(isa, Isa::kAvx2);
  }
  EXPECT_FALSE(IsaFromOneDnn(static_cast<unsigned>(dnnl::cpu_isa::all), &isa));
  EXPECT_FALSE(IsaFromOneDnn(0x12345, &isa));
  EXPECT_EQ(OneDnnVersion(), std::to_string(DNNL_VERSION_MAJOR) + "." + std::to_string(DNNL_VERSION_MINOR) + "." +
                                 std::to_string(DNNL_VERSION_PATCH));
}

// A oneDNN stand-in: `real` is the CPU; `used` means something already queried oneDNN (limits are refused).
struct FakeOneDnn {
  Isa real = Isa::kAvx512CoreVnni;
  bool used = false;
  bool honours_limit = true;
  bool has_sse41 = true;
  int limit = -1;  // rank of the accepted limit
  std::vector<Isa> set_calls;
  IsaProbe Probe() {
    IsaProbe p;
    p.set_max = [this](Isa isa) {
      set_calls.push_back(isa);
      if (used) return false;
      if (honours_limit) limit = IsaRank(isa);
      return true;
    };
    p.effective = [this](Isa* isa) {
      used = true;
      if (!has_sse41) return false;
      *isa = limit >= 0 && limit < IsaRank(real) ? AllIsas()[limit] : real;
      return true;
    };
    return p;
  }
};

TEST(AotCpuSupportIsa, HostIsaWithoutEmulationIsOneDnnsEffectiveIsa) {
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    FakeOneDnn f;
    HostIsaInfo info;
    std::string error;
    ASSERT_TRUE(ResolveHostIsa(unset, f.Probe(), &info, &error)) << error;
    EXPECT_EQ(info.isa, Isa::kAvx512CoreVnni);
    EXPECT_FALSE(info.emulated);
    EXPECT_TRUE(f.set_calls.empty());  // no limit without the variable
  }
  FakeOneDnn old;
  old.has_sse41 = false;
  HostIsaInfo info;
  std::string error;
  EXPECT_FALSE(ResolveHostIsa(nullptr, old.Probe(), &info, &error));
  EXPECT_EQ(error, "this CPU lacks SSE4.1 (as oneDNN sees it), the least the AotCpu EP compiles for");
}

TEST(AotCpuSupportIsa, HostIsaEmulatesASmallerMachineByLimitingOneDnnFirst) {
  FakeOneDnn f;
  HostIsaInfo info;
  std::string error;
  ASSERT_TRUE(ResolveHostIsa("avx2", f.Probe(), &info, &error)) << error;
  EXPECT_EQ(info.isa, Isa::kAvx2);
  EXPECT_TRUE(info.emulated);
  EXPECT_EQ(f.set_calls, std::vector<Isa>{Isa::kAvx2});
  // Again (a second factory in the same process): the limit is in place already, so it still succeeds.
  ASSERT_TRUE(ResolveHostIsa("avx2", f.Probe(), &info, &error)) << error;
  EXPECT_EQ(info.isa, Isa::kAvx2);
  // The real level itself is fine too.
  FakeOneDnn same;
  ASSERT_TRUE(ResolveHostIsa("avx512_core_vnni", same.Probe(), &info, &error)) << error;
  EXPECT_EQ(info.isa, Isa::kAvx512CoreVnni);
  EXPECT_TRUE(info.emulated);
}

TEST(AotCpuSupportIsa, HostIsaRefusesUnknownHigherAndTooLateEmulation) {
  HostIsaInfo untouched{Isa::kAvx, false};
  std::string error;
  FakeOneDnn f;
  EXPECT_FALSE(ResolveHostIsa("avx3", f.Probe(), &untouched, &error));
  EXPECT_EQ(error, "EPCTX_AOTCPU_HOST_ISA=avx3 is not an ISA level; use one of: sse41, avx, avx2, avx512_core, "
                   "avx512_core_vnni, avx512_core_bf16, avx512_core_amx (or unset it)");
  EXPECT_TRUE(f.set_calls.empty());

  FakeOneDnn higher;
  EXPECT_FALSE(ResolveHostIsa("avx512_core_amx", higher.Probe(), &untouched, &error));
  EXPECT_EQ(error, "EPCTX_AOTCPU_HOST_ISA=avx512_core_amx is higher than this CPU supports (at most "
                   "avx512_core_vnni); an emulated host can only be smaller than the real one: use "
                   "avx512_core_vnni or a level below it, or unset EPCTX_AOTCPU_HOST_ISA");

  FakeOneDnn late;
  late.used = true;  // e.g. the CPU EP already ran a oneDNN primitive
  EXPECT_FALSE(ResolveHostIsa("avx2", late.Probe(), &untouched, &error));
  EXPECT_EQ(error, "cannot emulate EPCTX_AOTCPU_HOST_ISA=avx2: oneDNN was already used in this process and runs "
                   "avx512_core_vnni code (its ISA can only be limited before its first use); set "
                   "EPCTX_AOTCPU_HOST_ISA before anything in the process uses oneDNN, or also set "
                   "DNNL_MAX_CPU_ISA=AVX2");

  FakeOneDnn deaf;
  deaf.honours_limit = false;
  EXPECT_FALSE(ResolveHostIsa("avx", deaf.Probe(), &untouched, &error));
  EXPECT_TRUE(Contains(error, "this oneDNN build ignores set_max_cpu_isa")) << error;

  EXPECT_EQ(untouched.isa, Isa::kAvx);  // never written on failure
}

// The real oneDNN, in a fresh child process (the test binary re-executed for this test only).
TEST(AotCpuSupportIsaDeathTest, RealOneDnnFollowsTheEmulatedHost) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv(kHostIsaEnv, "sse41", 1);
        HostIsaInfo info;
        std::string error;
        if (!HostIsa(&info, &error)) {
          std::fprintf(stderr, "HostIsa failed: %s\n", error.c_str());
          std::exit(1);
        }
        const bool ok = info.isa == Isa::kSse41 && info.emulated &&
                        dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::sse41;
        std::fprintf(stderr, ok ? "emulated sse41\n" : "oneDNN ignored the limit\n");
        std::exit(ok ? 0 : 2);
      },
      ::testing::ExitedWithCode(0), "emulated sse41");
}

TEST(AotCpuSupportIsaDeathTest, RealOneDnnCannotBeLimitedAfterItsFirstUse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const dnnl::cpu_isa before = dnnl::get_effective_cpu_isa();  // first use: freezes the maximum
        setenv(kHostIsaEnv, "sse41", 1);
        HostIsaInfo info;
        std::string error;
        const bool resolved = HostIsa(&info, &error);
        if (before == dnnl::cpu_isa::sse41) {  // an SSE4.1-only machine: nothing to limit
          std::fprintf(stderr, "already used\n");
          std::exit(resolved ? 0 : 1);
        }
        std::fprintf(stderr, "%s\n", error.c_str());
        std::exit(!resolved && dnnl::get_effective_cpu_isa() == before ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "already used");
}

TEST(AotCpuSupportIsa, CompatibilityStringRoundTrips) {
  const CompatibilityInfo info{1, 0, "2.6.3", Isa::kAvx512Core};
  EXPECT_EQ(FormatCompatibility(info), "epctx-aotcpu;format=1.0;onednn=2.6.3;isa=avx512_core");
  CompatibilityInfo parsed;
  std::string why;
  ASSERT_TRUE(ParseCompatibility(FormatCompatibility(info), &parsed, &why)) << why;
  EXPECT_EQ(parsed.format_major, 1);
  EXPECT_EQ(parsed.format_minor, 0);
  EXPECT_EQ(parsed.onednn, "2.6.3");
  EXPECT_EQ(parsed.isa, Isa::kAvx512Core);
  EXPECT_EQ(CompatibilityFor(Isa::kAvx2), "epctx-aotcpu;format=" + std::to_string(kContextBinaryMajor) + "." +
                                              std::to_string(kContextBinaryMinor) + ";onednn=" + OneDnnVersion() +
                                              ";isa=avx2");
  // Fields in any order; unknown keys (a later minor's) are ignored.
  ASSERT_TRUE(ParseCompatibility("epctx-aotcpu;isa=avx2;threads=4;onednn=2.6.3;format=1.7", &parsed, &why)) << why;
  EXPECT_EQ(parsed.isa, Isa::kAvx2);
  EXPECT_EQ(parsed.format_minor, 7);
}

TEST(AotCpuSupportIsa, CompatibilityStringParseFailures) {
  const std::map<std::string, std::string> bad = {
      {"", "it does not start with 'epctx-aotcpu;'"},
      {"example:0.1.0", "it does not start with 'epctx-aotcpu;'"},
      {"EPCTX-AOTCPU;format=1.0;onednn=2.6.3;isa=avx2", "it does not start with 'epctx-aotcpu;'"},
      {"epctx-aotcpu", "field 'format' is missing"},
      {"epctx-aotcpu;format=1.0;isa=avx2", "field 'onednn' is missing"},
      {"epctx-aotcpu;format=1.0;onednn=2.6.3", "field 'isa' is missing"},
      {"epctx-aotcpu;format=1;onednn=2.6.3;isa=avx2", "format '1' is not <major>.<minor>"},
      {"epctx-aotcpu;format=1.-1;onednn=2.6.3;isa=avx2", "format '1.-1' is not <major>.<minor>"},
      {"epctx-aotcpu;format=1.0;onednn=2.6;isa=avx2", "onednn '2.6' is not <major>.<minor>.<patch>"},
      {"epctx-aotcpu;format=1.0;onednn=2.6.3;isa=avx3",
       "isa 'avx3' is not one of sse41, avx, avx2, avx512_core, avx512_core_vnni, avx512_core_bf16, avx512_core_amx"},
      {"epctx-aotcpu;format=1.0;onednn=2.6.3;isa=avx2;isa=avx2", "field 'isa' appears twice"},
      {"epctx-aotcpu;format=1.0;;onednn=2.6.3;isa=avx2", "field '' is not key=value"},
      {"epctx-aotcpu;format=1.0;onednn=2.6.3;isa=avx2;", "field '' is not key=value"},
      {"epctx-aotcpu;=1;format=1.0;onednn=2.6.3;isa=avx2", "field '=1' is not key=value"},
  };
  for (const auto& [text, reason] : bad) {
    CompatibilityInfo info;
    std::string why;
    EXPECT_FALSE(ParseCompatibility(text, &info, &why)) << text;
    EXPECT_EQ(why, reason) << text;
  }
}

TEST(AotCpuSupportIsa, JudgeCompatibilityAgainstTheHost) {
  auto judge = [](const std::string& isa, Isa host, const std::string& onednn = "2.6.3", int format = 1) {
    return JudgeCompatibility("epctx-aotcpu;format=1.2;onednn=2.6.3;isa=" + isa, host, onednn, format);
  };
  EXPECT_EQ(judge("avx2", Isa::kAvx2), EPCTX_EP_SUPPORTED_OPTIMAL);
  EXPECT_EQ(judge("avx2", Isa::kAvx512CoreVnni), EPCTX_EP_SUPPORTED_PREFER_RECOMPILATION);
  EXPECT_EQ(judge("sse41", Isa::kAvx), EPCTX_EP_SUPPORTED_PREFER_RECOMPILATION);
  EXPECT_EQ(judge("avx512_core", Isa::kAvx2), EPCTX_EP_UNSUPPORTED);
  EXPECT_EQ(judge("avx512_core_amx", Isa::kAvx512CoreBf16), EPCTX_EP_UNSUPPORTED);
  EXPECT_EQ(judge("avx2", Isa::kAvx2, "2.6.4"), EPCTX_EP_UNSUPPORTED);   // another oneDNN, even a patch release
  EXPECT_EQ(judge("avx2", Isa::kAvx2, "3.6.0"), EPCTX_EP_UNSUPPORTED);
  EXPECT_EQ(judge("avx2", Isa::kAvx2, "2.6.3", 2), EPCTX_EP_UNSUPPORTED);  // another format major
  EXPECT_EQ(JudgeCompatibility("garbage", Isa::kAvx2, "2.6.3", 1), EPCTX_EP_UNSUPPORTED);
  EXPECT_EQ(JudgeCompatibility("", Isa::kAvx2, "2.6.3", 1), EPCTX_EP_UNSUPPORTED);
  // Against this process.
  EXPECT_EQ(JudgeCompatibility(CompatibilityFor(Isa::kAvx512Core), Isa::kAvx512Core), EPCTX_EP_SUPPORTED_OPTIMAL);
  EXPECT_EQ(JudgeCompatibility(CompatibilityFor(Isa::kAvx2), Isa::kAvx512Core),
            EPCTX_EP_SUPPORTED_PREFER_RECOMPILATION);
  EXPECT_EQ(JudgeCompatibility("epctx-aotcpu;format=1.0;onednn=0.0.1;isa=avx2", Isa::kAvx2), EPCTX_EP_UNSUPPORTED);
}

TEST(AotCpuSupportIsa, LoadErrorTexts) {
  EXPECT_EQ(IsaTooHighMessage(Isa::kAvx512Core, Isa::kAvx2),
            "the context binary was compiled for avx512_core but this CPU supports at most avx2; recompile the model "
            "on this machine (or for target_isa avx2 or lower)");
  EXPECT_EQ(IsaTooHighMessage(Isa::kAvx512CoreVnni, Isa::kAvx2, true),
            "the context binary was compiled for avx512_core_vnni but this CPU supports at most avx2 (emulated: "
            "EPCTX_AOTCPU_HOST_ISA=avx2); recompile the model on this machine (or for target_isa avx2 or lower)");
  EXPECT_EQ(BuildMismatchMessage(CompatibilityInfo{2, 1, "2.7.0", Isa::kAvx2}, "2.6.3", 1),
            "the context binary was compiled with oneDNN 2.7.0 and context format 2.1, but this build runs oneDNN "
            "2.6.3 and reads context format 1.x; recompile the model with this build");
}

// ---- options ----


AotCpuOptions Read(const std::map<std::string, std::string>& entries) {
  AotCpuOptions o;
  OptionsError e;
  EXPECT_TRUE(ReadOptions(test_graph::ConfigFromMap(entries), &o, &e)) << e.message;
  return o;
}

std::string ReadError(const std::map<std::string, std::string>& entries) {
  AotCpuOptions o;
  OptionsError e;
  if (ReadOptions(test_graph::ConfigFromMap(entries), &o, &e)) return "accepted";
  EXPECT_EQ(e.code, EPCTX_INVALID_ARGUMENT);
  return e.message;
}

TEST(AotCpuSupportOptions, DefaultsWhenNothingIsSet) {
  const AotCpuOptions o = Read({});
  EXPECT_FALSE(o.context_enable);
  EXPECT_EQ(o.embed_mode, 0);
  EXPECT_EQ(o.context_file_path, "");
  EXPECT_EQ(o.node_name_prefix, "");
  EXPECT_FALSE(o.share_ep_contexts);
  EXPECT_FALSE(o.stop_share_ep_contexts);
  EXPECT_FALSE(o.prepare_and_load);
  EXPECT_FALSE(o.prepare_only);
  EXPECT_EQ(o.target_isa, "");
  EXPECT_EQ(o.intra_op_num_threads, 0);
  EXPECT_EQ(o.mode(), Mode::kJit);
}

TEST(AotCpuSupportOptions, ReadsEveryKey) {
  const AotCpuOptions o = Read({{"ep.context_enable", "1"},
                                {"ep.context_embed_mode", "1"},
                                {"ep.context_file_path", "/out/m_ctx.onnx"},
                                {"ep.context_node_name_prefix", "m1_"},
                                {"ep.share_ep_contexts", "1"},
                                {"ep.stop_share_ep_contexts", "1"},
                                {"ep.aotcpuexecutionprovider.enable_prepare_only", "1"},
                                {"ep.aotcpuexecutionprovider.target_isa", "avx2"},
                                {"session.intra_op_num_threads", "8"},
                                {"ep.exampleexecutionprovider.enable_prepare_and_load", "1"}});  // another EP's
  EXPECT_TRUE(o.context_enable);
  EXPECT_EQ(o.embed_mode, 1);
  EXPECT_EQ(o.context_file_path, "/out/m_ctx.onnx");
  EXPECT_EQ(o.node_name_prefix, "m1_");
  EXPECT_TRUE(o.share_ep_contexts);
  EXPECT_TRUE(o.stop_share_ep_contexts);
  EXPECT_FALSE(o.prepare_and_load);
  EXPECT_TRUE(o.prepare_only);
  EXPECT_EQ(o.target_isa, "avx2");
  EXPECT_EQ(o.intra_op_num_threads, 8);
  EXPECT_TRUE(Read({{"ep.aotcpuexecutionprovider.enable_prepare_and_load", "1"}}).prepare_and_load);
}

TEST(AotCpuSupportOptions, FlagsAcceptOnly0Or1AndNameTheKey) {
  for (const char* key : {"ep.context_enable", "ep.context_embed_mode", "ep.share_ep_contexts",
                          "ep.stop_share_ep_contexts", "ep.aotcpuexecutionprovider.enable_prepare_and_load",
                          "ep.aotcpuexecutionprovider.enable_prepare_only"}) {
    EXPECT_EQ(ReadError({{key, "true"}}), std::string(key) + " must be 0 or 1, got 'true'");
    EXPECT_EQ(ReadError({{key, "2"}}), std::string(key) + " must be 0 or 1, got '2'");
    EXPECT_EQ(ReadError({{key, " 1"}}), std::string(key) + " must be 0 or 1, got ' 1'");
    EXPECT_EQ(ReadError({{key, "0"}}), "accepted");
    EXPECT_EQ(ReadError({{key, ""}}), "accepted");  // empty = not set
  }
}

TEST(AotCpuSupportOptions, IntraOpThreads) {
  EXPECT_EQ(Read({{"session.intra_op_num_threads", "0"}}).intra_op_num_threads, 0);
  EXPECT_EQ(Read({{"session.intra_op_num_threads", "4096"}}).intra_op_num_threads, 4096);
  for (const char* bad : {"-1", "4097", "two", "1.5", "99999999999"})
    EXPECT_EQ(ReadError({{"session.intra_op_num_threads", bad}}),
              std::string("session.intra_op_num_threads must be an integer from 0 (default) to 4096, got '") + bad +
                  "'");
}

// The partition cost rule's switch cost (partition_cost.h): a plain decimal number of microseconds; 0 turns the rule
// off. Signs, exponents, inf/nan and values above 1e6 are refused naming the key.
TEST(AotCpuSupportOptions, PartitionSwitchUs) {
  const char* key = "ep.aotcpuexecutionprovider.partition_switch_us";
  EXPECT_TRUE(Read({}).partition_cost.enabled);
  EXPECT_EQ(Read({}).partition_cost.switch_us, kDefaultSwitchUs);
  EXPECT_FALSE(Read({{key, "0"}}).partition_cost.enabled);
  EXPECT_TRUE(Read({{key, "2.5"}}).partition_cost.enabled);
  EXPECT_EQ(Read({{key, "2.5"}}).partition_cost.switch_us, 2.5);
  EXPECT_EQ(Read({{key, "1000000"}}).partition_cost.switch_us, 1e6);
  for (const char* bad : {"-1", "1e3", "inf", "nan", "four", "1.2.3", ".", "1000001", " 4"})
    EXPECT_EQ(ReadError({{key, bad}}), std::string(key) + " must be a number of microseconds from 0 (the partition "
                                                          "cost rule off) to 1000000, got '" + bad + "'");
}

TEST(AotCpuSupportOptions, SessionConfigGetterReadsTheRuntimesEntries) {
  const std::map<std::string, std::string> entries = {{"ep.context_enable", "1"},
                                                      {"ep.aotcpuexecutionprovider.target_isa", "avx2"}};
  EpctxSessionOptions so;
  so.entries = &entries;
  const ConfigGetter get = SessionConfigGetter(Api(), &so);
  EXPECT_STREQ(get("ep.context_enable"), "1");
  EXPECT_EQ(get("ep.context_file_path"), nullptr);
  AotCpuOptions o;
  OptionsError e;
  ASSERT_TRUE(ReadOptions(get, &o, &e)) << e.message;
  EXPECT_TRUE(o.context_enable);
  EXPECT_EQ(o.target_isa, "avx2");
}

// Runs CheckPrepareAndLoad on options read from `entries`.
PrepareAndLoadResult Check(const std::map<std::string, std::string>& entries) {
  return CheckPrepareAndLoad(Read(entries));
}
const char* const kPal = "ep.aotcpuexecutionprovider.enable_prepare_and_load";
const char* const kOnly = "ep.aotcpuexecutionprovider.enable_prepare_only";

TEST(AotCpuSupportOptions, BehaviorMatrix) {
  struct Row {
    const char* enable;
    const char* pal;
    Mode mode;
    bool writes, reloads;
  };
  for (const Row& row : {Row{"0", "0", Mode::kJit, false, false}, Row{"1", "0", Mode::kGenerate, true, false},
                         Row{"0", "1", Mode::kPrepareAndLoad, false, true},
                         Row{"1", "1", Mode::kPrepareAndLoadPersist, true, true}}) {
    for (const char* embed : {"0", "1"}) {
      SCOPED_TRACE(std::string("enable=") + row.enable + " pal=" + row.pal + " embed=" + embed);
      const PrepareAndLoadResult r = Check({{"ep.context_enable", row.enable}, {kPal, row.pal},
                                            {"ep.context_embed_mode", embed}});
      ASSERT_TRUE(r.ok) << r.error.message;
      EXPECT_EQ(r.effective.mode(), row.mode);
      EXPECT_EQ(r.effective.writes_context_model(), row.writes);
      EXPECT_EQ(r.effective.reloads(), row.reloads);
      const bool overridden = row.mode == Mode::kPrepareAndLoadPersist && std::string(embed) == "1";
      EXPECT_EQ(r.warnings.size(), overridden ? 1u : 0u);
      // Embed mode is kept except where Path B needs the external binary.
      EXPECT_EQ(r.effective.embed_mode, overridden ? 0 : std::stoi(embed));
    }
  }
  // Generation and Path B with an explicit path are fine (the runtime writes there).
  EXPECT_TRUE(Check({{"ep.context_enable", "1"}, {kPal, "1"}, {"ep.context_file_path", "m_ctx.onnx"}}).ok);
  EXPECT_TRUE(Check({{"ep.context_enable", "1"}, {"ep.context_file_path", "m_ctx.onnx"}}).ok);
  // Without prepare_and_load a file path and no generation is a loading setup (a model from bytes).
  EXPECT_TRUE(Check({{"ep.context_file_path", "m_ctx.onnx"}}).ok);
  // prepare_only (Test 5).
  const PrepareAndLoadResult only = Check({{"ep.context_enable", "1"}, {kOnly, "1"}});
  ASSERT_TRUE(only.ok) << only.error.message;
  EXPECT_EQ(only.effective.mode(), Mode::kPrepareOnly);
  EXPECT_TRUE(only.effective.writes_context_model());
  EXPECT_FALSE(only.effective.reloads());
  EXPECT_TRUE(only.warnings.empty());
}

TEST(AotCpuSupportOptions, Check6PrepareAndLoadWithPrepareOnlyIsMutuallyExclusive) {
  for (const char* enable : {"0", "1"}) {
    const PrepareAndLoadResult r = Check({{"ep.context_enable", enable}, {kPal, "1"}, {kOnly, "1"}});
    ASSERT_FALSE(r.ok);
    EXPECT_EQ(r.error.code, EPCTX_INVALID_ARGUMENT);
    EXPECT_EQ(r.error.message,
              "ep.aotcpuexecutionprovider.enable_prepare_and_load=1 and "
              "ep.aotcpuexecutionprovider.enable_prepare_only=1 are mutually exclusive: prepare_only compiles the "
              "model and writes the context model without running it, prepare_and_load compiles it and then runs it "
              "from the compiled context. Set only one of them to 1.");
  }
}

TEST(AotCpuSupportOptions, Check7FilePathWithoutPersistingIsContradictory) {
  const PrepareAndLoadResult r = Check({{kPal, "1"}, {"ep.context_file_path", "some_path.onnx"}});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error.code, EPCTX_INVALID_ARGUMENT);
  EXPECT_EQ(r.error.message,
            "Contradictory options: ep.aotcpuexecutionprovider.enable_prepare_and_load=1 with ep.context_enable=0 "
            "compiles and reloads in memory and writes no file, but ep.context_file_path is set to "
            "'some_path.onnx'. To also keep the compiled model at that path, set ep.context_enable=1; to compile in "
            "memory only, remove ep.context_file_path. (If the input is already a context model loaded from bytes, "
            "ep.context_file_path locates its binary: remove ep.aotcpuexecutionprovider.enable_prepare_and_load "
            "instead.)");
}

TEST(AotCpuSupportOptions, PrepareOnlyWithoutContextEnableIsContradictory) {
  const PrepareAndLoadResult r = Check({{kOnly, "1"}});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error.code, EPCTX_INVALID_ARGUMENT);
  EXPECT_EQ(r.error.message,
            "Contradictory options: ep.aotcpuexecutionprovider.enable_prepare_only=1 compiles the model and writes "
            "the context model without running it, but ep.context_enable is not 1, so nothing would be written. Set "
            "ep.context_enable=1 (and optionally ep.context_file_path), or remove "
            "ep.aotcpuexecutionprovider.enable_prepare_only.");
}

TEST(AotCpuSupportOptions, Check8EmbedModeIsOverriddenForPathB) {
  const PrepareAndLoadResult r = Check({{"ep.context_enable", "1"}, {"ep.context_file_path", "embed_test_ctx.onnx"},
                                        {"ep.context_embed_mode", "1"}, {kPal, "1"}});
  ASSERT_TRUE(r.ok) << r.error.message;
  EXPECT_EQ(r.effective.embed_mode, 0);
  EXPECT_EQ(r.effective.mode(), Mode::kPrepareAndLoadPersist);
  EXPECT_EQ(r.effective.context_file_path, "embed_test_ctx.onnx");
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "Overriding ep.context_embed_mode to 0: ep.aotcpuexecutionprovider.enable_prepare_and_load=1 reloads the "
            "compiled model from its external context binary, so the binary is written beside the context model "
            "instead of being embedded in it. Set ep.context_embed_mode=0 to silence this warning.");
}

TEST(AotCpuSupportOptions, Check9PrepareAndLoadIsIgnoredForAContextModel) {
  const PrepareAndLoadResult r = Check({{kPal, "1"}});
  ASSERT_TRUE(r.ok);
  std::string warning = "stale";
  const AotCpuOptions o = IgnorePrepareAndLoadForContextModel(r.effective, &warning);
  EXPECT_FALSE(o.prepare_and_load);
  EXPECT_EQ(o.mode(), Mode::kJit);  // the EPContext nodes load as usual
  EXPECT_EQ(warning,
            "prepare_and_load=1 is ignored because the input model is already a pre-compiled context model; it is "
            "loaded as is. Remove ep.aotcpuexecutionprovider.enable_prepare_and_load when loading context models.");
  const AotCpuOptions plain = IgnorePrepareAndLoadForContextModel(Read({}), &warning);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(plain.mode(), Mode::kJit);
}

TEST(AotCpuSupportOptions, TargetIsa) {
  Isa target = Isa::kSse41;
  OptionsError e;
  ASSERT_TRUE(ResolveTargetIsa(Read({}), Isa::kAvx512Core, &target, &e));
  EXPECT_EQ(target, Isa::kAvx512Core);
  ASSERT_TRUE(ResolveTargetIsa(Read({{"ep.aotcpuexecutionprovider.target_isa", "avx2"}}), Isa::kAvx512Core, &target,
                               &e));
  EXPECT_EQ(target, Isa::kAvx2);
  ASSERT_TRUE(ResolveTargetIsa(Read({{"ep.aotcpuexecutionprovider.target_isa", "avx2"}}), Isa::kAvx2, &target, &e));
  EXPECT_EQ(target, Isa::kAvx2);
  EXPECT_FALSE(ResolveTargetIsa(Read({{"ep.aotcpuexecutionprovider.target_isa", "avx512_core"}}), Isa::kAvx2,
                                &target, &e));
  EXPECT_EQ(e.code, EPCTX_INVALID_ARGUMENT);
  EXPECT_EQ(e.message,
            "ep.aotcpuexecutionprovider.target_isa=avx512_core is higher than this CPU supports (at most avx2): oneDNN "
            "only generates code for ISAs the machine has. Use one of: sse41, avx, avx2, or compile on a machine that "
            "has avx512_core.");
  EXPECT_FALSE(ResolveTargetIsa(Read({{"ep.aotcpuexecutionprovider.target_isa", "AVX2"}}), Isa::kAvx, &target, &e));
  EXPECT_EQ(e.message,
            "ep.aotcpuexecutionprovider.target_isa=AVX2 is not an ISA level; this CPU can compile for: sse41, avx");
  EXPECT_EQ(target, Isa::kAvx2);  // untouched on failure
}

TEST(AotCpuSupportOptions, ModeNamesAndPrepareOnlyRunError) {
  EXPECT_STREQ(ModeName(Mode::kJit), "jit");
  EXPECT_STREQ(ModeName(Mode::kGenerate), "generate");
  EXPECT_STREQ(ModeName(Mode::kPrepareAndLoad), "prepare_and_load");
  EXPECT_STREQ(ModeName(Mode::kPrepareAndLoadPersist), "prepare_and_load_persist");
  EXPECT_STREQ(ModeName(Mode::kPrepareOnly), "prepare_only");
  const OptionsError e = PrepareOnlyRunError("/out/m_ctx.onnx");
  EXPECT_EQ(e.code, EPCTX_EP_FAIL);
  EXPECT_EQ(e.message,
            "the session was created with ep.aotcpuexecutionprovider.enable_prepare_only=1: it compiled the model and "
            "wrote '/out/m_ctx.onnx' but does not run it; create a session from '/out/m_ctx.onnx' to run the "
            "compiled model");
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
