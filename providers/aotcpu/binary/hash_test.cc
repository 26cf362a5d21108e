// Every XXH3 path the host runs returns libxxhash's value: the stored hashes of a context binary do not depend on
// the machine that wrote or reads it.
#include "providers/aotcpu/binary/hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <string>

namespace epctx {
namespace aotcpu {
namespace {

TEST(Xxh3, EveryPathEqualsLibxxhashAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(7);
  std::string bytes(3 << 20, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  // XXH3 switches algorithm at 16, 128 and 240 bytes and works in 1024-byte stripes blocks beyond: cover each
  // regime, its edges, and offsets that break every vector alignment.
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 1100; ++n) lengths.push_back(n);
  for (size_t n : {4095, 4096, 4097, 65535, 65536, 100003, 1 << 20, (3 << 20) - 64}) lengths.push_back(n);
  ASSERT_FALSE(Xxh3Paths().empty());
  EXPECT_STREQ(Xxh3Paths().back().name, "libxxhash");
  for (const Xxh3Path& path : Xxh3Paths()) {
    for (size_t offset : {0, 1, 3, 8, 17, 63}) {
      for (size_t n : lengths) {
        const char* p = bytes.data() + offset;
        ASSERT_EQ(path.hash(p, n), XXH3_64bits(p, n)) << path.name << ", length " << n << ", offset " << offset;
      }
    }
  }
  EXPECT_EQ(Xxh3(bytes.data(), bytes.size()), XXH3_64bits(bytes.data(), bytes.size()));
  EXPECT_EQ(Xxh3(nullptr, 0), XXH3_64bits(nullptr, 0));
}

TEST(Xxh3, UsesTheWidestPathTheCpuRuns) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const char* expected = __builtin_cpu_supports("avx512f") ? "avx512" : __builtin_cpu_supports("avx2") ? "avx2" : "libxxhash";
  EXPECT_STREQ(Xxh3Paths().front().name, expected);
#endif
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
