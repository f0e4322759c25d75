#include "dualpath/result.h"

#include <gtest/gtest.h>

namespace dualpath {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::invalid_argument(fmt::format("{} is not positive", v));
  return v;
}

Status twice(int v, int* out) {
  DP_ASSIGN_OR_RETURN(int x, parse_positive(v));
  *out = 2 * x;
  return Status::ok();
}

Status wrapped(int v) {
  int out = 0;
  DP_RETURN_IF_ERROR(twice(v, &out), "doubling {}", v);
  return Status::ok();
}

TEST(Status, OkIsCheapAndHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_EQ(s.to_string(), "OK");
  EXPECT_TRUE(s.message().empty());
}

TEST(Status, CopiesKeepCodeAndMessage) {
  Status a = Status::corruption("bad checksum");
  Status b = a;
  EXPECT_TRUE(b.is_corruption());
  EXPECT_EQ(b.message(), "bad checksum");
  EXPECT_EQ(a.to_string(), "Corruption: bad checksum");
}

TEST(Result, AssignOrReturnPropagatesErrorsAndValues) {
  int out = 0;
  EXPECT_TRUE(twice(21, &out).is_ok());
  EXPECT_EQ(out, 42);
  Status s = twice(-1, &out);
  EXPECT_TRUE(s.is_invalid_argument());
}

TEST(ResultDeathTest, ValueOfAnErrorAbortsWithTheStatusInEveryBuildType) {
  Result<int> r = parse_positive(-4);
  EXPECT_DEATH((void)*r, "value\\(\\) of an error: InvalidArgument: -4 is not positive");
}

TEST(Result, ReturnIfErrorAddsContext) {
  Status s = wrapped(-3);
  EXPECT_EQ(s.message(), "doubling -3: -3 is not positive");
  EXPECT_TRUE(wrapped(3).is_ok());
}

}  // namespace
}  // namespace dualpath
