#include "core/status.h"

#include <gtest/gtest.h>

namespace epctx {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return MakeStatus(ErrorCode::INVALID_ARGUMENT, "odd value ", x);
  return x / 2;
}

Status Chain(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  RETURN_IF_ERROR_CTX(Half(h).status(), "second halving of ", x);
  *out = h;
  return Status::OK();
}

TEST(Status, OkAndCodes) {
  EXPECT_TRUE(Status::OK().ok());
  Status s(ErrorCode::INVALID_GRAPH, "bad");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "INVALID_GRAPH: bad");
  EXPECT_STREQ(ErrorCodeName(ErrorCode::MODEL_REQUIRES_COMPILATION), "MODEL_REQUIRES_COMPILATION");
  EXPECT_EQ(static_cast<int>(ErrorCode::EP_FAIL), 11);
}

TEST(Status, PropagatesWithContext) {
  int out = 0;
  EXPECT_TRUE(Chain(8, &out).ok());
  EXPECT_EQ(out, 4);
  Status s = Chain(6, &out);
  EXPECT_EQ(s.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.message(), "second halving of 6: odd value 3");
  EXPECT_EQ(Chain(3, &out).message(), "odd value 3");
}

}  // namespace
}  // namespace epctx
