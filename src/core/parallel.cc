#include "core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <thread>

namespace epctx {

namespace {
constexpr double kMinWorkPerThread = 32768;  // below this much work a thread costs more than it saves
}

int DefaultNumThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

void ParallelFor(int num_threads, int64_t n, double cost_per_item, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  double work = static_cast<double>(n) * std::max(cost_per_item, 1.0);
  int threads = static_cast<int>(std::min<double>({static_cast<double>(num_threads), work / kMinWorkPerThread,
                                                   static_cast<double>(n)}));
  if (threads <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num();
    int nt = omp_get_num_threads();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = std::min<int64_t>(n, chunk * t);
    int64_t e = std::min<int64_t>(n, b + chunk);
    if (b < e) fn(b, e);
  }
}

}  // namespace epctx
