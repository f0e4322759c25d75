#include "workload/dataset_spec.h"

#include <gtest/gtest.h>

namespace dualpath::workload {
namespace {

TEST(DatasetSpecTest, Table2Names) {
  auto ds = load_dataset("32k", 1);
  ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
  EXPECT_EQ(ds->name, "32k");
  EXPECT_EQ(ds->max_len_tokens, 32768);
}

TEST(DatasetSpecTest, UnknownSpecListsTheValidOnes) {
  auto ds = load_dataset("mooncake", 1);
  ASSERT_FALSE(ds.is_ok());
  EXPECT_TRUE(ds.status().is_invalid_argument());
  EXPECT_NE(ds.status().message().find("weka:PATH"), std::string::npos);
  EXPECT_NE(ds.status().message().find("64k"), std::string::npos);
  EXPECT_TRUE(load_dataset("weka:", 1).status().is_invalid_argument());
  EXPECT_TRUE(load_dataset("weka:/no/such/file.jsonl", 1).status().is_not_found());
}

}  // namespace
}  // namespace dualpath::workload
