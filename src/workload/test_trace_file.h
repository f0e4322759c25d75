#pragma once
// For tests: a trace file with the given text in the temporary directory, named for the running
// test and process, removed when the object goes. Shared by the trace readers' tests and the
// simulator's trace-replay tests.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace dualpath::workload {

class TestTraceFile {
 public:
  explicit TestTraceFile(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() /
             ("dp_trace_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl"))
                .string();
    std::ofstream(path_) << text;
  }
  ~TestTraceFile() { std::filesystem::remove(path_); }
  TestTraceFile(const TestTraceFile&) = delete;
  TestTraceFile& operator=(const TestTraceFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace dualpath::workload
