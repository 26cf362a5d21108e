// ai.onnx op versions of opsets 18-26 and the ones this CPU EP does not run (issue 25).
//
// A kernel is registered for an opset range and reads the node's opset to pick a version's semantics. A node
// whose op version is newer than what its kernel implements must not run with older semantics: for each
// version listed in kNotImplemented a refusing factory is registered, first, for the opsets that resolve to
// that version, so KernelRegistry::Find returns it and session creation fails with NOT_IMPLEMENTED naming the
// node, the op version and the model's opset. The version list is tests/opset/gen.py's VERSIONS (ONNX's
// operator_sets.h); docs/opsets.md says which of these ONNX Runtime 1.30 runs.
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace {

// Op versions introduced in opsets 18..26 (the same list as tests/opset/gen.py).
const std::map<int, const char*>& VersionsByOpset() {
  static const std::map<int, const char*> m = {
      {18, "Pad CenterCropPad Resize Mish OptionalGetElement OptionalHasElement Split Col2Im ScatterND ScatterElements "
           "ReduceSumSquare ReduceLogSum ReduceLogSumExp ReduceL1 ReduceL2 ReduceMax ReduceMin ReduceMean ReduceProd "
           "BitwiseAnd BitwiseOr BitwiseXor BitwiseNot GroupNormalization LpPool"},
      {19, "Equal AveragePool Cast CastLike Constant DeformConv DequantizeLinear Identity If Loop Pad QuantizeLinear "
           "Resize Reshape Scan Shape Size"},
      {20, "AffineGrid ConstantOfShape DFT Gelu GridSample ImageDecoder IsInf IsNaN ReduceMax ReduceMin "
           "RegexFullMatch StringConcat StringSplit"},
      {21, "Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten GroupNormalization Identity If Loop Pad "
           "QLinearMatMul QuantizeLinear Reshape Scan Shape Size Squeeze Transpose Unsqueeze"},
      {22, "EyeLike RandomUniform RandomNormal RandomUniformLike RandomNormalLike Multinomial Bernoulli "
           "ThresholdedRelu Selu Elu Mish HardSigmoid HardSwish Softsign Softplus Sin Cos Tan Asin Acos Atan Sinh Cosh "
           "Asinh Acosh Atanh Round Det NegativeLogLikelihoodLoss AveragePool MaxPool MaxUnpool LpPool MaxRoiPool "
           "Conv ConvTranspose DeformConv GlobalAveragePool GlobalMaxPool GlobalLpPool InstanceNormalization "
           "LpNormalization Dropout RoiAlign RNN GRU LSTM GridSample"},
      {23, "Attention Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten Identity If Loop Pad "
           "QuantizeLinear RMSNormalization Reshape RotaryEmbedding Scan Shape Size Squeeze Transpose Unsqueeze"},
      {24, "Attention Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten Identity If Loop Pad "
           "QuantizeLinear Reshape Scan Shape Size SplitToSequence Squeeze Swish TensorScatter TopK Transpose "
           "Unsqueeze"},
      {25, "Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten Identity If Loop Pad QuantizeLinear "
           "Reshape Scan Shape Size Squeeze Transpose Unsqueeze"},
      {26, "BitCast CumProd"},
  };
  return m;
}

// Op versions (of the list above) whose semantics this CPU EP does not implement. A version that only widened
// the type list is implemented when the kernel runs the types it had; new types get the kernel's own
// NOT_IMPLEMENTED naming the type.
const char* const kNotImplemented[] = {"ImageDecoder-20"};

}  // namespace

std::vector<int> OnnxOpVersionsSince18(const std::string& op) {
  std::vector<int> v;
  for (const auto& [opset, ops] : VersionsByOpset()) {
    std::istringstream in(ops);
    std::string name;
    while (in >> name)
      if (name == op) v.push_back(opset);
  }
  return v;
}

void RegisterVersionGates(KernelRegistry& r) {
  std::map<std::string, std::set<int>> refused;
  for (const char* s : kNotImplemented) {
    const std::string e(s);
    const size_t dash = e.rfind('-');
    refused[e.substr(0, dash)].insert(std::stoi(e.substr(dash + 1)));
  }
  for (const auto& [op, versions] : refused) {
    const std::vector<int> all = OnnxOpVersionsSince18(op);
    for (int v : versions) {
      // Opsets [v, next version - 1] resolve to version v.
      int last = 1 << 30;
      for (int w : all)
        if (w > v) {
          last = w - 1;
          break;
        }
      const std::string name = op;
      const int version = v;
      r.Register("", op,
                 [name, version](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
                   return info.Error(ErrorCode::NOT_IMPLEMENTED, name, "-", version, " (the model imports opset ",
                                     info.opset(), ") is not implemented by the CPU EP");
                 },
                 v, last);
    }
  }
}

}  // namespace epctx
