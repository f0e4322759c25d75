// dualpath bench store: FileStore read/write throughput next to fio on the same files, and
// Layer-Block-size read IOPS (issue 3). The logic lives in bench/store_bench.{h,cc}.

#include <cstdio>
#include <fstream>

#include "apps/dualpath/command.h"
#include "bench/store_bench.h"

namespace dualpath::app {
namespace {

void setup(CLI::App& parent, int& exit_code) {
  auto opt = std::make_shared<store::StoreBenchOptions>();
  auto json_path = std::make_shared<std::string>();
  auto dataset_mib = std::make_shared<int64_t>(opt->dataset_bytes >> 20);
  auto no_writes = std::make_shared<bool>(false);
  auto no_layer = std::make_shared<bool>(false);
  CLI::App* cmd = parent.add_subcommand(
      "store",
      "KV block store throughput: dualpath's io_uring FileStore next to fio on the same block\n"
      "files, with the same block size and queue depth, in one run. Cases: Full-Block reads\n"
      "and writes, and Layer-Block-size reads (IOPS), each with O_DIRECT and buffered. Both\n"
      "sides start every read repeat cold (posix_fadvise DONTNEED; fio --invalidate=1).\n"
      "GB/s counts whole block files (1e9 bytes/s); figures are medians of --repeats.\n"
      "Example: dualpath bench store --dir /mnt/nvme0n1/dp-bench --json store.json");
  cmd->add_option("--dir", opt->dir,
                  "Scratch directory on the disk to measure (created; its case subdirectories "
                  "are removed afterwards unless --keep)")
      ->required();
  cmd->add_option("--json", *json_path, "Write the results here as JSON (a `cases` array)");
  cmd->add_option("--queue-depth", opt->queue_depths,
                  "Block reads/writes in flight, one or more (default 16)")
      ->delimiter(',');
  cmd->add_option("--modes", opt->modes, "direct, buffered or both (default both)")->delimiter(',');
  cmd->add_option("--layers", opt->layout.layers, "Layers per Full Block (default 61, DS 660B)");
  cmd->add_option("--block-tokens", opt->layout.block_tokens, "Tokens per block (default 64)");
  cmd->add_option("--bytes-per-token-per-layer", opt->layout.bytes_per_token_per_layer,
                  "KV bytes per token per layer (default 656, DS 660B FP8 MLA)");
  cmd->add_option("--dataset-mib", *dataset_mib, "MiB of Full-Block files per mode (default 512)");
  cmd->add_option("--layer-block-files", opt->layer_block_files,
                  "Files for the Layer-Block read cases (default 4096)");
  cmd->add_option("--repeats", opt->repeats, "Read repeats per side and case (default 9)");
  cmd->add_option("--write-repeats", opt->write_repeats,
                  "Write repeats per side and case (default 3)");
  cmd->add_option("--fio", opt->fio_path, "The fio binary (default: fio on PATH)");
  cmd->add_flag("--no-writes", *no_writes, "Skip the write cases");
  cmd->add_flag("--no-layer-blocks", *no_layer, "Skip the Layer-Block read cases");
  cmd->add_flag("--keep", opt->keep_files, "Keep the read data sets under --dir");
  cmd->callback([=, &exit_code] {
    opt->dataset_bytes = *dataset_mib << 20;
    opt->writes = !*no_writes;
    opt->layer_blocks = !*no_layer;
    auto report = store::run_store_bench(
        *opt, [](const std::string& line) { std::fprintf(stderr, "  done: %s\n", line.c_str()); });
    if (!report.is_ok()) {
      std::fprintf(stderr, "dualpath: bench store: %s\n", report.status().to_string().c_str());
      exit_code = 1;
      return;
    }
    std::fputs(store::format_store_bench_table(*opt, *report).c_str(), stdout);
    if (!json_path->empty()) {
      std::ofstream out(*json_path);
      out << store::store_bench_json(*opt, *report);
      if (!out) {
        std::fprintf(stderr, "dualpath: bench store: cannot write '%s'; check the path\n",
                     json_path->c_str());
        exit_code = 1;
        return;
      }
    }
    exit_code = 0;
  });
}

DP_REGISTER_COMMAND("bench", "store", setup);

}  // namespace
}  // namespace dualpath::app
