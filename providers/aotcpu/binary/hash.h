// XXH3-64 (seed 0), the one hash of the context binary format, computed with the widest vector code the CPU runs.
//
// libxxhash as Debian builds it hashes with its SSE2 code path on every x86-64 machine. Hashing the weights is most
// of what verifying a binary costs, so the one-shot hash here picks, once per process, the AVX-512 or AVX2 code of
// the same library (its inline header compiled for that ISA in a file of its own) when the CPU and the OS support
// it, and libxxhash's own function otherwise. XXH3 is defined by its output, not by its code path: every path
// returns the same value for the same bytes (tested on every path the host runs, against libxxhash).
//
// Thread safety: all functions are reentrant.
#ifndef EPCTX_PROVIDERS_AOTCPU_BINARY_HASH_H_
#define EPCTX_PROVIDERS_AOTCPU_BINARY_HASH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace epctx {
namespace aotcpu {

// XXH3_64bits(data, size) through the fastest path this host runs. `data` may be null only when size is 0.
uint64_t Xxh3(const void* data, size_t size);

// One implementation of XXH3_64bits, for tests and benchmarks.
struct Xxh3Path {
  const char* name;  // "avx512", "avx2" or "libxxhash"
  uint64_t (*hash)(const void* data, size_t size);
};

// Every path this host can run, fastest first; the first is the one Xxh3 uses. Never empty.
const std::vector<Xxh3Path>& Xxh3Paths();

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_BINARY_HASH_H_
