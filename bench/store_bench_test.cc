// A small end-to-end run of the store benchmark: real files, real io_uring, real fio. It checks
// the report's shape (the JSON fields scripts rely on), never the figures.

#include "bench/store_bench.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/fio_runner.h"
#include "store/temp_dir.h"

namespace dualpath::store {
namespace {

TEST(StoreBench, ReportsEveryCaseWithTheFieldsScriptsReadAndCleansUp) {
  if (!FioRunner().version().is_ok()) GTEST_SKIP() << "fio is not installed";
  TempDir tmp;
  StoreBenchOptions opt;
  opt.dir = tmp.path() + "/bench";
  opt.layout = BlockLayout{4, 64, 656};  // 167,936-byte Full Blocks: a fast, small run
  opt.dataset_bytes = 4 << 20;
  opt.layer_block_files = 64;
  opt.repeats = 1;
  opt.write_repeats = 1;
  opt.queue_depths = {4};
  auto report = run_store_bench(opt, {});
  if (!report.is_ok() && report.status().message().find("O_DIRECT") != std::string::npos) {
    GTEST_SKIP() << report.status().to_string();
  }
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  ASSERT_EQ(report->cases.size(), 6u);  // {direct, buffered} x {read, layer read, write}
  auto doc = nlohmann::json::parse(store_bench_json(opt, *report));
  ASSERT_EQ(doc["cases"].size(), 6u);
  for (const auto& c : doc["cases"]) {
    for (const char* field : {"mode", "op", "block_bytes", "queue_depth", "dualpath_gbps",
                              "fio_gbps", "ratio", "dualpath_iops", "fio_iops"}) {
      EXPECT_TRUE(c.contains(field)) << field << " missing in " << c.dump();
    }
    EXPECT_GT(c["dualpath_gbps"].get<double>(), 0) << c.dump();
    EXPECT_GT(c["fio_gbps"].get<double>(), 0) << c.dump();
    EXPECT_EQ(c["queue_depth"].get<int>(), 4);
  }
  EXPECT_EQ(doc["cases"][0]["mode"], "direct");
  EXPECT_EQ(doc["cases"][0]["op"], "read");
  EXPECT_EQ(doc["cases"][0]["block_bytes"].get<int64_t>(), 4 * 64 * 656);
  EXPECT_EQ(doc["cases"][1]["block_bytes"].get<int64_t>(), 64 * 656) << "a Layer Block";
  const std::string table = format_store_bench_table(opt, *report);
  EXPECT_NE(table.find("ratio"), std::string::npos);
  EXPECT_EQ(count_regular_files(opt.dir), 0u) << "the data sets are removed";
}

TEST(StoreBench, MissingFioIsAClearError) {
  FioRunner fio("/nonexistent/fio");
  auto v = fio.version();
  ASSERT_FALSE(v.is_ok());
  EXPECT_NE(v.status().message().find("install fio"), std::string::npos) << v.status().message();
}

}  // namespace
}  // namespace dualpath::store
