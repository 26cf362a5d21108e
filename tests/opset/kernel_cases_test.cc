// The opset 18-26 conformance cases (tests/opset/gen.py, references from ONNX Runtime 1.30) run straight on the CPU
// EP's kernels: each model's nodes, in order, through the kernel registry, without the loader or the session.
// This checks the kernels' numbers against ORT whatever opsets the loader accepts; the `opset_<case>` tests run the
// same cases end to end through `epctx test`. Cases with subgraph attributes (If, Loop, Scan) need the session and
// are left to those; cases in tests/opset/skips.txt are skipped with their reason.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "model/tensor_proto.h"
#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/kernel_test_util.h"

namespace epctx {
namespace {

namespace fs = std::filesystem;
using namespace ::epctx::testing;  // NOLINT

bool ReadProto(const fs::path& p, google::protobuf::MessageLite* msg) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return msg->ParseFromString(bytes);
}

// "" when the attribute converts; otherwise why not.
std::string ConvertAttribute(const onnx::AttributeProto& a, Attribute* out) {
  out->name = a.name();
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      out->type = Attribute::Type::kFloat;
      out->f = a.f();
      return "";
    case onnx::AttributeProto::INT:
      out->type = Attribute::Type::kInt;
      out->i = a.i();
      return "";
    case onnx::AttributeProto::STRING:
      out->type = Attribute::Type::kString;
      out->s = a.s();
      return "";
    case onnx::AttributeProto::FLOATS:
      out->type = Attribute::Type::kFloats;
      out->floats.assign(a.floats().begin(), a.floats().end());
      return "";
    case onnx::AttributeProto::INTS:
      out->type = Attribute::Type::kInts;
      out->ints.assign(a.ints().begin(), a.ints().end());
      return "";
    case onnx::AttributeProto::STRINGS:
      out->type = Attribute::Type::kStrings;
      out->strings.assign(a.strings().begin(), a.strings().end());
      return "";
    case onnx::AttributeProto::TENSOR: {
      StatusOr<Tensor> t = TensorFromProto(a.t(), "attribute " + a.name(), nullptr);
      if (!t.ok()) return t.status().ToString();
      out->type = Attribute::Type::kTensor;
      out->t = std::move(t).value();
      return "";
    }
    default:
      return "attribute '" + a.name() + "' has a type this harness does not convert";
  }
}

double AsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat: return t.data<float>()[i];
    case DataType::kDouble: return t.data<double>()[i];
    case DataType::kFloat16: return static_cast<float>(t.data<Float16>()[i]);
    case DataType::kBFloat16: return static_cast<float>(t.data<BFloat16>()[i]);
    case DataType::kFloat8E4M3FN: return static_cast<float>(t.data<Float8E4M3FN>()[i]);
    case DataType::kFloat8E4M3FNUZ: return static_cast<float>(t.data<Float8E4M3FNUZ>()[i]);
    case DataType::kFloat8E5M2: return static_cast<float>(t.data<Float8E5M2>()[i]);
    case DataType::kFloat8E5M2FNUZ: return static_cast<float>(t.data<Float8E5M2FNUZ>()[i]);
    default: return 0;
  }
}

bool IsFloatType(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 || t == DataType::kBFloat16 ||
         IsFloat8(t);
}

// "" when `got` matches `want` (floats within |g - w| <= atol + rtol |w|, NaN matching NaN; others exactly).
std::string Compare(const Tensor& got, const Tensor& want, double rtol, double atol) {
  if (got.dtype() != want.dtype())
    return std::string("type ") + DataTypeName(got.dtype()) + ", expected " + DataTypeName(want.dtype());
  if (got.shape() != want.shape()) return "shape " + ShapeToString(got.shape()) + ", expected " + ShapeToString(want.shape());
  const int64_t n = got.NumElements();
  if (IsFloatType(got.dtype())) {
    for (int64_t i = 0; i < n; ++i) {
      const double g = AsDouble(got, i), w = AsDouble(want, i);
      if (std::isnan(g) && std::isnan(w)) continue;
      if (std::isinf(w) && g == w) continue;
      if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
        std::ostringstream os;
        os << "element " << i << " is " << g << ", expected " << w;
        return os.str();
      }
    }
    return "";
  }
  if (got.dtype() == DataType::kString) {
    for (int64_t i = 0; i < n; ++i)
      if (got.data<std::string>()[i] != want.data<std::string>()[i])
        return "element " + std::to_string(i) + " is '" + got.data<std::string>()[i] + "', expected '" +
               want.data<std::string>()[i] + "'";
    return "";
  }
  if (std::memcmp(got.raw_data(), want.raw_data(), static_cast<size_t>(n) * DataTypeSize(got.dtype())) != 0)
    return "values differ";
  return "";
}

// Runs one case folder; "" on success, "SKIP: why" when the harness cannot run it, else the failure.
std::string RunCase(const fs::path& dir, double rtol, double atol) {
  onnx::ModelProto model;
  if (!ReadProto(dir / "model.onnx", &model)) return "cannot parse model.onnx";
  int opset = 0;
  for (const auto& os : model.opset_import())
    if (os.domain().empty() || os.domain() == "ai.onnx") opset = static_cast<int>(os.version());
  const onnx::GraphProto& g = model.graph();
  Graph graph;
  graph.opsets[""] = opset;
  std::map<std::string, IValue> values;
  for (const auto& init : g.initializer()) {
    StatusOr<Tensor> t = TensorFromProto(init, "initializer " + init.name(), nullptr);
    if (!t.ok()) return t.status().ToString();
    graph.initializers[init.name()] = t.value();
    values[init.name()] = IValue(std::move(t).value());
  }
  std::vector<std::string> feeds;
  for (const auto& in : g.input())
    if (!graph.initializers.count(in.name())) feeds.push_back(in.name());
  const fs::path data = dir / "test_data_set_0";
  for (size_t i = 0; i < feeds.size(); ++i) {
    onnx::TensorProto tp;
    if (!ReadProto(data / ("input_" + std::to_string(i) + ".pb"), &tp)) return "cannot read input " + std::to_string(i);
    StatusOr<Tensor> t = TensorFromProto(tp, "input " + feeds[i], nullptr);
    if (!t.ok()) return t.status().ToString();
    values[feeds[i]] = IValue(std::move(t).value());
  }
  for (int k = 0; k < g.node_size(); ++k) {
    const onnx::NodeProto& np = g.node(k);
    Node node;
    node.name = np.name().empty() ? "n" + std::to_string(k) : np.name();
    node.op_type = np.op_type();
    node.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    node.opset = opset;
    node.inputs.assign(np.input().begin(), np.input().end());
    node.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& a : np.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS)
        return "SKIP: subgraph attribute (run through the session by opset_" + dir.filename().string() + ")";
      Attribute attr;
      const std::string why = ConvertAttribute(a, &attr);
      if (!why.empty()) return "SKIP: " + why;
      node.attributes[attr.name] = std::move(attr);
    }
    StatusOr<std::unique_ptr<OpKernel>> kernel = CreateKernel(node, graph);
    if (!kernel.ok()) return "kernel creation: " + kernel.status().ToString();
    std::vector<IValue> ins;
    for (const std::string& name : node.inputs) {
      if (name.empty()) {
        ins.emplace_back();
        continue;
      }
      auto it = values.find(name);
      if (it == values.end()) return "value '" + name + "' is not computed";
      ins.push_back(it->second);
    }
    std::vector<IValue> outs;
    Status st = Compute(*kernel.value(), node, ins, &outs);
    if (!st.ok()) return "run: " + st.ToString();
    for (size_t j = 0; j < node.outputs.size() && j < outs.size(); ++j)
      if (!node.outputs[j].empty()) values[node.outputs[j]] = outs[j];
  }
  for (int j = 0; j < g.output_size(); ++j) {
    onnx::TensorProto tp;
    if (!ReadProto(data / ("output_" + std::to_string(j) + ".pb"), &tp)) return "no expected output " + std::to_string(j);
    if (tp.name() == "ORT_FAILED") return "ONNX Runtime did not run this case: " + tp.string_data(0);
    StatusOr<Tensor> want = TensorFromProto(tp, "expected output", nullptr);
    if (!want.ok()) return want.status().ToString();
    auto it = values.find(g.output(j).name());
    if (it == values.end() || !it->second.is_tensor()) return "output '" + g.output(j).name() + "' is not a tensor";
    const std::string why = Compare(it->second.tensor(), want.value(), rtol, atol);
    if (!why.empty()) return "output '" + g.output(j).name() + "': " + why;
  }
  return "";
}

std::map<std::string, std::string> ReadSkips() {
  std::map<std::string, std::string> out;
  std::ifstream f(std::string(EPCTX_SOURCE_DIR) + "/tests/opset/skips.txt");
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find(' ');
    out[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(sp + 1);
  }
  return out;
}

TEST(OpsetKernelCases, MatchOnnxRuntime) {
  const fs::path root = fs::path(EPCTX_BINARY_DIR) / "test-models" / "opset";
  if (!fs::is_directory(root)) GTEST_SKIP() << root << " is missing (scripts/make_test_models.sh writes it)";
  const std::map<std::string, std::string> skips = ReadSkips();
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  int passed = 0, failed = 0, skipped = 0;
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    if (skips.count(name)) {
      ++skipped;
      continue;
    }
    double rtol = 1e-4, atol = 1e-5;
    std::ifstream tol(dir / "tolerance.txt");
    if (tol) tol >> rtol >> atol;
    const std::string why = RunCase(dir, rtol, atol);
    if (why.empty()) {
      ++passed;
    } else if (why.rfind("SKIP: ", 0) == 0) {
      ++skipped;
    } else {
      ++failed;
      ADD_FAILURE() << name << ": " << why;
    }
  }
  std::printf("opset kernel cases: %d passed, %d failed, %d skipped (of %zu)\n", passed, failed, skipped, dirs.size());
  EXPECT_GT(passed, 0);
}

}  // namespace
}  // namespace epctx
