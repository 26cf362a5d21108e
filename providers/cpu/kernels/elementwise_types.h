// Element-type traits shared by the elementwise kernels (elementwise_*.cc).
#pragma once

#include <type_traits>

#include "core/float16.h"

namespace epctx {

// The type an element is computed in: float for the 16-bit floats, the type itself otherwise.
template <typename T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<Float16> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
template <typename T>
using ComputeT = typename ComputeOf<T>::type;

template <typename T>
constexpr bool kIsFloatLike = std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

}  // namespace epctx
