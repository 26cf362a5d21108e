// Building ONNX protos in tests, seed writers and tools: attributes and initializers in one line each. Header-only
// over onnx_pb.h alone (no gtest, no epctx), so the fuzz seed writer can use it as well as the unit tests.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace epctx::onnx_build {

inline onnx::AttributeProto* Attr(onnx::NodeProto* n, const std::string& name, onnx::AttributeProto::AttributeType t) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}
inline void SetInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = Attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  Attr(n, name, onnx::AttributeProto::INT)->set_i(v);
}

// An initializer's header: name, element type and dims ({} = a scalar); the caller fills the data.
inline onnx::TensorProto* Initializer(onnx::GraphProto* g, const std::string& name, int elem,
                                      const std::vector<int64_t>& dims) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}
// float in float_data, int64 in int64_data (the typed fields); uint8 and any other bytes in raw_data.
inline void AddFloats(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                      const std::vector<float>& v) {
  auto* t = Initializer(g, name, onnx::TensorProto::FLOAT, dims);
  for (float x : v) t->add_float_data(x);
}
inline void AddInt64s(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                      const std::vector<int64_t>& v) {
  auto* t = Initializer(g, name, onnx::TensorProto::INT64, dims);
  for (int64_t x : v) t->add_int64_data(x);
}
inline void AddRaw(onnx::GraphProto* g, const std::string& name, int elem, const std::vector<int64_t>& dims,
                   const void* bytes, size_t size) {
  Initializer(g, name, elem, dims)->set_raw_data(std::string(static_cast<const char*>(bytes), size));
}
inline void AddUint8s(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                      const std::vector<uint8_t>& v) {
  AddRaw(g, name, onnx::TensorProto::UINT8, dims, v.data(), v.size());
}

}  // namespace epctx::onnx_build
