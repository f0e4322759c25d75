#pragma once
// `dualpath bench compute`: prefill and decode throughput of the CPU reference transformer on one
// core, the figure the live system's emulated clusters are sized by. The logic lives here so the
// command file stays thin (apps/dualpath/cmd_bench_compute.cc).

#include <cstdint>
#include <string>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::compute {

struct ComputeBenchOptions {
  std::vector<std::string> models = {"tiny", "small"};
  int64_t prompt_tokens = 512;    // new tokens per prefill
  int64_t cached_tokens = 0;      // KV already there (a prefix hit), attended by every new token
  int64_t decode_context = 4096;  // context of the decode steps
  int decode_steps = 16;
  int repeats = 5;
  uint64_t seed = 1;
};

struct ComputeBenchRow {
  std::string model;
  std::string phase;   // "prefill" or "decode"
  int64_t tokens = 0;  // per repeat
  int64_t cached_tokens = 0;
  int repeats = 0;
  double median_tokens_per_s = 0;
  double min_tokens_per_s = 0;  // the slowest repeat (p0): shared machines vary 2-4x
  // Tokens per second of this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), median: what one
  // unshared core would do, when other processes take turns on it.
  double median_tokens_per_cpu_s = 0;

  std::string to_line() const;
};

// Runs every case; `progress` (may be empty) gets each row's line as it finishes.
Result<std::vector<ComputeBenchRow>> run_compute_bench(const ComputeBenchOptions& options);

}  // namespace dualpath::compute
