// Helpers for end-to-end tests: building small ONNX models in C++ and temporary folders.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace epctx::testing {

// A fresh folder under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& bytes);
std::string ReadFile(const std::string& path);

// A model Y = Relu(X + W) with X float[N,4] (N a free dim "N"), W float[4] initializer = {1,-2,3,-4}.
onnx::ModelProto AddReluModel(int opset = 17);
// Sets W's data to live in external file `location` at `offset`.
void MakeWeightExternal(onnx::ModelProto* model, const std::string& location, int64_t offset);
std::string Serialize(const onnx::ModelProto& m);

}  // namespace epctx::testing
