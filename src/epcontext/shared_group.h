// The weight-sharing group being generated in this process (ep.context_enable=1 + ep.share_ep_contexts=1; the last
// session of the group also has ep.stop_share_ep_contexts=1). The EP writes one context binary for the whole group
// when the last session compiles, so the context models of sessions 1..N-1 must not be visible before that session
// succeeds: each session writes its files under hidden pending names in their final folders and registers them here;
// the last session publishes them all; a failure anywhere in the group removes them.
//
// Rules:
// - Pending name: "<folder>/.<final file name>.epctx-pending.<pid>.<n>" (n unique in the process), written with the
//   runtime's atomic writer (WriteFileAtomically: temporary file, fsync, rename).
// - Publish (last session): every pending file is renamed to its final name, all or none. External initializer
//   files go first (replacing, as outside a group), then the context models with RENAME_NOREPLACE. A context model
//   whose final name exists by then fails the group: FAIL naming the file; what was published is removed again and
//   every pending file and owned binary is removed (no ctx model of the group is left that might name a binary the
//   failed last session no longer guarantees).
// - Abort (any session of the group fails, or the process exits normally with a group open): pending files are
//   removed, and so are the context binaries the group's sessions wrote under final names (Own).
// - A folder's stale pending files of dead processes (and leftovers of this process that no group owns) are
//   removed the first time a group stages a file in that folder.
// - Pending paths are full paths: a group may write into several folders.
// - A forked child does not inherit the parent's group: it sees none (and never removes the parent's files).
//
// Thread safety: every member locks one mutex. Sessions of one group are expected to be created one after another;
// sessions created concurrently with ep.share_ep_contexts=1 join whichever group is open.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace epctx {

class SharedContextGroup {
 public:
  static SharedContextGroup& Instance();

  // Joins the open group or starts one; returns its id (> 0, increasing; never reused in a process).
  uint64_t Join();
  // The open group's id, 0 when none.
  uint64_t current() const;

  // FAIL when the open group already has a pending file whose final name is `final_path` (two sessions of a group
  // writing one context model): "Failed to generate EP context model since the file '<path>' is already the output
  // of an earlier session of this weight-sharing group ...". OK when no group is open.
  Status CheckFree(const std::string& final_path) const;

  // Registers a file of group `id` that will be published as `final_path` and returns the pending path to write
  // it to. `no_replace`: publishing fails if `final_path` exists (context models); otherwise the final file is
  // replaced (external initializer files). The first file of the group in a folder removes that folder's stale
  // pending files. FAIL when `id` is not the open group, or `final_path` is already registered (CheckFree).
  StatusOr<std::string> Stage(uint64_t id, const std::string& final_path, bool no_replace);

  // A file a session of group `id` wrote under its final name (an EP's context binary) is removed if the group is
  // aborted — but only if it was modified since the group started, so an older file of that name (another group's
  // binary) is never removed.
  void Own(uint64_t id, const std::string& path);

  // Publishes group `id` (rules above) and ends it. On FAIL the group is aborted as well.
  Status Publish(uint64_t id);

  // Ends group `id` if it is still open, removing its pending and owned files; no-op otherwise.
  void Abort(uint64_t id);

  // The pending paths of the open group (tests and reports).
  std::vector<std::string> PendingPaths() const;

  ~SharedContextGroup();  // at normal process exit an open group is aborted

 private:
  struct File {
    std::string pending;
    std::string final_path;
    bool no_replace = false;
  };
  SharedContextGroup() = default;
  bool OpenLocked() const;  // a group is open and belongs to this process
  void AbortLocked();

  mutable std::mutex mu_;
  uint64_t id_ = 0;        // open group, 0 = none
  uint64_t last_id_ = 0;
  int owner_pid_ = 0;      // the process that opened the group
  int64_t started_ns_ = 0;  // CLOCK_REALTIME_COARSE when it was opened (the clock file times use)
  std::vector<File> files_;
  std::vector<std::string> owned_;
  std::vector<std::string> swept_folders_;
};

// "<folder>/.<name>.epctx-pending.<pid>.<n>" for final path "<folder>/<name>".
std::string PendingPathFor(const std::string& final_path, int pid, uint64_t n);

// Removes the files in `folder` named like pending files (PendingPathFor, also with the atomic writer's
// ".tmp.<pid>" suffix) whose pid is not a live process, or is this process and `keep` does not list them.
// Returns how many were removed.
int RemoveStalePendingFiles(const std::string& folder, const std::vector<std::string>& keep);

}  // namespace epctx
