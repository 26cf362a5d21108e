#include "model/tensor_proto.h"

#include <onnx/onnx_pb.h>
#include <onnx/onnx-data_pb.h>

#include <cstdint>
#include <cstring>

#include "graph/graph.h"
#include "model/external_data.h"

namespace epctx {

namespace {

template <typename Dst, typename Src>
Status CopyTyped(const Src& field, int64_t n, Tensor* t, const std::string& what, const char* field_name) {
  RETURN_ERROR_IF(static_cast<int64_t>(field.size()) != n, INVALID_GRAPH, what, ": ", field_name, " holds ",
                  field.size(), " values but the shape ", ShapeToString(t->shape()), " needs ", n);
  Dst* d = t->data<Dst>();
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<Dst>(field.Get(static_cast<int>(i)));
  return Status::OK();
}

// Fills int4/uint4 tensor `t` (allocated, one value per byte) from `size` packed bytes; INVALID_GRAPH naming `what`
// unless size is exactly ceil(n / 2).
Status UnpackInt4Tensor(const uint8_t* src, uint64_t size, Tensor* t, const std::string& what) {
  const int64_t n = t->NumElements();
  Status s = t->dtype() == DataType::kInt4 ? UnpackInt4(src, size, n, t->data<Int4>(), what.c_str())
                                           : UnpackInt4(src, size, n, t->data<UInt4>(), what.c_str());
  RETURN_ERROR_IF(!s.ok(), INVALID_GRAPH, s.message(), " (", DataTypeName(t->dtype()), ": two values per byte)");
  return Status::OK();
}

// int32_data carries int8/16/32, uint8/16, bool and the bits of float16/bfloat16/float8.
Status CopyFromInt32Data(const onnx::TensorProto& p, int64_t n, Tensor* t, const std::string& what) {
  const auto& f = p.int32_data();
  RETURN_ERROR_IF(static_cast<int64_t>(f.size()) != n, INVALID_GRAPH, what, ": int32_data holds ", f.size(),
                  " values but the shape ", ShapeToString(t->shape()), " needs ", n);
  switch (t->dtype()) {
    case DataType::kInt8: for (int64_t i = 0; i < n; ++i) t->data<int8_t>()[i] = static_cast<int8_t>(f.Get(i)); break;
    case DataType::kInt16: for (int64_t i = 0; i < n; ++i) t->data<int16_t>()[i] = static_cast<int16_t>(f.Get(i)); break;
    case DataType::kInt32: for (int64_t i = 0; i < n; ++i) t->data<int32_t>()[i] = f.Get(i); break;
    case DataType::kUint8: for (int64_t i = 0; i < n; ++i) t->data<uint8_t>()[i] = static_cast<uint8_t>(f.Get(i)); break;
    case DataType::kUint16: for (int64_t i = 0; i < n; ++i) t->data<uint16_t>()[i] = static_cast<uint16_t>(f.Get(i)); break;
    case DataType::kBool: for (int64_t i = 0; i < n; ++i) t->data<bool>()[i] = f.Get(i) != 0; break;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) t->data<uint16_t>()[i] = static_cast<uint16_t>(f.Get(i));
      break;
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
      // onnx.proto: one float8 code (its 8 bits) per int32; anything else is not a code.
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = f.Get(static_cast<int>(i));
        RETURN_ERROR_IF(v < 0 || v > 255, INVALID_GRAPH, what, ": int32_data value ", v, " at index ", i,
                        " is not a ", DataTypeName(t->dtype()), " code (0..255)");
        t->data<uint8_t>()[i] = static_cast<uint8_t>(v);
      }
      break;
    case DataType::kInt4:
    case DataType::kUint4: {
      // onnx.proto: two 4-bit values per int32 (one packed byte, low nibble first); `n` counts values, and
      // CheckStoredSize has checked that f holds PackedInt4Bytes(n) entries.
      std::string bytes(static_cast<size_t>(f.size()), '\0');
      for (int i = 0; i < f.size(); ++i) {
        const int32_t v = f.Get(i);
        RETURN_ERROR_IF(v < 0 || v > 255, INVALID_GRAPH, what, ": int32_data value ", v, " at index ", i,
                        " is not a byte of two packed ", DataTypeName(t->dtype()), " values (0..255)");
        bytes[static_cast<size_t>(i)] = static_cast<char>(v);
      }
      return UnpackInt4Tensor(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), t, what);
    }
    default: return MakeStatus(ErrorCode::INVALID_GRAPH, what, ": int32_data cannot hold ", DataTypeName(t->dtype()));
  }
  return Status::OK();
}

// Checks, before anything is allocated, that the field `p` stores its data in holds exactly what `n` elements of
// `dtype` need: a model of a few bytes whose dims ask for gigabytes is refused without allocating (and zeroing)
// them. The copies below rely on it.
Status CheckStoredSize(const onnx::TensorProto& p, DataType dtype, int64_t n, const Shape& shape,
                       const std::string& what) {
  const uint64_t esize = DataTypeSize(dtype);
  if (IsInt4(dtype)) {  // packed two per byte, in raw_data or one byte per int32_data entry
    const uint64_t need = PackedInt4Bytes(n);
    const uint64_t have = p.has_raw_data() ? p.raw_data().size() : static_cast<uint64_t>(p.int32_data_size());
    RETURN_ERROR_IF(have != need, INVALID_GRAPH, what, ": ", p.has_raw_data() ? "raw_data holds " : "int32_data holds ",
                    have, p.has_raw_data() ? " bytes" : " values", " but shape ", ShapeToString(shape), " of ",
                    DataTypeName(dtype), " needs ", need, " (two 4-bit values per byte)");
    return Status::OK();
  }
  if (p.has_raw_data()) {
    RETURN_ERROR_IF(dtype == DataType::kString, INVALID_GRAPH, what, ": string tensors cannot use raw_data");
    const uint64_t have = p.raw_data().size();
    const bool overflows = esize == 0 || static_cast<uint64_t>(n) > UINT64_MAX / esize;
    RETURN_ERROR_IF(overflows || have != static_cast<uint64_t>(n) * esize, INVALID_GRAPH, what, ": raw_data holds ",
                    have, " bytes but shape ", ShapeToString(shape), " of ", DataTypeName(dtype), " needs ",
                    overflows ? std::string("more than 2^64") : std::to_string(static_cast<uint64_t>(n) * esize));
    return Status::OK();
  }
  int64_t have = 0, per_element = 1;
  const char* field = "int32_data";
  switch (dtype) {
    case DataType::kComplex64: per_element = 2; [[fallthrough]];
    case DataType::kFloat: have = p.float_data_size(), field = "float_data"; break;
    case DataType::kComplex128: per_element = 2; [[fallthrough]];
    case DataType::kDouble: have = p.double_data_size(), field = "double_data"; break;
    case DataType::kInt64: have = p.int64_data_size(), field = "int64_data"; break;
    case DataType::kUint32:
    case DataType::kUint64: have = p.uint64_data_size(), field = "uint64_data"; break;
    case DataType::kString: have = p.string_data_size(), field = "string_data"; break;
    default: have = p.int32_data_size();
  }
  RETURN_ERROR_IF(have % per_element != 0 || have / per_element != n, INVALID_GRAPH, what, ": ", field, " holds ",
                  have, " values but the shape ", ShapeToString(shape), " needs ", n,
                  per_element == 2 ? " complex values (2 each)" : "");
  return Status::OK();
}

}  // namespace

std::string OnnxElementTypeName(int32_t code) {
  if (IsValidDataType(code)) return DataTypeName(static_cast<DataType>(code));
  // onnx.proto's TensorProto.DataType after bfloat16 (16): IR 9 float8, IR 10 4-bit, IR 11 float4, IR 12 float8e8m0,
  // IR 13 2-bit integers.
  static const char* const kNewer[] = {"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4",
                                       "int4",         "float4e2m1",     "float8e8m0", "uint2",          "int2"};
  if (code >= 17 && code < 17 + static_cast<int32_t>(sizeof(kNewer) / sizeof(kNewer[0]))) return kNewer[code - 17];
  return "element type " + std::to_string(code);
}

namespace {

std::string TypeWithCode(int32_t code) { return OnnxElementTypeName(code) + " (" + std::to_string(code) + ")"; }

// An element type ONNX defines (IR 10 and later: 4-bit, float4, float8e8m0, 2-bit) that DataType lacks. Codes ONNX
// does not define are left to the checks that read the values (TensorFromProto: "unknown element type").
bool IsNewerOnnxType(int64_t code) { return code > static_cast<int64_t>(DataType::kInt4) && code <= 26; }

Status CheckTypeProto(const onnx::TypeProto& t, const std::string& what, const std::string& value) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const int32_t e = t.tensor_type().elem_type();
      RETURN_ERROR_IF(IsNewerOnnxType(e), INVALID_GRAPH, "model ", what, ": ", value, " has element type ",
                      TypeWithCode(e), ", which epctx does not run");
      return Status::OK();
    }
    case onnx::TypeProto::kSequenceType: return CheckTypeProto(t.sequence_type().elem_type(), what, value);
    case onnx::TypeProto::kOptionalType: return CheckTypeProto(t.optional_type().elem_type(), what, value);
    default: return Status::OK();
  }
}

Status CheckTensorType(const onnx::TensorProto& p, const std::string& what, const std::string& value) {
  const int32_t e = p.data_type();
  RETURN_ERROR_IF(IsNewerOnnxType(e), INVALID_GRAPH, "model ", what, ": ", value, " has element type ",
                  TypeWithCode(e), ", which epctx does not run");
  return Status::OK();
}

}  // namespace

Status CheckElementTypes(const onnx::GraphProto& g, const std::string& what) {
  for (const auto& v : g.input()) RETURN_IF_ERROR(CheckTypeProto(v.type(), what, "graph input '" + v.name() + "'"));
  for (const auto& v : g.output()) RETURN_IF_ERROR(CheckTypeProto(v.type(), what, "graph output '" + v.name() + "'"));
  for (const auto& v : g.value_info()) RETURN_IF_ERROR(CheckTypeProto(v.type(), what, "value '" + v.name() + "'"));
  for (const auto& t : g.initializer()) RETURN_IF_ERROR(CheckTensorType(t, what, "initializer '" + t.name() + "'"));
  for (const auto& n : g.node()) {
    const std::string node = "node '" + n.name() + "' (" + n.op_type() + ")";
    for (const auto& a : n.attribute()) {
      if (a.has_t()) RETURN_IF_ERROR(CheckTensorType(a.t(), what, node + " attribute '" + a.name() + "'"));
      for (const auto& t : a.tensors())
        RETURN_IF_ERROR(CheckTensorType(t, what, node + " attribute '" + a.name() + "'"));
      if (a.has_g()) RETURN_IF_ERROR(CheckElementTypes(a.g(), what));
      for (const auto& sg : a.graphs()) RETURN_IF_ERROR(CheckElementTypes(sg, what));
      const bool names_type = (n.op_type() == "Cast" && a.name() == "to") ||
                              (a.name() == "output_dtype" && (n.op_type() == "QuantizeLinear" ||
                                                              n.op_type() == "DequantizeLinear"));
      if (names_type && (n.domain().empty() || n.domain() == "ai.onnx") && a.type() == onnx::AttributeProto::INT) {
        const int64_t e = a.i();
        RETURN_ERROR_IF(IsNewerOnnxType(e), INVALID_GRAPH, "model ", what, ": ", node, " attribute '", a.name(),
                        "' names element type ",
                        TypeWithCode(static_cast<int32_t>(e)), ", which epctx does not run");
      }
    }
  }
  return Status::OK();
}

namespace {

Status Float8ToRaw(onnx::TensorProto* t, const std::string& what, const std::string& value) {
  if (!IsValidDataType(t->data_type()) ||
      !(IsFloat8(static_cast<DataType>(t->data_type())) || IsInt4(static_cast<DataType>(t->data_type()))) ||
      t->has_raw_data() ||
      t->data_location() == onnx::TensorProto::EXTERNAL || t->int32_data_size() == 0)
    return Status::OK();
  std::string raw(static_cast<size_t>(t->int32_data_size()), '\0');
  for (int i = 0; i < t->int32_data_size(); ++i) {
    const int32_t v = t->int32_data(i);
    RETURN_ERROR_IF(v < 0 || v > 255, INVALID_GRAPH, "model ", what, ": ", value, ": int32_data value ", v,
                    " at index ", i, " is not a ", DataTypeName(static_cast<DataType>(t->data_type())),
                    IsInt4(static_cast<DataType>(t->data_type())) ? " byte (0..255, two packed values)" : " code (0..255)");
    raw[static_cast<size_t>(i)] = static_cast<char>(v);
  }
  t->clear_int32_data();
  t->set_raw_data(std::move(raw));
  return Status::OK();
}

}  // namespace

Status MoveFloat8Int32DataToRaw(onnx::GraphProto* g, const std::string& what) {
  for (auto& t : *g->mutable_initializer()) RETURN_IF_ERROR(Float8ToRaw(&t, what, "initializer '" + t.name() + "'"));
  for (auto& n : *g->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      const std::string value = "node '" + n.name() + "' (" + n.op_type() + ") attribute '" + a.name() + "'";
      if (a.has_t()) RETURN_IF_ERROR(Float8ToRaw(a.mutable_t(), what, value));
      for (auto& t : *a.mutable_tensors()) RETURN_IF_ERROR(Float8ToRaw(&t, what, value));
      if (a.has_g()) RETURN_IF_ERROR(MoveFloat8Int32DataToRaw(a.mutable_g(), what));
      for (auto& sg : *a.mutable_graphs()) RETURN_IF_ERROR(MoveFloat8Int32DataToRaw(&sg, what));
    }
  }
  return Status::OK();
}

StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& p, const std::string& what,
                                 const ExternalDataResolver* resolver) {
  RETURN_ERROR_IF(IsNewerOnnxType(p.data_type()), INVALID_GRAPH, what, ": element type ",
                  TypeWithCode(p.data_type()), " is not one epctx runs");
  RETURN_ERROR_IF(!IsValidDataType(p.data_type()) || p.data_type() == 0, INVALID_GRAPH, what,
                  ": unknown element type ", p.data_type());
  DataType dtype = static_cast<DataType>(p.data_type());
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape) RETURN_ERROR_IF(d < 0, INVALID_GRAPH, what, ": negative dimension in ", ShapeToString(shape));
  int64_t n = ShapeSize(shape);
  RETURN_ERROR_IF(n < 0, INVALID_GRAPH, what, ": shape ", ShapeToString(shape), " is too large");
  size_t esize = DataTypeSize(dtype);

  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    RETURN_ERROR_IF(dtype == DataType::kString, INVALID_GRAPH, what, ": string tensors cannot use external data");
    RETURN_ERROR_IF(!resolver, INVALID_GRAPH, what, " uses external data, which is not allowed here");
    ExternalDataRef ref;
    for (const auto& kv : p.external_data()) {
      if (kv.key() == "location") {
        ref.location = kv.value();
      } else if (kv.key() == "offset" || kv.key() == "length") {
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(kv.value().c_str(), &end, 10);
        RETURN_ERROR_IF(kv.value().empty() || *end != '\0' || v < 0 || errno == ERANGE, INVALID_GRAPH, what,
                        ": external data ", kv.key(), " '", kv.value(), "' is not a non-negative integer");
        if (kv.key() == "offset") ref.offset = static_cast<uint64_t>(v);
        else ref.length = v;
      }
    }
    RETURN_ERROR_IF(static_cast<uint64_t>(n) > UINT64_MAX / (esize ? esize : 1), INVALID_GRAPH, what, ": too large");
    const void* data = nullptr;
    std::shared_ptr<void> holder;
    if (IsInt4(dtype)) {  // packed in the file: unpacked into memory of our own
      const uint64_t packed = PackedInt4Bytes(n);
      RETURN_IF_ERROR(resolver->Resolve(ref, packed, what, &data, &holder));
      ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, std::move(shape)));
      RETURN_IF_ERROR(UnpackInt4Tensor(static_cast<const uint8_t*>(data), packed, &t, what));
      return t;
    }
    RETURN_IF_ERROR(resolver->Resolve(ref, static_cast<uint64_t>(n) * esize, what, &data, &holder));
    // Kernels read elements through typed pointers: an offset that leaves them misaligned (any offset is legal in
    // ONNX) gets a copy instead of a view of the mapping.
    const size_t align = esize >= 8 ? 8 : esize;
    if (align > 1 && reinterpret_cast<uintptr_t>(data) % align != 0) {
      ASSIGN_OR_RETURN(Tensor copy, Tensor::Allocate(dtype, std::move(shape)));
      if (n > 0) std::memcpy(copy.raw_data(), data, static_cast<size_t>(n) * esize);
      return copy;
    }
    return Tensor::View(dtype, std::move(shape), const_cast<void*>(data), std::move(holder));
  }

  RETURN_IF_ERROR(CheckStoredSize(p, dtype, n, shape, what));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
  if (p.has_raw_data() && IsInt4(dtype)) {
    RETURN_IF_ERROR(UnpackInt4Tensor(reinterpret_cast<const uint8_t*>(p.raw_data().data()), p.raw_data().size(), &t,
                                     what));
    return t;
  }
  if (p.has_raw_data()) {
    if (n > 0) std::memcpy(t.raw_data(), p.raw_data().data(), p.raw_data().size());
    if (dtype == DataType::kBool)  // normalise to 0/1 so every bool read is well-defined
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
    return t;
  }
  switch (dtype) {
    case DataType::kFloat: RETURN_IF_ERROR(CopyTyped<float>(p.float_data(), n, &t, what, "float_data")); break;
    case DataType::kDouble: RETURN_IF_ERROR(CopyTyped<double>(p.double_data(), n, &t, what, "double_data")); break;
    case DataType::kInt64: RETURN_IF_ERROR(CopyTyped<int64_t>(p.int64_data(), n, &t, what, "int64_data")); break;
    case DataType::kUint32: RETURN_IF_ERROR(CopyTyped<uint32_t>(p.uint64_data(), n, &t, what, "uint64_data")); break;
    case DataType::kUint64: RETURN_IF_ERROR(CopyTyped<uint64_t>(p.uint64_data(), n, &t, what, "uint64_data")); break;
    case DataType::kString: {
      RETURN_ERROR_IF(p.string_data_size() != n, INVALID_GRAPH, what, ": string_data holds ", p.string_data_size(),
                      " values but the shape needs ", n);
      for (int64_t i = 0; i < n; ++i) t.data<std::string>()[i] = p.string_data(static_cast<int>(i));
      break;
    }
    case DataType::kComplex64: {
      RETURN_ERROR_IF(p.float_data_size() != 2 * n, INVALID_GRAPH, what, ": float_data size mismatch for complex64");
      if (n > 0) std::memcpy(t.raw_data(), p.float_data().data(), sizeof(float) * 2 * n);  // empty: data() is null
      break;
    }
    case DataType::kComplex128: {
      RETURN_ERROR_IF(p.double_data_size() != 2 * n, INVALID_GRAPH, what, ": double_data size mismatch for complex128");
      if (n > 0) std::memcpy(t.raw_data(), p.double_data().data(), sizeof(double) * 2 * n);
      break;
    }
    default: RETURN_IF_ERROR(CopyFromInt32Data(p, n, &t, what));
  }
  return t;
}

void TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->Clear();
  if (!name.empty()) p->set_name(name);
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  if (t.dtype() == DataType::kString) {
    for (int64_t i = 0; i < t.NumElements(); ++i) p->add_string_data(t.data<std::string>()[i]);
  } else if (IsInt4(t.dtype())) {  // files pack two values per byte
    std::string packed(PackedInt4Bytes(t.NumElements()), '\0');
    auto* dst = reinterpret_cast<uint8_t*>(packed.data());
    if (t.dtype() == DataType::kInt4) PackInt4(t.data<Int4>(), t.NumElements(), dst);
    else PackInt4(t.data<UInt4>(), t.NumElements(), dst);
    p->set_raw_data(std::move(packed));
  } else {
    p->set_raw_data(t.raw_data(), t.SizeInBytes());
  }
}

ValueType ValueTypeFromProto(const onnx::TypeProto& type) {
  ValueType vt;
  auto fill_tensor = [&](const onnx::TypeProto_Tensor& tt) {
    vt.elem_type = IsValidDataType(tt.elem_type()) ? static_cast<DataType>(tt.elem_type()) : DataType::kUndefined;
    if (tt.has_shape()) {
      vt.has_shape = true;
      for (const auto& d : tt.shape().dim()) {
        Dim dim;
        if (d.has_dim_value()) dim.value = d.dim_value();
        else if (d.has_dim_param()) dim.symbol = d.dim_param();
        vt.dims.push_back(dim);
      }
    }
  };
  if (type.has_tensor_type()) {
    vt.kind = ValueType::Kind::kTensor;
    fill_tensor(type.tensor_type());
  } else if (type.has_sequence_type()) {
    vt.kind = ValueType::Kind::kSequence;
    if (type.sequence_type().elem_type().has_tensor_type()) fill_tensor(type.sequence_type().elem_type().tensor_type());
  } else if (type.has_optional_type()) {
    vt.kind = ValueType::Kind::kOptional;
    const auto& inner = type.optional_type().elem_type();
    if (inner.has_tensor_type()) {
      vt.optional_inner = ValueType::Kind::kTensor;
      fill_tensor(inner.tensor_type());
    } else if (inner.has_sequence_type()) {
      vt.optional_inner = ValueType::Kind::kSequence;
      if (inner.sequence_type().elem_type().has_tensor_type())
        fill_tensor(inner.sequence_type().elem_type().tensor_type());
    }
  }
  return vt;
}

StatusOr<IValue> SequenceFromProto(const onnx::SequenceProto& proto, const std::string& what) {
  RETURN_ERROR_IF(proto.elem_type() != onnx::SequenceProto::TENSOR && proto.elem_type() != 0, NOT_IMPLEMENTED, what,
                  ": only sequences of tensors are supported");
  TensorSequence seq;
  DataType elem = DataType::kUndefined;
  for (int i = 0; i < proto.tensor_values_size(); ++i) {
    ASSIGN_OR_RETURN(Tensor t, TensorFromProto(proto.tensor_values(i), what, nullptr));
    elem = t.dtype();
    seq.push_back(std::move(t));
  }
  return IValue::Sequence(std::move(seq), elem);
}

StatusOr<IValue> OptionalFromProto(const onnx::OptionalProto& proto, const std::string& what) {
  if (proto.has_tensor_value()) {
    ASSIGN_OR_RETURN(Tensor t, TensorFromProto(proto.tensor_value(), what, nullptr));
    return IValue(std::move(t));
  }
  if (proto.has_sequence_value()) return SequenceFromProto(proto.sequence_value(), what);
  return IValue();
}

}  // namespace epctx
