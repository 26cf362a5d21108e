#include "common/context_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace epctx {
namespace plugin {

std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string FileNameOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string JoinPath(const std::string& folder, const std::string& name) {
  if (folder.empty()) return name;
  return folder.back() == '/' ? folder + name : folder + "/" + name;
}

std::string ErrnoText(int err) { return std::strerror(err); }

std::string ContextBinaryPath(const std::string& ctx_model_path, const std::string& suffix) {
  const std::string name = FileNameOf(ctx_model_path);
  const size_t dot = name.rfind('.');
  const std::string stem = dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
  return JoinPath(FolderOf(ctx_model_path), stem + suffix);
}

EpctxStatus* EpError(const EpctxApi* api, const char* ep_name, EpctxErrorCode code, const std::string& message) {
  return api->CreateStatus(code, (std::string(ep_name) + ": " + message).c_str());
}

EpctxStatus* LoadError(const EpctxApi* api, const char* ep_name, const std::string& message) {
  return api->CreateStatus(EPCTX_INVALID_GRAPH, (kLoadErrorPrefix + std::string(ep_name) + ": " + message).c_str());
}

namespace {

int64_t MonotonicUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

}  // namespace

int RemoveStaleBinaryTemporaries(const std::string& path) {
  const std::string folder = FolderOf(path);
  const std::string prefix = "." + FileNameOf(path) + ".tmp.";
  DIR* dir = opendir(folder.empty() ? "." : folder.c_str());
  if (!dir) return 0;
  std::vector<std::string> stale;
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<pid>.<counter>.<microseconds>", all decimal.
    const std::string rest = name.substr(prefix.size());
    const size_t dot1 = rest.find('.');
    const size_t dot2 = dot1 == std::string::npos ? dot1 : rest.find('.', dot1 + 1);
    if (dot2 == std::string::npos || dot1 == 0 || dot1 > 9 || dot2 == dot1 + 1 || dot2 + 1 == rest.size()) continue;
    if (rest.find_first_not_of("0123456789.") != std::string::npos || rest.find('.', dot2 + 1) != std::string::npos)
      continue;
    const long pid = std::strtol(rest.substr(0, dot1).c_str(), nullptr, 10);
    if (pid <= 0 || pid == static_cast<long>(getpid())) continue;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(JoinPath(folder, name));
  }
  closedir(dir);
  int removed = 0;
  for (const auto& f : stale) removed += unlink(f.c_str()) == 0;
  return removed;
}

EpctxStatus* WriteFileAtomically(const EpctxApi* api, const char* ep_name, const std::string& path, const void* data,
                                 size_t size) {
  static std::atomic<uint64_t> counter{0};
  const std::string folder = FolderOf(path);
  RemoveStaleBinaryTemporaries(path);  // what a killed writer of this file left behind
  std::string tmp;
  int fd = -1;
  // pid + counter + time: unique across threads and processes, also after a crash left an old temporary behind.
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = JoinPath(folder, "." + FileNameOf(path) + ".tmp." + std::to_string(getpid()) + "." +
                               std::to_string(counter.fetch_add(1)) + "." + std::to_string(MonotonicUs()));
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  auto fail = [&](const std::string& what, int err) {
    if (fd >= 0) close(fd);
    if (!tmp.empty()) unlink(tmp.c_str());
    return EpError(api, ep_name, EPCTX_EP_FAIL,
                   "failed to write the context binary '" + path + "': " + what + ": " + ErrnoText(err));
  };
  if (fd < 0) {
    const int err = errno;
    tmp.clear();  // nothing was created
    return fail("cannot create a temporary file in its folder", err);
  }
  const char* bytes = static_cast<const char*>(data);
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write", n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("fsync", errno);
  const int closed = close(fd);
  fd = -1;
  if (closed != 0) return fail("close", errno);
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail("rename", errno);
  const int dir = open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) fsync(dir), close(dir);  // makes the rename durable; best effort
  return nullptr;
}

bool IsEpContextNode(const EpctxApi* api, const EpctxNode* node) {
  return std::strcmp(api->Node_GetOperatorType(node), "EPContext") == 0 &&
         std::strcmp(api->Node_GetDomain(node), "com.microsoft") == 0;
}

bool IsEpContextNodeFrom(const EpctxApi* api, const EpctxNode* node, const std::vector<std::string>& sources) {
  if (!IsEpContextNode(api, node)) return false;
  const EpctxOpAttr* attr = api->Node_GetAttributeByName(node, "source");
  if (!attr) return false;
  const char* data = nullptr;
  size_t length = 0;
  if (EpctxStatus* st = api->OpAttr_GetString(attr, &data, &length)) return api->ReleaseStatus(st), false;
  const std::string source = Lower(std::string(data, length));
  for (const std::string& s : sources)
    if (source == Lower(s)) return true;
  return false;
}

EpctxStatus* IntAttr(const EpctxApi* api, const char* ep_name, const EpctxNode* node, const char* name,
                     int64_t default_value, int64_t* value) {
  const EpctxOpAttr* attr = api->Node_GetAttributeByName(node, name);
  *value = default_value;
  if (!attr) return nullptr;
  if (EpctxStatus* st = api->OpAttr_GetInt(attr, value)) {
    api->ReleaseStatus(st);
    return LoadError(api, ep_name,
                     std::string("node '") + api->Node_GetName(node) + "': attribute " + name + " is not an integer");
  }
  if (*value != 0 && *value != 1)
    return LoadError(api, ep_name,
                     std::string("node '") + api->Node_GetName(node) + "': attribute " + name + " is " +
                         std::to_string(*value) + "; it must be 0 or 1");
  return nullptr;
}

EpctxStatus* StringAttr(const EpctxApi* api, const char* ep_name, const EpctxNode* node, const char* name,
                        bool* present, std::string* value) {
  const EpctxOpAttr* attr = api->Node_GetAttributeByName(node, name);
  *present = attr != nullptr;
  if (!attr) return nullptr;
  const char* data = nullptr;
  size_t length = 0;
  if (EpctxStatus* st = api->OpAttr_GetString(attr, &data, &length)) {
    api->ReleaseStatus(st);
    return LoadError(api, ep_name,
                     std::string("node '") + api->Node_GetName(node) + "': attribute " + name + " is not a string");
  }
  value->assign(data, length);
  return nullptr;
}

EpctxStatus* MakeEpContextNode(const EpctxApi* api, const EpContextNodeSpec& spec, EpctxNode** node) {
  struct Attr {
    const char* name;
    const void* data;
    size_t length;
    EpctxOpAttrType type;
  };
  std::vector<Attr> specs = {{"main_context", &spec.main_context, 1, EPCTX_ATTR_INT},
                             {"embed_mode", &spec.embed_mode, 1, EPCTX_ATTR_INT},
                             {"source", spec.source.data(), spec.source.size(), EPCTX_ATTR_STRING}};
  auto add_string = [&](const char* name, const std::string& value, bool present) {
    if (present) specs.push_back({name, value.data(), value.size(), EPCTX_ATTR_STRING});
  };
  add_string("ep_sdk_version", spec.sdk_version, !spec.sdk_version.empty());
  add_string("partition_name", spec.name, true);
  add_string("ep_cache_context", spec.cache, spec.has_cache);
  add_string("hardware_architecture", spec.hardware_architecture, !spec.hardware_architecture.empty());
  add_string("notes", spec.notes, !spec.notes.empty());
  std::vector<EpctxOpAttr*> attrs(specs.size(), nullptr);
  for (size_t i = 0; i < specs.size(); ++i) {
    if (EpctxStatus* st = api->CreateOpAttr(specs[i].name, specs[i].data, specs[i].length, specs[i].type, &attrs[i])) {
      while (i-- > 0) api->ReleaseOpAttr(attrs[i]);
      return st;
    }
  }
  std::vector<const char*> inputs, outputs;
  for (const std::string& s : spec.inputs) inputs.push_back(s.c_str());
  for (const std::string& s : spec.outputs) outputs.push_back(s.c_str());
  // CreateNode owns the attributes from here on, also when it fails.
  return api->CreateNode("EPContext", "com.microsoft", spec.name.c_str(), inputs.data(), inputs.size(),
                         outputs.data(), outputs.size(), attrs.data(), attrs.size(), node);
}

bool ContextFolder(const EpctxApi* api, const EpctxGraph* graph, const std::string& context_file_path,
                   std::string* folder) {
  const std::string model_path = api->Graph_GetModelPath(graph);
  std::string base;
  if (!model_path.empty()) {
    base = FolderOf(model_path);
  } else if (!context_file_path.empty()) {
    struct stat st;
    base = stat(context_file_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? context_file_path
                                                                            : FolderOf(context_file_path);
  } else {
    return false;
  }
  *folder = base.empty() ? "." : base;
  return true;
}

EpctxStatus* ResolveContextBinary(const EpctxApi* api, const char* ep_name, const EpctxGraph* graph,
                                  const std::string& node_name, const std::string& relative,
                                  const std::string& context_file_path, std::string* shown_path,
                                  std::string* resolved) {
  const std::string who = "node '" + node_name + "': ";
  auto error = [&](const std::string& message) { return LoadError(api, ep_name, who + message); };
  if (relative.empty()) return error("the file path in ep_cache_context is empty");
  if (relative[0] == '/')
    return error("ep_cache_context must hold a path relative to the model's folder, but '" + relative +
                 "' is an absolute path");
  for (size_t pos = 0; pos <= relative.size();) {
    size_t slash = relative.find('/', pos);
    if (slash == std::string::npos) slash = relative.size();
    if (relative.compare(pos, slash - pos, "..") == 0 && slash - pos == 2)
      return error("the file path '" + relative +
                   "' in ep_cache_context has a '..' component; it may not point outside the model's folder");
    pos = slash + 1;
  }
  std::string folder;
  if (!ContextFolder(api, graph, context_file_path, &folder))
    return error("cannot locate the context binary '" + relative +
                 "': the model was loaded from bytes and ep.context_file_path is not set");
  const std::string path = JoinPath(folder, relative);
  *shown_path = path;
  char real_folder[PATH_MAX], real_path[PATH_MAX];
  if (!realpath(folder.c_str(), real_folder))
    return error("the context binary's folder '" + folder + "' is not accessible: " + ErrnoText(errno));
  if (!realpath(path.c_str(), real_path)) {
    const int err = errno;
    if (err == ENOENT) return error("the context binary '" + path + "' does not exist");
    return error("the context binary '" + path + "' is not accessible: " + ErrnoText(err));
  }
  // Symlinks inside the folder are fine as long as the file they reach is inside it too.
  const std::string inside = std::string(real_folder) == "/" ? "/" : std::string(real_folder) + "/";
  if (std::string(real_path).compare(0, inside.size(), inside) != 0)
    return error("the context binary '" + path + "' resolves to '" + real_path + "', outside the model's folder '" +
                 real_folder + "'");
  struct stat st;
  if (stat(real_path, &st) != 0 || !S_ISREG(st.st_mode))
    return error("the context binary '" + path + "' is not a regular file");
  *resolved = real_path;
  return nullptr;
}

MappedFile::~MappedFile() { Reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr, other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = other.data_, size_ = other.size_;
    other.data_ = nullptr, other.size_ = 0;
  }
  return *this;
}

void MappedFile::Reset() {
  if (data_) munmap(data_, size_);
  data_ = nullptr, size_ = 0;
}

bool MapFile(const std::string& path, MappedFile* out, std::string* why, bool will_need) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = "cannot open '" + path + "': " + ErrnoText(errno);
    return false;
  }
  // fstat of the open descriptor: the size is that of the file being mapped, not of whatever `path` names later.
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *why = "cannot stat '" + path + "': " + ErrnoText(errno);
    close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = "'" + path + "' is not a regular file";
    close(fd);
    return false;
  }
  if (st.st_size == 0) {
    *why = "'" + path + "' is empty";
    close(fd);
    return false;
  }
  if (static_cast<uint64_t>(st.st_size) > std::numeric_limits<size_t>::max()) {
    *why = "'" + path + "' is too large to map (" + std::to_string(st.st_size) + " bytes)";
    close(fd);
    return false;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  close(fd);  // the mapping keeps the file alive
  if (data == MAP_FAILED) {
    *why = "cannot map '" + path + "' (" + std::to_string(size) + " bytes): " + ErrnoText(err);
    return false;
  }
  if (will_need) madvise(data, size, MADV_WILLNEED);
  // Lets the kernel read a large file into 2 MiB page-cache folios and map them with 2 MiB pages (the kernel aligns
  // such mappings): one fault and one TLB entry per 512 pages. A 110 MB binary spends ~7 ms of CPU mapping 4 KiB
  // pages otherwise. Advice only: an unsupported kernel or a cached file in small folios maps as before.
  if (size >= (size_t{2} << 20)) madvise(data, size, MADV_HUGEPAGE);
  out->Reset();
  out->data_ = data, out->size_ = size;
  return true;
}

}  // namespace plugin
}  // namespace epctx
