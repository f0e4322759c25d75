#pragma once
// FioRunner: runs fio (the reference tool of `dualpath bench store`) as a child process on a
// directory of files and returns what it measured. Thread-compatible; blocks while fio runs.

#include <string>
#include <vector>

#include "dualpath/result.h"
#include "dualpath/units.h"

namespace dualpath::store {

struct FioJob {
  std::string directory;  // every file below it (fio --opendir), each read or written whole
  bool write = false;     // false: sequential read of each file; true: write, fsync at the end
  bool direct = false;    // O_DIRECT; buffered jobs drop the files' cached pages first
  int64_t block_bytes = 0;
  int queue_depth = 1;
};

struct FioResult {
  int64_t io_bytes = 0;
  double seconds = 0;
  double gbps() const { return seconds > 0 ? static_cast<double>(io_bytes) / seconds / 1e9 : 0; }
  double iops = 0;
};

// `fio` is looked up on PATH unless `fio_path` names a binary.
class FioRunner {
 public:
  explicit FioRunner(std::string fio_path = "fio", Duration timeout = std::chrono::minutes(5))
      : fio_path_(std::move(fio_path)), timeout_(timeout) {}

  // "fio-3.33", or kNotFound with the fix (install fio) when it cannot be run.
  Result<std::string> version() const;
  // Runs one job with the io_uring engine. kUnavailable when fio fails (its stderr is quoted),
  // kTimedOut when it runs past the timeout (it is killed).
  Result<FioResult> run(const FioJob& job) const;
  // The command line run() uses, for the record.
  std::vector<std::string> command_line(const FioJob& job, const std::string& output_path) const;

 private:
  Result<std::string> run_and_capture(const std::vector<std::string>& argv,
                                      const std::string& stdout_path) const;
  std::string fio_path_;
  Duration timeout_;
};

}  // namespace dualpath::store
