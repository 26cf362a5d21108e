#include "epcontext/shared_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "epcontext/paths.h"

namespace epctx {

namespace {

constexpr const char* kPendingTag = ".epctx-pending.";

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The pid of a pending file name ".<name>.epctx-pending.<pid>.<n>[.tmp.<pid>]", or -1 when the name is not one.
long PendingPid(const std::string& name) {
  if (name.size() < 2 || name[0] != '.') return -1;
  size_t tag = name.rfind(kPendingTag);
  if (tag == std::string::npos || tag < 2) return -1;
  std::string rest = name.substr(tag + std::strlen(kPendingTag));
  size_t tmp = rest.find(".tmp.");
  if (tmp != std::string::npos) {
    if (!AllDigits(rest.substr(tmp + 5))) return -1;
    rest.resize(tmp);
  }
  size_t dot = rest.find('.');
  if (dot == std::string::npos || !AllDigits(rest.substr(0, dot)) || !AllDigits(rest.substr(dot + 1))) return -1;
  if (dot > 9) return -1;  // not a pid
  return std::stol(rest.substr(0, dot));
}

bool ProcessAlive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

int64_t CoarseNowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::atomic<uint64_t> g_next_pending{1};

}  // namespace

std::string PendingPathFor(const std::string& final_path, int pid, uint64_t n) {
  const std::string name = BaseName(final_path);
  const std::string folder = final_path.substr(0, final_path.size() - name.size());  // "" or ends with '/'
  return folder + "." + name + kPendingTag + std::to_string(pid) + "." + std::to_string(n);
}

int RemoveStalePendingFiles(const std::string& folder, const std::vector<std::string>& keep) {
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return 0;
  std::vector<std::string> keep_names;
  for (const auto& k : keep)
    if (FolderOfPath(k) == folder) keep_names.push_back(BaseName(k));
  const long self = static_cast<long>(::getpid());
  int removed = 0;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    const long pid = PendingPid(name);
    if (pid < 0) continue;
    bool stale = pid == self ? std::find(keep_names.begin(), keep_names.end(), name) == keep_names.end()
                             : !ProcessAlive(pid);
    if (stale && ::unlink((folder + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

SharedContextGroup& SharedContextGroup::Instance() {
  static SharedContextGroup group;  // destroyed at normal exit: an open group is aborted then
  return group;
}

SharedContextGroup::~SharedContextGroup() {
  std::lock_guard<std::mutex> lock(mu_);
  if (OpenLocked()) AbortLocked();
}

bool SharedContextGroup::OpenLocked() const { return id_ != 0 && owner_pid_ == static_cast<int>(::getpid()); }

uint64_t SharedContextGroup::Join() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!OpenLocked()) {
    // A group inherited through fork() is the parent's: forget it without touching its files.
    files_.clear();
    owned_.clear();
    swept_folders_.clear();
    id_ = ++last_id_;
    owner_pid_ = static_cast<int>(::getpid());
    started_ns_ = CoarseNowNs();
  }
  return id_;
}

uint64_t SharedContextGroup::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return OpenLocked() ? id_ : 0;
}

Status SharedContextGroup::CheckFree(const std::string& final_path) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!OpenLocked()) return Status::OK();
  for (const File& f : files_)
    RETURN_ERROR_IF(f.final_path == final_path, FAIL, "Failed to generate EP context model since the file '",
                    final_path, "' is already the output of an earlier session of this weight-sharing group "
                    "(ep.share_ep_contexts=1); give each session of the group its own output path.");
  return Status::OK();
}

StatusOr<std::string> SharedContextGroup::Stage(uint64_t id, const std::string& final_path, bool no_replace) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_ERROR_IF(!OpenLocked() || id != id_, FAIL, "cannot write '", final_path,
                  "': its weight-sharing group (ep.share_ep_contexts=1) was aborted by a failed session");
  for (const File& f : files_)
    RETURN_ERROR_IF(f.final_path == final_path, FAIL, "Failed to generate '", final_path,
                    "' since an earlier session of this weight-sharing group (ep.share_ep_contexts=1) writes it "
                    "already; give each session of the group its own output path",
                    no_replace ? "." : " and its own ep.context_model_external_initializers_file_name.");
  File f;
  f.final_path = final_path;
  f.no_replace = no_replace;
  f.pending = PendingPathFor(final_path, owner_pid_, g_next_pending.fetch_add(1));
  const std::string folder = FolderOfPath(final_path);
  if (std::find(swept_folders_.begin(), swept_folders_.end(), folder) == swept_folders_.end()) {
    std::vector<std::string> keep;
    for (const File& g : files_) keep.push_back(g.pending);
    RemoveStalePendingFiles(folder, keep);
    swept_folders_.push_back(folder);
  }
  files_.push_back(f);  // registered before it is written, so a sweep never takes it for a leftover
  return f.pending;
}

void SharedContextGroup::Own(uint64_t id, const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!OpenLocked() || id != id_) return;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (mtime < started_ns_) return;  // older than the group: not ours
  if (std::find(owned_.begin(), owned_.end(), path) == owned_.end()) owned_.push_back(path);
}

Status SharedContextGroup::Publish(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_ERROR_IF(!OpenLocked() || id != id_, FAIL,
                  "the weight-sharing group (ep.share_ep_contexts=1) of this session was aborted by a failed session");
  // External initializer files first, so no published context model ever lacks its file; then the models.
  std::vector<const File*> order;
  for (const File& f : files_)
    if (!f.no_replace) order.push_back(&f);
  for (const File& f : files_)
    if (f.no_replace) order.push_back(&f);
  std::vector<const File*> published;
  Status failure;
  for (const File* f : order) {
    struct stat st {};
    if (::stat(f->pending.c_str(), &st) != 0) continue;  // staged but nothing written (the session wrote no file)
    int rc = f->no_replace
                 ? ::renameat2(AT_FDCWD, f->pending.c_str(), AT_FDCWD, f->final_path.c_str(), RENAME_NOREPLACE)
                 : ::rename(f->pending.c_str(), f->final_path.c_str());
    if (rc == 0) {
      published.push_back(f);
      continue;
    }
    const int e = errno;
    failure = e == EEXIST
                  ? MakeStatus(ErrorCode::FAIL, "Failed to publish the EP context models of the weight-sharing group "
                               "(ep.share_ep_contexts=1) since the file '", f->final_path, "' exists already (it "
                               "appeared after its session checked it). None of the group's files was kept; remove "
                               "it and generate the group again.")
                  : MakeStatus(ErrorCode::FAIL, "Failed to publish the EP context models of the weight-sharing "
                               "group (ep.share_ep_contexts=1): cannot rename '", f->pending, "' to '",
                               f->final_path, "': ", std::strerror(e), ". None of the group's files was kept.");
    break;
  }
  if (!failure.ok()) {
    for (const File* f : published) ::unlink(f->final_path.c_str());
    AbortLocked();
    return failure;
  }
  files_.clear();
  owned_.clear();
  swept_folders_.clear();
  id_ = 0;
  return Status::OK();
}

void SharedContextGroup::Abort(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (OpenLocked() && id == id_) AbortLocked();
}

void SharedContextGroup::AbortLocked() {
  for (const File& f : files_) ::unlink(f.pending.c_str());
  for (const std::string& p : owned_) ::unlink(p.c_str());
  files_.clear();
  owned_.clear();
  swept_folders_.clear();
  id_ = 0;
}

std::vector<std::string> SharedContextGroup::PendingPaths() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  if (OpenLocked())
    for (const File& f : files_) out.push_back(f.pending);
  return out;
}

}  // namespace epctx
