// Faults during EPContext generation (ep.context_enable=1), with the example plugin EP and AotCpu, embed mode 0
// and 1, with and without an external initializers file:
// - a read-only output folder (also for root: the test drops this thread's DAC-override capabilities);
// - a full disk: a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail with EFBIG) and, where a tmpfs can
//   be mounted (root or CAP_SYS_ADMIN), a really full file system (ENOSPC);
// - a process killed during generation: by SIGXFSZ in the middle of a write (a file-size limit with the signal's
//   default action, so the kill lands at a chosen byte of a chosen file) and by SIGKILL sent when inotify sees the
//   generator reach a point (temporary file created, binary renamed, model renamed);
// - an AotCpu weight-sharing group whose last session never comes (the process returns, _exits or is killed);
// - the compile API's write function failing midway (AotCpu, embed 1 and 0).
// In every case: the right status code and a message naming the path and the reason; no partial file under a final
// name (only the sources, or complete files); and the next run in the same folder generates correctly and leaves
// nothing else behind (stale temporaries of dead processes are swept).
// Not repeated here (covered elsewhere): a missing parent folder (ep_context_extra_test.cc), two processes racing
// for one output (ep_context_extra_test.cc), the example EP's binary write failing (example_ep_context_test.cc),
// example-EP weight-sharing groups killed/exited (share_group_test.cc), the CLI under `ulimit -f` (cli_test.sh),
// the compile API's write function failing with the example EP (compile_api_test.cc).
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <onnx/onnx_pb.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

extern char** environ;

namespace epctx {
namespace {

namespace fs = std::filesystem;
using epctx::testing::Catch;
using epctx::testing::Contains;
using epctx::testing::ContextNodes;
using epctx::testing::DevicesOf;
using epctx::testing::Exists;
using epctx::testing::FilesIn;
using epctx::testing::kExample;
using epctx::testing::kExampleLib;
using epctx::testing::LoadProto;
using epctx::testing::ReadFile;
using epctx::testing::Serialize;
using epctx::testing::StartsWith;
using epctx::testing::StrAttr;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;

constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";
constexpr const char* kChildEnv = "EPCTX_FAULT_CHILD";
constexpr const char* kExtName = "m_ctx.weights";
constexpr size_t kModelChunk = 64 * 1024;  // the largest chunk a write function receives (epctx.h)
constexpr int kK = 256;  // W is float[kK,kK]: 256 KiB, larger than every limit below

// Y = Relu(MatMul(X, W) + B), X float[2,kK] (static), W float[kK,kK], B float[kK]. The example EP claims Add+Relu
// (MatMul and W stay on the CPU EP, so W goes to the ctx model or its external file); AotCpu claims everything.
onnx::ModelProto DenseModel(float seed, int k = kK) {
  onnx::ModelProto m = epctx::testing::NewModel("dense");
  auto* g = m.mutable_graph();
  epctx::testing::AddTensorValueInfo(g->add_input(), "X", {2, k});
  epctx::testing::AddTensorValueInfo(g->add_output(), "Y", {2, k});
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(k);
  w->add_dims(k);
  std::string raw(static_cast<size_t>(k) * k * 4, '\0');
  float* wf = reinterpret_cast<float*>(raw.data());
  for (int i = 0; i < k * k; ++i) wf[i] = std::sin(seed * 0.37f + static_cast<float>(i) * 0.011f) / 8;
  w->set_raw_data(raw);
  std::vector<float> b(k);
  for (int i = 0; i < k; ++i) b[i] = std::cos(seed + static_cast<float>(i)) / 4;
  epctx::testing::AddWeight(g, "B", b);
  epctx::testing::AddNode(g, "MatMul", "matmul", {"X", "W"}, "M");
  epctx::testing::AddNode(g, "Add", "add", {"M", "B"}, "A");
  epctx::testing::AddNode(g, "Relu", "relu", {"A"}, "Y");
  return m;
}

std::vector<float> DenseInput(int k = kK) {
  std::vector<float> x(2 * static_cast<size_t>(k));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.7f);
  return x;
}

std::vector<float> RunDense(const Session& s, int k = kK) {
  std::vector<float> x = DenseInput(k);
  const int64_t shape[] = {2, k};
  std::vector<Value> in;
  in.push_back(Value::CreateTensor<float>(x.data(), x.size(), shape, 2));
  std::vector<Value> out = s.Run({"X"}, in, {"Y"});
  const float* y = out[0].GetTensorData<float>();
  return std::vector<float>(y, y + x.size());
}

// Outputs of a generated model against the CPU EP's (the summation order of MatMul may differ).
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5f + 1e-4f * std::fabs(want[i]))) ++bad;
  EXPECT_EQ(bad, 0u) << bad << " of " << got.size() << " outputs differ from the CPU EP's";
}

// One generation configuration.
struct Gen {
  const char* ep;  // "example" or "aotcpu"
  int embed;
  bool ext;  // ep.context_model_external_initializers_file_name = kExtName

  std::string Name() const {
    return std::string(ep) + "_embed" + std::to_string(embed) + (ext ? "_ext" : "");
  }
  std::string Bin() const { return std::string("m_ctx_") + ep + ".bin"; }
  // The files a successful generation of dir/m.onnx adds beside it. AotCpu leaves no initializer on the CPU EP, so
  // with it the external initializers file may or may not exist (checked separately).
  std::set<std::string> Outputs() const {
    std::set<std::string> out = {"m_ctx.onnx"};
    if (embed == 0) out.insert(Bin());
    if (ext && std::string(ep) == "example") out.insert(kExtName);
    return out;
  }
  std::map<std::string, std::string> Config(const std::string& dir) const {
    std::map<std::string, std::string> c = {{"ep.context_enable", "1"},
                                            {"ep.context_embed_mode", std::to_string(embed)},
                                            {"ep.context_file_path", dir + "/m_ctx.onnx"}};
    if (ext) c["ep.context_model_external_initializers_file_name"] = kExtName;
    return c;
  }
  // Which file the first write larger than 64 KiB goes to (W is 256 KiB; the example EP's binary is a few bytes).
  std::string FirstLargeFile() const {
    if (std::string(ep) == "aotcpu") return embed == 0 ? Bin() : "m_ctx.onnx";
    return ext ? kExtName : "m_ctx.onnx";
  }
};

const Gen kGens[] = {{"example", 0, false}, {"example", 0, true}, {"example", 1, false}, {"example", 1, true},
                     {"aotcpu", 0, false},  {"aotcpu", 0, true},  {"aotcpu", 1, false},  {"aotcpu", 1, true}};

SessionOptions OptionsFor(const Env& env, const std::string& ep, const std::map<std::string, std::string>& config) {
  SessionOptions o;
  o.SetIntraOpNumThreads(1);
  o.AppendExecutionProvider_V2(env, DevicesOf(env, ep == "aotcpu" ? kAot : kExample, false), KeyValuePairs());
  for (const auto& [k, v] : config) o.AddConfigEntry(k.c_str(), v.c_str());
  return o;
}

void RegisterBoth(Env& env) {
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  env.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
}

// Files whose names are not hidden (temporaries of the writers are hidden or end in ".tmp.<pid>").
bool IsTemporary(const std::string& f) { return StartsWith(f, ".") || Contains(f, ".tmp."); }

std::string Describe(const std::set<std::string>& files) {
  std::string s;
  for (const auto& f : files) s += (s.empty() ? "" : ", ") + f;
  return "{" + s + "}";
}

class Fault : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterBoth(env_);
    ASSERT_EQ(DevicesOf(env_, kAot, false).size(), 1u);
    ASSERT_EQ(DevicesOf(env_, kExample, false).size(), 1u);
    reference_ = CpuReferenceOf(DenseModel(1.f));
  }

  static std::vector<float> CpuReferenceOf(const onnx::ModelProto& m) {
    Env env;
    const std::string bytes = Serialize(m);
    Session s(env, bytes.data(), bytes.size(), SessionOptions().SetIntraOpNumThreads(1));
    return RunDense(s);
  }

  // Generates dir/m_ctx.onnx from dir/m.onnx; throws what the session throws.
  void Generate(const std::string& dir, const Gen& gen) {
    Session s(env_, (dir + "/m.onnx").c_str(), OptionsFor(env_, gen.ep, gen.Config(dir)));
  }

  // Generation into `dir` succeeds, leaves exactly the sources and its outputs, and the ctx model loads on its EP
  // (no node on the CPU EP for AotCpu) and gives the source's outputs.
  void ExpectGeneratesCleanly(const std::string& dir, const Gen& gen, const std::set<std::string>& sources) {
    SCOPED_TRACE("recovery run " + gen.Name() + " in " + dir);
    try {
      Generate(dir, gen);
    } catch (const Exception& e) {
      ADD_FAILURE() << "the next generation failed: " << e.what();
      return;
    }
    ExpectCompleteOutputs(dir, gen, sources);
  }

  void ExpectCompleteOutputs(const std::string& dir, const Gen& gen, const std::set<std::string>& sources) {
    std::set<std::string> want = sources;
    for (const auto& f : gen.Outputs()) want.insert(f);
    std::set<std::string> got = FilesIn(dir);
    if (gen.ext && std::string(gen.ep) == "aotcpu") got.erase(kExtName);  // may or may not exist (nothing on CPU)
    EXPECT_EQ(got, want) << "files in " << dir;
    ExpectModelLoads(dir + "/m_ctx.onnx", gen);
  }

  void ExpectModelLoads(const std::string& ctx, const Gen& gen) {
    try {
      Session s(env_, ctx.c_str(), OptionsFor(env_, gen.ep, {}));
      ExpectClose(RunDense(s), reference_);
      onnx::ModelProto m = LoadProto(ctx);
      ASSERT_EQ(ContextNodes(m).size(), 1u);
      EXPECT_EQ(epctx::testing::FindAttr(*ContextNodes(m)[0], "embed_mode")->i(), gen.embed);
    } catch (const Exception& e) {
      ADD_FAILURE() << ctx << " does not load: " << e.what();
    }
  }

  // The source model dir/m.onnx.
  void WriteSource(const std::string& dir) { WriteFile(dir + "/m.onnx", Serialize(DenseModel(1.f))); }

  Env env_;
  std::vector<float> reference_;
};

// ---- a read-only folder ----

// While alive, this thread runs without CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER in its effective set
// (Linux capabilities are per thread, and the permitted set keeps them, so they come back on destruction): root is
// then refused writes into a 0555 folder like anyone else. The runtime and the EPs write context files on the
// thread that creates the session. A no-op for a user without those capabilities.
class WithoutDacOverride {
 public:
  WithoutDacOverride() {
    ok_ = syscall(SYS_capget, &header_, saved_) == 0;
    if (!ok_) return;
    __user_cap_data_struct reduced[2] = {saved_[0], saved_[1]};
    for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER})
      reduced[cap / 32].effective &= ~(1u << (cap % 32));
    ok_ = syscall(SYS_capset, &header_, reduced) == 0;
  }
  ~WithoutDacOverride() {
    if (ok_) syscall(SYS_capset, &header_, saved_);
  }
  bool ok() const { return ok_; }

 private:
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2] = {};
  bool ok_ = false;
};

// The output folder is read-only (the source model elsewhere): generation fails naming the output path and the
// reason, writes nothing; once the folder is writable the same generation succeeds there.
TEST_F(Fault, ReadOnlyOutputFolder) {
  for (const Gen& gen : kGens) {
    SCOPED_TRACE(gen.Name());
    TempDir src, out;
    WriteSource(src.path());
    std::map<std::string, std::string> config = gen.Config(out.path());
    ASSERT_EQ(::chmod(out.path().c_str(), 0555), 0);
    {
      WithoutDacOverride no_root;
      ASSERT_TRUE(no_root.ok()) << std::strerror(errno);
      Exception e = Catch([&] { Session s(env_, (src / "m.onnx").c_str(), OptionsFor(env_, gen.ep, config)); });
      // The EP writes its binary first (EP_FAIL, naming the binary); else the runtime's first write fails (FAIL).
      if (gen.embed == 0) {
        EXPECT_EQ(e.code(), ErrorCode::EP_FAIL) << e.what();
        EXPECT_TRUE(Contains(e.what(), out / gen.Bin())) << e.what();
      } else {
        EXPECT_EQ(e.code(), ErrorCode::FAIL) << e.what();
        EXPECT_TRUE(Contains(e.what(), out.path() + "/m_ctx.")) << e.what();  // the model or its external file
      }
      EXPECT_TRUE(Contains(e.what(), std::strerror(EACCES))) << e.what();
    }
    EXPECT_EQ(FilesIn(out.path()), std::set<std::string>{});
    ASSERT_EQ(::chmod(out.path().c_str(), 0755), 0);
    try {
      Session s(env_, (src / "m.onnx").c_str(), OptionsFor(env_, gen.ep, config));
    } catch (const Exception& e) {
      ADD_FAILURE() << "generation into the folder made writable failed: " << e.what();
      continue;
    }
    ExpectCompleteOutputs(out.path(), gen, {});
  }
}

// The source model in a read-only folder and no ep.context_file_path: the derived output beside it cannot be
// written.
TEST_F(Fault, ReadOnlySourceFolderWithDerivedOutput) {
  for (const char* ep : {"example", "aotcpu"}) {
    SCOPED_TRACE(ep);
    TempDir dir;
    WriteSource(dir.path());
    ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
    {
      WithoutDacOverride no_root;
      ASSERT_TRUE(no_root.ok());
      Exception e = Catch([&] { Session s(env_, (dir / "m.onnx").c_str(), OptionsFor(env_, ep, {{"ep.context_enable", "1"}})); });
      EXPECT_TRUE(e.code() == ErrorCode::EP_FAIL || e.code() == ErrorCode::FAIL) << e.what();
      EXPECT_TRUE(Contains(e.what(), dir / "m_ctx")) << e.what();
      EXPECT_TRUE(Contains(e.what(), std::strerror(EACCES))) << e.what();
    }
    EXPECT_EQ(FilesIn(dir.path()), std::set<std::string>{"m.onnx"});
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    Session s(env_, (dir / "m.onnx").c_str(), OptionsFor(env_, ep, {{"ep.context_enable", "1"}}));
    std::set<std::string> want = {"m.onnx", "m_ctx.onnx", std::string("m_ctx_") + ep + ".bin"};
    EXPECT_EQ(FilesIn(dir.path()), want);
  }
}

// ---- a full disk ----

// Sets RLIMIT_FSIZE (and ignores SIGXFSZ, so writes past it fail with EFBIG) while alive.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit r = saved_;
    r.rlim_cur = bytes;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &r) == 0;
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = SIG_DFL;
  bool ok_ = false;
};

// No file may grow past 64 KiB: the first large file written fails (the EP's binary, the external initializers
// file or the model, depending on the configuration), naming that file and the reason; nothing is left; the next run
// without the limit generates into the same folder.
TEST_F(Fault, FileSizeLimitFailsTheFirstLargeWriteAndTheNextRunRecovers) {
  for (const Gen& gen : kGens) {
    SCOPED_TRACE(gen.Name());
    TempDir dir;
    WriteSource(dir.path());
    {
      FileSizeLimit limit(64 << 10);
      ASSERT_TRUE(limit.ok());
      Exception e = Catch([&] { Generate(dir.path(), gen); });
      const std::string failing = gen.FirstLargeFile();
      EXPECT_EQ(e.code(), failing == gen.Bin() ? ErrorCode::EP_FAIL : ErrorCode::FAIL) << e.what();
      EXPECT_TRUE(Contains(e.what(), dir / failing)) << "expected to name " << failing << ": " << e.what();
      EXPECT_TRUE(Contains(e.what(), std::strerror(EFBIG))) << e.what();
    }
    EXPECT_EQ(FilesIn(dir.path()), std::set<std::string>{"m.onnx"});
    ExpectGeneratesCleanly(dir.path(), gen, {"m.onnx"});
  }
}

// A really full file system (a 2 MiB tmpfs with 64 KiB left free) when one can be mounted: ENOSPC instead of EFBIG.
// The mount lives in a private mount namespace of this test process (unshare), so it disappears with the process.
TEST_F(Fault, FullFileSystemFailsTheFirstLargeWriteAndTheNextRunRecovers) {
  TempDir mnt;
  if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("tmpfs", mnt.path().c_str(), "tmpfs", 0, "size=2m,mode=0755") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << "; needs CAP_SYS_ADMIN); the file-size "
                 << "limit test above covers the same write paths with EFBIG";
  for (const Gen& gen : kGens) {
    SCOPED_TRACE(gen.Name());
    const std::string dir = mnt / gen.Name();
    ASSERT_TRUE(fs::create_directory(dir));
    WriteSource(dir);
    // Leave 64 KiB free.
    struct statvfs v{};
    ASSERT_EQ(::statvfs(dir.c_str(), &v), 0);
    const uint64_t free_bytes = static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
    ASSERT_GT(free_bytes, uint64_t{64 << 10});
    WriteFile(mnt / "filler", std::string(free_bytes - (64 << 10), 'f'));
    Exception e = Catch([&] { Generate(dir, gen); });
    const std::string failing = gen.FirstLargeFile();
    EXPECT_EQ(e.code(), failing == gen.Bin() ? ErrorCode::EP_FAIL : ErrorCode::FAIL) << e.what();
    EXPECT_TRUE(Contains(e.what(), dir + "/" + failing)) << "expected to name " << failing << ": " << e.what();
    EXPECT_TRUE(Contains(e.what(), std::strerror(ENOSPC))) << e.what();
    EXPECT_EQ(FilesIn(dir), std::set<std::string>{"m.onnx"});
    fs::remove(mnt / "filler");
    ExpectGeneratesCleanly(dir, gen, {"m.onnx"});
    fs::remove_all(dir);
  }
  ::umount2(mnt.path().c_str(), MNT_DETACH);
}

// ---- a process killed during generation ----

std::string SelfExe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Starts this test binary running only FaultChild.Run with kChildEnv=`spec` ("key=value;..."), stdout/stderr to
// `log`.
pid_t SpawnChild(const std::string& spec, const std::string& log) {
  const std::string exe = SelfExe();
  const std::string filter = "--gtest_filter=FaultChild.Run";
  char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>(filter.c_str()), nullptr};
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (!StartsWith(*e, std::string(kChildEnv) + "=")) env_strings.push_back(*e);
  env_strings.push_back(std::string(kChildEnv) + "=" + spec);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << std::strerror(rc);
  return rc == 0 ? pid : -1;
}

int Reap(pid_t pid) {
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return status;
}

std::string Spec(const Gen& gen, const std::string& dir, const std::string& extra = "") {
  return "ep=" + std::string(gen.ep) + ";embed=" + std::to_string(gen.embed) + ";ext=" + (gen.ext ? "1" : "0") +
         ";dir=" + dir + (extra.empty() ? "" : ";" + extra);
}

std::map<std::string, std::string> ParseSpec(const std::string& spec) {
  std::map<std::string, std::string> kv;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ';')) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) kv[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return kv;
}

// After a generator died: no file under a final name is partial. A ctx model there loads and runs; a binary there
// is byte-identical to one a complete generation writes (AotCpu and the example EP write deterministic binaries);
// everything else is a temporary. Returns the final names found.
std::set<std::string> CheckNoPartialFinalFile(const std::string& dir, const Gen& gen,
                                              const std::string& reference_bin) {
  std::set<std::string> finals;
  for (const auto& f : FilesIn(dir)) {
    if (f == "m.onnx" || IsTemporary(f)) continue;
    finals.insert(f);
    if (f == gen.Bin()) {
      EXPECT_EQ(ReadFile(dir + "/" + f), reference_bin) << f << " is not the complete binary";
    } else if (f != "m_ctx.onnx" && f != kExtName) {
      ADD_FAILURE() << "unexpected file " << f;
    }
  }
  return finals;
}

// Killed in the middle of writing a large file (SIGXFSZ at byte 64 KiB, core dumps off): a partial temporary may
// remain, never a partial final file; the next run sweeps the temporary and generates. The binary a killed example
// generation wrote before its model stays (complete) until the next run replaces it.
TEST_F(Fault, KilledMidWriteLeavesNoPartialFinalFileAndTheNextRunRecovers) {
  for (const Gen& gen : kGens) {
    SCOPED_TRACE(gen.Name());
    TempDir ref, dir, logs;
    WriteSource(ref.path());
    Generate(ref.path(), gen);
    const std::string reference_bin = gen.embed == 0 ? ReadFile(ref / gen.Bin()) : "";
    WriteSource(dir.path());
    const pid_t child = SpawnChild(Spec(gen, dir.path(), "fsize=65536"), logs / "child.log");
    ASSERT_GT(child, 0);
    const int status = Reap(child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ)
        << "status " << status << "; child log:\n" << ReadFile(logs / "child.log");
    const std::set<std::string> files = FilesIn(dir.path());
    std::set<std::string> temporaries;
    for (const auto& f : files)
      if (IsTemporary(f)) temporaries.insert(f);
    EXPECT_FALSE(temporaries.empty()) << "the kill should leave the partial temporary: " << Describe(files);
    const std::set<std::string> finals = CheckNoPartialFinalFile(dir.path(), gen, reference_bin);
    EXPECT_EQ(finals.count("m_ctx.onnx"), 0u);
    EXPECT_EQ(finals.count(gen.FirstLargeFile()), 0u) << "killed while writing it";
    ExpectGeneratesCleanly(dir.path(), gen, {"m.onnx"});
  }
}

// A point of generation, recognised by an inotify event on the output folder.
struct KillPoint {
  const char* name;
  uint32_t mask;                                    // IN_CREATE or IN_MOVED_TO
  std::function<bool(const std::string&)> matches;  // on the event's file name
};

// SIGKILL when the generator reaches a point, seen through inotify on the folder: the binary's temporary created,
// the binary renamed to its final name, the model's (or external file's) temporary created, the model renamed. The
// kill lands at or shortly after the point. Whatever state the process died in: no partial final file, and the next
// run generates correctly (or, when the model was already published, that model is complete and loads).
TEST_F(Fault, KilledAtEachPointOfGenerationLeavesNoPartialFinalFileAndTheNextRunRecovers) {
  const Gen gens[] = {{"aotcpu", 0, true}, {"example", 0, true}, {"aotcpu", 1, false}};
  for (const Gen& gen : gens) {
    std::vector<KillPoint> points;
    if (gen.embed == 0) {
      const std::string bin = gen.Bin();
      points.push_back({"binary temporary created", IN_CREATE,
                        [bin](const std::string& f) { return StartsWith(f, "." + bin + ".tmp."); }});
      points.push_back({"binary renamed", IN_MOVED_TO, [bin](const std::string& f) { return f == bin; }});
    }
    if (gen.ext && std::string(gen.ep) == "example")
      points.push_back({"external file temporary created", IN_CREATE,
                        [](const std::string& f) { return StartsWith(f, std::string(kExtName) + ".tmp."); }});
    points.push_back({"model temporary created", IN_CREATE,
                      [](const std::string& f) { return StartsWith(f, "m_ctx.onnx.tmp."); }});
    points.push_back({"model renamed", IN_MOVED_TO, [](const std::string& f) { return f == "m_ctx.onnx"; }});
    TempDir ref;
    WriteSource(ref.path());
    Generate(ref.path(), gen);
    const std::string reference_bin = gen.embed == 0 ? ReadFile(ref / gen.Bin()) : "";
    for (const KillPoint& point : points) {
      SCOPED_TRACE(gen.Name() + ", killed at: " + point.name);
      TempDir dir, logs;
      WriteSource(dir.path());
      const int fd = ::inotify_init1(IN_CLOEXEC);
      ASSERT_GE(fd, 0);
      ASSERT_GE(::inotify_add_watch(fd, dir.path().c_str(), IN_CREATE | IN_MOVED_TO), 0);
      const pid_t child = SpawnChild(Spec(gen, dir.path(), "hold=1"), logs / "child.log");
      ASSERT_GT(child, 0);
      bool seen = false;
      alignas(inotify_event) char buf[16384];
      while (!seen) {
        pollfd p{fd, POLLIN, 0};
        // A bound so a generator that never reaches the point fails the test instead of hanging it.
        if (::poll(&p, 1, 120000) <= 0) break;
        const ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        for (char* q = buf; q < buf + n;) {
          const auto* ev = reinterpret_cast<const inotify_event*>(q);
          if ((ev->mask & point.mask) && ev->len > 0 && point.matches(ev->name)) seen = true;
          q += sizeof(inotify_event) + ev->len;
        }
      }
      ::kill(child, SIGKILL);
      const int status = Reap(child);
      ::close(fd);
      ASSERT_TRUE(seen) << "the generator never reached the point; child log:\n" << ReadFile(logs / "child.log");
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
          << "status " << status << " (the child holds its session until killed); log:\n"
          << ReadFile(logs / "child.log");
      const std::set<std::string> finals = CheckNoPartialFinalFile(dir.path(), gen, reference_bin);
      if (finals.count("m_ctx.onnx")) {
        // Published before the kill: the model, its binary and external file are all there and complete.
        ExpectCompleteOutputs(dir.path(), gen, {"m.onnx"});
        // The next run refuses to overwrite it (ONNX Runtime's rule) and leaves it intact.
        Exception e = Catch([&] { Generate(dir.path(), gen); });
        EXPECT_EQ(e.code(), ErrorCode::FAIL);
        EXPECT_TRUE(Contains(e.what(), "exists already")) << e.what();
        ExpectCompleteOutputs(dir.path(), gen, {"m.onnx"});
      } else {
        ExpectGeneratesCleanly(dir.path(), gen, {"m.onnx"});
      }
    }
  }
}

// ---- an AotCpu weight-sharing group whose last session never comes ----

// The child creates the first session of an AotCpu group (a.onnx) and then returns from the test (a normal exit with
// the group open), calls _exit, or is killed. Nothing of the group may be visible (AotCpu writes the group's binary
// only when the last session compiles; the runtime keeps ctx models pending); a new group in the same folder
// publishes both models and one binary (named after the first model) and leaves no pending file of the dead group.
TEST_F(Fault, AotCpuShareGroupWhoseLastSessionNeverComes) {
  for (const char* end : {"return", "_exit", "kill"}) {
    SCOPED_TRACE(end);
    TempDir dir, logs;
    WriteFile(dir / "a.onnx", Serialize(DenseModel(1.f)));
    WriteFile(dir / "b.onnx", Serialize(DenseModel(1.f)));  // same W: stored once
    const pid_t child = SpawnChild(std::string("share_first=1;dir=") + dir.path() + ";end=" + end, logs / "c.log");
    ASSERT_GT(child, 0);
    const int status = Reap(child);
    if (std::string(end) == "kill")
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status << ReadFile(logs / "c.log");
    else if (std::string(end) == "_exit")
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 42) << status << ReadFile(logs / "c.log");
    else
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << ReadFile(logs / "c.log");
    for (const auto& f : FilesIn(dir.path()))
      EXPECT_TRUE(f == "a.onnx" || f == "b.onnx" || (std::string(end) != "return" && IsTemporary(f)))
          << "visible after the group's process ended: " << f;
    const std::map<std::string, std::string> share = {{"ep.context_enable", "1"}, {"ep.share_ep_contexts", "1"}};
    std::map<std::string, std::string> last = share;
    last["ep.stop_share_ep_contexts"] = "1";
    {
      std::map<std::string, std::string> first = share;
      first["ep.context_node_name_prefix"] = "a_";  // both models have the same graph: their partitions need names
      last["ep.context_node_name_prefix"] = "b_";
      Session a(env_, (dir / "a.onnx").c_str(), OptionsFor(env_, "aotcpu", first));
      Session b(env_, (dir / "b.onnx").c_str(), OptionsFor(env_, "aotcpu", last));
    }
    EXPECT_EQ(FilesIn(dir.path()),
              (std::set<std::string>{"a.onnx", "b.onnx", "a_ctx.onnx", "b_ctx.onnx", "a_aotcpu.bin"}));
    for (const char* m : {"a_ctx.onnx", "b_ctx.onnx"}) {
      Session s(env_, (dir / m).c_str(), OptionsFor(env_, "aotcpu", {}));
      ExpectClose(RunDense(s), reference_);
      EXPECT_EQ(StrAttr(*ContextNodes(LoadProto(dir / m))[0], "ep_cache_context"), "a_aotcpu.bin");
    }
  }
}

// ---- the compile API's write function failing midway (AotCpu; the example EP's case is in compile_api_test.cc) ----

// The model streamed to a write function that throws at its `fail_at`-th chunk: embed 1 (the model holds the binary,
// several 64 KiB chunks: it fails in the middle of the model) and embed 0 (the binary is written beside
// SetEpContextBinaryInformation's path before the model is streamed: it must be removed). The status is the
// callback's; nothing stays in the folder; the next compile with a working function streams a model that loads.
TEST_F(Fault, AotCpuCompileWriteFuncFailingMidwayLeavesNothingAndTheNextCompileRecovers) {
  for (const bool embed : {true, false}) {
    SCOPED_TRACE(embed ? "embed 1" : "embed 0");
    TempDir dir;
    WriteSource(dir.path());
    const int fail_at = embed ? 2 : 1;
    int calls = 0;
    std::string received;
    ModelCompilationOptions o(env_, OptionsFor(env_, "aotcpu", {}));
    o.SetInputModelPath(dir / "m.onnx")
        .SetEpContextEmbedMode(embed)
        .SetEpContextBinaryInformation(dir.path() + "/", "m_ctx.onnx")
        .SetOutputModelWriteFunc([&](const void* data, size_t n) {
          if (++calls == fail_at) throw Exception(ErrorCode::FAIL, "no space left in the caller's stream");
          received.append(static_cast<const char*>(data), n);
        });
    Status st = CompileModel(env_, o);
    EXPECT_EQ(st.GetErrorCode(), ErrorCode::FAIL);
    EXPECT_EQ(st.GetErrorMessage(), "no space left in the caller's stream");
    EXPECT_EQ(calls, fail_at);
    EXPECT_EQ(FilesIn(dir.path()), std::set<std::string>{"m.onnx"}) << "the binary must not outlive the failure";

    std::string streamed;
    o.SetOutputModelWriteFunc(
        [&](const void* data, size_t n) { streamed.append(static_cast<const char*>(data), n); });
    st = CompileModel(env_, o);
    ASSERT_TRUE(st.IsOK()) << st.GetErrorMessage();
    const std::set<std::string> want =
        embed ? std::set<std::string>{"m.onnx"} : std::set<std::string>{"m.onnx", "m_ctx_aotcpu.bin"};
    EXPECT_EQ(FilesIn(dir.path()), want);
    if (embed) {
      EXPECT_GT(streamed.size(), 2 * kModelChunk) << "the failure above was not in the middle of the model";
    }
    // A model from bytes finds its binary through ep.context_file_path.
    Session s(env_, streamed.data(), streamed.size(),
              OptionsFor(env_, "aotcpu", {{"ep.context_file_path", dir / "m_ctx.onnx"}}));
    ExpectClose(RunDense(s), reference_);
  }
}

// Runs only in a child process of the tests above (kChildEnv set): generates as its spec says.
//   fsize=N: RLIMIT_FSIZE = N with SIGXFSZ's default action and no core file, so the write crossing N kills it;
//   hold=1: keeps the session after generating and waits to be killed;
//   share_first=1: the first session of an AotCpu weight-sharing group on dir/a.onnx, then end=return|_exit|kill.
TEST(FaultChild, Run) {
  const char* spec_env = std::getenv(kChildEnv);
  if (!spec_env) GTEST_SKIP() << "runs only in a child process of the Fault tests";
  std::map<std::string, std::string> spec = ParseSpec(spec_env);
  Env env;
  RegisterBoth(env);
  const std::string dir = spec["dir"];
  if (spec["share_first"] == "1") {
    Session s(env, (dir + "/a.onnx").c_str(),
              OptionsFor(env, "aotcpu",
                         {{"ep.context_enable", "1"}, {"ep.share_ep_contexts", "1"}, {"ep.context_node_name_prefix", "a_"}}));
    if (spec["end"] == "kill") ::kill(::getpid(), SIGKILL);
    if (spec["end"] == "_exit") ::_exit(42);
    return;
  }
  const Gen gen{spec["ep"] == "aotcpu" ? "aotcpu" : "example", std::stoi(spec["embed"]), spec["ext"] == "1"};
  if (!spec["fsize"].empty()) {
    rlimit core{0, 0};
    ::setrlimit(RLIMIT_CORE, &core);
    rlimit r{};
    ::getrlimit(RLIMIT_FSIZE, &r);
    r.rlim_cur = std::stoull(spec["fsize"]);
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &r), 0);
    std::signal(SIGXFSZ, SIG_DFL);
  }
  Session s(env, (dir + "/m.onnx").c_str(), OptionsFor(env, gen.ep, gen.Config(dir)));
  std::fprintf(stderr, "generated %s/m_ctx.onnx\n", dir.c_str());
  if (spec["hold"] == "1")
    for (;;) ::pause();
}

}  // namespace
}  // namespace epctx
