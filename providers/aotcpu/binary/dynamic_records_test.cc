// Dynamic partition records (dynamic_records.h): a decoder-shaped graph with free dims (batch B, new tokens S, past
// P) round-trips through the records and tensors, infers and binds to the same dims and runs to the same outputs as
// the original at two shapes; the packed-weight table survives; hostile records (every truncation of a small graph,
// wrong magic/version, bad indices, a cycle, duplicate producers, huge counts, rank 13, tensor length mismatches) are
// refused with a reason naming the field.
#include "providers/aotcpu/binary/dynamic_records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "providers/aotcpu/ir/symbolic.h"
#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/runtime/dynamic.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;  // GraphBuilder, Dims, UniformFloats, IntA, IntsA

constexpr int64_t kD = 8;

// One attention block of a decoder: x [B, S, 8], past_k/past_v [B, P, 8];
//   q = x Wq, k = concat(past_k, x Wk), v = concat(past_v, x Wv), a = softmax(q k^T * scale) v, y = a Wo + x + half,
// with `scale` an initializer and `half` a folded constant (Value::folded, not an initializer).
struct Decoder {
  GraphBuilder b;
  std::shared_ptr<std::string> half = std::make_shared<std::string>(sizeof(float), '\0');
  Decoder() {
    b.SymInput("x", {-1, -1, kD}, {"B", "S", ""});
    b.SymInput("past_k", {-1, -1, kD}, {"B", "P", ""});
    b.SymInput("past_v", {-1, -1, kD}, {"B", "P", ""});
    uint32_t seed = 1;
    for (const char* w : {"Wq", "Wk", "Wv", "Wo"}) b.F32(w, {kD, kD}, UniformFloats(kD * kD, seed++));
    b.F32("scale", {}, {0.35f});
    const float h = 0.5f;
    std::memcpy(half->data(), &h, sizeof(h));
    const int hv = b.Out("half", {1});
    b.g.v(hv).folded = half;
    b.g.v(hv).data = half->data();
    for (const char* v : {"q", "xk", "xv", "a0"}) b.FreeOut(v, {-1, -1, kD});
    for (const char* v : {"k", "v"}) b.FreeOut(v, {-1, -1, kD});
    b.FreeOut("kt", {-1, kD, -1});
    for (const char* v : {"s", "ss", "p"}) b.FreeOut(v, {-1, -1, -1});
    for (const char* v : {"a", "o", "r", "y"}) b.FreeOut(v, {-1, -1, kD});
    b.N("MatMul", {"x", "Wq"}, {"q"});
    b.N("MatMul", {"x", "Wk"}, {"xk"});
    b.N("MatMul", {"x", "Wv"}, {"xv"});
    b.N("Concat", {"past_k", "xk"}, {"k"}).attrs["axis"] = IntA(1);
    b.N("Concat", {"past_v", "xv"}, {"v"}).attrs["axis"] = IntA(1);
    b.N("Transpose", {"k"}, {"kt"}).attrs["perm"] = IntsA({0, 2, 1});
    b.N("MatMul", {"q", "kt"}, {"s"});
    b.N("Mul", {"s", "scale"}, {"ss"});
    b.N("Softmax", {"ss"}, {"p"}).attrs["axis"] = IntA(-1);
    b.N("MatMul", {"p", "v"}, {"a"});
    b.N("MatMul", {"a", "Wo"}, {"o"});
    b.N("Add", {"o", "x"}, {"r"});
    b.N("Add", {"r", "half"}, {"y"});
    b.Output("y");
  }
  const std::vector<std::string> inputs = {"x", "past_k", "past_v"};
  const std::vector<std::string> outputs = {"y"};
};

std::vector<WeightRef> Refs(const DynamicRecords& d) {
  std::vector<WeightRef> refs;
  for (const TensorInput& t : d.tensors) refs.push_back({t.bytes.data(), t.bytes.size()});
  return refs;
}

DynamicRecords Serialize(const Graph& g, const std::vector<std::string>& in, const std::vector<std::string>& out,
                         const std::vector<StoredWeight>& packed = {}) {
  DynamicRecords d;
  CheckResult r = SerializeDynamicGraph(g, in, out, packed, &d);
  EXPECT_TRUE(r.ok) << r.reason;
  return d;
}

// Parse must fail with a reason containing `want`.
void ExpectRefused(std::string_view records, const std::vector<WeightRef>& refs, const std::string& want) {
  ParsedDynamicGraph p;
  CheckResult r = ParseDynamicGraph(records, refs, &p);
  EXPECT_FALSE(r.ok) << "accepted; wanted: " << want;
  EXPECT_NE(r.reason.find(want), std::string::npos) << r.reason;
}

std::vector<float> RunOnce(DynamicGraph* d, int64_t batch, int64_t s, int64_t past) {
  std::vector<float> x = UniformFloats(batch * s * kD, 7), pk = UniformFloats(batch * past * kD, 8),
                     pv = UniformFloats(batch * past * kD, 9);
  std::shared_ptr<Executor> exec;
  bool invalid = false;
  CheckResult r = d->Get({{batch, s, kD}, {batch, past, kD}, {batch, past, kD}}, &exec, &invalid);
  EXPECT_TRUE(r.ok) << r.reason;
  if (!r.ok) return {};
  std::vector<float> y(static_cast<size_t>(batch * s * kD), -1.f);
  r = exec->Run({x.data(), pk.data(), pv.data()}, {y.data()});
  EXPECT_TRUE(r.ok) << r.reason;
  return y;
}

std::unique_ptr<DynamicGraph> Create(const Graph& g, const std::vector<std::string>& in,
                                     const std::vector<std::string>& out) {
  DynamicGraph::Options o;
  o.threads = 1;
  static const char kOwner = 0;
  std::unique_ptr<DynamicGraph> d;
  CheckResult r = DynamicGraph::Create(g, in, out, o, std::shared_ptr<const void>(&kOwner, [](const void*) {}), &d);
  EXPECT_TRUE(r.ok) << r.reason;
  return d;
}

TEST(AotCpuDynamicRecords, DecoderRoundTripsInfersBindsAndRunsTheSame) {
  Decoder m;
  const DynamicRecords d = Serialize(m.b.g, m.inputs, m.outputs);
  // Constants: Wq, Wk, Wv, Wo, scale (initializers) and half (folded), once each.
  ASSERT_EQ(d.tensors.size(), 6u);
  const std::vector<WeightRef> refs = Refs(d);
  ParsedDynamicGraph p;
  CheckResult r = ParseDynamicGraph(d.records, refs, &p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(p.inputs, m.inputs);
  EXPECT_EQ(p.outputs, m.outputs);
  const Graph& a = m.b.g;
  const Graph& b = p.graph;
  ASSERT_EQ(a.values.size(), b.values.size());
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  for (size_t i = 0; i < a.values.size(); ++i) {
    const Value &x = a.values[i], &y = b.values[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.dtype, y.dtype) << x.name;
    EXPECT_EQ(x.has_shape, y.has_shape) << x.name;
    EXPECT_EQ(x.dims, y.dims) << x.name;
    EXPECT_EQ(x.dim_symbols, y.dim_symbols) << x.name;
    EXPECT_EQ(x.is_initializer, y.is_initializer) << x.name;
    EXPECT_EQ(x.is_graph_input, y.is_graph_input) << x.name;
    EXPECT_EQ(x.is_graph_output, y.is_graph_output) << x.name;
    EXPECT_EQ(x.producer, y.producer) << x.name;
    EXPECT_EQ(x.consumers, y.consumers) << x.name;
    EXPECT_EQ(b.Find(x.name), static_cast<int>(i));
    ASSERT_EQ(x.is_const(), y.is_const()) << x.name;
    if (x.is_const()) {
      ASSERT_EQ(std::memcmp(x.data, y.data, x.bytes()), 0) << x.name;
      // Borrowed from the mapped tensors, not copied.
      bool points_into_a_tensor = false;
      for (const WeightRef& t : refs) points_into_a_tensor |= y.data == t.data;
      EXPECT_TRUE(points_into_a_tensor) << x.name;
      EXPECT_FALSE(y.folded) << x.name;
    }
  }
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node &x = a.nodes[i], &y = b.nodes[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.domain, y.domain);
    EXPECT_EQ(x.opset, y.opset);
    EXPECT_EQ(x.inputs, y.inputs) << x.name;
    EXPECT_EQ(x.outputs, y.outputs) << x.name;
    ASSERT_EQ(x.attrs.size(), y.attrs.size()) << x.name;
    for (const auto& [key, at] : x.attrs) {
      ASSERT_TRUE(y.Has(key)) << x.name << " " << key;
      const Attr& bt = y.attrs.at(key);
      EXPECT_EQ(at.type, bt.type);
      EXPECT_EQ(at.i, bt.i);
      EXPECT_EQ(at.ints, bt.ints);
    }
  }

  // Symbolic inference and binding: the same dims for every value at several bindings.
  SymbolicShapes sa, sb;
  ASSERT_TRUE(InferSymbolic(a, &sa));
  ASSERT_TRUE(InferSymbolic(b, &sb));
  EXPECT_EQ(sa.symbols, sb.symbols);
  EXPECT_EQ(sb.symbols, (std::vector<std::string>{"B", "P", "S"}));
  for (const auto& binding : std::vector<std::map<std::string, int64_t>>{{{"B", 1}, {"S", 5}, {"P", 0}},
                                                                         {{"B", 2}, {"S", 1}, {"P", 7}}}) {
    Graph ga, gb;
    std::string wa, wb;
    ASSERT_TRUE(Bind(a, sa, binding, &ga, &wa)) << wa;
    ASSERT_TRUE(Bind(b, sb, binding, &gb, &wb)) << wb;
    for (size_t i = 0; i < ga.values.size(); ++i) {
      EXPECT_EQ(ga.values[i].has_shape, gb.values[i].has_shape) << ga.values[i].name;
      EXPECT_EQ(ga.values[i].dims, gb.values[i].dims) << ga.values[i].name;
    }
    EXPECT_EQ(gb.v(gb.Find("p")).dims, (Dims{binding.at("B"), binding.at("S"), binding.at("P") + binding.at("S")}));
  }

  // Both run, and give the same outputs at two shapes.
  auto da = Create(a, m.inputs, m.outputs);
  auto db = Create(b, p.inputs, p.outputs);
  ASSERT_TRUE(da && db);
  for (const Dims& shape : {Dims{1, 4, 0 + 3}, Dims{2, 1, 6}}) {
    const std::vector<float> ya = RunOnce(da.get(), shape[0], shape[1], shape[2]);
    const std::vector<float> yb = RunOnce(db.get(), shape[0], shape[1], shape[2]);
    ASSERT_EQ(ya.size(), static_cast<size_t>(shape[0] * shape[1] * kD));
    ASSERT_EQ(ya.size(), yb.size());
    for (size_t i = 0; i < ya.size(); ++i) EXPECT_EQ(ya[i], yb[i]) << "shape " << DimsText(shape) << " element " << i;
  }
}

TEST(AotCpuDynamicRecords, PackedWeightTableSurvives) {
  Decoder m;
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const std::vector<dnnl::memory::desc> layouts = {
      dnnl::memory::desc({16, 16, 3, 3}, dt::f32, tag::OIhw8i8o),  // blocked
      dnnl::memory::desc({8, 8}, dt::f32, tag::ba),                // plain strided (transposed)
      dnnl::memory::desc({4, 6}, dt::s8, tag::ab),                 // plain, another dtype
  };
  std::vector<std::string> bytes;
  std::vector<StoredWeight> packed;
  for (size_t i = 0; i < layouts.size(); ++i) {
    std::string s(layouts[i].get_size(), '\0');
    for (size_t k = 0; k < s.size(); ++k) s[k] = static_cast<char>(k * 31 + i);
    bytes.push_back(std::move(s));
  }
  for (size_t i = 0; i < layouts.size(); ++i)
    packed.push_back({"w" + std::to_string(i) + ".weight:packed", layouts[i], bytes[i].data(), bytes[i].size()});
  DynamicRecords d;
  CheckResult r = SerializeDynamicGraph(m.b.g, m.inputs, m.outputs, packed, &d, "graph0/");
  ASSERT_TRUE(r.ok) << r.reason;
  ASSERT_EQ(d.tensors.size(), 6u + 3u);
  EXPECT_EQ(d.tensors[0].name, "graph0/const:Wq");
  EXPECT_EQ(d.tensors[6].name, "graph0/packed:w0.weight:packed");
  EXPECT_NE(d.tensors[6].layout, 0u);  // the blocked tag, as the static compiler records it
  ParsedDynamicGraph p;
  const std::vector<WeightRef> refs = Refs(d);
  r = ParseDynamicGraph(d.records, refs, &p);
  ASSERT_TRUE(r.ok) << r.reason;
  ASSERT_EQ(p.packed.size(), 3u);
  for (size_t i = 0; i < layouts.size(); ++i) {
    const auto it = p.packed.find(packed[i].name);
    ASSERT_NE(it, p.packed.end()) << packed[i].name;
    EXPECT_TRUE(it->second.layout == layouts[i]) << i;
    EXPECT_TRUE(SameLayout(it->second.layout, layouts[i])) << i;
    ASSERT_EQ(it->second.size, bytes[i].size());
    EXPECT_EQ(it->second.data, refs[6 + i].data);  // borrowed
    EXPECT_EQ(std::memcmp(it->second.data, bytes[i].data(), bytes[i].size()), 0);
  }
  // A stored weight whose bytes do not fill its layout, or whose dtype the records cannot hold, is not written.
  std::vector<StoredWeight> bad = {packed[0]};
  bad[0].size -= 4;
  EXPECT_FALSE(SerializeDynamicGraph(m.b.g, m.inputs, m.outputs, bad, &d).ok);
  bad[0] = {"w", dnnl::memory::desc({4}, dt::bf16, tag::a), bytes[0].data(), 8};
  r = SerializeDynamicGraph(m.b.g, m.inputs, m.outputs, bad, &d);
  EXPECT_NE(r.reason.find("data type"), std::string::npos) << r.reason;
}

// y = Relu(x + c): the smallest graph with a symbol, an initializer, a node and a packed weight.
struct Small {
  GraphBuilder b;
  std::string wbytes = std::string(4 * 4 * sizeof(float), '\x11');
  std::vector<StoredWeight> packed;
  Small() {
    b.SymInput("x", {-1, 4}, {"N", ""});
    b.F32("c", {4}, {1, 2, 3, 4});
    b.FreeOut("s", {-1, 4});
    b.FreeOut("y", {-1, 4});
    b.N("Add", {"x", "c"}, {"s"});
    b.N("Relu", {"s"}, {"y"}).attrs["note"] = StrA("n");
    b.Output("y");
    packed.push_back({"c:packed", dnnl::memory::desc({4, 4}, dnnl::memory::data_type::f32,
                                                      dnnl::memory::format_tag::ab), wbytes.data(), wbytes.size()});
  }
};

// A Constant node's tensor attribute keeps its bytes in Attr::s (ir.cc): larger than any name, it must round-trip
// (the zoo's PaddleOCR models have such Constants inside their partitions), and a truncated one is still refused.
TEST(AotCpuDynamicRecords, LargeTensorAttributeRoundTrips) {
  GraphBuilder b;
  b.Input("x", {4, 25000});
  b.Out("c", {4, 25000});
  b.Out("y", {4, 25000});
  Node& c = b.N("Constant", {}, {"c"});
  Attr value;
  value.type = EPCTX_ATTR_TENSOR;
  value.i = kF32;
  value.ints = {4, 25000};
  const std::vector<float> data = UniformFloats(4 * 25000, 3);
  value.s.assign(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));  // 400 KB
  c.attrs["value"] = value;
  b.N("Add", {"x", "c"}, {"y"});
  b.Output("y");
  const DynamicRecords d = Serialize(b.g, {"x"}, {"y"});
  ParsedDynamicGraph p;
  CheckResult r = ParseDynamicGraph(d.records, Refs(d), &p);
  ASSERT_TRUE(r.ok) << r.reason;
  ASSERT_EQ(p.graph.nodes.size(), 2u);
  const Attr& back = p.graph.nodes[0].attrs.at("value");
  EXPECT_EQ(back.type, EPCTX_ATTR_TENSOR);
  EXPECT_EQ(back.ints, value.ints);
  EXPECT_EQ(back.s, value.s);
  const size_t cut = d.records.find(value.s.substr(0, 64)) + 1000;  // inside the tensor's bytes
  ASSERT_LT(cut, d.records.size());
  EXPECT_FALSE(ParseDynamicGraph(std::string_view(d.records.data(), cut), Refs(d), &p).ok);
}

TEST(AotCpuDynamicRecords, EveryTruncationIsRefused) {
  Small m;
  const DynamicRecords d = Serialize(m.b.g, {"x"}, {"y"}, m.packed);
  const std::vector<WeightRef> refs = Refs(d);
  ParsedDynamicGraph p;
  ASSERT_TRUE(ParseDynamicGraph(d.records, refs, &p).ok);
  for (size_t n = 0; n < d.records.size(); ++n) {
    CheckResult r = ParseDynamicGraph(std::string_view(d.records.data(), n), refs, &p);
    EXPECT_FALSE(r.ok) << "prefix of " << n << " bytes accepted";
    EXPECT_FALSE(r.reason.empty()) << n;
  }
  ExpectRefused(d.records + "x", refs, "1 trailing bytes");
}

TEST(AotCpuDynamicRecords, HostileHeadersCountsAndTensors) {
  Small m;
  const DynamicRecords d = Serialize(m.b.g, {"x"}, {"y"}, m.packed);
  const std::vector<WeightRef> refs = Refs(d);
  std::string bad = d.records;
  bad[3] = 'X';
  ExpectRefused(bad, refs, "magic AOTDYN1");
  ExpectRefused(std::string("AOTPRG1\0", 8) + d.records.substr(8), refs, "magic");
  bad = d.records;
  const uint32_t v4 = 4;
  std::memcpy(&bad[8], &v4, 4);
  ExpectRefused(bad, refs, "records version 4 is not supported");

  // Offsets: magic 8, version 4, graph name (u32 + bytes), value count, then value 0 ("x"): name, dtype, flags, dims.
  const size_t count_at = 12 + 4 + m.b.g.name.size();
  auto patched = [&](size_t at, uint32_t v) {
    std::string s = d.records;
    std::memcpy(&s[at], &v, 4);
    return s;
  };
  ExpectRefused(patched(count_at, 0xFFFFFFFFu), refs, "value count 4294967295 exceeds the records or the limit");
  const size_t dtype_at = count_at + 4 + 4 + 1;
  ExpectRefused(patched(dtype_at, 1000), refs, "value 0 ('x') has unknown dtype 1000");
  ExpectRefused(patched(dtype_at + 4, 64 | 4), refs, "has unknown flags");
  ExpectRefused(patched(dtype_at + 8, 13), refs, "rank is above 12");
  ExpectRefused(patched(dtype_at + 8, 1000000), refs, "rank is above 12");

  // Tensors: too few, a length mismatch, no data.
  ExpectRefused(d.records, {}, "value 1 ('c') names tensor 0 of 0");
  std::vector<WeightRef> shorter = refs;
  shorter[0].length -= 4;
  ExpectRefused(d.records, shorter, "value 1 ('c') needs 16 bytes, tensor 0 has 12");
  shorter = refs;
  shorter[1].length += 1;
  ExpectRefused(d.records, shorter, "packed weight 0 ('c:packed') needs 64 bytes, tensor 1 has 65");
  shorter = refs;
  shorter[0].data = nullptr;
  ExpectRefused(d.records, shorter, "tensor 0 has no data");
}

// Writes `g` as it is (the writer does not check the graph's structure; the parser must).
std::string RawRecords(const Graph& g, std::vector<std::string> in = {"x"}, std::vector<std::string> out = {"y"}) {
  return Serialize(g, in, out).records;
}

TEST(AotCpuDynamicRecords, HostileGraphStructure) {
  auto refs_of = [](const Graph& g) { return Refs(Serialize(g, {"x"}, {"y"})); };
  {
    Small m;
    m.b.g.nodes[0].inputs[1] = 99;  // out of range
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "node 0 ('Add_0', Add) input 1 names value 99 of 4");
  }
  {
    Small m;
    m.b.g.nodes[1].outputs[0] = 7;
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "node 1 ('Relu_1', Relu) output 0 names value 7 of 4");
  }
  {
    Small m;  // a cycle: Add reads y, which Relu (after it) produces from Add's output
    m.b.g.nodes[0].inputs[0] = m.b.g.Find("y");
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "node 0 ('Add_0', Add) input 0 reads value 'y' before any node");
  }
  {
    Small m;  // a node reading its own output
    m.b.g.nodes[1].inputs[0] = m.b.g.Find("y");
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "input 0 reads value 'y' before any node produces it");
  }
  {
    Small m;  // two producers of s
    m.b.g.nodes[1].outputs[0] = m.b.g.Find("s");
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "output 0 writes value 's', which node 0 produces too");
  }
  {
    Small m;  // a node writing a constant
    m.b.g.nodes[0].outputs[0] = m.b.g.Find("c");
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "writes value 'c', a graph input or constant");
  }
  {
    Small m;  // a value name twice
    m.b.g.values[2].name = "x";
    ExpectRefused(RawRecords(m.b.g, {"x"}, {"y"}), refs_of(m.b.g), "value 2 ('x'): another value has that name");
  }
  {
    Small m;  // graph input list disagrees with the flags
    m.b.g.inputs.clear();
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "1 values are flagged as graph inputs, the list has 0");
    m.b.g.inputs = {1};
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "graph input 0 names value 'c', which is not flagged as one");
    m.b.g.inputs = {0, 0};
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "graph input 1 names value 'x' twice");
  }
  {
    Small m;  // a graph output nothing produces
    m.b.g.nodes.pop_back();
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "graph output 0 names value 'y', which nothing produces");
  }
  {
    Small m;  // fused names that are not graph inputs/outputs
    ExpectRefused(RawRecords(m.b.g, {"s"}, {"y"}), refs_of(m.b.g), "fused input 's' is not a graph input");
    ExpectRefused(RawRecords(m.b.g, {"x"}, {"nope"}), refs_of(m.b.g), "fused output 'nope' is not a graph output");
  }
  {
    Small m;  // an initializer without data, a static dim below 0, an opset out of range
    m.b.g.v(m.b.g.Find("s")).is_initializer = true;
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "value 2 ('s') is an initializer without data");
  }
  {
    Small m;
    m.b.g.v(m.b.g.Find("c")).dims = {-1};  // a constant with a free dim (has_shape stays true)
    DynamicRecords d;
    EXPECT_FALSE(SerializeDynamicGraph(m.b.g, {"x"}, {"y"}, {}, &d).ok);
    m.b.g.v(m.b.g.Find("s")).has_shape = true;  // s [-1, 4] claimed static
    m.b.g.v(m.b.g.Find("c")).dims = {4};
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "value 2 ('s') has dimension -1");
  }
  {
    Small m;
    m.b.g.nodes[0].opset = -3;
    ExpectRefused(RawRecords(m.b.g), refs_of(m.b.g), "node 0 ('Add_0', Add) has opset -3");
  }
  {
    Small m;  // a subgraph attribute (refused by the writer and by the parser), an attribute type out of range
    m.b.g.nodes[1].attrs["note"].type = EPCTX_ATTR_GRAPH;
    DynamicRecords d;
    CheckResult r = SerializeDynamicGraph(m.b.g, {"x"}, {"y"}, {}, &d);
    EXPECT_NE(r.reason.find("attribute 'note' is a subgraph"), std::string::npos) << r.reason;
    // Forge them: write type STRING (5), then patch it to GRAPH (7) or 42 in the records.
    m.b.g.nodes[1].attrs["note"].type = EPCTX_ATTR_STRING;
    std::string s = RawRecords(m.b.g);
    const size_t at = s.find(std::string("\x04\0\0\0note", 8));
    ASSERT_NE(at, std::string::npos);
    ASSERT_EQ(s[at + 8], 5);
    s[at + 8] = 7;
    ExpectRefused(s, refs_of(m.b.g), "attribute 0 ('note') is a subgraph");
    s[at + 8] = 42;
    ExpectRefused(s, refs_of(m.b.g), "attribute 0 ('note') has unknown type 42");
  }
  {
    Small m;  // a node with subgraphs is not written
    m.b.g.nodes[1].has_subgraphs = true;
    DynamicRecords d;
    EXPECT_FALSE(SerializeDynamicGraph(m.b.g, {"x"}, {"y"}, {}, &d).ok);
  }
}

TEST(AotCpuDynamicRecords, HostilePackedWeights) {
  Small m;
  const DynamicRecords d = Serialize(m.b.g, {"x"}, {"y"}, m.packed);
  const std::vector<WeightRef> refs = Refs(d);
  // The packed table comes last but for version 2's shape info and version 3's derived constants (three empty counts,
  // 12 bytes): name "c:packed", dtype, tag, dims (2 x i64), strides (2 x i64), tensor index.
  const size_t name_at = d.records.rfind("c:packed");
  ASSERT_NE(name_at, std::string::npos);
  const size_t dtype_at = name_at + 8, tag_at = dtype_at + 4, dims_at = tag_at + 4, strides_at = dims_at + 4 + 16,
               tensor_at = strides_at + 4 + 16;
  ASSERT_EQ(tensor_at + 4 + 12, d.records.size());
  auto patched = [&](size_t at, const void* v, size_t n) {
    std::string s = d.records;
    std::memcpy(&s[at], v, n);
    return s;
  };
  const uint32_t bf16 = 16, huge_tag = 0x7FFFFFFF, thirteen = 13, two = 2;
  const int64_t zero = 0, neg = -4, big = int64_t{1} << 41;
  ExpectRefused(patched(dtype_at, &bf16, 4), refs, "packed weight 0 ('c:packed') has unsupported dtype 16");
  ExpectRefused(patched(tag_at, &huge_tag, 4), refs, "has both a format tag and strides");
  ExpectRefused(patched(dims_at + 4, &zero, 8), refs, "has dimension 0");
  ExpectRefused(patched(strides_at + 4, &neg, 8), refs, "has stride -4");
  ExpectRefused(patched(strides_at + 4, &big, 8), refs, "has stride 2199023255552");
  ExpectRefused(patched(dims_at, &thirteen, 4), refs, "rank is beyond the limits");
  ExpectRefused(patched(tensor_at, &two, 4), refs, "packed weight 0 ('c:packed') names tensor 2 of 2");
  std::string wrong_tensor = patched(tensor_at, &zero, 4);  // the constant's 16 bytes for a 64-byte layout
  ExpectRefused(wrong_tensor, refs, "packed weight 0 ('c:packed') needs 64 bytes, tensor 0 has 16");
  // A blocked tag with no strides that the dims cannot take (a 4-D tag for 2-D dims) fails in the layout, cleanly.
  std::string blocked = d.records.substr(0, tag_at);
  const uint32_t oihw8i8o = static_cast<uint32_t>(dnnl::memory::format_tag::OIhw8i8o);
  blocked.append(reinterpret_cast<const char*>(&oihw8i8o), 4);
  blocked.append(d.records, dims_at, 4 + 16);
  const uint32_t no_strides = 0;
  blocked.append(reinterpret_cast<const char*>(&no_strides), 4);
  blocked.append(d.records, tensor_at, 4 + 12);
  ExpectRefused(blocked, refs, "packed weight 0 ('c:packed') has a bad layout");
  // A count of weights beyond the bytes left.
  const size_t count_at = name_at - 4 - 4;
  const uint32_t many = 1000;
  ExpectRefused(patched(count_at, &many, 4), refs, "packed weight count 1000 exceeds the records or the limit");
  // Duplicate weight names.
  Small m2;
  m2.packed.push_back(m2.packed[0]);
  const DynamicRecords d2 = Serialize(m2.b.g, {"x"}, {"y"}, m2.packed);
  ExpectRefused(d2.records, Refs(d2), "packed weight 1 ('c:packed') is given twice");
}

// Version 2's shape info: profiles (built at load) and ranges round-trip; version 1 records (none) still parse; forged
// counts, dims and ranges are refused.
TEST(AotCpuDynamicRecords, ShapeProfilesAndRanges) {
  Small m;
  DynamicShapeInfo shapes;
  shapes.profiles = {{{2, 4}}, {{7, 4}}};
  shapes.ranges["N"] = {1, 64};
  DynamicRecords d;
  ASSERT_TRUE(SerializeDynamicGraph(m.b.g, {"x"}, {"y"}, m.packed, &d, "", shapes).ok);
  const std::vector<WeightRef> refs = Refs(d);
  ParsedDynamicGraph p;
  CheckResult r = ParseDynamicGraph(d.records, refs, &p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(p.shapes.profiles, shapes.profiles);
  EXPECT_EQ(p.shapes.ranges, shapes.ranges);
  // The shape info: u32 2, two profiles of one input (u32 rank 2 + 2 x i64 each), u32 1, "N", lo, hi; then version 3's
  // derived constant count (0).
  const size_t info_at = d.records.size() - 4 - (4 + 2 * (4 + 16) + 4 + (4 + 1) + 16);
  uint32_t count = 0;
  std::memcpy(&count, &d.records[info_at], 4);
  ASSERT_EQ(count, 2u);
  // Version 1: the same records without the tail.
  std::string v1 = d.records.substr(0, info_at);
  const uint32_t one = 1;
  std::memcpy(&v1[8], &one, 4);
  ASSERT_TRUE(ParseDynamicGraph(v1, refs, &p).ok);
  EXPECT_TRUE(p.shapes.profiles.empty() && p.shapes.ranges.empty());
  auto patched = [&](size_t at, const void* v, size_t n) {
    std::string s = d.records;
    std::memcpy(&s[at], v, n);
    return s;
  };
  const uint32_t many = 300;
  ExpectRefused(patched(info_at, &many, 4), refs, "shape profile count 300 exceeds 256");
  const int64_t neg = -5, lo_big = 100;
  ExpectRefused(patched(info_at + 4 + 4, &neg, 8), refs, "shape profile 0 input 'x' has dim -5");
  const size_t range_at = info_at + 4 + 2 * 20 + 4 + 5;
  ExpectRefused(patched(range_at, &lo_big, 8), refs, "shape range 'N' is 100..64");
  ExpectRefused(std::string_view(d.records).substr(0, d.records.size() - 7), refs, "shape range 0 is truncated");
  ExpectRefused(std::string_view(d.records).substr(0, d.records.size() - 3), refs, "derived constant count is truncated");
  // Version 2: without the derived constants.
  std::string v2 = d.records.substr(0, d.records.size() - 4);
  const uint32_t two = 2;
  std::memcpy(&v2[8], &two, 4);
  r = ParseDynamicGraph(v2, refs, &p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(p.shapes.profiles, shapes.profiles);
  EXPECT_TRUE(p.derived.empty());
  // A profile must give every input's dims.
  shapes.profiles = {{}};
  EXPECT_FALSE(SerializeDynamicGraph(m.b.g, {"x"}, {"y"}, m.packed, &d, "", shapes).ok);
}

// Version 3's derived constants: a float constant read only as a MatMul's weight, stored only as the packed weight a
// shape made from it, reorders back exactly; the loaded graph runs bit-identical to the original without making its
// bytes; a derived constant some step reads raw has its bytes made (from the packed weight) and gives the right
// answer; forged records are refused with their reason.
struct MatMulGraph {
  GraphBuilder b;
  MatMulGraph() {
    b.SymInput("x", {-1, 64}, {"N", ""});
    b.F32("W", {64, 48}, UniformFloats(64 * 48, 5));
    b.F32("c", {48}, UniformFloats(48, 6));
    b.FreeOut("m", {-1, 48});
    b.FreeOut("y", {-1, 48});
    b.N("MatMul", {"x", "W"}, {"m"});
    b.N("Add", {"m", "c"}, {"y"});
    b.Output("y");
  }
};

std::vector<float> RunN(DynamicGraph* d, int64_t n) {
  const std::vector<float> x = UniformFloats(n * 64, 11 + static_cast<uint32_t>(n));
  std::shared_ptr<Executor> exec;
  bool invalid = false;
  CheckResult r = d->Get({{n, 64}}, &exec, &invalid);
  EXPECT_TRUE(r.ok) << r.reason;
  if (!r.ok) return {};
  std::vector<float> y(static_cast<size_t>(n * 48), -1.f);
  r = exec->Run({x.data()}, {y.data()});
  EXPECT_TRUE(r.ok) << r.reason;
  return y;
}

struct Loaded {
  DynamicRecords d;
  ParsedDynamicGraph p;
  std::unique_ptr<DynamicGraph> dyn;
};

// Serializes `g` with its packed weights and `derived`, parses it back and creates the dynamic graph from it.
void Load(const Graph& g, const std::vector<DynamicGraph::Packed>& made, const DerivedConstants& derived,
          Loaded* out) {
  std::vector<StoredWeight> packed;
  for (const auto& w : made) packed.push_back({w.name, w.layout, w.data, w.size});
  CheckResult r = SerializeDynamicGraph(g, {"x"}, {"y"}, packed, &out->d, "", {}, derived);
  ASSERT_TRUE(r.ok) << r.reason;
  r = ParseDynamicGraph(out->d.records, Refs(out->d), &out->p);
  ASSERT_TRUE(r.ok) << r.reason;
  std::map<std::string, CompileOptions::EarlierWeight> weights;
  for (const auto& [name, w] : out->p.packed) weights[name] = {w.layout, nullptr, w.data, w.size, nullptr};
  DynamicGraph::Options o;
  o.threads = 1;
  static const char kOwner = 0;
  r = DynamicGraph::Create(out->p.graph, {"x"}, {"y"}, o, std::shared_ptr<const void>(&kOwner, [](const void*) {}),
                           &out->dyn, weights, out->p.derived);
  ASSERT_TRUE(r.ok) << r.reason;
}

TEST(AotCpuDynamicRecords, DerivedConstantsAreStoredOnceAndRunTheSame) {
  MatMulGraph m;
  auto orig = Create(m.b.g, {"x"}, {"y"});
  ASSERT_TRUE(orig);
  const std::vector<float> y3 = RunN(orig.get(), 3);
  const std::vector<DynamicGraph::Packed> made = orig->PackedWeights();
  std::vector<StoredWeight> packed;
  for (const auto& w : made) packed.push_back({w.name, w.layout, w.data, w.size});
  const DerivedConstants derived = DerivableConstants(m.b.g, packed);
  std::string names;
  for (const auto& w : made) names += w.name + " (" + std::to_string(w.layout.data.format_desc.blocking.inner_nblks) + ") ";
  ASSERT_EQ(derived.size(), 1u) << names;  // W (read by the MatMul only); c is read by the Add as it is
  ASSERT_EQ(derived.begin()->first, "W");
  // Packed as a MatMul weight, or (AVX2) as a 1x1 convolution's [N, K, 1, 1]: its plain layout has the dims swapped.
  EXPECT_TRUE(derived.begin()->second.weight == "W:packed" || derived.begin()->second.weight == "W:packed1x1")
      << derived.begin()->second.weight;
  // A packed weight that does not reorder back to the constant's bytes is not a source.
  for (const auto& w : made)
    if (w.name == derived.begin()->second.weight) {
      std::string forged(static_cast<const char*>(w.data), w.size);
      forged[5] ^= 1;
      EXPECT_TRUE(DerivableConstants(m.b.g, {{w.name, w.layout, forged.data(), forged.size()}}).empty());
    }

  Loaded l;
  Load(m.b.g, made, derived, &l);
  ASSERT_TRUE(l.dyn);
  // Tensors: c raw, then the packed weights; W has none of its own.
  EXPECT_EQ(l.d.tensors.size(), 1u + made.size());
  EXPECT_EQ(l.d.tensors[0].name, "const:c");
  EXPECT_EQ(l.p.derived, derived);
  EXPECT_TRUE(IsDerivedPlaceholder(l.p.graph.v(l.p.graph.Find("W")).data));
  for (int64_t n : {3, 5, 1}) {
    const std::vector<float> a = n == 3 ? y3 : RunN(orig.get(), n);
    const std::vector<float> b = RunN(l.dyn.get(), n);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "n " << n << " element " << i;
  }
  // Every shape took the stored weight: W's bytes were never made.
  EXPECT_EQ(l.dyn->stats().derived_pending, 1u);
  EXPECT_EQ(l.dyn->stats().derived_bytes_made, 0u);
}

TEST(AotCpuDynamicRecords, ADerivedConstantReadRawHasItsBytesMade) {
  // c is read by the Add as it is: given as derived (from a plain copy of it), the first shape finds a step reading
  // the placeholder, makes c's bytes from the weight and lowers again.
  MatMulGraph m;
  auto orig = Create(m.b.g, {"x"}, {"y"});
  ASSERT_TRUE(orig);
  const std::vector<float> y2 = RunN(orig.get(), 2);
  std::vector<DynamicGraph::Packed> made = orig->PackedWeights();
  const Value& c = m.b.g.v(m.b.g.Find("c"));
  made.push_back({"c:plain", dnnl::memory::desc({48}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a),
                  c.data, c.bytes()});
  Loaded l;
  Load(m.b.g, made, {{"c", {"c:plain", {}}}}, &l);
  ASSERT_TRUE(l.dyn);
  EXPECT_EQ(l.dyn->stats().derived_pending, 1u);
  const std::vector<float> b = RunN(l.dyn.get(), 2);
  ASSERT_EQ(b.size(), y2.size());
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(y2[i], b[i]) << i;
  EXPECT_EQ(l.dyn->stats().derived_pending, 0u);
  EXPECT_EQ(l.dyn->stats().derived_bytes_made, 48u * 4);
  // Create refuses a placeholder with no weight named for it.
  std::unique_ptr<DynamicGraph> d;
  DynamicGraph::Options o;
  CheckResult r = DynamicGraph::Create(l.p.graph, {"x"}, {"y"}, o, nullptr, &d);
  EXPECT_NE(r.reason.find("constant 'c' has no bytes and no packed weight"), std::string::npos) << r.reason;
}

// A convolution with a BatchNormalization every shape folds into it: BakeFolds stores the folded weights and bias as
// constants of the convolution, without the BatchNormalization and its constants; the folded weights derive from
// their packed weight; the loaded graph runs bit-identical to the original at the compiled and at other shapes
// without making any constant's bytes.
TEST(AotCpuDynamicRecords, BakedFoldsRunTheSameAndStoreWeightsOnce) {
  GraphBuilder b;
  b.SymInput("x", {-1, 8, -1, -1}, {"N", "", "H", "W"});
  b.F32("w", {16, 8, 3, 3}, UniformFloats(16 * 8 * 9, 21));
  b.F32("gamma", {16}, UniformFloats(16, 22));
  b.F32("beta", {16}, UniformFloats(16, 23));
  b.F32("mean", {16}, UniformFloats(16, 24));
  std::vector<float> var = UniformFloats(16, 25);
  for (float& v : var) v = v * v + 0.5f;
  b.F32("var", {16}, var);
  b.FreeOut("c", {-1, 16, -1, -1});
  b.FreeOut("n", {-1, 16, -1, -1});
  b.FreeOut("y", {-1, 16, -1, -1});
  Node& conv = b.N("Conv", {"x", "w"}, {"c"});
  conv.attrs["pads"] = IntsA({1, 1, 1, 1});
  const std::string conv_name = conv.name;  // (the reference does not outlive the next node)
  b.N("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"n"});
  b.N("Relu", {"n"}, {"y"});
  b.Output("y");
  auto run = [](DynamicGraph* d, int64_t n, int64_t h, int64_t w) {
    const std::vector<float> x = UniformFloats(n * 8 * h * w, 30 + static_cast<uint32_t>(h));
    std::shared_ptr<Executor> exec;
    bool invalid = false;
    CheckResult r = d->Get({{n, 8, h, w}}, &exec, &invalid);
    EXPECT_TRUE(r.ok) << r.reason;
    if (!r.ok) return std::vector<float>();
    std::vector<float> y(static_cast<size_t>(n * 16 * h * w), -1.f);
    r = exec->Run({x.data()}, {y.data()});
    EXPECT_TRUE(r.ok) << r.reason;
    return y;
  };
  auto orig = Create(b.g, {"x"}, {"y"});
  ASSERT_TRUE(orig);
  const std::vector<float> y1 = run(orig.get(), 1, 12, 10);
  std::vector<StoredWeight> packed;
  for (const auto& w : orig->PackedWeights()) packed.push_back({w.name, w.layout, w.data, w.size});
  Graph baked;
  std::vector<std::shared_ptr<std::string>> owned;
  size_t folds = 0;
  ASSERT_TRUE(BakeFolds(b.g, *orig->Memo(), &packed, &baked, &owned, &folds).ok);
  ASSERT_EQ(folds, 1u);
  for (const Node& n : baked.nodes) EXPECT_NE(n.op, "BatchNormalization");
  EXPECT_LT(baked.Find("gamma"), 0);
  EXPECT_LT(baked.Find("w"), 0);
  ASSERT_GE(baked.Find("w:folded"), 0);
  // Nothing baked for a convolution the caller skips.
  Graph same;
  std::vector<StoredWeight> packed2;
  for (const auto& w : orig->PackedWeights()) packed2.push_back({w.name, w.layout, w.data, w.size});
  ASSERT_TRUE(BakeFolds(b.g, *orig->Memo(), &packed2, &same, &owned, &folds, {conv_name}).ok);
  EXPECT_EQ(folds, 0u);
  EXPECT_EQ(same.nodes.size(), b.g.nodes.size());

  const DerivedConstants derived = DerivableConstants(baked, packed);
  ASSERT_EQ(derived.count("w:folded"), 1u);
  DynamicRecords d;
  CheckResult r = SerializeDynamicGraph(baked, {"x"}, {"y"}, packed, &d, "", {}, derived);
  ASSERT_TRUE(r.ok) << r.reason;
  ParsedDynamicGraph p;
  r = ParseDynamicGraph(d.records, Refs(d), &p);
  ASSERT_TRUE(r.ok) << r.reason;
  std::map<std::string, CompileOptions::EarlierWeight> weights;
  for (const auto& [name, w] : p.packed) weights[name] = {w.layout, nullptr, w.data, w.size, nullptr};
  DynamicGraph::Options o;
  o.threads = 1;
  std::unique_ptr<DynamicGraph> loaded;
  r = DynamicGraph::Create(p.graph, {"x"}, {"y"}, o, nullptr, &loaded, weights, p.derived);
  ASSERT_TRUE(r.ok) << r.reason;
  for (const Dims& shape : {Dims{1, 12, 10}, Dims{2, 7, 9}}) {
    const std::vector<float> a = shape[0] == 1 ? y1 : run(orig.get(), shape[0], shape[1], shape[2]);
    const std::vector<float> c = run(loaded.get(), shape[0], shape[1], shape[2]);
    ASSERT_EQ(a.size(), c.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], c[i]) << DimsText(shape) << " element " << i;
  }
  EXPECT_EQ(loaded->stats().derived_bytes_made, 0u) << loaded->stats().derived_why;
}

TEST(AotCpuDynamicRecords, HostileDerivedConstants) {
  Small m;
  // c [4] stored only as "c:plain" (its bytes, layout a).
  const Value& c = m.b.g.v(m.b.g.Find("c"));
  std::vector<StoredWeight> packed = m.packed;
  packed.push_back({"c:plain", dnnl::memory::desc({4}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a),
                    c.data, c.bytes()});
  DynamicRecords d;
  CheckResult r = SerializeDynamicGraph(m.b.g, {"x"}, {"y"}, packed, &d, "", {}, {{"c", {"c:plain", {}}}});
  ASSERT_TRUE(r.ok) << r.reason;
  const std::vector<WeightRef> refs = Refs(d);
  ASSERT_EQ(refs.size(), 2u);  // the two packed weights, no constant
  ParsedDynamicGraph p;
  r = ParseDynamicGraph(d.records, refs, &p);
  ASSERT_TRUE(r.ok) << r.reason;
  ASSERT_EQ(p.derived.size(), 1u);
  // Every prefix is refused.
  for (size_t n = 0; n < d.records.size(); ++n) {
    CheckResult t = ParseDynamicGraph(std::string_view(d.records.data(), n), refs, &p);
    EXPECT_FALSE(t.ok) << "prefix of " << n << " bytes accepted";
    EXPECT_FALSE(t.reason.empty()) << n;
  }
  // The tail: u32 count 1, u32 value index 1 (c), str "c:plain", i64s strides (none: row-major).
  const size_t at = d.records.size() - (4 + 4 + 4 + 7 + 4);
  auto patched = [&](size_t off, uint32_t v) {
    std::string s = d.records;
    std::memcpy(&s[at + off], &v, 4);
    return s;
  };
  ExpectRefused(patched(0, 0), refs, "value 1 ('c') is a constant without a tensor and no packed weight it derives from");
  ExpectRefused(patched(0, 2), refs, "derived constant count 2 exceeds the 1 constants without a tensor");
  ExpectRefused(patched(4, 9), refs, "derived constant 0 names value 9 of 4");
  ExpectRefused(patched(4, 0), refs, "derived constant 0 ('x') is not a constant without a tensor");
  std::string other = d.records;
  other[other.size() - 5] = 'X';  // "c:plaiX"
  ExpectRefused(other, refs, "derived constant 0 ('c') names packed weight 'c:plaiX', which is not stored");
  std::string wrong = d.records.substr(0, at + 8);  // then "c:packed": stored, but 16 floats
  const std::string name = "c:packed";
  const uint32_t len = static_cast<uint32_t>(name.size());
  wrong.append(reinterpret_cast<const char*>(&len), 4);
  wrong += name;
  wrong.append(4, '\0');
  ExpectRefused(wrong, refs, "derived constant 0 ('c'): packed weight 'c:packed' is not a float weight of 4 elements");
  ExpectRefused(d.records + "z", refs, "1 trailing bytes");
  std::string strided = d.records.substr(0, d.records.size() - 4);
  const uint32_t one = 1;
  const int64_t two = 2;
  strided.append(reinterpret_cast<const char*>(&one), 4);
  strided.append(reinterpret_cast<const char*>(&two), 8);
  ExpectRefused(strided, refs, "derived constant 0 ('c'): its strides do not lay out packed weight 'c:plain' densely");
  const uint32_t thirteen = 13;
  std::memcpy(&strided[strided.size() - 12], &thirteen, 4);
  ExpectRefused(strided, refs, "derived constant 0 is truncated, or a name or rank is beyond the limits");
  // The serializer refuses a derived constant it cannot describe.
  EXPECT_FALSE(SerializeDynamicGraph(m.b.g, {"x"}, {"y"}, packed, &d, "", {}, {{"c", {"nope", {}}}}).ok);
  EXPECT_FALSE(SerializeDynamicGraph(m.b.g, {"x"}, {"y"}, packed, &d, "", {}, {{"c", {"c:packed", {}}}}).ok);
  EXPECT_FALSE(SerializeDynamicGraph(m.b.g, {"x"}, {"y"}, packed, &d, "", {}, {{"s", {"c:plain", {}}}}).ok);
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
