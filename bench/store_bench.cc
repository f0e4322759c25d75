#include "bench/store_bench.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "common/percentiles.h"
#include "store/aligned_buffer.h"
#include "store/block_file.h"
#include "store/file_store.h"
#include "bench/fio_runner.h"

namespace dualpath::store {
namespace {

// Batches outstanding: with three, the store's I/O thread always has queued work when the
// oldest finishes, so it keeps queue_depth I/Os in flight.
constexpr int kBatchesInFlight = 3;
// Blocks per batch: four queue depths' worth (fewer wake-ups of the submitting thread, which
// matters for small blocks on a busy machine), as long as the buffers stay under 256 MiB.
constexpr int64_t kBufferBudgetBytes = int64_t{256} << 20;
int batch_blocks(int queue_depth, int64_t file_bytes) {
  const int64_t by_budget = kBufferBudgetBytes / (kBatchesInFlight * file_bytes);
  return static_cast<int>(
      std::max<int64_t>(queue_depth, std::min<int64_t>(4 * queue_depth, by_budget)));
}
constexpr Duration kBatchDeadline = std::chrono::seconds(120);

std::vector<BlockKey> bench_keys(const std::string& tag, int64_t n) {
  // Any distinct keys do; derive them from the tag so that every repeat writes new blocks.
  std::vector<BlockKey> keys;
  BlockKey k = chain_start(fingerprint_of(tag));
  for (int64_t i = 0; i < n; ++i) {
    const TokenId t[2] = {static_cast<TokenId>(i), static_cast<TokenId>(i >> 31)};
    keys.push_back(next_block_key(k, t));
  }
  return keys;
}

// The keys of the block files under `dir`, in the order fio's --opendir visits them: readdir
// order, depth first (fio's recurse_dir). Reading in the same order keeps the comparison fair
// whatever the file system's placement of the files.
void keys_in_fio_order(const std::string& dir, std::vector<BlockKey>* keys) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      if (auto k = BlockKey::from_hex(name.substr(0, 32)); k.is_ok()) keys->push_back(*k);
    } else if (S_ISDIR(st.st_mode)) {
      keys_in_fio_order(path, keys);
    }
  }
  ::closedir(d);
}

Status drop_cached_pages(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (!it->is_regular_file()) continue;
    int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);  // clean pages only can be dropped
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  if (ec) {
    return Status::io_error(fmt::format("cannot list '{}': {}", dir, ec.message()));
  }
  return Status::ok();
}

// The blocks' buffers: slices of one huge-page-backed allocation, as an engine's buffer pool.
struct BufferPool {
  AlignedBuffer memory;
  std::vector<std::span<std::byte>> slots;
};

// Runs `keys` through the store in batches of `batch` blocks with kBatchesInFlight outstanding;
// returns the elapsed seconds. Every block must succeed.
Result<double> timed_pass(FileStore& store,
                          const std::vector<BlockKey>& keys,
                          BufferPool& buffers,
                          int batch,
                          bool write) {
  std::deque<IoBatch> window;
  size_t next = 0;
  size_t batch_no = 0;
  auto retire_oldest = [&]() -> Status {
    IoBatch& b = window.front();
    DP_RETURN_IF_ERROR(b.wait_for(kBatchDeadline), "benchmark batch");
    for (const Status& s : b.results()) {
      if (!s.is_ok()) return s.with_context(write ? "benchmark write" : "benchmark read");
    }
    window.pop_front();
    return Status::ok();
  };
  const auto start = std::chrono::steady_clock::now();
  while (next < keys.size() || !window.empty()) {
    while (window.size() < kBatchesInFlight && next < keys.size()) {
      const size_t slot = batch_no++ % kBatchesInFlight;
      const size_t count = std::min(static_cast<size_t>(batch), keys.size() - next);
      if (write) {
        std::vector<WriteRequest> reqs;
        for (size_t j = 0; j < count; ++j) {
          reqs.push_back({keys[next + j], buffers.slots[slot * static_cast<size_t>(batch) + j]});
        }
        DP_ASSIGN_OR_RETURN(auto b, store.write(reqs));
        window.push_back(std::move(b));
      } else {
        std::vector<ReadRequest> reqs;
        for (size_t j = 0; j < count; ++j) {
          reqs.push_back({keys[next + j], buffers.slots[slot * static_cast<size_t>(batch) + j]});
        }
        DP_ASSIGN_OR_RETURN(auto b, store.read(reqs));
        window.push_back(std::move(b));
      }
      next += count;
    }
    DP_RETURN_IF_ERROR(retire_oldest());
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct CaseSetup {
  std::string mode;
  std::string unit;
  BlockLayout layout;
  int64_t blocks = 0;
  int queue_depth = 0;
  int batch = 0;  // blocks per read()/write() call
};

// `sync`: fsync each written block. The read cases' data sets are scratch and skip it (their
// pages are written back before each repeat anyway); the write cases measure it.
Result<std::unique_ptr<FileStore>> open_bench_store(const std::string& root,
                                                    const CaseSetup& c,
                                                    bool sync) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) {
    return Status::failed_precondition(fmt::format(
        "cannot create benchmark directory '{}': {}; pass a writable --dir", root, ec.message()));
  }
  FileStoreOptions o;
  o.data_paths = {root};
  o.model = fingerprint_of("dualpath bench store");
  o.layout = c.layout;
  o.direct_io = c.mode == "direct";
  o.queue_depth = c.queue_depth;
  o.sync_writes = sync;
  return FileStore::open(o);
}

Result<BufferPool> make_buffers(const CaseSetup& c) {
  BufferPool pool;
  const auto block = static_cast<size_t>(c.layout.full_block_bytes());
  const auto stride = static_cast<size_t>(round_up_to_io_align(c.layout.full_block_bytes()));
  const size_t slots = static_cast<size_t>(c.batch) * kBatchesInFlight;
  DP_ASSIGN_OR_RETURN(pool.memory, AlignedBuffer::allocate(stride * slots));
  // Incompressible contents, in case the file system or device compresses.
  std::mt19937_64 rng(42);
  for (size_t w = 0; w + 8 <= pool.memory.size(); w += 8) {
    const uint64_t v = rng();
    std::memcpy(pool.memory.data() + w, &v, 8);
  }
  for (size_t i = 0; i < slots; ++i)
    pool.slots.push_back(pool.memory.span().subspan(i * stride, block));
  return pool;
}

StoreBenchCase summarize(const CaseSetup& c,
                         const std::string& op,
                         int repeats,
                         const std::vector<double>& dp_seconds,
                         const std::vector<FioResult>& fio) {
  StoreBenchCase out;
  out.mode = c.mode;
  out.op = op;
  out.unit = c.unit;
  out.block_bytes = c.layout.full_block_bytes();
  out.file_bytes = block_file_bytes(c.layout);
  out.queue_depth = c.queue_depth;
  out.blocks = c.blocks;
  out.repeats = repeats;
  std::vector<double> dp_iops, fio_iops;
  for (double s : dp_seconds) {
    out.dualpath_gbps_runs.push_back(static_cast<double>(c.blocks * out.file_bytes) / s / 1e9);
    dp_iops.push_back(static_cast<double>(c.blocks) / s);
  }
  for (const auto& f : fio) {
    out.fio_gbps_runs.push_back(f.gbps());
    fio_iops.push_back(f.iops);
  }
  out.dualpath_gbps = median(out.dualpath_gbps_runs);
  out.dualpath_payload_gbps = out.dualpath_gbps * static_cast<double>(out.block_bytes) /
                              static_cast<double>(out.file_bytes);
  out.fio_gbps = median(out.fio_gbps_runs);
  // The ratio pairs each repeat's back-to-back runs, which share the disk's state of the moment
  // (shared machines drift 2-4x between runs), then takes the median.
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(out.dualpath_gbps_runs.size(), out.fio_gbps_runs.size()); ++i) {
    if (out.fio_gbps_runs[i] > 0)
      ratios.push_back(out.dualpath_gbps_runs[i] / out.fio_gbps_runs[i]);
  }
  out.ratio = median(ratios);
  out.ratio_of_medians = out.fio_gbps > 0 ? out.dualpath_gbps / out.fio_gbps : 0;
  out.dualpath_iops = median(dp_iops);
  out.fio_iops = median(fio_iops);
  return out;
}

Result<StoreBenchCase> run_read_case(const StoreBenchOptions& opt,
                                     const CaseSetup& c,
                                     const FioRunner& fio) {
  const std::string root =
      fmt::format("{}/{}-{}-{}", opt.dir, c.unit, c.mode, c.layout.full_block_bytes());
  DP_ASSIGN_OR_RETURN(auto buffers, make_buffers(c));
  std::vector<double> dp_seconds;
  std::vector<FioResult> fio_runs;
  {
    DP_ASSIGN_OR_RETURN(auto store, open_bench_store(root, c, /*sync=*/false));
    const auto keys = bench_keys("read-set", c.blocks);
    // The data set: written once (untimed), then read once to warm metadata caches (dentries,
    // inodes), which fio also has warm after it opens its files.
    DP_ASSIGN_OR_RETURN(double ignored, timed_pass(*store, keys, buffers, c.batch, true));
    std::vector<BlockKey> order;
    keys_in_fio_order(root + "/blocks", &order);
    if (order.size() != keys.size()) {
      return Status::internal(fmt::format("found {} block files under '{}', wrote {}", order.size(),
                                          root, keys.size()));
    }
    DP_ASSIGN_OR_RETURN(ignored, timed_pass(*store, order, buffers, c.batch, false));
    (void)ignored;
    for (int r = 0; r < opt.repeats; ++r) {
      // Alternate which side goes first, so that neither always follows the other's traffic.
      for (int side = 0; side < 2; ++side) {
        DP_RETURN_IF_ERROR(drop_cached_pages(root));
        if ((side + r) % 2 == 0) {
          DP_ASSIGN_OR_RETURN(double s, timed_pass(*store, order, buffers, c.batch, false));
          dp_seconds.push_back(s);
        } else {
          DP_ASSIGN_OR_RETURN(auto f, fio.run({root + "/blocks", false, c.mode == "direct",
                                               block_file_bytes(c.layout), c.queue_depth}));
          fio_runs.push_back(f);
        }
      }
    }
  }
  if (!opt.keep_files) std::filesystem::remove_all(root);
  return summarize(c, "read", opt.repeats, dp_seconds, fio_runs);
}

Result<StoreBenchCase> run_write_case(const StoreBenchOptions& opt,
                                      const CaseSetup& c,
                                      const FioRunner& fio) {
  const std::string root =
      fmt::format("{}/{}-{}-{}-write", opt.dir, c.unit, c.mode, c.layout.full_block_bytes());
  DP_ASSIGN_OR_RETURN(auto buffers, make_buffers(c));
  std::vector<double> dp_seconds;
  std::vector<FioResult> fio_runs;
  for (int r = 0; r < opt.write_repeats; ++r) {
    {
      DP_ASSIGN_OR_RETURN(auto store, open_bench_store(root, c, /*sync=*/true));
      const auto keys = bench_keys(fmt::format("write-set-{}", r), c.blocks);
      DP_ASSIGN_OR_RETURN(double s, timed_pass(*store, keys, buffers, c.batch, true));
      dp_seconds.push_back(s);
    }
    DP_ASSIGN_OR_RETURN(auto f, fio.run({root + "/blocks", true, c.mode == "direct",
                                         block_file_bytes(c.layout), c.queue_depth}));
    fio_runs.push_back(f);
    std::filesystem::remove_all(root);
  }
  return summarize(c, "write", opt.write_repeats, dp_seconds, fio_runs);
}

}  // namespace

Result<StoreBenchReport> run_store_bench(const StoreBenchOptions& opt,
                                         const std::function<void(const std::string&)>& progress) {
  DP_RETURN_IF_ERROR(opt.layout.validate(), "bench store");
  if (opt.dir.empty()) return Status::invalid_argument("bench store needs --dir DIR");
  if (opt.repeats < 1 || opt.write_repeats < 1) {
    return Status::invalid_argument("--repeats and --write-repeats must be at least 1");
  }
  for (const auto& m : opt.modes) {
    if (m != "direct" && m != "buffered") {
      return Status::invalid_argument(fmt::format("mode '{}' is not one of direct, buffered", m));
    }
  }
  FioRunner fio(opt.fio_path);
  StoreBenchReport report;
  DP_ASSIGN_OR_RETURN(report.fio_version, fio.version());
  report.fio_command_example = fio.command_line(
      {opt.dir + "/<case>/blocks", false, true, block_file_bytes(opt.layout), opt.queue_depths[0]},
      "<json>");
  const BlockLayout layer_layout{1, opt.layout.block_tokens, opt.layout.bytes_per_token_per_layer};
  const int64_t full_blocks =
      std::max<int64_t>(opt.dataset_bytes / block_file_bytes(opt.layout), 1);
  auto case_start = std::chrono::steady_clock::now();
  auto done = [&](const StoreBenchCase& c) {
    report.cases.push_back(c);
    const auto now = std::chrono::steady_clock::now();
    if (progress) {
      progress(
          fmt::format("{:<8} {:<5} {:<11} qd={:<3} dualpath {:.2f} GB/s, fio {:.2f} GB/s, "
                      "ratio {:.2f} ({:.0f} s)",
                      c.mode, c.op, c.unit, c.queue_depth, c.dualpath_gbps, c.fio_gbps, c.ratio,
                      std::chrono::duration<double>(now - case_start).count()));
    }
    case_start = now;
  };
  for (const std::string& mode : opt.modes) {
    for (int qd : opt.queue_depths) {
      CaseSetup full{mode,        "full_block", opt.layout,
                     full_blocks, qd,           batch_blocks(qd, block_file_bytes(opt.layout))};
      DP_ASSIGN_OR_RETURN(auto read, run_read_case(opt, full, fio));
      done(read);
      if (opt.layer_blocks) {
        CaseSetup layer{mode,         "layer_block",
                        layer_layout, opt.layer_block_files,
                        qd,           batch_blocks(qd, block_file_bytes(layer_layout))};
        DP_ASSIGN_OR_RETURN(auto layer_read, run_read_case(opt, layer, fio));
        done(layer_read);
      }
      if (opt.writes) {
        DP_ASSIGN_OR_RETURN(auto write, run_write_case(opt, full, fio));
        done(write);
      }
    }
  }
  return report;
}

std::string format_store_bench_table(const StoreBenchOptions& opt, const StoreBenchReport& r) {
  std::string out = fmt::format(
      "store bench  dir={}  layout layers={} block_tokens={} bytes_per_token_per_layer={}  "
      "repeats={} reads, {} writes (medians)  {}\n",
      opt.dir, opt.layout.layers, opt.layout.block_tokens, opt.layout.bytes_per_token_per_layer,
      opt.repeats, opt.write_repeats, r.fio_version);
  out += fmt::format("{:<9}{:<6}{:<12}{:>12}{:>5}{:>7}{:>15}{:>10}{:>8}{:>15}{:>10}\n", "mode",
                     "op", "unit", "block_bytes", "qd", "blocks", "dualpath GB/s", "fio GB/s",
                     "ratio", "dualpath IOPS", "fio IOPS");
  for (const auto& c : r.cases) {
    out += fmt::format(
        "{:<9}{:<6}{:<12}{:>12}{:>5}{:>7}{:>15.2f}{:>10.2f}{:>8.2f}{:>15.0f}{:>10.0f}\n", c.mode,
        c.op, c.unit, c.block_bytes, c.queue_depth, c.blocks, c.dualpath_gbps, c.fio_gbps, c.ratio,
        c.dualpath_iops, c.fio_iops);
  }
  out +=
      "GB/s = 1e9 bytes/s of whole block files (header + payload + padding), as fio counts; "
      "ratio = median over repeats of dualpath / fio in back-to-back runs.\n";
  return out;
}

std::string store_bench_json(const StoreBenchOptions& opt, const StoreBenchReport& r) {
  nlohmann::json doc;
  doc["benchmark"] = "dualpath bench store";
  doc["dir"] = opt.dir;
  doc["fio_version"] = r.fio_version;
  doc["fio_command_example"] = r.fio_command_example;
  doc["setup"] = {{"layers", opt.layout.layers},
                  {"block_tokens", opt.layout.block_tokens},
                  {"bytes_per_token_per_layer", opt.layout.bytes_per_token_per_layer},
                  {"repeats", opt.repeats},
                  {"write_repeats", opt.write_repeats},
                  {"dataset_bytes", opt.dataset_bytes},
                  {"layer_block_files", opt.layer_block_files},
                  {"gbps_means", "1e9 bytes per second of whole block files, median of repeats"}};
  doc["cases"] = nlohmann::json::array();
  for (const auto& c : r.cases) {
    doc["cases"].push_back({{"mode", c.mode},
                            {"op", c.op},
                            {"unit", c.unit},
                            {"block_bytes", c.block_bytes},
                            {"file_bytes", c.file_bytes},
                            {"queue_depth", c.queue_depth},
                            {"blocks", c.blocks},
                            {"repeats", c.repeats},
                            {"dualpath_gbps", c.dualpath_gbps},
                            {"dualpath_payload_gbps", c.dualpath_payload_gbps},
                            {"fio_gbps", c.fio_gbps},
                            {"ratio", c.ratio},
                            {"ratio_of_medians", c.ratio_of_medians},
                            {"dualpath_iops", c.dualpath_iops},
                            {"fio_iops", c.fio_iops},
                            {"dualpath_gbps_runs", c.dualpath_gbps_runs},
                            {"fio_gbps_runs", c.fio_gbps_runs}});
  }
  return doc.dump(2) + "\n";
}

}  // namespace dualpath::store
