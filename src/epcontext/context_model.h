// Writing a context model: the partitioned main graph with every fused node replaced by the EPContext node its EP
// returned, the source's inputs/outputs in order, referenced initializers (embedded, or all in one external file
// beside the model, or where an initializer-location function says), source metadata plus ep_compatibility_info.<EP>.
// Checked with the ONNX checker, then written through a temporary file and a rename so no partial model is ever
// visible under the final name (or, for a weight-sharing group, under pending names the group publishes), or handed
// to the caller's buffer / write function (generation.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "epcontext/generation.h"
#include "graph/graph.h"
#include "model/model.h"

namespace epctx {

struct ContextModelSpec {
  const Model* source = nullptr;
  const Graph* partitioned = nullptr;            // fused nodes have domain "epctx.fused"
  std::map<std::string, Node> ep_context_nodes;  // fused node name -> its EPContext node
  std::map<std::string, std::string> compatibility;  // EP name -> compatibility string ("" = none)
  std::map<std::string, std::string> metadata;       // extra metadata_props (e.g. epctx.left_on_cpu); "" removes one
  // The model's path: where a file output goes; for buffer/write-function outputs the path whose folder relative
  // external files are placed in and checked against (and the name used in messages).
  std::string output_path;
  std::string external_initializers_file;  // relative file name beside the model; "" = embed all
  // Output, existing-file rule, external threshold and initializer-location function; null = the legacy options
  // (file, existing file an error, every initializer in external_initializers_file when set).
  const GenerationOptions* options = nullptr;
  // Weight-sharing groups write under pending names (shared_group.h) and publish later: when set, the model is
  // written to `stage_model_path` instead of `output_path`, and the external initializers file to
  // `stage_external_path` (same folder as its final name) while the model still names the final file.
  std::string stage_model_path;
  std::string stage_external_path;
};

// Fused nodes inside control-flow bodies (If/Loop/Scan graph attributes, at any depth) are written where their
// partitions were: the body is rewritten the same way as the main graph (EPContext nodes, other nodes from the
// source, its still-referenced initializers and value_info), and its initializers follow the same location rules.
Status WriteContextModel(const ContextModelSpec& spec);

// True when `g` or any graph nested in it holds an EPContext node: the model is already compiled.
bool HoldsEpContextNodes(const Graph& g);

// Writes `bytes` to `path` atomically (temporary file in the same folder, fsync, rename). FAIL naming the path.
// With `no_replace`, an existing `path` is never replaced (FAIL "... exists already").
Status WriteFileAtomically(const std::string& path, const std::string& bytes, bool no_replace = false);

}  // namespace epctx
