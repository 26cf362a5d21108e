/* Pins the plugin EP ABI (include/epctx/ep_api.h) as pure C11.
 *
 * Compile time: the offset of every member of every table, and each table's size, as _Static_asserts. The tables
 * are append-only: a member that moves breaks every plugin built against an older header, so a failure here means
 * the change is wrong, not the test. A member appended at the end needs its offset added below and the table's
 * size raised (the size assert exists so no member goes unpinned). Offsets are those of LP64 (x86_64, aarch64
 * Linux): the leading uint32_t version sits at 0, padding follows, each function pointer takes 8 bytes and the
 * first one sits at 8.
 *
 * Run time: the enum values ep_api.h documents as equal to ONNX Runtime's (OrtErrorCode,
 * ONNXTensorElementDataType, OrtHardwareDeviceType, OrtLoggingLevel, OrtEpDataLayout,
 * OrtCompiledModelCompatibility), checked against ONNX Runtime's numbers written out here.
 *
 * Built by tests/c_abi/CMakeLists.txt (C11, -Wall -Wextra -pedantic -Werror); ctest runs it as ep_api_layout. */
#include <epctx/ep_api.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

_Static_assert(sizeof(void (*)(void)) == 8 && sizeof(void*) == 8, "the offsets below are LP64's");
_Static_assert(sizeof(uint32_t) == 4, "version is a uint32_t");

#define PIN(type, member, offset) \
  _Static_assert(offsetof(type, member) == (offset), #type "::" #member " moved: the table is append-only")
#define PIN_SIZE(type, size) \
  _Static_assert(sizeof(type) == (size), #type " grew or shrank: pin the offset of every new member, then its size")

/* ---- EpctxApiBase: handed to CreateEpFactories; no version field (GetApi negotiates it) ---- */
PIN(EpctxApiBase, GetApi, 0);
PIN(EpctxApiBase, GetVersionString, 8);
PIN_SIZE(EpctxApiBase, 16);

/* ---- EpctxApi: the table the runtime implements ---- */
PIN(EpctxApi, version, 0);
PIN(EpctxApi, CreateStatus, 8);
PIN(EpctxApi, GetErrorCode, 16);
PIN(EpctxApi, GetErrorMessage, 24);
PIN(EpctxApi, ReleaseStatus, 32);
PIN(EpctxApi, Log, 40);
PIN(EpctxApi, KeyValuePairs_Create, 48);
PIN(EpctxApi, KeyValuePairs_Add, 56);
PIN(EpctxApi, KeyValuePairs_Get, 64);
PIN(EpctxApi, KeyValuePairs_GetAll, 72);
PIN(EpctxApi, KeyValuePairs_Release, 80);
PIN(EpctxApi, GetSessionConfigEntry, 88);
PIN(EpctxApi, GetEnvConfigEntries, 96);
PIN(EpctxApi, HardwareDevice_Type, 104);
PIN(EpctxApi, HardwareDevice_VendorId, 112);
PIN(EpctxApi, HardwareDevice_Vendor, 120);
PIN(EpctxApi, HardwareDevice_DeviceId, 128);
PIN(EpctxApi, HardwareDevice_Metadata, 136);
PIN(EpctxApi, CreateHardwareDevice, 144);
PIN(EpctxApi, ReleaseHardwareDevice, 152);
PIN(EpctxApi, CreateEpDevice, 160);
PIN(EpctxApi, ReleaseEpDevice, 168);
PIN(EpctxApi, Graph_GetName, 176);
PIN(EpctxApi, Graph_GetModelPath, 184);
PIN(EpctxApi, Graph_GetOnnxIRVersion, 192);
PIN(EpctxApi, Graph_GetOpsetVersion, 200);
PIN(EpctxApi, Graph_GetNumNodes, 208);
PIN(EpctxApi, Graph_GetNodes, 216);
PIN(EpctxApi, Graph_GetNumInputs, 224);
PIN(EpctxApi, Graph_GetInputs, 232);
PIN(EpctxApi, Graph_GetNumOutputs, 240);
PIN(EpctxApi, Graph_GetOutputs, 248);
PIN(EpctxApi, Graph_GetNumInitializers, 256);
PIN(EpctxApi, Graph_GetInitializers, 264);
PIN(EpctxApi, Graph_GetParentNode, 272);
PIN(EpctxApi, Node_GetName, 280);
PIN(EpctxApi, Node_GetOperatorType, 288);
PIN(EpctxApi, Node_GetDomain, 296);
PIN(EpctxApi, Node_GetSinceVersion, 304);
PIN(EpctxApi, Node_GetId, 312);
PIN(EpctxApi, Node_GetNumInputs, 320);
PIN(EpctxApi, Node_GetInputs, 328);
PIN(EpctxApi, Node_GetNumOutputs, 336);
PIN(EpctxApi, Node_GetOutputs, 344);
PIN(EpctxApi, Node_GetNumAttributes, 352);
PIN(EpctxApi, Node_GetAttributes, 360);
PIN(EpctxApi, Node_GetAttributeByName, 368);
PIN(EpctxApi, Node_GetNumSubgraphs, 376);
PIN(EpctxApi, Node_GetSubgraphs, 384);
PIN(EpctxApi, Node_GetGraph, 392);
PIN(EpctxApi, OpAttr_GetName, 400);
PIN(EpctxApi, OpAttr_GetType, 408);
PIN(EpctxApi, OpAttr_GetInt, 416);
PIN(EpctxApi, OpAttr_GetFloat, 424);
PIN(EpctxApi, OpAttr_GetString, 432);
PIN(EpctxApi, OpAttr_GetInts, 440);
PIN(EpctxApi, OpAttr_GetFloats, 448);
PIN(EpctxApi, OpAttr_GetNumStrings, 456);
PIN(EpctxApi, OpAttr_GetStringAt, 464);
PIN(EpctxApi, OpAttr_GetTensor, 472);
PIN(EpctxApi, OpAttr_GetGraph, 480);
PIN(EpctxApi, ValueInfo_GetName, 488);
PIN(EpctxApi, ValueInfo_GetKind, 496);
PIN(EpctxApi, ValueInfo_GetElementType, 504);
PIN(EpctxApi, ValueInfo_GetRank, 512);
PIN(EpctxApi, ValueInfo_GetShape, 520);
PIN(EpctxApi, ValueInfo_GetProducer, 528);
PIN(EpctxApi, ValueInfo_GetNumConsumers, 536);
PIN(EpctxApi, ValueInfo_GetConsumers, 544);
PIN(EpctxApi, ValueInfo_IsGraphInput, 552);
PIN(EpctxApi, ValueInfo_IsGraphOutput, 560);
PIN(EpctxApi, ValueInfo_IsInitializer, 568);
PIN(EpctxApi, ValueInfo_IsConstantInitializer, 576);
PIN(EpctxApi, ValueInfo_IsFromOuterScope, 584);
PIN(EpctxApi, ValueInfo_GetInitializerValue, 592);
PIN(EpctxApi, ValueInfo_GetExternalInitializerInfo, 600);
PIN(EpctxApi, Value_GetElementType, 608);
PIN(EpctxApi, Value_GetRank, 616);
PIN(EpctxApi, Value_GetShape, 624);
PIN(EpctxApi, Value_GetElementCount, 632);
PIN(EpctxApi, Value_GetData, 640);
PIN(EpctxApi, Value_GetMutableData, 648);
PIN(EpctxApi, EpGraphSupportInfo_AddNodesToFuse, 656);
PIN(EpctxApi, EpGraphSupportInfo_AddSingleNode, 664);
PIN(EpctxApi, NodeComputeContext_NodeName, 672);
PIN(EpctxApi, KernelContext_GetInputCount, 680);
PIN(EpctxApi, KernelContext_GetOutputCount, 688);
PIN(EpctxApi, KernelContext_GetInput, 696);
PIN(EpctxApi, KernelContext_GetOutput, 704);
PIN(EpctxApi, CreateOpAttr, 712);
PIN(EpctxApi, ReleaseOpAttr, 720);
PIN(EpctxApi, CreateNode, 728);
PIN(EpctxApi, ReleaseNode, 736);
PIN(EpctxApi, ProfilingEventSink_AddEvent, 744);
PIN(EpctxApi, ReportEpContextLoad, 752);
PIN(EpctxApi, EpGraphSupportInfo_SetNodeRejectionReason, 760);
PIN_SIZE(EpctxApi, 768);

/* ---- EpctxEpFactory: implemented by the plugin ---- */
PIN(EpctxEpFactory, version, 0);
PIN(EpctxEpFactory, GetName, 8);
PIN(EpctxEpFactory, GetVendor, 16);
PIN(EpctxEpFactory, GetVendorId, 24);
PIN(EpctxEpFactory, GetVersion, 32);
PIN(EpctxEpFactory, GetSupportedDevices, 40);
PIN(EpctxEpFactory, CreateEp, 48);
PIN(EpctxEpFactory, ReleaseEp, 56);
PIN(EpctxEpFactory, ValidateCompiledModelCompatibilityInfo, 64);
PIN_SIZE(EpctxEpFactory, 72);

/* ---- EpctxEp: implemented by the plugin, one per session ---- */
PIN(EpctxEp, version, 0);
PIN(EpctxEp, GetName, 8);
PIN(EpctxEp, GetCapability, 16);
PIN(EpctxEp, Compile, 24);
PIN(EpctxEp, ReleaseNodeComputeInfos, 32);
PIN(EpctxEp, GetPreferredDataLayout, 40);
PIN(EpctxEp, ShouldConvertDataLayoutForOp, 48);
PIN(EpctxEp, SetDynamicOptions, 56);
PIN(EpctxEp, OnRunStart, 64);
PIN(EpctxEp, OnRunEnd, 72);
PIN(EpctxEp, IsConcurrentRunSupported, 80);
PIN(EpctxEp, CreateProfiler, 88);
PIN(EpctxEp, OnSessionInitializationEnd, 96);
PIN(EpctxEp, GetCompiledModelCompatibilityInfo, 104);
PIN_SIZE(EpctxEp, 112);

/* ---- EpctxNodeComputeInfo: implemented by the plugin, one per fused node ---- */
PIN(EpctxNodeComputeInfo, version, 0);
PIN(EpctxNodeComputeInfo, CreateState, 8);
PIN(EpctxNodeComputeInfo, Compute, 16);
PIN(EpctxNodeComputeInfo, ReleaseState, 24);
PIN_SIZE(EpctxNodeComputeInfo, 32);

/* ---- EpctxEpProfiler: implemented by the plugin ---- */
PIN(EpctxEpProfiler, version, 0);
PIN(EpctxEpProfiler, StartProfiling, 8);
PIN(EpctxEpProfiler, EndProfiling, 16);
PIN(EpctxEpProfiler, Release, 24);
PIN_SIZE(EpctxEpProfiler, 32);

/* ---- run time: enum values equal ONNX Runtime's ---- */

static int failures = 0;

static void Expect(const char* what, long long epctx_value, long long ort_value) {
  if (epctx_value != ort_value) {
    fprintf(stderr, "ep_api_layout_test: %s is %lld in ep_api.h but %lld in ONNX Runtime\n", what, epctx_value,
            ort_value);
    ++failures;
  }
}
#define EXPECT_ORT(epctx_name, ort_value) Expect(#epctx_name, (long long)(epctx_name), (long long)(ort_value))

int main(void) {
  /* OrtErrorCode (onnxruntime_c_api.h) */
  EXPECT_ORT(EPCTX_OK, 0);                          /* ORT_OK */
  EXPECT_ORT(EPCTX_FAIL, 1);                        /* ORT_FAIL */
  EXPECT_ORT(EPCTX_INVALID_ARGUMENT, 2);            /* ORT_INVALID_ARGUMENT */
  EXPECT_ORT(EPCTX_NO_SUCHFILE, 3);                 /* ORT_NO_SUCHFILE */
  EXPECT_ORT(EPCTX_NO_MODEL, 4);                    /* ORT_NO_MODEL */
  EXPECT_ORT(EPCTX_ENGINE_ERROR, 5);                /* ORT_ENGINE_ERROR */
  EXPECT_ORT(EPCTX_RUNTIME_EXCEPTION, 6);           /* ORT_RUNTIME_EXCEPTION */
  EXPECT_ORT(EPCTX_INVALID_PROTOBUF, 7);            /* ORT_INVALID_PROTOBUF */
  EXPECT_ORT(EPCTX_MODEL_LOADED, 8);                /* ORT_MODEL_LOADED */
  EXPECT_ORT(EPCTX_NOT_IMPLEMENTED, 9);             /* ORT_NOT_IMPLEMENTED */
  EXPECT_ORT(EPCTX_INVALID_GRAPH, 10);              /* ORT_INVALID_GRAPH */
  EXPECT_ORT(EPCTX_EP_FAIL, 11);                    /* ORT_EP_FAIL */
  EXPECT_ORT(EPCTX_MODEL_LOAD_CANCELED, 12);        /* ORT_MODEL_LOAD_CANCELED */
  EXPECT_ORT(EPCTX_MODEL_REQUIRES_COMPILATION, 13); /* ORT_MODEL_REQUIRES_COMPILATION */
  EXPECT_ORT(EPCTX_NOT_FOUND, 14);                  /* ORT_NOT_FOUND */

  /* ONNXTensorElementDataType (= onnx.TensorProto.DataType) */
  EXPECT_ORT(EPCTX_ELEMENT_UNDEFINED, 0);
  EXPECT_ORT(EPCTX_ELEMENT_FLOAT, 1);
  EXPECT_ORT(EPCTX_ELEMENT_UINT8, 2);
  EXPECT_ORT(EPCTX_ELEMENT_INT8, 3);
  EXPECT_ORT(EPCTX_ELEMENT_UINT16, 4);
  EXPECT_ORT(EPCTX_ELEMENT_INT16, 5);
  EXPECT_ORT(EPCTX_ELEMENT_INT32, 6);
  EXPECT_ORT(EPCTX_ELEMENT_INT64, 7);
  EXPECT_ORT(EPCTX_ELEMENT_STRING, 8);
  EXPECT_ORT(EPCTX_ELEMENT_BOOL, 9);
  EXPECT_ORT(EPCTX_ELEMENT_FLOAT16, 10);
  EXPECT_ORT(EPCTX_ELEMENT_DOUBLE, 11);
  EXPECT_ORT(EPCTX_ELEMENT_UINT32, 12);
  EXPECT_ORT(EPCTX_ELEMENT_UINT64, 13);
  EXPECT_ORT(EPCTX_ELEMENT_COMPLEX64, 14);
  EXPECT_ORT(EPCTX_ELEMENT_COMPLEX128, 15);
  EXPECT_ORT(EPCTX_ELEMENT_BFLOAT16, 16);

  /* OrtHardwareDeviceType */
  EXPECT_ORT(EPCTX_DEVICE_CPU, 0);
  EXPECT_ORT(EPCTX_DEVICE_GPU, 1);
  EXPECT_ORT(EPCTX_DEVICE_NPU, 2);

  /* OrtLoggingLevel */
  EXPECT_ORT(EPCTX_LOG_VERBOSE, 0);
  EXPECT_ORT(EPCTX_LOG_INFO, 1);
  EXPECT_ORT(EPCTX_LOG_WARNING, 2);
  EXPECT_ORT(EPCTX_LOG_ERROR, 3);
  EXPECT_ORT(EPCTX_LOG_FATAL, 4);

  /* OrtEpDataLayout */
  EXPECT_ORT(EPCTX_LAYOUT_NCHW, 0);
  EXPECT_ORT(EPCTX_LAYOUT_NHWC, 1);

  /* OrtCompiledModelCompatibility */
  EXPECT_ORT(EPCTX_EP_NOT_APPLICABLE, 0);
  EXPECT_ORT(EPCTX_EP_SUPPORTED_OPTIMAL, 1);
  EXPECT_ORT(EPCTX_EP_SUPPORTED_PREFER_RECOMPILATION, 2);
  EXPECT_ORT(EPCTX_EP_UNSUPPORTED, 3);

  /* The enums cross the ABI as C enums: int-sized. */
  Expect("sizeof(EpctxErrorCode)", (long long)sizeof(EpctxErrorCode), (long long)sizeof(int));
  Expect("sizeof(EpctxElementType)", (long long)sizeof(EpctxElementType), (long long)sizeof(int));

  if (EPCTX_EP_API_VERSION < 1u) {
    fprintf(stderr, "ep_api_layout_test: EPCTX_EP_API_VERSION must be at least 1\n");
    ++failures;
  }
  if (failures) {
    fprintf(stderr, "ep_api_layout_test: %d mismatch(es)\n", failures);
    return 1;
  }
  printf("ep_api_layout_test: layout and enum values OK\n");
  return 0;
}
