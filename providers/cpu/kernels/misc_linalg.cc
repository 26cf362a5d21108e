// Det (opset 11): determinants of a batch of square matrices by LU decomposition with partial pivoting,
// computed in double whatever the element type.
#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace misc {
namespace {

// Destroys `a` (n x n, row-major).
double Determinant(double* a, int64_t n) {
  double det = 1;
  for (int64_t k = 0; k < n; ++k) {
    int64_t pivot = k;
    double best = std::fabs(a[k * n + k]);
    for (int64_t i = k + 1; i < n; ++i) {
      const double v = std::fabs(a[i * n + k]);
      if (v > best) {
        best = v;
        pivot = i;
      }
    }
    if (best == 0) return 0;
    if (std::isnan(best)) return best;
    if (pivot != k) {
      std::swap_ranges(a + k * n, a + (k + 1) * n, a + pivot * n);
      det = -det;
    }
    const double d = a[k * n + k];
    det *= d;
    const double* rk = a + k * n;
    for (int64_t i = k + 1; i < n; ++i) {
      double* ri = a + i * n;
      const double f = ri[k] / d;
      if (f == 0) continue;
#pragma omp simd
      for (int64_t j = k + 1; j < n; ++j) ri[j] -= f * rk[j];
    }
  }
  return det;
}

Status DetCompute(KernelContext& ctx) {
  const Tensor* x = ctx.Input(0);
  RETURN_ERROR_IF(x == nullptr, INVALID_ARGUMENT, ctx.node().Describe(), ": input X is missing");
  const size_t r = x->rank();
  RETURN_ERROR_IF(r < 2 || x->dim(r - 1) != x->dim(r - 2), INVALID_ARGUMENT, ctx.node().Describe(),
                  ": X must have shape [*, M, M], got ", ShapeToString(x->shape()));
  const Shape out_shape(x->shape().begin(), x->shape().end() - 2);
  ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
  const int64_t n = x->dim(r - 1);
  const int64_t batch = y->NumElements();
  return DispatchType<float, double, Float16, BFloat16>(x->dtype(), "Det", [&](auto tag) {
           using T = decltype(tag);
           const T* src = x->data<T>();
           T* dst = y->data<T>();
           ParallelFor(ctx.num_threads(), batch, static_cast<double>(n) * n * n / 3 + 1, [&](int64_t b, int64_t e) {
             std::vector<double> a(static_cast<size_t>(n * n));
             for (int64_t i = b; i < e; ++i) {
               const T* m = src + i * n * n;
               if constexpr (std::is_same_v<T, double>) {
                 std::copy(m, m + n * n, a.begin());
               } else {
                 for (int64_t k = 0; k < n * n; ++k) a[k] = static_cast<float>(m[k]);
               }
               dst[i] = static_cast<T>(Determinant(a.data(), n));
             }
           });
           return Status::OK();
         }).WithContext(ctx.node().Describe());
}

}  // namespace

void RegisterLinalgKernels(KernelRegistry& r) { r.Register("", "Det", LambdaKernel(DetCompute), 11); }

}  // namespace misc
}  // namespace epctx
