// The tensor family's shared helpers (tensor_common.h).
#include "providers/aotcpu/lower/tensor_common.h"

#include <algorithm>

namespace epctx {
namespace aotcpu {

namespace {

// The axis order (outermost first) of an operand with element strides, dense or not: the axes longer than 1 sorted by
// stride (ties by index), each size-1 axis left in its place (its stride carries no order). False for a blocked layout.
bool AxisOrder(const Operand& op, std::vector<int64_t>* st, std::vector<size_t>* order) {
  if (!PlainStrides(op, st) || st->size() < 2) return false;
  std::vector<size_t> moving;
  for (size_t i = 0; i < st->size(); ++i)
    if (op.dims[i] != 1) moving.push_back(i);
  std::vector<size_t> sorted = moving;
  std::stable_sort(sorted.begin(), sorted.end(), [&](size_t a, size_t b) { return (*st)[a] > (*st)[b]; });
  order->resize(st->size());
  for (size_t i = 0; i < st->size(); ++i) (*order)[i] = i;
  for (size_t k = 0; k < moving.size(); ++k) (*order)[moving[k]] = sorted[k];
  return true;
}

bool IsIdentity(const std::vector<size_t>& order) {
  for (size_t k = 0; k < order.size(); ++k)
    if (order[k] != k) return false;
  return true;
}


}  // namespace

// The node's name for steps and run-time messages; unnamed nodes are named by their output.
std::string StepName(const Graph& g, const Node& n) {
  if (!n.name.empty()) return n.name;
  return n.op + " -> '" + (n.outputs.empty() || n.outputs[0] < 0 ? std::string() : g.v(n.outputs[0]).name) + "'";
}

// Types a zero-copy view can carry (any fixed-size element).
bool ViewableType(uint32_t dt) {
  return dt == kF32 || dt == kI64 || dt == kI32 || dt == kBool || dt == kU8 || dt == kI8;
}
// Types the reorder/concat/gather steps move (int64 through the executor's stand-in descriptors).
bool MovableType(uint32_t dt) { return dt == kI64 || DnnlType(dt) != dnnl::memory::data_type::undef; }

// Input `i` and output `o` of `n` are present tensors with static shapes.
bool StaticIo(const Graph& g, const Node& n, size_t in_count, std::string* why) {
  if (n.outputs.size() != 1 || n.outputs[0] < 0) return Reject(why, "expects one output");
  for (size_t i = 0; i < in_count; ++i) {
    if (i >= n.inputs.size() || n.inputs[i] < 0) return Reject(why, "input " + std::to_string(i) + " is absent");
    if (!g.v(n.inputs[i]).has_shape) return Reject(why, "input '" + g.v(n.inputs[i]).name + "' has no static shape");
  }
  const Value& y = g.v(n.outputs[0]);
  if (!y.has_shape) return Reject(why, "output '" + y.name + "' has no static shape");
  if (y.dims.size() > kMaxRank) return Reject(why, "rank above " + std::to_string(kMaxRank));
  return true;
}

// A constant int list from an input (opset >= `since`) or an attribute (older opsets). *present tells whether the
// list was given at all; false when given but not constant.
bool IntsArg(const Graph& g, const Node& n, size_t input, const char* attr, int64_t since, std::vector<int64_t>* out,
             bool* present) {
  out->clear();
  if (n.opset >= since) {
    *present = input < n.inputs.size() && n.inputs[input] >= 0;
    return !*present || g.ConstInts(n.inputs[input], out);
  }
  *present = n.Has(attr);
  *out = n.Ints(attr);
  return true;
}

bool NormAxis(int64_t a, int64_t rank, int64_t* out) {
  if (a < -rank || a >= rank) return false;
  *out = a < 0 ? a + rank : a;
  return true;
}

// When `op`'s bytes are a dense tensor whose axes are a permutation of op.dims other than the identity (nhwc's acdb):
// `order` gets the axes from outermost to innermost (AxisOrder).
bool DensePermutation(const Operand& op, std::vector<size_t>* order) {
  std::vector<int64_t> st;
  if (!AxisOrder(op, &st, order) || IsIdentity(*order)) return false;
  int64_t inner = 1;
  for (size_t k = order->size(); k-- > 0;) {
    const size_t a = (*order)[k];
    if (op.dims[a] != 1 && st[a] != inner) return false;
    inner *= op.dims[a];
  }
  return true;
}

// The axis order of an operand with element strides, dense or not (a channel slice of an nhwc value is nhwc-ordered),
// when it is not the identity.
bool StrideOrder(const Operand& op, std::vector<size_t>* order) {
  std::vector<int64_t> st;
  return AxisOrder(op, &st, order) && !IsIdentity(*order);
}

// A strided view of the plain operand `in` (dims `in_dims`): element (i0..) of the view is element
// offset + sum(i_k * strides_k) of `in`.
Operand StridedView(const Operand& in, uint32_t dtype, std::vector<int64_t> dims, std::vector<int64_t> strides,
                    int64_t elem_offset) {
  Operand v = in;
  v.tag = 0;
  v.dtype = dtype;
  v.dims = std::move(dims);
  v.strides = std::move(strides);
  v.offset = in.offset + static_cast<uint64_t>(elem_offset) * DtypeSize(dtype);
  return v;
}

}  // namespace aotcpu
}  // namespace epctx
