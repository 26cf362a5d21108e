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
#include <cstdlib>
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

// Parses what Serialize wrote. Returns "" or the reason the text is not a valid program (never trusts the text:
// every slot is bounded, defined once before use, constants hold exactly their element count, every output is a
// step's result). Slots that are neither inputs nor outputs get the name "slot<N>"; steps are named after their
// output for error messages.
inline std::string Deserialize(const std::string& text, Program* out) {
  std::vector<std::string> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) return "the last line is not terminated (truncated?)";
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  auto words = [](const std::string& line, size_t max_words, std::string* rest) {  // split off up to max_words
    std::vector<std::string> w;
    size_t pos = 0;
    while (w.size() < max_words && pos < line.size()) {
      size_t sp = line.find(' ', pos);
      if (sp == std::string::npos) sp = line.size();
      w.push_back(line.substr(pos, sp - pos));
      pos = sp + 1;
    }
    if (rest) *rest = pos < line.size() ? line.substr(pos) : "";
    return w;
  };
  auto parse_u64 = [](const std::string& s, uint64_t limit, uint64_t* v) {
    if (s.empty() || s.size() > 19) return false;
    uint64_t x = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      x = x * 10 + static_cast<uint64_t>(c - '0');
    }
    if (x > limit) return false;
    *v = x;
    return true;
  };
  if (lines.empty() || lines[0] != "example-program 1") return "it does not start with \"example-program 1\"";
  uint64_t num_slots = 0;
  // Every slot is defined by one line, so a valid program has fewer slots than lines.
  if (lines.size() < 2 || lines[1].compare(0, 6, "slots ") != 0 ||
      !parse_u64(lines[1].substr(6), lines.size(), &num_slots))
    return "line 2 is not \"slots N\" with N at most the number of lines";
  Program p;
  p.slot_names.assign(num_slots, "");
  std::vector<char> defined(num_slots, 0), is_output(num_slots, 0);
  enum Section { kInputs, kConsts, kSteps, kOutputs } section = kInputs;
  for (size_t li = 2; li < lines.size(); ++li) {
    const std::string& line = lines[li];
    const std::string where = "line " + std::to_string(li + 1) + ": ";
    std::string rest;
    const std::vector<std::string> head = words(line, 1, &rest);
    const std::string kind = head.empty() ? "" : head[0];
    uint64_t slot = 0;
    if (kind == "input" || kind == "output") {
      std::string name;
      const std::vector<std::string> w = words(rest, 1, &name);
      if (w.size() != 1 || !parse_u64(w[0], num_slots ? num_slots - 1 : 0, &slot) || num_slots == 0)
        return where + "bad slot number";
      if (name.empty()) return where + "missing value name";
      if (kind == "input") {
        if (section != kInputs || slot != p.num_inputs) return where + "inputs must come first, numbered 0, 1, ...";
        ++p.num_inputs;
        defined[slot] = 1;
      } else {
        section = kOutputs;
        if (!defined[slot] || slot < p.num_inputs) return where + "output slot " + w[0] + " is no step's result";
        bool step_result = false;
        for (const Step& st : p.steps) step_result |= st.output == slot;
        if (!step_result) return where + "output slot " + w[0] + " is no step's result";
        if (is_output[slot]) return where + "slot " + w[0] + " is output twice";
        is_output[slot] = 1;
        p.outputs.push_back(static_cast<size_t>(slot));
      }
      p.slot_names[slot] = name;
    } else if (kind == "const") {
      if (section > kConsts) return where + "constants must come before steps";
      section = kConsts;
      const std::vector<std::string> w = words(rest, SIZE_MAX, nullptr);
      uint64_t rank = 0;
      if (w.size() < 2 || num_slots == 0 || !parse_u64(w[0], num_slots - 1, &slot) || !parse_u64(w[1], 64, &rank))
        return where + "bad constant header";
      if (defined[slot]) return where + "slot " + w[0] + " is defined twice";
      Constant c{static_cast<size_t>(slot), Shape(rank), {}};
      uint64_t count = 1;  // saturates above the word count: a constant cannot hold more values than words
      for (uint64_t d = 0; d < rank; ++d) {
        uint64_t dim = 0;
        if (2 + d >= w.size() || !parse_u64(w[2 + d], UINT32_MAX, &dim)) return where + "bad constant dimension";
        c.shape[d] = static_cast<int64_t>(dim);
        count = count == 0 || dim == 0 ? 0 : std::min<uint64_t>(count * std::min<uint64_t>(dim, w.size() + 1), w.size() + 1);
      }
      if (w.size() != 2 + rank + count) return where + "constant value count does not match its shape";
      for (uint64_t k = 0; k < count; ++k) {
        const std::string& v = w[2 + rank + k];
        char* end = nullptr;
        const float f = std::strtof(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size()) return where + "bad float '" + v + "'";
        c.data.push_back(f);
      }
      defined[slot] = 1;
      p.slot_names[slot] = "slot" + std::to_string(slot);
      p.constants.push_back(std::move(c));
    } else if (kind == "step") {
      if (section > kSteps) return where + "steps must come before outputs";
      section = kSteps;
      const std::vector<std::string> w = words(rest, SIZE_MAX, nullptr);
      Step st{Op::kRelu, {}, 0, ""};
      if (w.empty() || !ParseOp(w[0].c_str(), &st.op)) return where + "unknown operator";
      const size_t arity = st.op == Op::kRelu ? 1 : 2;
      if (w.size() != 2 + arity || num_slots == 0) return where + "wrong number of slots for " + w[0];
      for (size_t k = 0; k < arity; ++k) {
        uint64_t in = 0;
        if (!parse_u64(w[2 + k], num_slots - 1, &in) || !defined[in]) return where + "input slot is not defined yet";
        st.inputs.push_back(static_cast<size_t>(in));
      }
      if (!parse_u64(w[1], num_slots - 1, &slot)) return where + "bad output slot";
      if (defined[slot]) return where + "slot " + w[1] + " is defined twice";
      defined[slot] = 1;
      st.output = static_cast<size_t>(slot);
      st.node_name = "step " + std::to_string(p.steps.size()) + " (" + w[0] + ")";
      p.slot_names[slot] = "slot" + std::to_string(slot);
      p.steps.push_back(std::move(st));
    } else {
      return where + "unknown record '" + kind + "'";
    }
  }
  for (uint64_t s = 0; s < num_slots; ++s)
    if (!defined[s]) return "slot " + std::to_string(s) + " is never defined";
  if (p.outputs.empty()) return "the program has no outputs";
  for (Step& st : p.steps)  // name steps that produce outputs after the value, as in the source model
    if (is_output[st.output]) st.node_name = "producer of '" + p.slot_names[st.output] + "'";
  *out = std::move(p);
  return "";
}

// A context binary (embed_mode=0): every graph one Compile call made, by partition name (format in README.md):
//   example-context 1 | graphs N | then N times: graph NAME, the graph's program text (Serialize), end.
inline std::string SerializeContext(const std::vector<std::pair<std::string, std::string>>& graphs) {
  std::string s = "example-context 1\ngraphs " + std::to_string(graphs.size()) + "\n";
  for (const auto& g : graphs) s += "graph " + g.first + "\n" + g.second + "end\n";
  return s;
}

enum class ContextError { kNone, kBadHeader, kTruncated, kCorrupted };

// Parses a context binary into (partition name, program text) pairs, each program checked with Deserialize.
// On failure returns the kind and sets *reason.
inline ContextError ParseContext(const std::string& bytes, std::vector<std::pair<std::string, std::string>>* graphs,
                                 std::string* reason) {
  static const std::string kHeader = "example-context 1\n";
  if (bytes.compare(0, kHeader.size(), kHeader) != 0) {
    if (bytes.size() < kHeader.size() && kHeader.compare(0, bytes.size(), bytes) == 0) {
      *reason = "it ends inside its header";
      return ContextError::kTruncated;
    }
    *reason = "bad header: it does not start with \"example-context 1\"";
    return ContextError::kBadHeader;
  }
  size_t pos = kHeader.size();
  // Next line without its '\n'; false at the end of the data or on an unterminated line (truncation).
  auto next_line = [&](std::string* line) {
    const size_t nl = bytes.find('\n', pos);
    if (nl == std::string::npos) return false;
    *line = bytes.substr(pos, nl - pos);
    pos = nl + 1;
    return true;
  };
  std::string line;
  if (!next_line(&line)) {
    *reason = "it ends before its graph count";
    return ContextError::kTruncated;
  }
  if (line.compare(0, 7, "graphs ") != 0 || line.size() == 7 || line.size() > 7 + 9 ||
      line.find_first_not_of("0123456789", 7) != std::string::npos) {
    *reason = "line 2 is not \"graphs N\"";
    return ContextError::kCorrupted;
  }
  const size_t count = std::strtoul(line.c_str() + 7, nullptr, 10);
  std::vector<std::pair<std::string, std::string>> result;
  for (size_t i = 0; i < count; ++i) {
    if (!next_line(&line)) {
      *reason = "it ends after " + std::to_string(i) + " of its " + std::to_string(count) + " graphs";
      return ContextError::kTruncated;
    }
    if (line.compare(0, 6, "graph ") != 0 || line.size() == 6) {
      *reason = "graph " + std::to_string(i + 1) + " does not start with \"graph NAME\"";
      return ContextError::kCorrupted;
    }
    std::string name = line.substr(6), program;
    for (;;) {
      if (!next_line(&line)) {
        *reason = "it ends inside graph '" + name + "'";
        return ContextError::kTruncated;
      }
      if (line == "end") break;
      program += line + "\n";
    }
    Program p;
    const std::string error = Deserialize(program, &p);
    if (!error.empty()) {
      *reason = "graph '" + name + "' is not a valid program: " + error;
      return ContextError::kCorrupted;
    }
    for (const auto& g : result)
      if (g.first == name) {
        *reason = "graph '" + name + "' appears twice";
        return ContextError::kCorrupted;
      }
    result.emplace_back(std::move(name), std::move(program));
  }
  if (pos != bytes.size()) {
    *reason = "unexpected data after its " + std::to_string(count) + " graphs";
    return ContextError::kCorrupted;
  }
  *graphs = std::move(result);
  return ContextError::kNone;
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
