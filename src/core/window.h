// Sliding-window geometry shared by the CPU EP's kernels and the loader's shape inference, so the shape a model is
// inferred to have and the shape a kernel computes cannot disagree.
#pragma once

#include <cstdint>

namespace epctx {

// Windows along one axis of length `in` with `pad_begin` / `pad_end` padding (auto_pad NOTSET; VALID is pads 0), a
// window extent (kernel - 1) * dilation + 1 and a stride >= 1: floor((in + pads - extent) / stride) + 1, or with
// ceil_mode (pooling) the ceiling, less a last window that would start inside the end padding, as ONNX Runtime 1.30
// computes it. -1 when the padded axis is shorter than the extent.
inline int64_t WindowOutputSize(int64_t in, int64_t extent, int64_t stride, int64_t pad_begin, int64_t pad_end,
                                bool ceil_mode) {
  const int64_t span = in + pad_begin + pad_end - extent;
  if (span < 0) return -1;
  if (!ceil_mode) return span / stride + 1;
  int64_t out = (span + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + pad_begin) --out;  // a window starting inside the end padding is dropped
  return out;
}

}  // namespace epctx
