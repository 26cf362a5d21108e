#include "core/data_type.h"

namespace epctx {

size_t DataTypeSize(DataType t) {
  switch (t) {
#define X(e, T, n) \
  case DataType::e: \
    return sizeof(T);
    EPCTX_FOR_EACH_DATA_TYPE(X)
#undef X
    default:
      return 0;
  }
}

const char* DataTypeName(DataType t) {
  switch (t) {
#define X(e, T, n) \
  case DataType::e: \
    return n;
    EPCTX_FOR_EACH_DATA_TYPE(X)
#undef X
    default:
      return "undefined";
  }
}

bool IsValidDataType(int32_t v) {
  switch (static_cast<DataType>(v)) {
#define X(e, T, n) case DataType::e:
    EPCTX_FOR_EACH_DATA_TYPE(X)
#undef X
    return true;
    default:
      return false;
  }
}

}  // namespace epctx
