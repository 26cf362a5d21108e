// Test-only helpers of the AotCpu unit tests (ops_*_test.cc): a GraphBuilder that makes the compiler's IR by hand
// (inputs, float/int64 constants, nodes with declared output shapes) and attribute makers. Not part of the plugin.
#ifndef EPCTX_PROVIDERS_AOTCPU_IR_TEST_GRAPH_H_
#define EPCTX_PROVIDERS_AOTCPU_IR_TEST_GRAPH_H_

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "providers/aotcpu/plan/compiler.h"
#include "providers/aotcpu/plugin/options.h"

namespace epctx {
namespace aotcpu {
namespace test_graph {

using Dims = std::vector<int64_t>;

inline int64_t Numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// `n` floats drawn uniformly from [lo, hi) by a generator seeded with `seed`: the same values on every run.
inline std::vector<float> UniformFloats(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// A session config as a map, for ReadOptions: the getter returns NULL for absent keys.
inline ConfigGetter ConfigFromMap(const std::map<std::string, std::string>& entries) {
  auto owned = std::make_shared<std::map<std::string, std::string>>(entries);
  return [owned](const char* key) -> const char* {
    auto it = owned->find(key);
    return it == owned->end() ? nullptr : it->second.c_str();
  };
}

class GraphBuilder {
 public:
  Graph g;

  int Input(const std::string& name, Dims dims) {
    const int i = Val(name, kF32, std::move(dims));
    g.v(i).is_graph_input = true;
    g.inputs.push_back(i);
    return i;
  }
  int F32(const std::string& name, Dims dims, std::vector<float> data) {
    const int i = Val(name, kF32, std::move(dims));
    store_.emplace_back(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
    g.v(i).data = store_.back().data();
    g.v(i).is_initializer = true;
    return i;
  }
  int I64(const std::string& name, Dims dims, std::vector<int64_t> data) {
    const int i = Val(name, kI64, std::move(dims));
    store_.emplace_back(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(int64_t));
    g.v(i).data = store_.back().data();
    g.v(i).is_initializer = true;
    return i;
  }
  int I64(const std::string& name, std::vector<int64_t> data) {  // a 1-D tensor
    const Dims dims = {static_cast<int64_t>(data.size())};
    return I64(name, dims, std::move(data));
  }
  // Declares a node output's type and shape (what shape inference would have given).
  int Out(const std::string& name, Dims dims) { return Val(name, kF32, std::move(dims)); }
  Node& N(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs, int64_t opset = 17) {
    Node n;
    n.name = op + "_" + std::to_string(g.nodes.size());
    n.op = op;
    n.opset = opset;
    const int index = static_cast<int>(g.nodes.size());
    for (const std::string& s : ins) {
      const int v = s.empty() ? -1 : g.Find(s);
      EXPECT_TRUE(s.empty() || v >= 0) << s;
      n.inputs.push_back(v);
      if (v >= 0) g.v(v).consumers.push_back(index);
    }
    for (const std::string& s : outs) {
      const int v = g.Find(s);
      EXPECT_GE(v, 0) << s;
      n.outputs.push_back(v);
      g.v(v).producer = index;
    }
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
  // A graph input with free dims (-1) named by `symbols` ("" = unnamed), as the runtime gives it.
  int SymInput(const std::string& name, Dims dims, std::vector<std::string> symbols, uint32_t dtype = kF32) {
    const int i = Input(name, dims);
    Value& v = g.v(i);
    v.dtype = dtype;
    v.dim_symbols = std::move(symbols);
    for (int64_t d : dims)
      if (d < 0) v.has_shape = false;
    return i;
  }
  // A node output as the runtime gives it with free dims: rank known, free dims -1.
  int FreeOut(const std::string& name, Dims dims) {
    const int i = Out(name, dims);
    g.v(i).has_shape = false;
    return i;
  }
  void Output(const std::string& name) {
    const int v = g.Find(name);
    g.v(v).is_graph_output = true;
    g.outputs.push_back(v);
  }

 private:
  int Val(const std::string& name, uint32_t dtype, Dims dims) {
    Value v;
    v.name = name;
    v.dtype = dtype;
    v.dims = std::move(dims);
    v.has_shape = true;
    g.values.push_back(v);
    const int i = static_cast<int>(g.values.size() - 1);
    g.by_name[name] = i;
    return i;
  }
  std::deque<std::string> store_;
};

inline Attr FloatA(float f) {
  Attr a;
  a.type = EPCTX_ATTR_FLOAT;
  a.f = f;
  return a;
}
inline Attr IntA(int64_t i) {
  Attr a;
  a.type = EPCTX_ATTR_INT;
  a.i = i;
  return a;
}
inline Attr IntsA(Dims v) {
  Attr a;
  a.type = EPCTX_ATTR_INTS;
  a.ints = std::move(v);
  return a;
}

inline Attr StrA(const std::string& s) {
  Attr a;
  a.type = EPCTX_ATTR_STRING;
  a.s = s;
  return a;
}

}  // namespace test_graph
}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_IR_TEST_GRAPH_H_
