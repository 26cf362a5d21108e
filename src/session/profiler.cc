#include "session/profiler.h"

#include <cstdio>
#include <fstream>

namespace epctx {

namespace {
std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      o += buf;
    } else o += c;
  }
  return o;
}
}  // namespace

Status SessionProfiler::Write(const std::string& path) const {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    RETURN_ERROR_IF(!f, FAIL, "cannot write profile '", path, "'");
    std::lock_guard<std::mutex> lock(mu_);
    f << "[\n";
    for (size_t i = 0; i < events_.size(); ++i) {
      const Event& e = events_[i];
      f << "{\"name\":\"" << JsonEscape(e.name) << "\",\"cat\":\"" << JsonEscape(e.category)
        << "\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":" << e.start_us << ",\"dur\":" << e.duration_us << ",\"args\":{";
      bool first = true;
      for (const auto& [k, v] : e.args) {
        f << (first ? "" : ",") << "\"" << JsonEscape(k) << "\":\"" << JsonEscape(v) << "\"";
        first = false;
      }
      f << "}}" << (i + 1 < events_.size() ? "," : "") << "\n";
    }
    f << "]\n";
    RETURN_ERROR_IF(!f.good(), FAIL, "cannot write profile '", path, "'");
  }
  RETURN_ERROR_IF(std::rename(tmp.c_str(), path.c_str()) != 0, FAIL, "cannot write profile '", path, "'");
  return Status::OK();
}

}  // namespace epctx
