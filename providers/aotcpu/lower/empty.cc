// Values with no elements (a zero-sized dim), as a dynamic partition meets them at run time: a Slice that selects
// nothing, a free dim given 0. ops.h has the contract; the compiler driver (plan/compiler.cc) calls these.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

bool IsEmpty(const Graph& g, int v) { return v >= 0 && g.v(v).has_shape && g.v(v).numel() == 0; }

// Whether the node's data is empty: any operand of a Concat, else its first input. Other inputs are parameters
// whose emptiness means something else: a Reduce's empty `axes` (opset 18) reduces every axis or none, a Resize's
// empty `roi`, a Slice's empty `axes` (ONNX backend tests ReduceMax_18_empty_axes_all and the like).
bool AnyEmptyInput(const Graph& g, const Node& n) {
  if (n.op == "Concat") {
    for (int v : n.inputs)
      if (IsEmpty(g, v)) return true;
    return false;
  }
  return !n.inputs.empty() && IsEmpty(g, n.inputs[0]);
}

bool AllOutputsNonEmpty(const Graph& g, const Node& n) {
  for (int v : n.outputs)
    if (v >= 0 && (!g.v(v).has_shape || g.v(v).numel() <= 0)) return false;
  return !n.outputs.empty();
}

// Makes value `v` (float32, static shape) a constant of `numel` floats from `fill(i)`.
template <typename Fill>
void MakeConstant(Graph* g, int v, Fill fill) {
  Value& out = g->v(v);
  const int64_t numel = out.numel();
  auto bytes = std::make_shared<std::string>(static_cast<size_t>(numel) * sizeof(float), '\0');
  float* p = reinterpret_cast<float*>(bytes->data());
  for (int64_t i = 0; i < numel; ++i) p[i] = fill(i);
  out.folded = std::move(bytes);
  out.data = out.folded->data();
}

bool IsFloatOutput(const Graph& g, const Node& n) {
  return n.outputs.size() == 1 && n.outputs[0] >= 0 && g.v(n.outputs[0]).dtype == kF32;
}

// Gemm with K = 0: Y = beta * C (broadcast to [M, N], ONNX's unidirectional rule), or zeros without C. The CPU EP and
// ONNX's definition agree; ONNX Runtime 1.30 returns C without beta there.
bool GemmOfNothing(Graph* g, const Node& n) {
  const int y = n.outputs[0];
  const std::vector<int64_t>& yd = g->v(y).dims;
  if (yd.size() != 2) return false;
  const int c = n.inputs.size() > 2 ? n.inputs[2] : -1;
  if (c < 0) {
    MakeConstant(g, y, [](int64_t) { return 0.0f; });
    return true;
  }
  const Value& cv = g->v(c);
  if (!cv.is_const() || !cv.has_shape || cv.dtype != kF32 || cv.dims.size() > 2) return false;
  std::vector<int64_t> cd(2 - cv.dims.size(), 1);
  cd.insert(cd.end(), cv.dims.begin(), cv.dims.end());
  for (size_t k = 0; k < 2; ++k)
    if (cd[k] != 1 && cd[k] != yd[k]) return false;
  const float beta = n.Float("beta", 1.0f);
  const float* cp = static_cast<const float*>(cv.data);
  const int64_t cols = yd[1];
  MakeConstant(g, y, [&](int64_t i) {
    const int64_t r = cd[0] == 1 ? 0 : i / cols, k = cd[1] == 1 ? 0 : i % cols;
    return beta * cp[r * cd[1] + k];
  });
  return true;
}

// Pad of an empty tensor in constant mode: every element is the pad value.
bool PadOfNothing(Graph* g, const Node& n) {
  if (n.Str("mode", "constant") != "constant") return false;
  float value = n.Float("value", 0.0f);  // opset < 11
  if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !g->ConstScalar(n.inputs[2], &value)) return false;
  MakeConstant(g, n.outputs[0], [value](int64_t) { return value; });
  return true;
}

// Conv or ConvTranspose of an empty input whose output has elements (a zero-sized spatial dim inside the pads): no
// product reaches any output element, each is its channel's bias (or 0). C = 0 alike.
bool ConvOfNothing(Graph* g, const Node& n) {
  const std::vector<int64_t>& yd = g->v(n.outputs[0]).dims;
  if (yd.size() < 3) return false;
  const int b = n.inputs.size() > 2 ? n.inputs[2] : -1;
  const float* bias = nullptr;
  if (b >= 0) {
    const Value& bv = g->v(b);
    if (!bv.is_const() || bv.dtype != kF32 || bv.numel() != yd[1]) return false;
    bias = static_cast<const float*>(bv.data);
  }
  int64_t inner = 1;
  for (size_t k = 2; k < yd.size(); ++k) inner *= yd[k];
  const int64_t channels = yd[1];
  MakeConstant(g, n.outputs[0], [&](int64_t i) { return bias ? bias[(i / inner) % channels] : 0.0f; });
  return true;
}

}  // namespace

bool AllOutputsEmpty(const Graph& g, const Node& n) {
  bool any = false;
  for (int v : n.outputs) {
    if (v < 0) continue;
    if (!IsEmpty(g, v)) return false;
    any = true;
  }
  return any;
}

CheckResult RewriteEmptyOperands(Graph* g, std::vector<bool>* computed) {
  computed->assign(g->nodes.size(), false);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    Node& n = g->nodes[i];
    if ((!n.domain.empty() && n.domain != "ai.onnx") || !AnyEmptyInput(*g, n) || !AllOutputsNonEmpty(*g, n)) continue;
    bool done = false;
    if (n.op == "MaxPool" || n.op == "AveragePool" || n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool" ||
        n.op == "LpPool") {
      // ONNX Runtime 1.30 refuses these ("Only N can be zero"); "shape:" makes it the caller's INVALID_ARGUMENT.
      const Value& x = g->v(n.inputs[0]);
      return CheckResult::Fail("shape:node '" + n.name + "' (" + n.op + "): input '" + x.name + "' has shape " +
                               DimsText(x.dims) + ": a pooling window over a zero-sized dim (only the batch may be 0)");
    }
    if (n.op == "Concat") {
      // An empty operand adds nothing: it is dropped (its consumer entry with it); one operand left is an Identity.
      std::vector<int> kept;
      for (int v : n.inputs) {
        if (!IsEmpty(*g, v)) {
          kept.push_back(v);
          continue;
        }
        std::vector<int>& cons = g->v(v).consumers;
        for (size_t k = 0; k < cons.size(); ++k)
          if (cons[k] == static_cast<int>(i)) {
            cons.erase(cons.begin() + static_cast<std::ptrdiff_t>(k));
            break;
          }
      }
      if (kept.empty()) continue;
      n.inputs = kept;
      if (kept.size() == 1) {
        n.op = "Identity";
        n.attrs.clear();
      }
      continue;
    }
    if (!IsFloatOutput(*g, n)) continue;
    const int y = n.outputs[0];
    if (n.op == "MatMul") {  // K = 0: every dot product is empty
      MakeConstant(g, y, [](int64_t) { return 0.0f; });
      done = true;
    } else if (n.op == "Gemm") {
      done = GemmOfNothing(g, n);
    } else if (n.op == "ReduceSum" || n.op == "ReduceMean") {
      // Every output element reduces an empty set (a reduced dim is 0). ReduceMean gives 0 there as ONNX Runtime 1.30
      // does (ONNX leaves it undefined).
      MakeConstant(g, y, [](int64_t) { return 0.0f; });
      done = true;
    } else if (n.op == "ReduceMax" || n.op == "ReduceMin") {  // ONNX: the lowest (highest) value of the type
      const float inf = std::numeric_limits<float>::infinity();
      const float v = n.op == "ReduceMax" ? -inf : inf;
      MakeConstant(g, y, [v](int64_t) { return v; });
      done = true;
    } else if (n.op == "Conv" || n.op == "ConvTranspose") {
      done = ConvOfNothing(g, n);
    } else if (n.op == "Pad") {
      done = PadOfNothing(g, n);
    }
    if (done) (*computed)[i] = true;
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
