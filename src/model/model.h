// Loading an ONNX model (from a path or from bytes) into the runtime's Graph: parse, version checks, free
// dimension overrides, ONNX checker, ONNX shape inference, conversion to Graph with initializers mapped from
// external data. Every failure is a Status naming the file and the problem; nothing here aborts on bad input.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace onnx {
class ModelProto;
class GraphProto;
namespace checker {
class CheckerContext;
}  // namespace checker
}

namespace epctx {

class ExternalDataResolver;

struct ModelLoadOptions {
  // Folder that external data locations are relative to for models loaded from bytes
  // (session.model_external_initializers_file_folder_path). Ignored for models loaded from a path.
  std::string external_data_folder;
  // Free dimension overrides by dim_param name (SessionOptions::AddFreeDimensionOverrideByName).
  std::map<std::string, int64_t> free_dimension_overrides;
  // Whole input shapes by input name (session config epctx.input_shapes, `epctx ... --input-shape NAME:1x512`), for
  // inputs whose free dims have no dim_param to override by name. Applied before free dimension overrides; a
  // name that is no graph input, another rank, or a dim the model fixes to another value is INVALID_ARGUMENT.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  bool run_checker = true;
  bool run_shape_inference = true;
};

// Parses epctx.input_shapes: "name:1x512;state:2x1x128" (';' or ',' between inputs, 'x' between dims, a scalar is
// "name:"). INVALID_ARGUMENT naming the text when malformed.
Status ParseInputShapes(const std::string& text, std::map<std::string, std::vector<int64_t>>* out);

// Supported versions: what ONNX Runtime 1.30 reads (it refuses IR 14 and opset 27). libonnx 1.12 knows IR 8 and
// opset 17; schemas_18_26.h registers what later opsets changed, functions.h inlines model-local functions (IR 8+)
// and CheckElementTypes refuses the element types added since IR 9 that the runtime does not run.
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 13;
constexpr int kMaxDefaultOpset = 26;
constexpr int kMaxMlOpset = 5;  // ai.onnx.ml

struct Model {
  std::string path;        // empty when loaded from bytes
  std::string folder;      // folder of `path` (or the external data folder for bytes)
  int64_t ir_version = 0;
  std::string producer_name;
  std::map<std::string, int> opsets;
  std::map<std::string, std::string> metadata;
  std::shared_ptr<Graph> graph;
  std::shared_ptr<onnx::ModelProto> proto;  // after overrides and shape inference; kept for writers
  std::shared_ptr<ExternalDataResolver> external_data;
};

StatusOr<std::shared_ptr<Model>> LoadModelFromFile(const std::string& path, const ModelLoadOptions& options);
StatusOr<std::shared_ptr<Model>> LoadModelFromBytes(const void* data, size_t size, const ModelLoadOptions& options);
// From an already parsed proto (takes ownership). `path` may be empty.
StatusOr<std::shared_ptr<Model>> LoadModelFromProto(std::shared_ptr<onnx::ModelProto> proto, const std::string& path,
                                                    const ModelLoadOptions& options);

// A graph rewrite that replaces main-graph nodes by initializers, and If nodes by the branch their constant condition
// picks (constant folding, session/constant_folding.h), applied to the Graph and the proto alike so that writers
// (context models) see the rewritten graph.
struct InitializerRewrite {
  std::vector<size_t> remove_nodes;            // indices into the graph's nodes (the proto's node order)
  std::map<std::string, Tensor> initializers;  // new initializers, named after outputs of removed nodes
  std::vector<std::string> drop_initializers;  // initializers no node reads any more (never graph inputs/outputs)
  // Rewrites of subgraphs of nodes this rewrite keeps; each names its node (index in this graph, before removal)
  // and graph attribute.
  std::vector<InitializerRewrite> subgraphs;
  size_t node = 0;
  std::string attribute;
  // If nodes of this graph replaced by one of their branches (their condition is a constant): the If's index (before
  // removal) and the branch attribute ("then_branch" or "else_branch"). The branch's nodes take the If's place; its
  // outputs take the If's output names (through an Identity when the branch output is not computed by a node of the
  // branch, or is output twice); its initializers join this graph's; its other values keep their names unless a name
  // is defined elsewhere in the model too, then they get a fresh one (and so do node names taken in this graph).
  struct BranchInline {
    size_t node = 0;
    std::string branch;
  };
  std::vector<BranchInline> inline_ifs;
};

// Applies `rewrite` to the main graph (and its subgraph rewrites to those subgraphs), then re-runs ONNX shape inference (values now constant make shapes static
// downstream, e.g. a Reshape's target) and refreshes every value type of the Graph, subgraphs included. The
// rewrite itself is applied even when shape inference fails; the Graph then keeps its previous (less specific, still
// correct) types and *inference_error says why. FAIL for an index out of range or a name collision.
Status ApplyInitializerRewrite(Model* model, const InitializerRewrite& rewrite, std::string* inference_error);

// libonnx 1.12's check_graph over `graph`, reading a tensor type without `shape` as the ONNX spec, ONNX Runtime and
// newer checkers do (rank unknown): libonnx 1.12 requires a shape on every tensor type of the top graph's inputs,
// outputs and value_info, so such types get an empty shape for the check only and lose it again afterwards (also
// when the check throws). Throws what check_graph throws. Used for loaded models and for generated context models.
void CheckGraphAllowingShapelessTypes(onnx::GraphProto* graph, const onnx::checker::CheckerContext& ctx);

}  // namespace epctx
