#include "core/int4.h"

#include <string>

namespace epctx {

template <typename T>
Status UnpackInt4(const uint8_t* src, uint64_t src_bytes, int64_t count, T* dst, const char* what) {
  static_assert(kIsInt4<T>, "int4 or uint4 only");
  if (count < 0 || src_bytes != PackedInt4Bytes(count))
    return MakeStatus(ErrorCode::INVALID_ARGUMENT, what, ": ", src_bytes, " bytes of packed 4-bit data for ", count,
                      " values; expected ", count < 0 ? std::string("a non-negative count")
                                                      : std::to_string(PackedInt4Bytes(count)));
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t byte = src[i / 2];
    dst[i] = T::FromBits(i % 2 == 0 ? byte & 0xF : byte >> 4);
  }
  return Status::OK();
}

template <typename T>
void PackInt4(const T* src, int64_t count, uint8_t* dst) {
  static_assert(kIsInt4<T>, "int4 or uint4 only");
  for (int64_t i = 0; i + 1 < count; i += 2)
    dst[i / 2] = static_cast<uint8_t>(src[i].bits() | (src[i + 1].bits() << 4));
  if (count % 2 != 0) dst[count / 2] = src[count - 1].bits();
}

template Status UnpackInt4<Int4>(const uint8_t*, uint64_t, int64_t, Int4*, const char*);
template Status UnpackInt4<UInt4>(const uint8_t*, uint64_t, int64_t, UInt4*, const char*);
template void PackInt4<Int4>(const Int4*, int64_t, uint8_t*);
template void PackInt4<UInt4>(const UInt4*, int64_t, uint8_t*);

}  // namespace epctx
