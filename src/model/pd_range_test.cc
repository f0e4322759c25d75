#include "model/pd_range.h"

#include <gtest/gtest.h>

namespace dualpath::model {
namespace {

PdRangeInput paper(int g, int s, double dram_gb_per_s) {
  return {g, s, 50e9, 50e9, dram_gb_per_s * 1e9};
}

TEST(PdRange, PaperWorkedExampleIsOneSeventhToSevenHalves) {
  auto r = bottleneck_free_range(paper(8, 1, 500));
  ASSERT_TRUE(r.is_ok());
  EXPECT_NEAR(r->pd_min, 1.0 / 7, 1e-12);
  EXPECT_NEAR(r->pd_max, 3.5, 1e-12);
  EXPECT_EQ(as_fraction(r->pd_min), "1/7");
  EXPECT_EQ(as_fraction(r->pd_max), "7/2");
  // CNIC write and DRAM tie at 3.5 (PAPER.md §6); both bind, DE CNIC read (6) does not.
  int binding_upper = 0;
  for (const auto& c : r->constraints) {
    if (!c.lower && c.binds) ++binding_upper;
    if (c.name.rfind("(5)", 0) == 0) {
      EXPECT_FALSE(c.binds);
    }
  }
  EXPECT_EQ(binding_upper, 2);
}

TEST(PdRange, GeneralisedTableRowsOfPaperSection6) {
  struct Row { int g, s; double dram; double lo, hi; };
  // PAPER.md §6 "Generalized ranges": M/(Bs) = 10, 8, 10, 5, 10.
  const Row rows[] = {{8, 1, 500, 1.0 / 7, 3.5}, {8, 1, 400, 1.0 / 7, 2.5},
                      {8, 2, 1000, 1.0 / 3, 1.5}, {8, 2, 500, 1.0 / 3, 1.0},
                      {4, 1, 500, 1.0 / 3, 1.5}};
  for (const auto& row : rows) {
    auto r = bottleneck_free_range(paper(row.g, row.s, row.dram));
    ASSERT_TRUE(r.is_ok());
    EXPECT_NEAR(r->pd_min, row.lo, 1e-9) << row.g << " " << row.s;
    EXPECT_NEAR(r->pd_max, row.hi, 1e-9) << row.g << " " << row.s;
  }
}

TEST(PdRange, ZeroBandwidthIsAClearError) {
  PdRangeInput in = paper(8, 1, 500);
  in.snic_bytes_per_s = 0;
  auto r = bottleneck_free_range(in);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("hardware.snic_gbps"), std::string::npos);
}

TEST(PdRange, TooManySnicsMakeTheRangeInfeasible) {
  auto r = bottleneck_free_range(paper(8, 5, 5000));  // 2sS/g > B: PE CNIC read overloaded
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(r->feasible);
}

}  // namespace
}  // namespace dualpath::model
