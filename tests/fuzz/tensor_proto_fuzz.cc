// libFuzzer target: test-data files as `epctx test` reads them (test_data_set_N/input_N.pb). The input is the
// file's bytes; it is written as input_0.pb and read by the CLI's own ReadTestData (tools/tool_common.cc) once as
// each kind a model input can declare (tensor, tensor declared bfloat16, sequence, optional); every value read is
// then compared with itself and summarized as `epctx test` does on a mismatch.
//
// Contract checked: a file is read or refused with a Status that has a message; a value that was read compares
// equal to itself (ValuesClose treats NaN as equal to NaN) and its summary is printable.
//
// Seeds: tests/fuzz/corpus/tensor_proto plus the input_N.pb files of ONNX's node tests (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "tools/tool_common.h"

namespace {
std::string* g_dir = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = new std::string(epctx::fuzz::MakeTempDir("tensor_proto"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace epctx;
  fuzz::WriteBytes(*g_dir + "/input_0.pb", data, size);
  static const std::pair<ValueType::Kind, DataType> kDeclared[] = {
      {ValueType::Kind::kTensor, DataType::kFloat},
      {ValueType::Kind::kTensor, DataType::kBFloat16},  // the uint16 -> bfloat16 reinterpretation
      {ValueType::Kind::kSequence, DataType::kFloat},
      {ValueType::Kind::kOptional, DataType::kFloat},
  };
  for (const auto& [kind, elem] : kDeclared) {
    ValueInfo info;
    info.name = "x";
    info.type.kind = kind;
    info.type.elem_type = elem;
    auto values = tools::ReadTestData(*g_dir, "input_", {info});
    if (!values.ok()) {
      fuzz::CheckRefusal(values.status(), "ReadTestData");
      continue;
    }
    if (values->size() != 1) fuzz::Die("one file gave " + std::to_string(values->size()) + " values");
    const IValue& v = (*values)[0];
    std::string why;
    if (!tools::ValuesClose(v, v, 0, 0, &why)) fuzz::Die("a value read from a test-data file differs from itself: " + why);
    if (tools::Summarize(v).empty()) fuzz::Die("empty summary");
  }
  return 0;
}
