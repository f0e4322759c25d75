#pragma once
// FileStore: the KV block store on real files (issue 3, PAPER.md §4, DESIGN.md `store/`).
//
// One Full Block per file, content-addressed by its BlockKey (block_key.h) and laid out as in
// block_file.h, under sharded directories of each data path:
//
//   <data_path>/blocks/<first two hex digits of the key>/<32 hex digits>.blk
//   <data_path>/tmp/          files being written (published by rename into blocks/)
//   <data_path>/quarantine/   invalid files, moved aside for inspection, never deleted
//
// A key lives under data_paths[key.high % data_paths.size()], so several roots (one per disk,
// like /mnt/nvme0n1,/mnt/nvme1n1) share the load.
//
// Guarantees:
// - A reader never sees a partial or wrong block: writes are published atomically (temp file,
//   write, fsync, rename), and every read checks the header and the payload checksum before it
//   reports success. An invalid file (flipped byte, truncated, another model, another format
//   version) is a miss plus one warning naming the file, and the file is quarantined.
// - Processes may share the data paths: each keeps its own index (rebuilt by scanning at open)
//   and, on an index miss, looks for the file on disk, so blocks another process wrote are found.
//   A file another process evicts while we read it stays readable (POSIX unlink semantics).
// - Capacity: with capacity_bytes > 0 the store evicts least-recently-used blocks to stay under
//   it, and never evicts a block one of its own reads has pinned. The limit counts the blocks
//   this store knows; processes sharing a directory should split the capacity between them.
// - Every block read or written passes its direction's limiter of the node's StorageNic (full
//   duplex), charged the block's KV bytes (not the file's header and padding); reads in flight
//   are counted in its read-queue gauge.
//
// Threads: thread-safe. Any thread may call any method; each store has one I/O thread with one
// io_uring ring (io_worker.h), which runs all reads and writes, verifies read checksums and
// publishes written files; the thread that waits for a read batch verifies its checksums. Calls
// block only for metadata system calls (open, stat, rename).

#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "dualpath/result.h"
#include "dualpath/units.h"
#include "store/block_index.h"
#include "store/block_key.h"
#include "store/block_layout.h"
#include "store/io_batch.h"
#include "store/io_faults.h"
#include "store/storage_nic.h"

namespace dualpath::store {

class IoWorker;
struct IoOp;
namespace internal {
class BatchState;
}

struct FileStoreOptions {
  // Root directories; each must exist and be writable. Their subdirectories are created.
  std::vector<std::string> data_paths;
  ModelFingerprint model;
  BlockLayout layout;
  // O_DIRECT reads and writes. Buffers must then be 4096-aligned (AlignedBuffer). Open fails
  // with a clear error when a data path's file system refuses O_DIRECT.
  bool direct_io = false;
  // Bytes of block files the store may hold; <= 0: unlimited.
  int64_t capacity_bytes = 0;
  // Block reads and writes the I/O thread keeps in flight.
  int queue_depth = 64;
  // The node's storage NIC (rate limiter and read-queue gauge), shared by the node's stores;
  // must outlive the store. Null: the store uses its own, unlimited one.
  StorageNic* storage_nic = nullptr;
  // Look for a file on disk when the index misses (finds blocks other processes wrote).
  bool probe_disk_on_miss = true;
  // fsync each block file before publishing it. Without it a process crash still never shows
  // a partial block (rename publishes what the kernel holds), but after a power loss a
  // published file may hold garbage: a checksum miss, quarantined. Off only for scratch data
  // such as benchmark sets.
  bool sync_writes = true;
  // Files in tmp/ older than this are leftovers of a crashed writer and are removed at open.
  // Younger ones may belong to a live writer in another process and are left alone.
  Duration stale_temp_age = std::chrono::minutes(10);
  // Tests only: injected failures of the store's file operations (io_faults.h). Null: none.
  std::shared_ptr<IoFaults> faults;
};

struct ReadRequest {
  BlockKey key;
  // layout.full_block_bytes() bytes; 4096-aligned with direct_io.
  std::span<std::byte> buffer;
};

struct WriteRequest {
  BlockKey key;
  // layout.full_block_bytes() bytes; 4096-aligned with direct_io. Not copied: it must stay
  // unchanged until the batch finishes.
  std::span<const std::byte> payload;
};

// The longest stored prefix of a prompt.
struct PrefixMatch {
  std::vector<BlockKey> keys;  // every whole block of the prompt, in order
  size_t hit_blocks = 0;       // keys[0, hit_blocks) are stored
  int64_t hit_tokens(const BlockLayout& layout) const {
    return static_cast<int64_t>(hit_blocks) * layout.block_tokens;
  }
};

class FileStore {
 public:
  struct Stats {
    BlockIndex::Stats index;
    int64_t quarantined_files = 0;
    int64_t capacity_bytes = 0;
  };

  // Checks every data path (exists, is a directory, is writable, accepts O_DIRECT when asked),
  // creates the subdirectories, removes stale temp files, scans blocks/ to rebuild the index
  // (oldest file first in LRU order) and evicts down to the capacity. Errors name the path and
  // the fix: kNotFound (missing path), kFailedPrecondition (not a directory, not writable, no
  // O_DIRECT), kInvalidArgument (bad options), kUnavailable (no io_uring).
  static Result<std::unique_ptr<FileStore>> open(FileStoreOptions options);
  // Every IoBatch of this store must be destroyed first.
  ~FileStore();
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  const FileStoreOptions& options() const { return options_; }
  const BlockLayout& layout() const { return options_.layout; }

  // Whether the block is stored (index, then disk when probe_disk_on_miss). Does not validate the
  // file; a read does.
  bool contains(const BlockKey& key);
  // The prompt's block keys and how many leading blocks are stored: the paper's trie walk, one
  // hash and one lookup per block, stopping at the first miss. Keys are those of the chain in
  // `cache_namespace` (block_key.h: a hit never crosses namespaces; empty: the default one).
  PrefixMatch longest_cached_prefix(std::span<const TokenId> tokens,
                                    std::string_view cache_namespace = {});

  // Starts reading the blocks into the callers' buffers. Misses are decided at once; the rest
  // runs on the I/O thread. kInvalidArgument (and nothing started) when a buffer has the wrong
  // size or alignment.
  Result<IoBatch> read(std::span<const ReadRequest> requests);
  // Starts writing and publishing the blocks. A key already stored is OK at once (same key,
  // same content). kInvalidArgument (and nothing started) when a payload is malformed.
  Result<IoBatch> write(std::span<const WriteRequest> requests);

  // Where the block's file lives (or would live).
  std::string block_path(const BlockKey& key) const;
  StorageNic& storage_nic() const { return *nic_; }
  Stats stats() const;

 private:
  friend class internal::BatchState;
  explicit FileStore(FileStoreOptions options);
  Status prepare_roots();
  void scan_roots();
  int root_of(const BlockKey& key) const;
  std::string path_in(int root, const BlockKey& key) const;
  // Pins the key for a read, looking on disk when the index misses. Returns its root.
  std::optional<int> pin_for_read(const BlockKey& key);
  // kInvalidArgument unless `bytes` is one Full Block (4096-aligned with direct_io).
  Status check_request(std::string_view what,
                       size_t i,
                       const BlockKey& key,
                       std::span<const std::byte> bytes) const;
  // An empty read (or write) batch with scratch pages for `requests` ops.
  Result<std::shared_ptr<internal::BatchState>> new_batch(bool reads, size_t requests);
  // Moves an invalid file to quarantine/ and logs one warning; returns the miss outcome.
  Status quarantine(int root, const BlockKey& key, const std::string& path, const Status& why);
  void unlink_victims(const std::vector<BlockIndex::Victim>& victims);
  // Renames a written temp file into place, making its shard directory when it is the first.
  // False with errno set on failure.
  bool publish(const std::string& temp_path, const std::string& path);
  // What the fault injector says of this operation (nothing without one).
  Fault fault(FileOp op, const std::string& path) const {
    return options_.faults ? options_.faults->on(op, path) : Fault{};
  }
  // Worker thread: a read's I/O has finished (it leaves the read queue).
  void note_read_io_done();
  // Waiting thread: verifies a read whose I/O has finished, closes its file and unpins it.
  Status finish_read(internal::BatchState& batch, IoOp& op);
  // Waiting thread, cancelled batch: closes and unpins without verifying.
  void abandon_read(internal::BatchState& batch, IoOp& op);
  // Worker thread: publishes a written block (rename) or cleans up after a failed write.
  Status finish_write(internal::BatchState& batch, IoOp& op);

  FileStoreOptions options_;
  const int64_t file_bytes_;  // block_file_bytes(layout)
  SteadyClock clock_;
  std::unique_ptr<StorageNic> own_nic_;  // when options_.storage_nic is null
  StorageNic* nic_ = nullptr;
  BlockIndex index_;
  std::unique_ptr<IoWorker> worker_;
  std::string writer_tag_;  // "<host>.<pid>": names this store's temp and quarantined files
  // Both relaxed: a statistic, and a counter that only has to hand out distinct numbers.
  std::atomic<int64_t> quarantined_files_{0};
  std::atomic<uint64_t> temp_sequence_{0};
};

}  // namespace dualpath::store
