// The tables tying ONNX op types to support/lowering functions and step kinds to builders.
#include <cstring>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

const OpEntry kOps[] = {
    {"Conv", SupportConvOrQdq, LowerConvOrQdq},
    {"ConvTranspose", SupportConvTranspose, LowerConvTranspose},
    {"BatchNormalization", SupportBatchNorm, LowerBatchNorm},
    {"MaxPool", SupportPool, LowerPool},
    {"AveragePool", SupportPool, LowerPool},
    {"GlobalAveragePool", SupportPool, LowerPool},
    {"GlobalMaxPool", SupportPool, LowerPool},
    {"Resize", SupportResize, LowerResize},
    {"Gemm", SupportGemm, LowerGemm},
    {"LSTM", SupportLstm, LowerLstm},
    {"MatMul", SupportMatMul, LowerMatMul},
    {"Relu", SupportUnary, LowerUnary},
    {"LeakyRelu", SupportUnary, LowerUnary},
    {"Clip", SupportUnary, LowerUnary},
    {"Sigmoid", SupportUnary, LowerUnary},
    {"HardSigmoid", SupportUnary, LowerUnary},
    {"HardSwish", SupportUnary, LowerUnary},
    {"Swish", SupportUnary, LowerUnary},
    {"Tanh", SupportUnary, LowerUnary},
    {"Exp", SupportUnary, LowerUnary},
    {"Log", SupportUnary, LowerUnary},
    {"Sqrt", SupportUnary, LowerUnary},
    {"Abs", SupportUnaryAny, LowerUnaryAny},
    {"Neg", SupportUnaryAny, LowerUnaryAny},
    {"Elu", SupportUnary, LowerUnary},
    {"Softplus", SupportUnary, LowerUnary},
    {"Gelu", SupportUnary, LowerUnary},
    {"Mish", SupportUnary, LowerUnary},
    {"Erf", SupportUnary, LowerUnary},
    {"Add", SupportArith, LowerArith},
    {"Sub", SupportArith, LowerArith},
    {"Mul", SupportArith, LowerArith},
    {"Div", SupportArith, LowerArith},
    {"Pow", SupportBinary, LowerBinary},
    {"Max", SupportBinary, LowerBinary},
    {"Min", SupportBinary, LowerBinary},
    {"Equal", SupportCompareAny, LowerCompareAny},
    {"Greater", SupportCompareAny, LowerCompareAny},
    {"GreaterOrEqual", SupportCompareAny, LowerCompareAny},
    {"Less", SupportCompareAny, LowerCompareAny},
    {"LessOrEqual", SupportCompareAny, LowerCompareAny},
    {"Softmax", SupportSoftmax, LowerSoftmax},
    {"LayerNormalization", SupportLayerNorm, LowerLayerNorm},
    {"ReduceMean", SupportReduce, LowerReduce},
    {"ReduceMax", SupportReduce, LowerReduce},
    {"ReduceMin", SupportReduce, LowerReduce},
    {"ReduceSum", SupportReduce, LowerReduce},
    {"Reshape", SupportReshape, LowerReshape},
    {"Squeeze", SupportReshape, LowerReshape},
    {"Unsqueeze", SupportReshape, LowerReshape},
    {"Flatten", SupportReshape, LowerReshape},
    {"Identity", SupportReshape, LowerReshape},
    {"Cast", SupportCast, LowerCast},
    {"Transpose", SupportTranspose, LowerTranspose},
    {"Slice", SupportSlice, LowerSlice},
    {"Gather", SupportGather, LowerGather},
    {"Concat", SupportConcat, LowerConcat},
    {"Split", SupportSplit, LowerSplit},
    {"Pad", SupportPad, LowerPad},
    {"Expand", SupportExpand, LowerExpand},
    {"DynamicQuantizeLinear", SupportDynamicQuantize, LowerDynamicQuantize},
    {"DequantizeLinear", SupportDequantizeLinear, LowerDequantizeLinear},
    {"QuantizeLinear", SupportQuantizeLinear, LowerQuantizeLinear},
    {"MatMulInteger", SupportMatMulInteger, LowerMatMulInteger},
    {"ConvInteger", SupportConvInteger, LowerConvInteger},
    {"Where", SupportElementwise, LowerElementwise},
    {"Not", SupportElementwise, LowerElementwise},
    {"And", SupportElementwise, LowerElementwise},
    {"Or", SupportElementwise, LowerElementwise},
    {"Xor", SupportElementwise, LowerElementwise},
    {"Sin", SupportElementwise, LowerElementwise},
    {"Cos", SupportElementwise, LowerElementwise},
    {"Ceil", SupportElementwise, LowerElementwise},
    {"Floor", SupportElementwise, LowerElementwise},
    {"Trilu", SupportTrilu, LowerTrilu},
    {"Shape", SupportShape, LowerShape},
    {"ReduceL2", SupportReduce, LowerReduce},
    {"ReduceSumSquare", SupportReduce, LowerReduce},
};

struct StepEntry {
  StepKind kind;
  StepBuilder build;
};
const StepEntry kSteps[] = {
    {StepKind::kReorder, BuildReorder},     {StepKind::kConv, BuildConv},
    {StepKind::kDeconv, BuildDeconv},       {StepKind::kMatMul, BuildMatMul},
    {StepKind::kPool, BuildPool},           {StepKind::kEltwise, BuildEltwise},
    {StepKind::kBinary, BuildBinary},       {StepKind::kSoftmax, BuildSoftmax},
    {StepKind::kLayerNorm, BuildLayerNorm}, {StepKind::kReduction, BuildReduction},
    {StepKind::kConcat, BuildConcat},       {StepKind::kResample, BuildResample},
    {StepKind::kGather, BuildGather},       {StepKind::kErf, BuildErf},
    {StepKind::kInnerProduct, BuildInnerProduct}, {StepKind::kBatchNorm, BuildBatchNorm},
    {StepKind::kMaskedSoftmax, BuildMaskedSoftmax}, {StepKind::kPad, BuildPad},
    {StepKind::kLstm, BuildLstm},           {StepKind::kStridedCopy, BuildStridedCopy},
    {StepKind::kDynamicQuantize, BuildDynamicQuantize}, {StepKind::kDequantize, BuildDequantize},
    {StepKind::kMatMulInt8, BuildMatMulInt8}, {StepKind::kConvInt8, BuildConvInt8},
    {StepKind::kBilinear, BuildBilinear}, {StepKind::kRoundFloat16, BuildRoundFloat16},
    {StepKind::kQuantize, BuildQuantize}, {StepKind::kQConv, BuildQConv},
    {StepKind::kMatMulInt8Avx2, BuildMatMulInt8Avx2}, {StepKind::kConvInt8Avx2, BuildConvInt8Avx2},
    {StepKind::kQConvAvx2, BuildQConvAvx2}, {StepKind::kTypedEltwise, BuildTypedEltwise},
    {StepKind::kTrilu, BuildTrilu},
};

}  // namespace

const OpEntry* FindOp(const std::string& domain, const std::string& op_type) {
  if (!domain.empty() && domain != "ai.onnx") return nullptr;
  for (const OpEntry& e : kOps)
    if (op_type == e.op_type) return &e;
  return nullptr;
}

StepBuilder FindStepBuilder(uint32_t kind) {
  for (const StepEntry& e : kSteps)
    if (static_cast<uint32_t>(e.kind) == kind) return e.build;
  return nullptr;
}

}  // namespace aotcpu
}  // namespace epctx
