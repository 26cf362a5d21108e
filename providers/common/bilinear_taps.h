// Header only: the taps and weights of one axis of a bilinear Resize, set up as ONNX Runtime's UpsampleBilinear sets
// them, shared by the CPU EP (kernels/misc_resize.cc) and AotCpu's kBilinear step (lower/nn_pool.cc) so that both
// give ONNX Runtime's floats. Per output position j: the input coordinate c (from the caller's coordinate rule),
// clamped to [0, in - 1] (NaN -> 0); taps c1 = trunc(c), c2 = min(c1 + 1, in - 1); weights d1 = |c - c1|,
// d2 = |c - c2|, or 0.5 each where both taps are the last pixel. The caller sums
// d2x*d2y*x11 + d1x*d2y*x21 + d2x*d1y*x12 + d1x*d1y*x22 left to right in float, without contraction.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace epctx::common {

struct BilinearTaps {
  std::vector<int64_t> c1, c2;
  std::vector<float> d1, d2;
};

// coordinate(j) -> the unclamped input coordinate of output position j, as a float.
template <class CoordinateFn>
BilinearTaps PlanBilinearTaps(int64_t in, int64_t out, CoordinateFn coordinate) {
  BilinearTaps t;
  const size_t n = static_cast<size_t>(out);
  t.c1.resize(n);
  t.c2.resize(n);
  t.d1.resize(n);
  t.d2.resize(n);
  const float last = static_cast<float>(in - 1);
  for (int64_t j = 0; j < out; ++j) {
    float c = coordinate(j);
    if (std::isnan(c)) c = 0;
    c = std::max(0.0f, std::min(c, last));
    const int64_t c1 = std::min(static_cast<int64_t>(c), in - 1), c2 = std::min(c1 + 1, in - 1);
    t.c1[j] = c1;
    t.c2[j] = c2;
    t.d1[j] = c1 == c2 ? 0.5f : std::fabs(c - static_cast<float>(c1));
    t.d2[j] = c1 == c2 ? 0.5f : std::fabs(c - static_cast<float>(c2));
  }
  return t;
}

}  // namespace epctx::common
