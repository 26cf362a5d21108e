#include "providers/cpu/passes/cpu_fusion.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "providers/cpu/passes/cpu_pass_util.h"

namespace epctx {
namespace {

using cpu_pass::CollectSubgraphReads;
using cpu_pass::ConstFloat;
using cpu_pass::IsCpuNode;
using cpu_pass::IsFloat;
using cpu_pass::IsOnnx;
using cpu_pass::SingleOutput;

// Who reads each value of one graph, and which values must stay (graph outputs, read from subgraphs).
struct Uses {
  std::map<std::string, std::vector<size_t>> readers;
  std::set<std::string> pinned;

  // `subgraph_reads`: CollectSubgraphReads of `g`, which this graph's fusions do not change.
  Uses(const Graph& g, const std::set<std::string>& subgraph_reads) : pinned(subgraph_reads) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const std::string& in : g.nodes[i].inputs)
        if (!in.empty()) readers[in].push_back(i);
    for (const ValueInfo& o : g.outputs) pinned.insert(o.name);
  }
  // The one CPU node reading `v`, or -1 (more readers, none, a graph output, read from a subgraph).
  int SoleReader(const Graph& g, const std::string& v) const {
    if (pinned.count(v)) return -1;
    auto it = readers.find(v);
    if (it == readers.end() || it->second.size() != 1) return -1;
    const size_t r = it->second[0];
    return IsCpuNode(g.nodes[r]) ? static_cast<int>(r) : -1;
  }
  size_t Count(const std::string& v) const {
    auto it = readers.find(v);
    return it == readers.end() ? 0 : it->second.size();
  }
};

// The single value of a constant float scalar (any shape with one element).
bool ConstScalar(const Graph& g, const std::string& name, float* v) {
  const Tensor* t = ConstFloat(g, name);
  if (!t || t->NumElements() != 1) return false;
  *v = t->data<float>()[0];
  return true;
}

float AttrFloat(const Node& n, const char* name, float def) {
  const Attribute* a = n.attr(name);
  return a && a->type == Attribute::Type::kFloat ? a->f : def;
}

// Clip's bounds when constant: attributes before opset 11, scalar initializers after (absent = unbounded).
bool ClipBounds(const Graph& g, const Node& n, float* lo, float* hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (n.opset < 11) {
    *lo = AttrFloat(n, "min", -INFINITY);
    *hi = AttrFloat(n, "max", INFINITY);
    return true;
  }
  if (n.inputs.size() > 1 && !n.inputs[1].empty() && !ConstScalar(g, n.inputs[1], lo)) return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !ConstScalar(g, n.inputs[2], hi)) return false;
  return true;
}

// A Conv the pass may change: float, constant weights, not already fused.
bool FusableConv(const Graph& g, const Node& n) {
  if (!IsCpuNode(n) || !IsOnnx(n) || n.op_type != "Conv" || n.attr(kFusedActivationAttr)) return false;
  if (n.inputs.size() < 2 || !SingleOutput(n) || !IsFloat(g, n.outputs[0])) return false;
  if (!ConstFloat(g, n.inputs[1])) return false;
  return n.inputs.size() < 3 || n.inputs[2].empty() || ConstFloat(g, n.inputs[2]);
}

// An inference BatchNormalization reading `value`, whose four parameters are constant [M] floats.
bool FoldableBatchNorm(const Graph& g, const Node& bn, const std::string& value, int64_t m) {
  if (!IsCpuNode(bn) || !IsOnnx(bn) || bn.op_type != "BatchNormalization" || bn.opset < 9) return false;
  if (bn.inputs.size() != 5 || bn.inputs[0] != value || !SingleOutput(bn)) return false;
  const Attribute* tm = bn.attr("training_mode");
  if (tm && tm->i != 0) return false;
  for (size_t i = 1; i < 5; ++i) {
    const Tensor* t = ConstFloat(g, bn.inputs[i]);
    if (!t || t->shape() != Shape{m}) return false;
  }
  return true;
}

// Rewrites conv (in place, in `g`) to compute conv * scale[m] + shift[m] per output channel m and write `out`: new
// initializers "<out>/folded_w" and "<out>/folded_b" (float, rescaled in double).
bool FoldIntoConv(Graph* g, Node* conv, const std::vector<double>& scale, const std::vector<double>& shift,
                  const std::string& out) {
  const Tensor& w = *ConstFloat(*g, conv->inputs[1]);
  const int64_t m = w.shape().empty() ? 0 : w.shape()[0];
  if (m <= 0 || w.NumElements() % m != 0 || scale.size() != static_cast<size_t>(m) ||
      shift.size() != static_cast<size_t>(m))
    return false;
  const float* bias = conv->inputs.size() > 2 && !conv->inputs[2].empty() ? ConstFloat(*g, conv->inputs[2])->data<float>()
                                                                          : nullptr;
  const std::string wn = out + "/folded_w", bn = out + "/folded_b";
  if (g->initializers.count(wn) || g->initializers.count(bn) || g->FindType(wn) || g->FindType(bn)) return false;
  auto nw = Tensor::Allocate(DataType::kFloat, w.shape());
  auto nb = Tensor::Allocate(DataType::kFloat, Shape{m});
  if (!nw.ok() || !nb.ok()) return false;
  const int64_t per = w.NumElements() / m;
  for (int64_t o = 0; o < m; ++o) {
    const double sc = scale[static_cast<size_t>(o)];
    for (int64_t j = 0; j < per; ++j)
      nw.value().data<float>()[o * per + j] = static_cast<float>(static_cast<double>(w.data<float>()[o * per + j]) * sc);
    const double b0 = bias ? bias[o] : 0.0;
    nb.value().data<float>()[o] = static_cast<float>(b0 * sc + shift[static_cast<size_t>(o)]);
  }
  g->initializers[wn] = std::move(nw).value();
  g->initializers[bn] = std::move(nb).value();
  conv->inputs.resize(3);
  conv->inputs[1] = wn;
  conv->inputs[2] = bn;
  conv->outputs[0] = out;
  return true;
}

// BatchNormalization as a per-channel scale and shift: y = x * s + (shift - mean * s), s = scale / sqrt(var + eps).
void BatchNormAffine(const Graph& g, const Node& bn, int64_t m, std::vector<double>* scale, std::vector<double>* shift) {
  const float* sc = ConstFloat(g, bn.inputs[1])->data<float>();
  const float* sh = ConstFloat(g, bn.inputs[2])->data<float>();
  const float* mean = ConstFloat(g, bn.inputs[3])->data<float>();
  const float* var = ConstFloat(g, bn.inputs[4])->data<float>();
  const double eps = AttrFloat(bn, "epsilon", 1e-5f);
  scale->resize(static_cast<size_t>(m));
  shift->resize(static_cast<size_t>(m));
  for (int64_t o = 0; o < m; ++o) {
    const double s = static_cast<double>(sc[o]) / std::sqrt(static_cast<double>(var[o]) + eps);
    (*scale)[static_cast<size_t>(o)] = s;
    (*shift)[static_cast<size_t>(o)] = static_cast<double>(sh[o]) - static_cast<double>(mean[o]) * s;
  }
}

// A Mul or Add of `value` (the output of a Conv of rank `rank` with `m` channels) by a constant that is one value or
// one per channel ([m, 1, ...] or [1, m, 1, ...]): the per-channel scale and shift it applies (ONNX Runtime's
// ConvMulFusion and ConvAddFusion; PaddleOCR's detector puts a learnable scale and bias after most convolutions).
bool ChannelAffine(const Graph& g, const Node& n, const std::string& value, int64_t m, size_t rank,
                   std::vector<double>* scale, std::vector<double>* shift) {
  if (!IsCpuNode(n) || !IsOnnx(n) || (n.op_type != "Mul" && n.op_type != "Add") || n.inputs.size() != 2 ||
      !SingleOutput(n))
    return false;
  if ((n.inputs[0] == value) == (n.inputs[1] == value)) return false;  // exactly one operand is the conv
  const Tensor* c = ConstFloat(g, n.inputs[0] == value ? n.inputs[1] : n.inputs[0]);
  if (!c || c->rank() > rank) return false;
  if (c->NumElements() != 1) {
    // Right-aligned against [N, M, spatial...]: the channel axis is rank - 1 - spatial from the right.
    const size_t spatial = rank - 2, cr = c->rank();
    if (cr < spatial + 1 || c->shape()[cr - 1 - spatial] != m || c->NumElements() != m) return false;
  }
  const float* cv = c->data<float>();
  scale->assign(static_cast<size_t>(m), 1.0);
  shift->assign(static_cast<size_t>(m), 0.0);
  for (int64_t o = 0; o < m; ++o) {
    const double v = cv[c->NumElements() == 1 ? 0 : o];
    (n.op_type == "Mul" ? *scale : *shift)[static_cast<size_t>(o)] = v;
  }
  return true;
}

// The activation `n` applies to `value` when the Conv kernel can run it as a post-op.
bool ActivationOf(const Graph& g, const Node& n, const std::string& value, std::string* kind,
                  std::vector<float>* params) {
  if (!IsCpuNode(n) || !IsOnnx(n) || n.inputs.empty() || n.inputs[0] != value || !SingleOutput(n)) return false;
  const std::string& op = n.op_type;
  params->clear();
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish") {
    if (n.inputs.size() != 1) return false;
    *kind = op;
  } else if (op == "LeakyRelu") {
    *kind = op;
    params->push_back(AttrFloat(n, "alpha", 0.01f));
  } else if (op == "Clip") {
    float lo, hi;
    if (!ClipBounds(g, n, &lo, &hi) || std::isnan(lo) || std::isnan(hi)) return false;
    *kind = op;
    *params = {lo, hi};
  } else {
    return false;
  }
  return true;
}

// `n` computes x * k, x + k, k + x, x - k, k - x or x / k of `x` and a one-element float constant k of rank <= `rank`:
// composes it into y = x * scale + shift.
bool LinearStep(const Graph& g, const Node& n, const std::string& x, size_t rank, double* scale, double* shift) {
  if (!IsCpuNode(n) || !IsOnnx(n) || n.inputs.size() != 2 || !SingleOutput(n) || !IsFloat(g, n.outputs[0])) return false;
  if ((n.inputs[0] == x) == (n.inputs[1] == x)) return false;
  const bool x_first = n.inputs[0] == x;
  const Tensor* c = ConstFloat(g, x_first ? n.inputs[1] : n.inputs[0]);
  if (!c || c->NumElements() != 1 || c->rank() > rank) return false;
  const double k = c->data<float>()[0];
  if (n.op_type == "Mul") {
    *scale *= k;
    *shift *= k;
  } else if (n.op_type == "Add") {
    *shift += k;
  } else if (n.op_type == "Sub") {
    if (!x_first) *scale = -*scale, *shift = -*shift;
    *shift += x_first ? -k : k;
  } else if (n.op_type == "Div" && x_first && k != 0 && std::isfinite(k)) {
    *scale /= k;
    *shift /= k;
  } else {
    return false;
  }
  return true;
}

// x * Clip(x + 3, 0, 6) / 6 (or * 1/6, in either order) reading conv output `x`: its four nodes and its output.
bool HardSwishPattern(const Graph& g, const Uses& uses, const std::string& x, std::vector<size_t>* nodes,
                      std::string* out) {
  auto it = uses.readers.find(x);
  if (uses.pinned.count(x) || it == uses.readers.end() || it->second.size() != 2) return false;
  int add = -1, mul = -1;
  for (size_t r : it->second) {
    const Node& n = g.nodes[r];
    if (!IsCpuNode(n) || !IsOnnx(n) || n.inputs.size() != 2 || !SingleOutput(n)) return false;
    if (n.op_type == "Add") add = static_cast<int>(r);
    else if (n.op_type == "Mul") mul = static_cast<int>(r);
  }
  if (add < 0 || mul < 0) return false;
  const Node& a = g.nodes[static_cast<size_t>(add)];
  float c = 0;
  const std::string& ac = a.inputs[0] == x ? a.inputs[1] : a.inputs[0];
  if (!ConstScalar(g, ac, &c) || c != 3.f) return false;
  const int clip = uses.SoleReader(g, a.outputs[0]);
  if (clip < 0) return false;
  const Node& cl = g.nodes[static_cast<size_t>(clip)];
  float lo, hi;
  if (cl.op_type != "Clip" || !IsOnnx(cl) || cl.inputs[0] != a.outputs[0] || !SingleOutput(cl) ||
      !ClipBounds(g, cl, &lo, &hi) || lo != 0.f || hi != 6.f)
    return false;
  // Then either / 6 and * x (x * (Clip / 6), the classifier) or * x and / 6 ((x * Clip) / 6, the detector).
  auto is_sixth = [&](const Node& n, const std::string& in) {
    float c = 0;
    if (!IsCpuNode(n) || !IsOnnx(n) || n.inputs.size() != 2 || !SingleOutput(n)) return false;
    if (n.op_type == "Div") return n.inputs[0] == in && ConstScalar(g, n.inputs[1], &c) && c == 6.f;
    if (n.op_type != "Mul") return false;
    const std::string& k = n.inputs[0] == in ? n.inputs[1] : n.inputs[0];
    return (n.inputs[0] == in || n.inputs[1] == in) && ConstScalar(g, k, &c) && std::fabs(c - 1.f / 6.f) <= 1e-7f;
  };
  auto is_times_x = [&](const Node& n, const std::string& in) {
    return static_cast<int>(&n - g.nodes.data()) == mul &&
           ((n.inputs[0] == x && n.inputs[1] == in) || (n.inputs[1] == x && n.inputs[0] == in));
  };
  const int second = uses.SoleReader(g, cl.outputs[0]);
  if (second < 0) return false;
  const Node& s2 = g.nodes[static_cast<size_t>(second)];
  if (is_sixth(s2, cl.outputs[0])) {
    if (uses.SoleReader(g, s2.outputs[0]) != mul || !is_times_x(g.nodes[static_cast<size_t>(mul)], s2.outputs[0]))
      return false;
    *out = g.nodes[static_cast<size_t>(mul)].outputs[0];
  } else if (second == mul && is_times_x(s2, cl.outputs[0])) {
    const int third = uses.SoleReader(g, s2.outputs[0]);
    if (third < 0 || !is_sixth(g.nodes[static_cast<size_t>(third)], s2.outputs[0])) return false;
    *out = g.nodes[static_cast<size_t>(third)].outputs[0];
    *nodes = {static_cast<size_t>(add), static_cast<size_t>(clip), static_cast<size_t>(mul), static_cast<size_t>(third)};
    return true;
  } else {
    return false;
  }
  *nodes = {static_cast<size_t>(add), static_cast<size_t>(clip), static_cast<size_t>(second), static_cast<size_t>(mul)};
  return true;
}

// A float MatMul the pass may give a bias: B a constant 2-D float, not already fused.
bool FusableMatMul(const Graph& g, const Node& n) {
  if (!IsCpuNode(n) || !IsOnnx(n) || n.op_type != "MatMul" || n.inputs.size() != 2 || !SingleOutput(n) ||
      n.attr(kMatMulBiasAttr) || !IsFloat(g, n.outputs[0]))
    return false;
  const Tensor* b = ConstFloat(g, n.inputs[1]);
  return b && b->rank() == 2 && b->shape()[1] > 0;
}

// `add` adds a constant float of `n` values along the last axis to `mm`'s output (shape [n] or [1, ..., 1, n], of
// a rank that does not grow the output's): its name in `*bias`.
bool RowBias(const Graph& g, const Node& add, const Node& mm, int64_t n, std::string* bias) {
  if (!IsCpuNode(add) || !IsOnnx(add) || add.op_type != "Add" || add.inputs.size() != 2 || !SingleOutput(add) ||
      !IsFloat(g, add.outputs[0]))
    return false;
  const std::string& y = mm.outputs[0];
  if ((add.inputs[0] == y) == (add.inputs[1] == y)) return false;
  *bias = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  const Tensor* c = ConstFloat(g, *bias);
  if (!c || c->rank() < 1 || c->NumElements() != n || c->shape().back() != n) return false;
  if (c->rank() == 1) return true;
  const ValueType* a = g.FindType(mm.inputs[0]);  // the product has A's rank (at least 2)
  return a && a->has_shape && c->rank() <= std::max<size_t>(a->dims.size(), 2);
}

// A ConvInteger / MatMulInteger the pass may give a float output: ONNX, single int32 output, not fused yet.
bool FusableIntegerProduct(const Graph& g, const Node& n) {
  if (!IsCpuNode(n) || !IsOnnx(n) || (n.op_type != "ConvInteger" && n.op_type != "MatMulInteger")) return false;
  if (!SingleOutput(n) || n.attr(kFusedOutputScaleAttr) || n.inputs.size() < 2 || n.inputs.size() > 4) return false;
  const ValueType* t = g.FindType(n.outputs[0]);
  return !t || t->elem_type == DataType::kInt32;
}

// `cast` casts `value` to float and `mul`, its sole reader, multiplies the result by a one-element float of rank
// 0 or 1 (so the product keeps the cast's shape): that factor's name in `*scale`.
bool CastThenScale(const Graph& g, const Node& cast, const Node& mul, const std::string& value, std::string* scale) {
  if (!IsCpuNode(cast) || !IsOnnx(cast) || cast.op_type != "Cast" || cast.inputs.size() != 1 ||
      cast.inputs[0] != value || !SingleOutput(cast))
    return false;
  const Attribute* to = cast.attr("to");
  if (!to || to->i != static_cast<int64_t>(DataType::kFloat)) return false;
  if (!IsCpuNode(mul) || !IsOnnx(mul) || mul.op_type != "Mul" || mul.inputs.size() != 2 || !SingleOutput(mul))
    return false;
  const std::string& c = cast.outputs[0];
  if ((mul.inputs[0] == c) == (mul.inputs[1] == c)) return false;
  *scale = mul.inputs[0] == c ? mul.inputs[1] : mul.inputs[0];
  const ValueType* t = g.FindType(*scale);
  if (!t || t->elem_type != DataType::kFloat || !t->has_shape || t->dims.size() > 1) return false;
  for (const Dim& d : t->dims)
    if (d.value != 1) return false;
  return true;
}

// `add` adds a constant float per output channel (ConvInteger: axis 1 of its output) or column (MatMulInteger: the
// last axis) to `prod`'s output, broadcasting without growing it: the constant's name in `*bias`.
// The shape of `name` when known: an initializer's (this graph's or an enclosing one's), else its value type's.
bool KnownShape(const Graph& g, const std::string& name, Shape* dims) {
  for (const Graph* s = &g; s; s = s->parent) {
    auto it = s->initializers.find(name);
    if (it != s->initializers.end()) {
      *dims = it->second.shape();
      return true;
    }
  }
  const ValueType* t = g.FindType(name);
  if (!t || !t->has_shape) return false;
  dims->clear();
  for (const Dim& d : t->dims) {
    if (!d.known()) return false;
    dims->push_back(d.value);
  }
  return true;
}

bool OutputBias(const Graph& g, const Node& add, const Node& prod, std::string* bias) {
  Shape ws;
  if (!KnownShape(g, prod.inputs[1], &ws) || ws.size() < 2) return false;
  if (prod.op_type == "MatMulInteger") return ws.back() > 0 && RowBias(g, add, prod, ws.back(), bias);
  if (!IsCpuNode(add) || !IsOnnx(add) || add.op_type != "Add" || add.inputs.size() != 2 || !SingleOutput(add) ||
      !IsFloat(g, add.outputs[0]))
    return false;
  const std::string& y = prod.outputs[0];
  if ((add.inputs[0] == y) == (add.inputs[1] == y)) return false;
  *bias = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  const Tensor* c = ConstFloat(g, *bias);
  const int64_t m = ws[0], rank = static_cast<int64_t>(ws.size());
  if (!c || m <= 0 || c->NumElements() != m || static_cast<int64_t>(c->rank()) > rank) return false;
  const int64_t axis = static_cast<int64_t>(c->rank()) - (rank - 1);  // axis 1 of the output, aligned right
  for (int64_t d = 0; d < static_cast<int64_t>(c->rank()); ++d)
    if (c->shape()[d] != (d == axis ? m : 1)) return false;
  return axis >= 0 || m == 1;
}

// The fusions of one graph's own nodes (subgraphs are separate calls). Returns true when `*copy` was changed.
bool FuseGraph(Graph* g, CpuFusionStats* stats) {
  bool changed = false;
  std::vector<bool> removed(g->nodes.size(), false);
  std::set<std::string> subgraph_reads;
  CollectSubgraphReads(*g, &subgraph_reads);
  Uses uses(*g, subgraph_reads);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if (removed[i] || !FusableConv(*g, g->nodes[i])) continue;
    Node& conv = g->nodes[i];
    const Tensor* w = ConstFloat(*g, conv.inputs[1]);
    const int64_t m = w->shape().empty() ? 0 : w->shape()[0];
    // BatchNormalization, then constant per-channel Mul / Add, folded into the weights and bias while they follow.
    int r = uses.SoleReader(*g, conv.outputs[0]);
    for (int folds = 0; r >= 0 && !removed[static_cast<size_t>(r)] && folds < 8; ++folds) {
      const Node next = g->nodes[static_cast<size_t>(r)];
      std::vector<double> scale, shift;
      const bool bn = FoldableBatchNorm(*g, next, conv.outputs[0], m);
      if (bn) BatchNormAffine(*g, next, m, &scale, &shift);
      else if (!ChannelAffine(*g, next, conv.outputs[0], m, w->rank(), &scale, &shift)) break;
      if (!FoldIntoConv(g, &conv, scale, shift, next.outputs[0])) break;
      removed[static_cast<size_t>(r)] = true;
      ++(bn ? stats->batch_norms : stats->affines);
      changed = true;
      uses = Uses(*g, subgraph_reads);  // conv now writes the folded node's output
      w = ConstFloat(*g, conv.inputs[1]);
      r = uses.SoleReader(*g, conv.outputs[0]);
    }
    if (!IsFloat(*g, conv.outputs[0])) continue;
    std::string kind, out;
    std::vector<float> params;
    std::vector<size_t> absorbed;
    r = uses.SoleReader(*g, conv.outputs[0]);
    if (r >= 0 && !removed[static_cast<size_t>(r)] &&
        ActivationOf(*g, g->nodes[static_cast<size_t>(r)], conv.outputs[0], &kind, &params)) {
      absorbed = {static_cast<size_t>(r)};
      out = g->nodes[static_cast<size_t>(r)].outputs[0];
    } else if (HardSwishPattern(*g, uses, conv.outputs[0], &absorbed, &out)) {
      kind = "HardSwish";
    } else {
      continue;
    }
    bool free = true;
    for (size_t a : absorbed) free &= !removed[a];
    if (!free) continue;
    for (size_t a : absorbed) removed[a] = true;
    Attribute act;
    act.name = kFusedActivationAttr;
    act.type = Attribute::Type::kString;
    act.s = kind;
    conv.attributes[act.name] = act;
    Attribute ps;
    ps.name = kFusedActivationParamsAttr;
    ps.type = Attribute::Type::kFloats;
    ps.floats = params;
    conv.attributes[ps.name] = ps;
    conv.outputs[0] = out;
    ++stats->activations;
    changed = true;
    uses = Uses(*g, subgraph_reads);
    // Then Mul / Add / Sub / Div by one-element constants: y * scale + shift, one more post-op.
    double scale = 1, shift = 0;
    bool linear = false;
    for (int folds = 0; folds < 8; ++folds) {
      r = uses.SoleReader(*g, conv.outputs[0]);
      if (r < 0 || removed[static_cast<size_t>(r)] ||
          !LinearStep(*g, g->nodes[static_cast<size_t>(r)], conv.outputs[0], w->rank(), &scale, &shift))
        break;
      removed[static_cast<size_t>(r)] = true;
      conv.outputs[0] = g->nodes[static_cast<size_t>(r)].outputs[0];
      linear = true;
      ++stats->linears;
      uses = Uses(*g, subgraph_reads);
    }
    if (linear) {
      Attribute lin;
      lin.name = kFusedLinearAttr;
      lin.type = Attribute::Type::kFloats;
      lin.floats = {static_cast<float>(scale), static_cast<float>(shift)};
      conv.attributes[lin.name] = lin;
    }
  }
  // MatMul by a constant 2-D B, then Add of a constant bias along the last axis: one oneDNN matmul with bias.
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if (removed[i] || !FusableMatMul(*g, g->nodes[i])) continue;
    Node& mm = g->nodes[i];
    const int r = uses.SoleReader(*g, mm.outputs[0]);
    if (r < 0 || removed[static_cast<size_t>(r)]) continue;
    const Node& add = g->nodes[static_cast<size_t>(r)];
    const int64_t n = ConstFloat(*g, mm.inputs[1])->shape()[1];
    std::string bias;
    if (!RowBias(*g, add, mm, n, &bias)) continue;
    mm.inputs.push_back(bias);
    mm.outputs[0] = add.outputs[0];
    Attribute a;
    a.name = kMatMulBiasAttr;
    a.type = Attribute::Type::kInt;
    a.i = 1;
    mm.attributes[a.name] = a;
    removed[static_cast<size_t>(r)] = true;
    ++stats->matmul_biases;
    changed = true;
    uses = Uses(*g, subgraph_reads);
  }
  // ConvInteger / MatMulInteger -> Cast(to float) -> Mul(one-element scale): one node writing float(acc) * scale,
  // the same two roundings as the Cast and the Mul.
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if (removed[i] || !FusableIntegerProduct(*g, g->nodes[i])) continue;
    const int rc = uses.SoleReader(*g, g->nodes[i].outputs[0]);
    if (rc < 0 || removed[static_cast<size_t>(rc)]) continue;
    const int rm = uses.SoleReader(*g, g->nodes[static_cast<size_t>(rc)].outputs[0]);
    if (rm < 0 || removed[static_cast<size_t>(rm)]) continue;
    std::string scale;
    if (!CastThenScale(*g, g->nodes[static_cast<size_t>(rc)], g->nodes[static_cast<size_t>(rm)],
                       g->nodes[i].outputs[0], &scale))
      continue;
    Node& prod = g->nodes[i];
    prod.inputs.resize(4);
    prod.inputs.push_back(scale);
    prod.outputs[0] = g->nodes[static_cast<size_t>(rm)].outputs[0];
    Attribute a;
    a.name = kFusedOutputScaleAttr;
    a.type = Attribute::Type::kInt;
    a.i = 1;
    prod.attributes[a.name] = a;
    removed[static_cast<size_t>(rc)] = removed[static_cast<size_t>(rm)] = true;
    ++stats->output_scales;
    changed = true;
    uses = Uses(*g, subgraph_reads);
    // Then the Add of a constant bias per channel / column, then a Relu.
    const int ra = uses.SoleReader(*g, prod.outputs[0]);
    std::string bias;
    if (ra < 0 || removed[static_cast<size_t>(ra)] || !OutputBias(*g, g->nodes[static_cast<size_t>(ra)], prod, &bias))
      continue;
    prod.inputs.push_back(bias);
    prod.outputs[0] = g->nodes[static_cast<size_t>(ra)].outputs[0];
    a.name = kFusedOutputBiasAttr;
    prod.attributes[a.name] = a;
    removed[static_cast<size_t>(ra)] = true;
    ++stats->output_biases;
    uses = Uses(*g, subgraph_reads);
    const int rr = uses.SoleReader(*g, prod.outputs[0]);
    if (rr < 0 || removed[static_cast<size_t>(rr)]) continue;
    const Node& relu = g->nodes[static_cast<size_t>(rr)];
    if (!IsCpuNode(relu) || !IsOnnx(relu) || relu.op_type != "Relu" || relu.inputs.size() != 1 ||
        !SingleOutput(relu) || !IsFloat(*g, relu.outputs[0]))
      continue;
    Attribute act;
    act.name = kFusedActivationAttr;
    act.type = Attribute::Type::kString;
    act.s = "Relu";
    prod.attributes[act.name] = act;
    prod.outputs[0] = relu.outputs[0];
    removed[static_cast<size_t>(rr)] = true;
    ++stats->activations;
    uses = Uses(*g, subgraph_reads);
  }
  // A fused MatMulInteger (2-D B, per-tensor A zero point) whose only reader is a Gather of one row along the row
  // axis (a language model's head read at the last position): Gather the rows of A first, then the product computes
  // that row alone. Exact: rows of a matrix product are independent, and the float epilogue is per element/column.
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if (removed[i]) continue;
    const Node& prod = g->nodes[i];
    if (!IsCpuNode(prod) || !IsOnnx(prod) || prod.op_type != "MatMulInteger" || !prod.attributes.count(kFusedOutputScaleAttr))
      continue;
    const int rg = uses.SoleReader(*g, prod.outputs[0]);
    if (rg < 0 || removed[static_cast<size_t>(rg)]) continue;
    const Node& gather = g->nodes[static_cast<size_t>(rg)];
    if (!IsOnnx(gather) || gather.op_type != "Gather" || gather.inputs.size() != 2 || !SingleOutput(gather) ||
        gather.inputs[0] != prod.outputs[0] || !g->initializers.count(gather.inputs[1]) ||
        g->initializers.at(gather.inputs[1]).NumElements() != 1)
      continue;
    Shape a_dims, b_dims, az_dims;
    if (!KnownShape(*g, prod.inputs[0], &a_dims) || a_dims.size() < 3 || !KnownShape(*g, prod.inputs[1], &b_dims) ||
        b_dims.size() != 2)
      continue;
    if (prod.inputs.size() > 2 && !prod.inputs[2].empty() &&
        (!KnownShape(*g, prod.inputs[2], &az_dims) || ShapeSize(az_dims) != 1))
      continue;
    auto ax = gather.attributes.find("axis");
    int64_t axis = ax == gather.attributes.end() ? 0 : ax->second.i;
    const int64_t rank = static_cast<int64_t>(a_dims.size());
    if (axis < 0) axis += rank;
    if (axis != rank - 2) continue;
    // The Gather moves to the product's place (its inputs, A and an initializer, are ready there) and the product to
    // the Gather's (nothing between reads the product's output: the Gather was its only reader).
    Node moved_gather = gather, moved_prod = prod;
    const std::string rows = gather.outputs[0] + "/rows_of_a";
    moved_prod.outputs[0] = gather.outputs[0];
    moved_prod.inputs[0] = rows;
    moved_gather.inputs[0] = prod.inputs[0];
    moved_gather.outputs[0] = rows;
    g->nodes[i] = std::move(moved_gather);
    g->nodes[static_cast<size_t>(rg)] = std::move(moved_prod);
    ++stats->gathered_rows;
    changed = true;
    uses = Uses(*g, subgraph_reads);
  }
  if (!changed) return false;
  std::vector<Node> kept;
  kept.reserve(g->nodes.size());
  for (size_t i = 0; i < g->nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(g->nodes[i]));
  g->nodes = std::move(kept);
  return true;
}

}  // namespace

std::shared_ptr<Graph> FuseCpuNodes(const std::shared_ptr<Graph>& graph, CpuFusionStats* stats) {
  CpuFusionStats local;
  std::shared_ptr<Graph> out = cpu_pass::RewriteCopy(
      graph,
      [](const Graph& g, const Node& n) {
        return FusableConv(g, n) || FusableMatMul(g, n) || FusableIntegerProduct(g, n);
      },
      [&](Graph* g) { return FuseGraph(g, &local); });
  if (out == graph) return graph;
  stats->batch_norms += local.batch_norms;
  stats->affines += local.affines;
  stats->activations += local.activations;
  stats->matmul_biases += local.matmul_biases;
  stats->linears += local.linears;
  stats->output_scales += local.output_scales;
  stats->output_biases += local.output_biases;
  stats->gathered_rows += local.gathered_rows;
  return out;
}

}  // namespace epctx
