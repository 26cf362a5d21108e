#include "tests/test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

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

onnx::ModelProto AddReluModel(int opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("epctx-tests");
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("add_relu");
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

}  // namespace epctx::testing
