// Model-local functions (ModelProto.functions, IR 8+) replaced by their bodies, before the ONNX checker, shape
// inference and the conversion to Graph see the model: the runtime and its EPs only ever see standard nodes.
#pragma once

#include <string>

#include "core/status.h"

namespace onnx {
class ModelProto;
}

namespace epctx {

// Replaces every node that calls a model-local function, in the main graph and in every subgraph, by the function's
// nodes, and clears ModelProto.functions. A call matches a function by (domain, op_type) and, from IR 10, overload
// (NodeProto field 8, FunctionProto field 13; libonnx 1.12's onnx.proto predates them, so they are read from the
// messages' unknown fields). In the copied body:
// - the function's inputs and outputs take the names of the call's (a missing optional input is ""); every other value
//   gets a fresh name, unique in the model, made from the call's name and its own;
// - an attribute that references a function attribute (ref_attr_name) takes the call's value, else the function's
//   default (FunctionProto.attribute_proto, field 11, also read from unknown fields), else it is dropped;
// - calls of other local functions are inlined in turn (nesting deeper than 32 is refused, as is a model that would
//   grow beyond 1,000,000 nodes).
// A function importing a domain at another version than the model is INVALID_GRAPH naming the function, the domain
// and both versions; a domain only the function imports is added to the model's imports. `what` names the model.
Status InlineModelFunctions(onnx::ModelProto* model, const std::string& what);

}  // namespace epctx
