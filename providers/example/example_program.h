// The example EP's "backend": the compiled form of one fused graph (a Program) and its interpreter. Nothing here
// knows the plugin ABI; example_ep.cc translates between the two. A new EP replaces this file with its compiler.
//
// A Program numbers every value of the fused graph (a slot): slots [0, num_inputs) are the fused node's inputs in
// order, constants are copied in at compile time, every node is one Step, and `outputs` lists the slots of the
// fused node's outputs in order. Programs are immutable after compilation, so concurrent runs may share one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace example {

using Shape = std::vector<int64_t>;

inline int64_t ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline std::string ShapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// NumPy broadcasting of two shapes; false when a pair of dimensions is neither equal nor 1. A dimension of -1
// (unknown until the run) matches anything, so a graph with symbolic dimensions is checked again at run time.
inline bool BroadcastShape(const Shape& a, const Shape& b, Shape* out) {
  const size_t rank = std::max(a.size(), b.size());
  out->assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) (*out)[i] = da;
    else if (da == 1) (*out)[i] = db;
    else if (da == -1 || db == -1) (*out)[i] = std::max(da, db);
    else return false;
  }
  return true;
}

enum class Op { kAdd, kMul, kRelu };
constexpr const char* kOpNames[] = {"Add", "Mul", "Relu"};

inline bool ParseOp(const char* op_type, Op* op) {
  for (int i = 0; i < 3; ++i)
    if (std::strcmp(op_type, kOpNames[i]) == 0) return *op = static_cast<Op>(i), true;
  return false;
}

struct Step {
  Op op;
  std::vector<size_t> inputs;  // slots
  size_t output;               // slot
  std::string node_name;       // for error messages
};

struct Constant {
  size_t slot;
  Shape shape;
  std::vector<float> data;  // a copy: the program keeps no pointer into the model
};

struct Program {
  std::vector<std::string> slot_names;  // value names
  size_t num_inputs = 0;
  std::vector<Constant> constants;
  std::vector<Step> steps;      // topological order
  std::vector<size_t> outputs;  // slots of the fused node's outputs, in order
};

// The text stored in an EPContext node's ep_cache_context (format in README.md). One record per line:
//   example-program 1 | slots N | input SLOT NAME | const SLOT RANK DIMS... VALUES... | step OP OUT IN... |
//   output SLOT NAME.  Names run to the end of the line; floats are printed with %.9g, which round-trips.
inline std::string Serialize(const Program& p) {
  std::string s = "example-program 1\nslots " + std::to_string(p.slot_names.size()) + "\n";
  for (size_t i = 0; i < p.num_inputs; ++i) s += "input " + std::to_string(i) + " " + p.slot_names[i] + "\n";
  char num[32];
  for (const Constant& c : p.constants) {
    s += "const " + std::to_string(c.slot) + " " + std::to_string(c.shape.size());
    for (int64_t d : c.shape) s += " " + std::to_string(d);
    for (float v : c.data) s += (std::snprintf(num, sizeof num, " %.9g", v), num);
    s += "\n";
  }
  for (const Step& st : p.steps) {
    s += std::string("step ") + kOpNames[static_cast<int>(st.op)] + " " + std::to_string(st.output);
    for (size_t in : st.inputs) s += " " + std::to_string(in);
    s += "\n";
  }
  for (size_t o : p.outputs) s += "output " + std::to_string(o) + " " + p.slot_names[o] + "\n";
  return s;
}

// A tensor during a run: borrowed data (an input, a constant, runtime-owned output memory) or scratch.
struct Buffer {
  Shape shape;
  const float* data = nullptr;
  std::vector<float> scratch;
};

// out = f(a, b) over the broadcast shape `shape`; a broadcast dimension has stride 0.
template <typename F>
void Binary(const Buffer& a, const Buffer& b, const Shape& shape, float* out, F f) {
  const int64_t n = ElementCount(shape);
  if (n == 0) return;
  if (a.shape == b.shape) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a.data[i], b.data[i]);
  } else if (ElementCount(b.shape) == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a.data[i], b.data[0]);
  } else if (ElementCount(a.shape) == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a.data[0], b.data[i]);
  } else {
    const size_t rank = shape.size();
    auto strides = [rank](const Shape& s) {
      Shape st(rank, 0);
      int64_t running = 1;
      for (size_t i = s.size(); i-- > 0; running *= s[i]) st[rank - s.size() + i] = s[i] == 1 ? 0 : running;
      return st;
    };
    const Shape sa = strides(a.shape), sb = strides(b.shape);
    const int64_t inner = shape[rank - 1], ia = sa[rank - 1], ib = sb[rank - 1];
    Shape index(rank, 0);
    int64_t oa = 0, ob = 0;
    for (int64_t o = 0; o < n; o += inner) {
      for (int64_t j = 0; j < inner; ++j) out[o + j] = f(a.data[oa + j * ia], b.data[ob + j * ib]);
      for (size_t k = rank - 1; k-- > 0;) {  // odometer over the outer dimensions
        oa += sa[k], ob += sb[k];
        if (++index[k] < shape[k]) break;
        oa -= sa[k] * shape[k], ob -= sb[k] * shape[k], index[k] = 0;
      }
    }
  }
}

// Runs `p` on `inputs` (the fused node's inputs in order; shapes and borrowed data). `allocate(i, shape)` returns
// the memory for output i, or nullptr when allocation failed (the caller keeps the reason). Returns "" or an error.
// relu_clip > 0 clips Relu's output from above (the EP's dynamic option); Relu maps NaN to 0 like the CPU EP.
template <typename Allocate>
std::string Run(const Program& p, std::vector<Buffer> inputs, float relu_clip, Allocate&& allocate) {
  std::vector<Buffer> slots(p.slot_names.size());
  for (size_t i = 0; i < p.num_inputs; ++i) slots[i] = std::move(inputs[i]);
  for (const Constant& c : p.constants) slots[c.slot].shape = c.shape, slots[c.slot].data = c.data.data();
  std::vector<int> output_index(p.slot_names.size(), -1);
  for (size_t i = 0; i < p.outputs.size(); ++i) output_index[p.outputs[i]] = static_cast<int>(i);

  for (const Step& st : p.steps) {
    const Buffer& a = slots[st.inputs[0]];
    const Buffer* b = st.op == Op::kRelu ? nullptr : &slots[st.inputs[1]];
    Shape shape = a.shape;
    if (b && !BroadcastShape(a.shape, b->shape, &shape))
      return "node '" + st.node_name + "': shapes " + ShapeString(a.shape) + " and " + ShapeString(b->shape) +
             " do not broadcast";
    Buffer& out = slots[st.output];
    out.shape = shape;
    float* dst = nullptr;
    if (output_index[st.output] >= 0) {
      if (!(dst = allocate(static_cast<size_t>(output_index[st.output]), shape))) return "output allocation failed";
    } else {
      out.scratch.resize(static_cast<size_t>(ElementCount(shape)));
      dst = out.scratch.data();
    }
    out.data = dst;
    if (st.op == Op::kAdd) {
      Binary(a, *b, shape, dst, [](float x, float y) { return x + y; });
    } else if (st.op == Op::kMul) {
      Binary(a, *b, shape, dst, [](float x, float y) { return x * y; });
    } else {
      const int64_t n = ElementCount(shape);
      for (int64_t i = 0; i < n; ++i) dst[i] = a.data[i] > 0 ? a.data[i] : 0.f;
      if (relu_clip > 0)
        for (int64_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], relu_clip);
    }
  }
  return "";
}

}  // namespace example
