#include "providers/cpu/passes/qdq_fusion.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "providers/cpu/layout.h"
#include "providers/cpu/passes/cpu_pass_util.h"

namespace epctx {
namespace {

using cpu_pass::CollectSubgraphReads;
using cpu_pass::ConstTensor;
using cpu_pass::IsCpuNode;
using cpu_pass::IsOnnx;
using cpu_pass::SingleOutput;

bool Is8Bit(DataType t) { return t == DataType::kInt8 || t == DataType::kUint8; }

int64_t AttrInt(const Node& n, const char* name, int64_t def) {
  const Attribute* a = n.attr(name);
  return a && a->type == Attribute::Type::kInt ? a->i : def;
}

// Element type and rank of a value: from a constant, else from the graph's types (rank -1 when unknown).
bool TypeOf(const Graph& g, const std::string& v, DataType* type, int64_t* rank) {
  if (const Tensor* t = ConstTensor(g, v)) {
    *type = t->dtype();
    *rank = static_cast<int64_t>(t->rank());
    return true;
  }
  const ValueType* vt = g.FindType(v);
  if (!vt || vt->kind != ValueType::Kind::kTensor) return false;
  *type = vt->elem_type;
  *rank = vt->has_shape ? static_cast<int64_t>(vt->dims.size()) : -1;
  return true;
}

// A DequantizeLinear (or QuantizeLinear) whose scale and zero point are constants.
struct QParams {
  const Node* node = nullptr;
  std::string value;           // the quantized input (DequantizeLinear) or output (QuantizeLinear)
  DataType type = DataType::kUndefined;  // its element type
  int64_t rank = -1;
  const Tensor* scale = nullptr;         // float
  const Tensor* zero_point = nullptr;    // nullptr: absent (0)
  int64_t axis = -1;                     // normalized; -1 per tensor
  int64_t count() const { return scale->NumElements(); }
  float scale_at(int64_t i) const { return scale->data<float>()[count() == 1 ? 0 : i]; }
};

// The common checks of a Q or DQ node `n`: ONNX domain, CPU, one output, constant float scale, constant zero point
// of the quantized type (or none), no blocks. `quantized` names its quantized value, whose type is looked up.
bool ReadQParams(const Graph& g, const Node& n, const std::string& quantized, QParams* p) {
  if (!IsCpuNode(n) || !IsOnnx(n) || !SingleOutput(n) || n.inputs.size() < 2 || n.inputs.size() > 3) return false;
  if (AttrInt(n, "block_size", 0) != 0) return false;
  p->node = &n;
  p->value = quantized;
  p->scale = ConstTensor(g, n.inputs[1]);
  if (!p->scale || p->scale->dtype() != DataType::kFloat || p->scale->NumElements() < 1 || p->scale->rank() > 1)
    return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    p->zero_point = ConstTensor(g, n.inputs[2]);
    if (!p->zero_point || p->zero_point->NumElements() != p->scale->NumElements()) return false;
  }
  if (!TypeOf(g, quantized, &p->type, &p->rank)) {
    if (!p->zero_point) return false;
    p->type = p->zero_point->dtype();
  }
  if (p->zero_point && p->zero_point->dtype() != p->type) return false;
  if (p->count() > 1) {
    if (p->rank < 1) return false;
    int64_t axis = AttrInt(n, "axis", 1);
    if (axis < 0) axis += p->rank;
    if (axis < 0 || axis >= p->rank) return false;
    p->axis = axis;
  }
  return true;
}

// Who reads each value, and which values must stay (graph outputs, read from subgraphs).
struct Uses {
  std::map<std::string, std::vector<size_t>> readers;
  std::map<std::string, size_t> producer;
  std::set<std::string> pinned;

  Uses(const Graph& g, const std::set<std::string>& subgraph_reads) : pinned(subgraph_reads) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const std::string& in : g.nodes[i].inputs)
        if (!in.empty()) readers[in].push_back(i);
      for (const std::string& out : g.nodes[i].outputs)
        if (!out.empty()) producer[out] = i;
    }
    for (const ValueInfo& o : g.outputs) pinned.insert(o.name);
  }
  const Node* Producer(const Graph& g, const std::string& v) const {
    auto it = producer.find(v);
    return it == producer.end() ? nullptr : &g.nodes[it->second];
  }
  // The one reader of `v` when nothing else (graph output, subgraph) reads it.
  const Node* SoleReader(const Graph& g, const std::string& v) const {
    if (pinned.count(v)) return nullptr;
    auto it = readers.find(v);
    if (it == readers.end() || it->second.size() != 1) return nullptr;
    return &g.nodes[it->second[0]];
  }
};

// The DequantizeLinear writing `v`, with constant parameters.
bool MatchDq(const Graph& g, const Uses& uses, const std::string& v, QParams* p) {
  const Node* n = uses.Producer(g, v);
  return n && n->op_type == "DequantizeLinear" && ReadQParams(g, *n, n->inputs[0], p);
}

// The QuantizeLinear that alone reads `v` (the op's float output), per tensor, 8-bit.
bool MatchQ(const Graph& g, const Uses& uses, const std::string& v, QParams* p) {
  const Node* n = uses.SoleReader(g, v);
  if (!n || n->op_type != "QuantizeLinear" || n->inputs[0] != v) return false;
  if (!ReadQParams(g, *n, n->outputs[0], p) || p->count() != 1) return false;
  if (!p->zero_point) {  // absent: uint8, or output_dtype (opset 21)
    const int64_t od = AttrInt(*n, "output_dtype", 0);
    const DataType t = od == 0 ? DataType::kUint8 : static_cast<DataType>(od);
    if (p->type != DataType::kUndefined && p->type != t) return false;
    p->type = t;
  }
  return Is8Bit(p->type);
}

// An 8-bit per-tensor activation.
bool PerTensor8Bit(const QParams& p) { return Is8Bit(p.type) && p.count() == 1; }

// The zero point input for the fused node: the Q/DQ node's own, else a new zero initializer of its type.
std::string ZeroPoint(Graph* g, const QParams& p, const std::string& base) {
  if (p.zero_point) return p.node->inputs[2];
  std::string name = base + "/zero_point";
  for (int k = 1; g->initializers.count(name) || g->FindType(name); ++k)
    name = base + "/zero_point_" + std::to_string(k);
  auto t = Tensor::Allocate(p.type, Shape{});  // zero-filled
  g->initializers[name] = std::move(t).value();
  return name;
}

struct Match {
  size_t op = 0;
  QParams x, w, b, y;
  bool has_bias = false;
};

bool MatchConv(const Graph& g, const Uses& uses, const Node& c, Match* m) {
  if (!IsCpuNode(c) || !IsOnnx(c) || c.op_type != "Conv" || !SingleOutput(c)) return false;
  if (c.inputs.size() < 2 || c.inputs.size() > 3) return false;
  if (!MatchDq(g, uses, c.inputs[0], &m->x) || !PerTensor8Bit(m->x)) return false;
  if (!MatchDq(g, uses, c.inputs[1], &m->w) || !Is8Bit(m->w.type)) return false;
  const Tensor* w = ConstTensor(g, m->w.value);
  if (!w || w->rank() < 3) return false;
  const int64_t channels = w->dim(0);
  if (m->w.count() != 1 && (m->w.axis != 0 || m->w.count() != channels)) return false;
  m->has_bias = c.inputs.size() == 3 && !c.inputs[2].empty();
  if (m->has_bias) {
    if (!MatchDq(g, uses, c.inputs[2], &m->b)) return false;
    const Tensor* b = ConstTensor(g, m->b.value);
    if (!b || b->dtype() != DataType::kInt32 || b->rank() != 1 || b->dim(0) != channels) return false;
    if (m->b.count() != 1 && (m->b.axis != 0 || m->b.count() != channels)) return false;
    if (m->b.zero_point)
      for (int64_t i = 0; i < m->b.zero_point->NumElements(); ++i)
        if (m->b.zero_point->data<int32_t>()[i] != 0) return false;
    // The bias is summed into the int32 accumulator, whose unit is x_scale * w_scale[m].
    const float xs = m->x.scale_at(0);
    for (int64_t i = 0; i < channels; ++i)
      if (m->b.scale_at(i) != xs * m->w.scale_at(i)) return false;
  }
  return MatchQ(g, uses, c.outputs[0], &m->y) && m->y.type == m->x.type;
}

bool MatchMatMul(const Graph& g, const Uses& uses, const Node& n, Match* m) {
  if (!IsCpuNode(n) || !IsOnnx(n) || n.op_type != "MatMul" || !SingleOutput(n) || n.inputs.size() != 2) return false;
  if (!MatchDq(g, uses, n.inputs[0], &m->x) || !PerTensor8Bit(m->x)) return false;
  if (!MatchDq(g, uses, n.inputs[1], &m->w) || !Is8Bit(m->w.type)) return false;
  if (m->w.count() != 1) {  // per column of a 2-D b
    if (m->w.rank != 2 || m->w.axis != 1) return false;
    const Tensor* b = ConstTensor(g, m->w.value);
    const ValueType* bt = b ? nullptr : g.FindType(m->w.value);
    const int64_t cols = b ? b->dim(1) : (bt && bt->has_shape && bt->dims.size() == 2 ? bt->dims[1].value : -1);
    if (cols != m->w.count()) return false;
  }
  return MatchQ(g, uses, n.outputs[0], &m->y) && m->y.type == m->x.type;
}

// Removes the nodes in `drop` and each DequantizeLinear in `dqs` that no remaining node, graph output or subgraph
// (`sub_reads`) reads, keeping the order of the rest.
void DropNodes(Graph* g, const std::set<std::string>& sub_reads, const std::set<const Node*>& dqs,
               std::set<size_t>* drop) {
  std::set<std::string> read(sub_reads);
  for (const ValueInfo& o : g->outputs) read.insert(o.name);
  for (size_t i = 0; i < g->nodes.size(); ++i)
    if (!drop->count(i))
      for (const std::string& in : g->nodes[i].inputs) read.insert(in);
  for (const Node* dq : dqs)
    if (!read.count(dq->outputs[0])) drop->insert(static_cast<size_t>(dq - g->nodes.data()));
  std::vector<Node> kept;
  kept.reserve(g->nodes.size() - drop->size());
  for (size_t i = 0; i < g->nodes.size(); ++i)
    if (!drop->count(i)) kept.push_back(std::move(g->nodes[i]));
  g->nodes = std::move(kept);
}

bool FuseGraph(Graph* g, CpuFusionStats* stats) {
  std::set<std::string> sub_reads;
  CollectSubgraphReads(*g, &sub_reads);
  std::vector<Match> matches;
  {
    const Uses uses(*g, sub_reads);
    for (size_t i = 0; i < g->nodes.size(); ++i) {
      Match m;
      m.op = i;
      if (MatchConv(*g, uses, g->nodes[i], &m) || MatchMatMul(*g, uses, g->nodes[i], &m)) matches.push_back(m);
    }
  }
  if (matches.empty()) return false;
  // Indices of the QuantizeLinear nodes folded in, and of the DequantizeLinear nodes that may now be unread.
  std::set<size_t> drop;
  std::set<const Node*> dqs;
  std::vector<Node> fused;
  for (const Match& m : matches) {
    const Node& op = g->nodes[m.op];
    const std::string base = op.name.empty() ? op.outputs[0] : op.name;
    Node q;
    q.name = op.name;
    q.domain = "";
    q.opset = op.opset;
    q.doc_string = op.doc_string;
    q.outputs = {m.y.node->outputs[0]};
    const std::string xz = ZeroPoint(g, m.x, base + "/x");
    const std::string wz = ZeroPoint(g, m.w, base + "/w");
    const std::string yz = ZeroPoint(g, m.y, base + "/y");
    if (op.op_type == "Conv") {
      q.op_type = "QLinearConv";
      q.attributes = op.attributes;
      q.inputs = {m.x.value, m.x.node->inputs[1], xz, m.w.value, m.w.node->inputs[1], wz, m.y.node->inputs[1], yz};
      if (m.has_bias) q.inputs.push_back(m.b.value);
      ++stats->qdq_convs;
    } else {
      q.op_type = "QLinearMatMul";
      q.inputs = {m.x.value, m.x.node->inputs[1], xz, m.w.value, m.w.node->inputs[1], wz, m.y.node->inputs[1], yz};
      ++stats->qdq_matmuls;
    }
    fused.push_back(std::move(q));
    drop.insert(static_cast<size_t>(m.y.node - g->nodes.data()));
    dqs.insert(m.x.node);
    dqs.insert(m.w.node);
    if (m.has_bias) dqs.insert(m.b.node);
  }
  for (size_t k = 0; k < matches.size(); ++k) g->nodes[matches[k].op] = std::move(fused[k]);
  DropNodes(g, sub_reads, dqs, &drop);
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// DequantizeLinear -> elementwise float ops -> QuantizeLinear as one 256-entry table (epctx.cpu::Lookup8).

// The float ops a table may absorb: each is one IEEE operation per element (no contraction possible), so the
// scalar evaluation below gives the kernels' values bit for bit.
bool LookupOp(const Node& n) {
  static const std::set<std::string> ops{"Mul", "Add", "Sub", "Div", "Clip", "Relu"};
  return IsCpuNode(n) && IsOnnx(n) && SingleOutput(n) && ops.count(n.op_type) && n.attributes.empty();
}

// A one-element float constant (a scalar operand of the table's ops).
bool ScalarConst(const Graph& g, const std::string& v, float* out) {
  const Tensor* t = ConstTensor(g, v);
  // rank <= 1: broadcasting it leaves the other operand's shape as it is
  if (!t || t->dtype() != DataType::kFloat || t->NumElements() != 1 || t->rank() > 1) return false;
  *out = t->data<float>()[0];
  return true;
}

struct Lookup {
  QParams x, y;
  std::vector<size_t> ops;  // graph order
  std::vector<int64_t> table;
};

// Collects, backwards from the QuantizeLinear's input, the elementwise ops between it and one per-tensor
// DequantizeLinear: every operand is that DequantizeLinear's output, another collected op's output or a one-element
// float constant; every collected value but the last is read only by collected ops (and is no graph output).
bool MatchLookup(const Graph& g, const Uses& uses, const Node& q, Lookup* m) {
  if (q.op_type != "QuantizeLinear" || !IsCpuNode(q) || !IsOnnx(q) || q.inputs.empty()) return false;
  const Node* last = uses.Producer(g, q.inputs[0]);
  if (!last || !LookupOp(*last) || !MatchQ(g, uses, q.inputs[0], &m->y) || m->y.node != &q) return false;
  std::set<size_t> set;
  std::vector<size_t> stack{static_cast<size_t>(last - g.nodes.data())};
  std::string root;
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    if (!set.insert(i).second) continue;
    if (set.size() > 32) return false;
    const Node& n = g.nodes[i];
    if (!LookupOp(n)) return false;
    DataType t;
    int64_t rank;
    if (!TypeOf(g, n.outputs[0], &t, &rank) || t != DataType::kFloat) return false;
    const size_t arity = n.op_type == "Clip" ? 1 : n.op_type == "Relu" ? 1 : 2;
    if (n.inputs.size() < arity || n.inputs.size() > (n.op_type == "Clip" ? 3u : arity)) return false;
    float c0;
    if (ScalarConst(g, n.inputs[0], &c0) && (arity == 1 || ScalarConst(g, n.inputs[1], &c0))) return false;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const std::string& in = n.inputs[k];
      float c;
      if (in.empty() && k > 0) continue;
      if (ScalarConst(g, in, &c) && (k > 0 || n.op_type != "Clip")) continue;
      if (k > 0 && n.op_type == "Clip") return false;  // a Clip bound must be a constant
      const Node* p = uses.Producer(g, in);
      if (!p) return false;
      if (p->op_type == "DequantizeLinear") {
        if (!root.empty() && root != in) return false;
        root = in;
        continue;
      }
      stack.push_back(static_cast<size_t>(p - g.nodes.data()));
    }
  }
  if (root.empty() || !MatchDq(g, uses, root, &m->x) || !PerTensor8Bit(m->x)) return false;
  // Only the last op's output leaves the group (to the QuantizeLinear).
  for (size_t i : set) {
    const std::string& v = g.nodes[i].outputs[0];
    if (&g.nodes[i] == last) continue;
    if (uses.pinned.count(v)) return false;
    auto it = uses.readers.find(v);
    if (it == uses.readers.end()) return false;
    for (size_t r : it->second)
      if (!set.count(r)) return false;
  }
  m->ops.assign(set.begin(), set.end());  // std::set is sorted: graph (topological) order
  return true;
}

// The table: for each byte b of x's type, DequantizeLinear, the ops in graph order, QuantizeLinear, with the
// kernels' formulas (nn_quant.cc DequantizeRow / QuantizeRow, one float operation per op). False when a value is
// not finite (division by zero and the like), where kernels may differ in the sign of a zero or a NaN's fate.
bool EvaluateLookup(const Graph& g, Lookup* m) {
  const bool xs = m->x.type == DataType::kInt8, ys = m->y.type == DataType::kInt8;
  const int32_t xz = m->x.zero_point ? (xs ? m->x.zero_point->data<int8_t>()[0] : m->x.zero_point->data<uint8_t>()[0]) : 0;
  const float yz = static_cast<float>(
      m->y.zero_point ? (ys ? m->y.zero_point->data<int8_t>()[0] : m->y.zero_point->data<uint8_t>()[0]) : 0);
  const float xsc = m->x.scale_at(0), ysc = m->y.scale_at(0);
  const std::string& root = m->x.node->outputs[0];
  m->table.assign(256, 0);
  for (int b = 0; b < 256; ++b) {
    const int32_t xv = xs ? static_cast<int32_t>(static_cast<int8_t>(static_cast<uint8_t>(b))) : b;
    std::map<std::string, float> val;
    val[root] = static_cast<float>(xv - xz) * xsc;
    auto read = [&](const std::string& v) {
      float c;
      if (ScalarConst(g, v, &c)) return c;
      return val.at(v);
    };
    float out = 0.f;
    for (size_t i : m->ops) {
      const Node& n = g.nodes[i];
      float r;
      if (n.op_type == "Relu") {
        const float a = read(n.inputs[0]);
        r = a > 0.f ? a : 0.f;
      } else if (n.op_type == "Clip") {
        r = read(n.inputs[0]);
        const bool has_lo = n.inputs.size() > 1 && !n.inputs[1].empty();
        const bool has_hi = n.inputs.size() > 2 && !n.inputs[2].empty();
        const float lo = has_lo ? read(n.inputs[1]) : 0.f, hi = has_hi ? read(n.inputs[2]) : 0.f;
        if (has_lo && has_hi && !(lo <= hi)) return false;
        if (has_lo) r = r < lo ? lo : r;
        if (has_hi) r = r > hi ? hi : r;
      } else {
        const float a = read(n.inputs[0]), c = read(n.inputs[1]);
        r = n.op_type == "Mul" ? a * c : n.op_type == "Add" ? a + c : n.op_type == "Sub" ? a - c : a / c;
      }
      if (!std::isfinite(r)) return false;
      val[n.outputs[0]] = r;
      out = r;
    }
    const float v = std::nearbyint(out / ysc) + yz;
    const float lo = ys ? -128.f : 0.f, hi = ys ? 127.f : 255.f;
    m->table[b] = static_cast<int64_t>(v < lo ? lo : v > hi ? hi : v);
  }
  return true;
}

bool FuseLookups(Graph* g, CpuFusionStats* stats) {
  std::set<std::string> sub_reads;
  CollectSubgraphReads(*g, &sub_reads);
  std::vector<Lookup> matches;
  std::set<size_t> taken;
  {
    const Uses uses(*g, sub_reads);
    for (size_t i = 0; i < g->nodes.size(); ++i) {
      Lookup m;
      if (!MatchLookup(*g, uses, g->nodes[i], &m) || !EvaluateLookup(*g, &m)) continue;
      bool overlap = false;
      for (size_t k : m.ops) overlap |= taken.count(k) > 0;
      if (overlap) continue;
      taken.insert(m.ops.begin(), m.ops.end());
      matches.push_back(std::move(m));
    }
  }
  if (matches.empty()) return false;
  std::set<size_t> drop(taken);
  std::set<const Node*> dqs;
  for (const Lookup& m : matches) {
    const size_t qi = static_cast<size_t>(m.y.node - g->nodes.data());
    Node t;
    t.name = m.y.node->name;
    t.op_type = "Lookup8";
    t.domain = kCpuInternalDomain;
    t.opset = 1;
    t.inputs = {m.x.value};
    t.outputs = {m.y.node->outputs[0]};
    Attribute table;
    table.name = "table";
    table.type = Attribute::Type::kInts;
    table.ints = m.table;
    Attribute to;
    to.name = "to";
    to.type = Attribute::Type::kInt;
    to.i = static_cast<int64_t>(m.y.type);
    t.attributes["table"] = table;
    t.attributes["to"] = to;
    dqs.insert(m.x.node);
    g->nodes[qi] = std::move(t);
    ++stats->qdq_lookups;
  }
  DropNodes(g, sub_reads, dqs, &drop);
  return true;
}

}  // namespace

std::shared_ptr<Graph> FuseQdqNodes(const std::shared_ptr<Graph>& graph, CpuFusionStats* stats) {
  CpuFusionStats local;
  std::shared_ptr<Graph> out = cpu_pass::RewriteCopy(
      graph,
      [](const Graph&, const Node& n) {
        return IsCpuNode(n) && IsOnnx(n) &&
               (n.op_type == "Conv" || n.op_type == "MatMul" || n.op_type == "QuantizeLinear");
      },
      [&](Graph* g) {
        const bool ops = FuseGraph(g, &local);
        return FuseLookups(g, &local) || ops;
      });
  if (out == graph) return graph;
  stats->qdq_convs += local.qdq_convs;
  stats->qdq_matmuls += local.qdq_matmuls;
  stats->qdq_lookups += local.qdq_lookups;
  return out;
}

}  // namespace epctx
