// NonMaxSuppression (opsets 10 and 11; both behave the same).
//
// Per batch and class: keep boxes scoring above score_threshold, visit them by descending score (ties: lower box
// index first) and select a box unless its IoU with an already selected box exceeds iou_threshold. Suppression
// follows ONNX Runtime: boxes with zero area or no overlap never suppress each other.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace misc {
namespace {

struct Box {
  float y_min, x_min, y_max, x_max;
};

Box ReadBox(const float* p, bool center_point) {
  if (center_point) {  // [x_center, y_center, width, height]
    const float hw = p[2] / 2, hh = p[3] / 2;
    return {p[1] - hh, p[0] - hw, p[1] + hh, p[0] + hw};
  }
  // [y1, x1, y2, x2]: any diagonal pair of corners
  return {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
}

bool Suppresses(const Box& a, const Box& b, float iou_threshold) {
  const float ix = std::min(a.x_max, b.x_max) - std::max(a.x_min, b.x_min);
  const float iy = std::min(a.y_max, b.y_max) - std::max(a.y_min, b.y_min);
  if (!(ix > 0 && iy > 0)) return false;
  const float inter = ix * iy;
  const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const float uni = area_a + area_b - inter;
  if (!(area_a > 0 && area_b > 0 && uni > 0)) return false;
  return inter / uni > iou_threshold;
}

// Reads an optional scalar input (shape [] or [1]) of the given kind; `present` tells whether it was given.
template <typename T>
Status ReadOptionalScalar(const KernelContext& ctx, size_t i, const char* name, DataType dtype, T* value,
                          bool* present) {
  const Tensor* t = ctx.Input(i);
  *present = false;
  if (t == nullptr || t->NumElements() == 0) return Status::OK();
  RETURN_ERROR_IF(t->dtype() != dtype, INVALID_ARGUMENT, ctx.node().Describe(), ": input '", name, "' must be ",
                  DataTypeName(dtype), ", got ", DataTypeName(t->dtype()));
  RETURN_ERROR_IF(t->NumElements() != 1, INVALID_ARGUMENT, ctx.node().Describe(), ": input '", name,
                  "' must be a scalar, got shape ", ShapeToString(t->shape()));
  *value = t->data<T>()[0];
  *present = true;
  return Status::OK();
}

class NonMaxSuppressionKernel final : public OpKernel {
 public:
  explicit NonMaxSuppressionKernel(bool center_point) : center_point_(center_point) {}

  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    const int64_t cpb = info.GetInt("center_point_box", 0);
    if (cpb != 0 && cpb != 1)
      return info.Error(ErrorCode::INVALID_ARGUMENT, "center_point_box must be 0 or 1, got ", cpb);
    return std::unique_ptr<OpKernel>(new NonMaxSuppressionKernel(cpb == 1));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* boxes = ctx.Input(0);
    const Tensor* scores = ctx.Input(1);
    RETURN_ERROR_IF(!boxes || !scores, INVALID_ARGUMENT, ctx.node().Describe(), ": inputs boxes and scores are required");
    RETURN_ERROR_IF(boxes->dtype() != DataType::kFloat || scores->dtype() != DataType::kFloat, INVALID_ARGUMENT,
                    ctx.node().Describe(), ": boxes and scores must be float");
    RETURN_ERROR_IF(boxes->rank() != 3 || boxes->dim(2) != 4, INVALID_ARGUMENT, ctx.node().Describe(),
                    ": boxes must have shape [num_batches, spatial_dimension, 4], got ", ShapeToString(boxes->shape()));
    RETURN_ERROR_IF(scores->rank() != 3 || scores->dim(0) != boxes->dim(0) || scores->dim(2) != boxes->dim(1),
                    INVALID_ARGUMENT, ctx.node().Describe(), ": scores must have shape [", boxes->dim(0),
                    ", num_classes, ", boxes->dim(1), "], got ", ShapeToString(scores->shape()));
    int64_t max_per_class = 0;
    float iou_threshold = 0, score_threshold = 0;
    bool has_max, has_iou, has_score;
    RETURN_IF_ERROR(ReadOptionalScalar(ctx, 2, "max_output_boxes_per_class", DataType::kInt64, &max_per_class, &has_max));
    RETURN_IF_ERROR(ReadOptionalScalar(ctx, 3, "iou_threshold", DataType::kFloat, &iou_threshold, &has_iou));
    RETURN_IF_ERROR(ReadOptionalScalar(ctx, 4, "score_threshold", DataType::kFloat, &score_threshold, &has_score));
    RETURN_ERROR_IF(!(iou_threshold >= 0 && iou_threshold <= 1), INVALID_ARGUMENT, ctx.node().Describe(),
                    ": iou_threshold must be in [0, 1], got ", iou_threshold);
    max_per_class = std::max<int64_t>(max_per_class, 0);

    const int64_t B = boxes->dim(0), S = boxes->dim(1), C = scores->dim(1);
    const float* bd = boxes->data<float>();
    const float* sd = scores->data<float>();
    std::vector<int64_t> selected;  // triples
    std::vector<int64_t> order;
    std::vector<Box> kept;
    std::vector<Box> all(static_cast<size_t>(S));
    for (int64_t b = 0; b < B && max_per_class > 0; ++b) {
      for (int64_t s = 0; s < S; ++s) all[s] = ReadBox(bd + (b * S + s) * 4, center_point_);
      for (int64_t c = 0; c < C; ++c) {
        const float* cs = sd + (b * C + c) * S;
        order.clear();
        for (int64_t s = 0; s < S; ++s) {
          if (std::isnan(cs[s])) continue;  // unordered: never selected
          if (has_score && !(cs[s] > score_threshold)) continue;
          order.push_back(s);
        }
        std::stable_sort(order.begin(), order.end(), [cs](int64_t l, int64_t r) { return cs[l] > cs[r]; });
        kept.clear();
        for (int64_t s : order) {
          if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
          bool suppressed = false;
          for (const Box& k : kept) {
            if (Suppresses(k, all[s], iou_threshold)) {
              suppressed = true;
              break;
            }
          }
          if (suppressed) continue;
          kept.push_back(all[s]);
          selected.insert(selected.end(), {b, c, s});
        }
      }
    }
    const int64_t n = static_cast<int64_t>(selected.size() / 3);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kInt64, {n, 3}));
    std::copy(selected.begin(), selected.end(), y->data<int64_t>());
    return Status::OK();
  }

 private:
  bool center_point_;
};

}  // namespace

void RegisterDetectionKernels(KernelRegistry& r) {
  r.Register("", "NonMaxSuppression", NonMaxSuppressionKernel::Create, 10);
}

}  // namespace misc
}  // namespace epctx
