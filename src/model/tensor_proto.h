// Conversion between onnx::TensorProto and Tensor. Every size in the proto is checked against the element count
// before a byte is copied; external data is resolved through ExternalDataResolver (path-safety and mapping live
// there, see external_data.h).
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace onnx {
class GraphProto;
class TensorProto;
class TypeProto;
class SequenceProto;
class OptionalProto;
}  // namespace onnx

namespace epctx {

class ExternalDataResolver;
struct ValueType;

// `what` names the tensor in messages (e.g. "initializer 'W'"). `resolver` may be null, in which case a tensor
// with external data is an INVALID_GRAPH error. Raw data is copied unless external (then mapped, not copied, unless
// its offset leaves the elements misaligned for their type).
StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& what,
                                 const ExternalDataResolver* resolver);
// Writes dims, data_type and data (raw_data for numeric types, int4/uint4 packed two per byte; string_data for
// strings). TensorFromProto reads int4/uint4 from packed raw_data, int32_data or external data (ceil(n / 2) bytes,
// checked before any copy) into one value per byte.
void TensorToProto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto);

// Sequence / optional values from ONNX's test-data protos.
StatusOr<IValue> SequenceFromProto(const onnx::SequenceProto& proto, const std::string& what);
StatusOr<IValue> OptionalFromProto(const onnx::OptionalProto& proto, const std::string& what);

// The ONNX name of an element type code, including those newer than the runtime's DataType (IR 11-13: "float4e2m1"
// 23 ... "int2" 26); "element type N" for a code ONNX does not define.
std::string OnnxElementTypeName(int32_t code);

// Refuses (INVALID_GRAPH) an element type the runtime does not run, anywhere a model states one: graph inputs,
// outputs, value infos, initializers, Constant values, Cast/CastLike's `to`, subgraphs alike. The message names the
// value (or node) and the type, e.g. "model 'm.onnx': graph input 'x' has element type int2 (26), which epctx does
// not run". The float8 types (17-20) and uint4/int4 (21, 22) are DataTypes and pass. `what` names the model.
Status CheckElementTypes(const onnx::GraphProto& graph, const std::string& what);

// Moves the data of float8 and int4/uint4 tensors stored in int32_data (one float8 code, or one byte of two packed
// 4-bit values, per int32, as onnx.proto allows) to raw_data, in initializers and node attributes, subgraphs included:
// libonnx 1.12's checker refuses int32_data for element types it does not know ("Unrecognized data_type"). The values
// are unchanged; a value outside 0..255 is refused (INVALID_GRAPH naming the tensor, the value and the type); sizes
// are checked when the tensor is read (TensorFromProto). `what` names the model.
Status MoveFloat8Int32DataToRaw(onnx::GraphProto* graph, const std::string& what);

// Converts an onnx TypeProto to ValueType (unknown kinds map to kUnknown).
ValueType ValueTypeFromProto(const onnx::TypeProto& type);

}  // namespace epctx
