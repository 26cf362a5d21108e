// Little-endian record writer/reader shared by the AotCpu records encodings (program.cc: "AOTPRG1"; dynamic_records.cc:
// "AOTDYN1"). The Reader treats its bytes as hostile: every read is bounds-checked and returns false past the end;
// Str/I64s also refuse a length beyond `limit` or beyond the bytes left, before allocating.
#ifndef EPCTX_PROVIDERS_AOTCPU_BINARY_RECORD_IO_H_
#define EPCTX_PROVIDERS_AOTCPU_BINARY_RECORD_IO_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace epctx {
namespace aotcpu {
namespace record_io {

class Writer {
 public:
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void F32(float v) { Raw(&v, 4); }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    out.append(s);
  }
  void I64s(const std::vector<int64_t>& v) {
    U32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) I64(x);
  }
  void Raw(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  std::string out;
};

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool U32(uint32_t* v) { return Raw(v, 4); }
  bool U64(uint64_t* v) { return Raw(v, 8); }
  bool I64(int64_t* v) { return Raw(v, 8); }
  bool F32(float* v) { return Raw(v, 4); }
  bool Str(std::string* s, uint32_t limit) {
    uint32_t n = 0;
    if (!U32(&n) || n > limit || n > s_.size() - pos_) return false;
    s->assign(s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool I64s(std::vector<int64_t>* v, uint32_t limit) {
    uint32_t n = 0;
    if (!U32(&n) || n > limit || static_cast<uint64_t>(n) * 8 > s_.size() - pos_) return false;
    v->resize(n);
    for (uint32_t i = 0; i < n; ++i) I64(&(*v)[i]);
    return true;
  }
  bool Raw(void* p, size_t n) {
    if (n > s_.size() - pos_) return false;
    std::memcpy(p, s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }
  bool done() const { return pos_ == s_.size(); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace record_io
}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_BINARY_RECORD_IO_H_
