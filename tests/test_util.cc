#include "tests/test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <sys/stat.h>

namespace epctx::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/epctx_test_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
std::set<std::string> FilesIn(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

onnx::ModelProto NewModel(const std::string& graph_name, int opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("epctx-tests");
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  m.mutable_graph()->set_name(graph_name);
  return m;
}

onnx::ModelProto AddReluModel(int opset) {
  onnx::ModelProto m = NewModel("add_relu", opset);
  auto* g = m.mutable_graph();
  auto* x = g->add_input();
  x->set_name("X");
  auto* xt = x->mutable_type()->mutable_tensor_type();
  xt->set_elem_type(onnx::TensorProto::FLOAT);
  xt->mutable_shape()->add_dim()->set_dim_param("N");
  xt->mutable_shape()->add_dim()->set_dim_value(4);
  auto* y = g->add_output();
  y->set_name("Y");
  auto* yt = y->mutable_type()->mutable_tensor_type();
  yt->set_elem_type(onnx::TensorProto::FLOAT);
  yt->mutable_shape()->add_dim()->set_dim_param("N");
  yt->mutable_shape()->add_dim()->set_dim_value(4);
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  for (float v : {1.f, -2.f, 3.f, -4.f}) w->add_float_data(v);
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("X");
  add->add_input("W");
  add->add_output("S");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("S");
  relu->add_output("Y");
  return m;
}

void MakeWeightExternal(onnx::ModelProto* model, const std::string& location, int64_t offset) {
  auto* w = model->mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* l = w->add_external_data();
  l->set_key("location");
  l->set_value(location);
  auto* o = w->add_external_data();
  o->set_key("offset");
  o->set_value(std::to_string(offset));
  auto* n = w->add_external_data();
  n->set_key("length");
  n->set_value("16");
}

std::string Serialize(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

onnx::ModelProto LoadProto(const std::string& path) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(ReadFile(path))) << path;
  return m;
}

void AddTensorValueInfo(onnx::ValueInfoProto* vi, const std::string& name, const std::vector<int64_t>& dims,
                        int elem) {
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

onnx::ValueInfoProto FloatNx4(const std::string& name) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("N");
  t->mutable_shape()->add_dim()->set_dim_value(4);
  return v;
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, const std::string& name,
                         const std::vector<std::string>& inputs, const std::string& output) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  n->add_output(output);
  return n;
}

void AddWeight(onnx::GraphProto* g, const std::string& name, const std::vector<float>& values) {
  auto* w = g->add_initializer();
  w->set_name(name);
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(static_cast<int64_t>(values.size()));
  for (float v : values) w->add_float_data(v);
}

const std::vector<float> kInput = {0.5f, -1, 2, 7, -3, 1.25f, 0, -0.75f};

Value InputTensor(std::vector<float>* storage) {
  *storage = kInput;
  static const int64_t shape[] = {2, 4};
  return Value::CreateTensor<float>(storage->data(), storage->size(), shape, 2);
}

std::vector<float> ToVector(const Value& v) {
  EXPECT_EQ(v.GetTensorTypeAndShapeInfo().GetShape(), (std::vector<int64_t>{2, 4}));
  const float* y = v.GetTensorData<float>();
  return std::vector<float>(y, y + 8);
}

std::vector<float> RunOne(const Session& s, const std::string& input, const std::string& output) {
  std::vector<float> x;
  std::vector<Value> inputs;
  inputs.push_back(InputTensor(&x));
  return ToVector(s.Run({input}, inputs, {output})[0]);
}

std::vector<float> CpuReference(const onnx::ModelProto& m) {
  Env env;
  const std::string bytes = Serialize(m);
  Session s(env, bytes.data(), bytes.size(), SessionOptions());
  return RunOne(s, m.graph().input(0).name(), m.graph().output(0).name());
}

std::vector<ConstEpDevice> DevicesOf(const Env& env, const std::string& ep, bool include_virtual) {
  std::vector<ConstEpDevice> v;
  for (const ConstEpDevice& d : env.GetEpDevices()) {
    const KeyValuePairs metadata = d.Device().Metadata();  // GetValue points into it: keep it alive
    const char* virt = metadata.GetValue("is_virtual");
    const bool is_virtual = virt && std::string(virt) == "1";
    if (d.EpName() == ep && (include_virtual || !is_virtual)) v.push_back(d);
  }
  return v;
}

SessionOptions WithExample(const Env& env, const KeyValuePairs& ep_options,
                           const std::map<std::string, std::string>& config) {
  SessionOptions opts;
  opts.SetIntraOpNumThreads(1);
  opts.AppendExecutionProvider_V2(env, DevicesOf(env, kExample, false), ep_options);
  for (const auto& [k, v] : config) opts.AddConfigEntry(k.c_str(), v.c_str());
  return opts;
}

Env* AotCpuSuite::env_ = nullptr;

void AotCpuSuite::SetUpTestSuite() {
  env_ = new Env(LoggingLevel::ERROR, ::testing::UnitTest::GetInstance()->current_test_suite()->name());
  env_->RegisterExecutionProviderLibrary("aotcpu", kAotCpuLib);
}

void AotCpuSuite::TearDownTestSuite() {
  delete env_;
  env_ = nullptr;
}

SessionOptions AotCpuSuite::Options(int threads, bool aot, const std::map<std::string, std::string>& config) {
  SessionOptions o;
  o.SetIntraOpNumThreads(threads);
  if (aot) o.AppendExecutionProvider_V2(*env_, DevicesOf(*env_, kAotCpu, false), KeyValuePairs());
  for (const auto& [k, v] : config) o.AddConfigEntry(k.c_str(), v.c_str());
  return o;
}

void AotCpuSuite::CheckJitAndFromContext(const std::string& path, const TempDir& dir, int threads,
                                         const std::function<void(Session&, const std::string&)>& check) {
  Session jit(*env_, path.c_str(), Options(threads));
  const std::string report = jit.GetSessionReport();
  EXPECT_TRUE(Contains(report, "\"cpu_nodes\":0")) << report;
  EXPECT_EQ(jit.GetPartitionAssignments().size(), 1u) << report;
  check(jit, "JIT");
  for (int embed : {0, 1}) {
    const std::string ctx = dir / ("model_e" + std::to_string(embed) + "_ctx.onnx");
    {
      Session gen(*env_, path.c_str(),
                  Options(threads, true,
                          {{"ep.context_enable", "1"},
                           {"ep.context_file_path", ctx},
                           {"ep.context_embed_mode", std::to_string(embed)}}));
    }
    ASSERT_TRUE(Exists(ctx)) << ctx;
    Session loaded(*env_, ctx.c_str(), Options(threads, true, {{"session.disable_model_compile", "1"}}));
    check(loaded, "loaded from _ctx.onnx, embed " + std::to_string(embed));
  }
}

std::vector<const onnx::NodeProto*> ContextNodes(const onnx::ModelProto& m) {
  std::vector<const onnx::NodeProto*> nodes;
  for (const auto& n : m.graph().node())
    if (n.op_type() == "EPContext") nodes.push_back(&n);
  return nodes;
}

std::vector<onnx::NodeProto*> ContextNodes(onnx::ModelProto* m) {
  std::vector<onnx::NodeProto*> nodes;
  for (auto& n : *m->mutable_graph()->mutable_node())
    if (n.op_type() == "EPContext") nodes.push_back(&n);
  return nodes;
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::string StrAttr(const onnx::NodeProto& n, const std::string& name) {
  const auto* a = FindAttr(n, name);
  EXPECT_TRUE(a) << "node " << n.name() << " lacks " << name;
  return a ? a->s() : "";
}

std::vector<float> RunIf(const Session& s, bool cond_value) {
  std::vector<float> x{0.5f, 1.f, -5.f, 2.f};
  int64_t shape[] = {4};
  bool c = cond_value;
  std::vector<Value> in;
  in.push_back(Value::CreateTensor<bool>(&c, 1, nullptr, 0));
  in.push_back(Value::CreateTensor<float>(x.data(), 4, shape, 1));
  auto out = s.Run({"cond", "X"}, in, {"Y"});
  const float* y = out[0].GetTensorData<float>();
  return std::vector<float>(y, y + 4);
}

}  // namespace epctx::testing
