// Intra-op parallelism. epctx and oneDNN share one OpenMP runtime (libgomp), so there is one pool of threads
// and no oversubscription between our loops and oneDNN's primitives.
#pragma once

#include <cstdint>
#include <functional>

namespace epctx {

// Splits [0, n) into contiguous chunks and calls fn(begin, end) for each, on up to `num_threads` threads.
// `cost_per_item` is a rough count of cheap operations per item; small loops run inline on the caller.
// fn must not throw and must be safe to call concurrently on disjoint ranges.
void ParallelFor(int num_threads, int64_t n, double cost_per_item, const std::function<void(int64_t, int64_t)>& fn);

// Threads the process would use by default (the number of cores).
int DefaultNumThreads();

}  // namespace epctx
