#pragma once
// The store benchmark behind `dualpath bench store` (issue 3): read and write throughput of
// Full Blocks through FileStore, next to fio on the same files with the same block size and
// queue depth, in the same run; and IOPS of reads of Layer-Block size.
//
// Method, per mode (direct, buffered):
// - reads: write a data set of block files (untimed), then per repeat run dualpath and fio back
//   to back on the same files, both cold (the files' pages dropped with posix_fadvise DONTNEED
//   first; fio does the same with --invalidate=1). Each side reads every file once, whole.
// - writes: per repeat dualpath writes and publishes a fresh set of blocks (temp file, write,
//   fsync, rename), then fio overwrites the same files (--end_fsync=1); the files are deleted
//   before the next repeat.
// - Layer-Block reads: the same read procedure on files whose payload is one Layer Block.
// The figure of each side is the median over the repeats. Throughput counts the bytes moved
// from disk (header, payload and padding: the whole file), which is what fio counts; the KV
// payload rate is reported too.

#include <functional>
#include <string>
#include <vector>

#include "dualpath/result.h"
#include "store/block_layout.h"

namespace dualpath::store {

struct StoreBenchOptions {
  std::string dir;  // a scratch directory on the disk to measure; created if missing
  // DS 660B FP8 MLA (PAPER.md §4): 41,984-byte Layer Blocks, 2.56 MB Full Blocks.
  BlockLayout layout{61, 64, 656};
  std::vector<int> queue_depths{16};
  std::vector<std::string> modes{"direct", "buffered"};
  int64_t dataset_bytes = int64_t{512} << 20;  // per mode, for Full-Block cases
  int64_t layer_block_files = 4096;            // for the Layer-Block read cases
  // Read repeats: the read ratio is the acceptance figure, and this VM's disk varies run to run.
  int repeats = 9;
  int write_repeats = 3;
  bool writes = true;
  bool layer_blocks = true;
  std::string fio_path = "fio";
  bool keep_files = false;
};

struct StoreBenchCase {
  std::string mode;         // direct | buffered
  std::string op;           // read | write
  std::string unit;         // full_block | layer_block
  int64_t block_bytes = 0;  // KV payload per block (one file)
  int64_t file_bytes = 0;   // bytes per block file (what both sides move)
  int queue_depth = 0;
  int64_t blocks = 0;  // per repeat
  int repeats = 0;
  double dualpath_gbps = 0;          // median; file bytes per second / 1e9
  double dualpath_payload_gbps = 0;  // median; KV payload bytes per second / 1e9
  double fio_gbps = 0;               // median
  double ratio = 0;                  // median over repeats of dualpath/fio of back-to-back runs
  double ratio_of_medians = 0;       // dualpath_gbps / fio_gbps
  double dualpath_iops = 0;          // blocks per second, median
  double fio_iops = 0;
  std::vector<double> dualpath_gbps_runs;
  std::vector<double> fio_gbps_runs;
};

struct StoreBenchReport {
  std::string fio_version;
  std::vector<std::string> fio_command_example;
  std::vector<StoreBenchCase> cases;
};

// Runs every case; `progress` gets one line per finished case (may be empty). Errors name the
// directory or the tool and the fix.
Result<StoreBenchReport> run_store_bench(const StoreBenchOptions& options,
                                         const std::function<void(const std::string&)>& progress);

// The terminal table, one row per case, with the ratio.
std::string format_store_bench_table(const StoreBenchOptions& options,
                                     const StoreBenchReport& report);
// The JSON document (`cases` array; setup alongside).
std::string store_bench_json(const StoreBenchOptions& options, const StoreBenchReport& report);

}  // namespace dualpath::store
