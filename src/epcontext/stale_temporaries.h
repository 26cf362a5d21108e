// Removing the temporary files that a writer killed mid-write leaves behind (SIGKILL, a crash, a full disk that
// killed it by SIGXFSZ). The runtime's atomic writer (context_model.h, WriteFileAtomically) writes `<path>.tmp.<pid>`
// and renames it; a process that dies in between leaves that file. Before writing `path` again, the writer calls
// RemoveStaleTemporaries(path), so the next run in a folder leaves nothing of a dead run behind.
#pragma once

#include <string>

namespace epctx {

// The pid in `name` if it is exactly "<base>.tmp.<decimal pid>", else -1.
long TemporaryPid(const std::string& name, const std::string& base);

// Removes "<path>.tmp.<pid>" files beside `path` whose pid is not a running process (kill(pid, 0) fails with ESRCH).
// A live pid's file (another process writing now, or this one) is kept; so is a file of a process in another pid
// namespace that happens to share the pid of a live one here. A dead-looking pid of a process in another pid
// namespace writing into the same folder would lose its temporary: its rename then fails and it reports the
// error. Returns the number of files removed. Never fails (best effort: an unreadable folder removes nothing).
int RemoveStaleTemporaries(const std::string& path);

}  // namespace epctx
