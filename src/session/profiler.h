// Session profiling (SessionOptions::EnableProfiling): one Chrome-trace "X" event per node run, with the EP that
// ran it, plus events EPs add through their profilers. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace epctx {

class SessionProfiler {
 public:
  struct Event {
    std::string name, category;
    int64_t start_us, duration_us;
    std::map<std::string, std::string> args;
  };
  SessionProfiler() : epoch_(std::chrono::steady_clock::now()) {}
  int64_t NowUs() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - epoch_).count();
  }
  int64_t EpochUs() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(epoch_.time_since_epoch()).count();
  }
  void Add(Event e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  // Writes the events as a Chrome trace JSON array to `path` (FAIL naming the path on I/O errors).
  Status Write(const std::string& path) const;

 private:
  std::chrono::steady_clock::time_point epoch_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

}  // namespace epctx
