#include "model/ep_context_schema.h"

#include <onnx/defs/schema.h>

#include <mutex>

namespace epctx {

void RegisterEpContextSchema() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
    if (ranges.Map().count(kMsDomain) == 0) ranges.AddDomainToVersion(kMsDomain, 1, 1);
    onnx::OpSchema schema;
    schema.SetName(kEpContextOp)
        .SetDomain(kMsDomain)
        .SinceVersion(1)
        .SetDoc("Onnx node container for EP context (epctx's registration of ONNX Runtime's contrib op).")
        .Attr("main_context", "1: this node holds (or references) the EP context; 0: its graph lives in another node's context",
              onnx::AttributeProto::INT, static_cast<int64_t>(1))
        .Attr("ep_cache_context", "payload (embed_mode=1) or relative path of the context binary (embed_mode=0)",
              onnx::AttributeProto::STRING, false)
        .Attr("embed_mode", "1: payload embedded; 0: path to a context binary", onnx::AttributeProto::INT,
              static_cast<int64_t>(1))
        .Attr("ep_sdk_version", "version of the EP that generated the node", onnx::AttributeProto::STRING, false)
        .Attr("onnx_model_filename", "original model file name", onnx::AttributeProto::STRING, false)
        .Attr("hardware_architecture", "hardware architecture", onnx::AttributeProto::STRING, false)
        .Attr("partition_name", "partitioned graph name", onnx::AttributeProto::STRING, false)
        .Attr("source", "the EP that generated the node", onnx::AttributeProto::STRING, false)
        .Attr("notes", "EP-specific notes", onnx::AttributeProto::STRING, false)
        .Attr("max_size", "EP-specific maximum size", onnx::AttributeProto::INT, static_cast<int64_t>(0))
        .AllowUncheckedAttributes()
        .Input(0, "inputs", "the partition's inputs", "T", onnx::OpSchema::Variadic, false, 1)
        .Output(0, "outputs", "the partition's outputs", "T", onnx::OpSchema::Variadic, false, 1)
        .TypeConstraint("T",
                        {"tensor(bool)", "tensor(int8)", "tensor(int16)", "tensor(int32)", "tensor(int64)",
                         "tensor(uint8)", "tensor(uint16)", "tensor(uint32)", "tensor(uint64)", "tensor(float16)",
                         "tensor(float)", "tensor(double)", "tensor(bfloat16)"},
                        "partition boundary types")
        .TypeAndShapeInferenceFunction([](onnx::InferenceContext&) {});  // types come from the graph's value infos
    onnx::RegisterSchema(schema);
  });
}

}  // namespace epctx
