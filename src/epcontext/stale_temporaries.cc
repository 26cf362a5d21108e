#include "epcontext/stale_temporaries.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

namespace epctx {

long TemporaryPid(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp.";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 9) return -1;  // not a pid (pid_max is at most 2^22)
  for (char c : digits)
    if (c < '0' || c > '9') return -1;
  return std::stol(digits);
}

int RemoveStaleTemporaries(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return 0;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(dir)) {
    const long pid = TemporaryPid(e->d_name, base);
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(folder + "/" + e->d_name);
  }
  ::closedir(dir);
  int removed = 0;
  for (const auto& f : stale) removed += ::unlink(f.c_str()) == 0;
  return removed;
}

}  // namespace epctx
