#include "providers/aotcpu/binary/hash.h"

#include <xxhash.h>

namespace epctx {
namespace aotcpu {

// hash_avx2.cc and hash_avx512.cc, compiled with -mavx2 / -mavx512f: callable only when the CPU supports the ISA.
uint64_t Xxh3Avx2(const void* data, size_t size);
uint64_t Xxh3Avx512(const void* data, size_t size);

namespace {

uint64_t Xxh3Library(const void* data, size_t size) { return XXH3_64bits(data, size); }

std::vector<Xxh3Path> DetectPaths() {
  std::vector<Xxh3Path> paths;
#if defined(__x86_64__) && defined(__GNUC__)
  // __builtin_cpu_supports also checks that the OS saves the vector registers (XCR0), not only CPUID.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) paths.push_back({"avx512", &Xxh3Avx512});
  if (__builtin_cpu_supports("avx2")) paths.push_back({"avx2", &Xxh3Avx2});
#endif
  paths.push_back({"libxxhash", &Xxh3Library});
  return paths;
}

}  // namespace

const std::vector<Xxh3Path>& Xxh3Paths() {
  static const std::vector<Xxh3Path> paths = DetectPaths();
  return paths;
}

uint64_t Xxh3(const void* data, size_t size) {
  static const auto hash = Xxh3Paths().front().hash;
  return hash(data, size);
}

}  // namespace aotcpu
}  // namespace epctx
