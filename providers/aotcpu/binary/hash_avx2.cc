// XXH3-64 with xxhash's AVX2 code, from its inline header (the library itself is built for SSE2). Compiled with
// -mavx2 (providers/aotcpu/CMakeLists.txt); called only after hash.cc checked the CPU. See hash.h.
#if defined(__x86_64__)
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace epctx {
namespace aotcpu {

uint64_t Xxh3Avx2(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace aotcpu
}  // namespace epctx

#endif  // __x86_64__
