#include "store/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "common/log.h"
#include "store/batch_state.h"
#include "store/block_file.h"
#include "store/io_worker.h"

namespace dualpath::store {
namespace {

constexpr int kShards = 256;  // blocks/00 .. blocks/ff: keeps directories small at 1M blocks
// Per op: one page for the header, one for the payload's unaligned tail and its padding, and
// one past the expected end of file: a read that fills it found trailing bytes. Reading one page
// too many costs nothing at end of file and saves an fstat per read.
constexpr int64_t kScratchBytesPerOp = 3 * kIoAlignBytes;
// Blocks evicted at a time when a data path's file system is full (ENOSPC).
constexpr int64_t kEvictOnFullBlocks = 8;

std::string errno_text(int err) { return fmt::format("{} (errno {})", std::strerror(err), err); }

// Block files hold the KV of every tenant's prompts (issue 32): the store's directories and files
// are its user's only. Nodes and the scheduler run as one user; a store shared by several hosts
// needs the same uid on each.
constexpr mode_t kDirMode = 0700;
constexpr mode_t kFileMode = 0600;

Status make_dir(const std::string& path, const std::string& root) {
  if (::mkdir(path.c_str(), kDirMode) == 0 || errno == EEXIST) return Status::ok();
  const int err = errno;
  return Status::failed_precondition(
      fmt::format("data path '{}' is not writable: mkdir '{}' failed: {}; fix its permissions "
                  "or choose another data path",
                  root, path, errno_text(err)));
}

bool is_key_file_name(std::string_view name) {
  return name.size() == 32 + kBlockFileSuffix.size() && name.ends_with(kBlockFileSuffix);
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kIoAlignBytes == 0; }

}  // namespace

FileStore::FileStore(FileStoreOptions options)
    : options_(std::move(options)),
      file_bytes_(block_file_bytes(options_.layout)),
      index_(options_.capacity_bytes) {
  // Host and process: unique among all writers of a directory shared by several nodes.
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  writer_tag_ = fmt::format("{}.{}", host, ::getpid());
  if (options_.storage_nic == nullptr) {
    own_nic_ = std::make_unique<StorageNic>(0.0, clock_);
    nic_ = own_nic_.get();
  } else {
    nic_ = options_.storage_nic;
  }
}

FileStore::~FileStore() = default;

Result<std::unique_ptr<FileStore>> FileStore::open(FileStoreOptions options) {
  DP_RETURN_IF_ERROR(options.layout.validate(), "open block store");
  if (options.data_paths.empty()) {
    return Status::invalid_argument(
        "block store has no data paths; set store.data_paths to one or more directories");
  }
  std::set<std::string> seen;
  for (const auto& p : options.data_paths) {
    if (!seen.insert(p).second) {
      return Status::invalid_argument(
          fmt::format("data path '{}' is listed twice in data_paths; list each root once", p));
    }
  }
  if (options.capacity_bytes > 0 && options.capacity_bytes < block_file_bytes(options.layout)) {
    return Status::invalid_argument(fmt::format(
        "capacity_bytes {} is smaller than one block file ({} bytes); raise it or set 0 for "
        "unlimited",
        options.capacity_bytes, block_file_bytes(options.layout)));
  }
  std::unique_ptr<FileStore> store(new FileStore(std::move(options)));
  DP_RETURN_IF_ERROR(store->prepare_roots());
  store->scan_roots();
  // A capacity lowered since the last run: evict down to it now.
  DP_ASSIGN_OR_RETURN(auto victims, store->index_.reserve(0));
  store->unlink_victims(victims);
  DP_ASSIGN_OR_RETURN(store->worker_,
                      IoWorker::start(store->options_.queue_depth, &store->nic_->limiter,
                                      &store->nic_->write_limiter, &store->nic_->clock));
  return store;
}

Status FileStore::prepare_roots() {
  for (const std::string& root : options_.data_paths) {
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT) {
        return Status::not_found(fmt::format(
            "data path '{}' does not exist; create it (mkdir -p '{}') or fix data_paths", root,
            root));
      }
      return Status::failed_precondition(fmt::format(
          "data path '{}' cannot be examined: {}; check its permissions", root, errno_text(err)));
    }
    if (!S_ISDIR(st.st_mode)) {
      return Status::failed_precondition(
          fmt::format("data path '{}' is not a directory; point data_paths at a directory", root));
    }
    DP_RETURN_IF_ERROR(make_dir(root + "/blocks", root));
    DP_RETURN_IF_ERROR(make_dir(root + "/tmp", root));
    DP_RETURN_IF_ERROR(make_dir(root + "/quarantine", root));
    // Shard directories (blocks/00 .. blocks/ff) are made by the first write into each.
    // Permission bits do not tell (root ignores them, read-only mounts keep them): try a write.
    const std::string probe = fmt::format("{}/tmp/.probe.{}", root, writer_tag_);
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (options_.direct_io ? O_DIRECT : 0);
    int fd = ::open(probe.c_str(), flags, kFileMode);
    if (fd < 0) {
      const int err = errno;
      if (err == EINVAL && options_.direct_io) {
        return Status::failed_precondition(fmt::format(
            "the file system of data path '{}' refuses O_DIRECT ({}); open the store with "
            "direct_io = false (buffered I/O) for this path",
            root, errno_text(err)));
      }
      return Status::failed_precondition(fmt::format(
          "data path '{}' is not writable: creating '{}' failed: {}; fix its permissions or "
          "choose another data path",
          root, probe, errno_text(err)));
    }
    Status probe_status;
    if (options_.direct_io) {
      auto page = AlignedBuffer::allocate(kIoAlignBytes);
      if (!page.is_ok()) {
        probe_status = page.status();
      } else if (::pwrite(fd, page->data(), page->size(), 0) !=
                 static_cast<ssize_t>(page->size())) {
        const int err = errno;
        probe_status = Status::failed_precondition(fmt::format(
            "an O_DIRECT write to data path '{}' failed: {}; set direct_io = false or free "
            "space on it",
            root, errno_text(err)));
      }
    }
    ::close(fd);
    ::unlink(probe.c_str());
    DP_RETURN_IF_ERROR(probe_status);
  }
  return Status::ok();
}

void FileStore::scan_roots() {
  struct Found {
    BlockKey key;
    int root;
    int64_t bytes;
    int64_t mtime_ns;
  };
  std::vector<Found> found;
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  for (int r = 0; r < static_cast<int>(options_.data_paths.size()); ++r) {
    const std::string& root = options_.data_paths[static_cast<size_t>(r)];
    // Leftovers of crashed writers: never visible as blocks, removed once surely dead.
    const std::string tmp = root + "/tmp";
    if (DIR* d = ::opendir(tmp.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string p = tmp + "/" + e->d_name;
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0) continue;
        const int64_t mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        if (now_ns - mtime_ns > options_.stale_temp_age.count()) ::unlink(p.c_str());
      }
      ::closedir(d);
    }
    for (int s = 0; s < kShards; ++s) {
      const std::string dir = fmt::format("{}/blocks/{:02x}", root, s);
      DIR* d = ::opendir(dir.c_str());
      if (d == nullptr) continue;  // not made yet: no block was written into this shard
      while (dirent* e = ::readdir(d)) {
        std::string_view name(e->d_name);
        if (!is_key_file_name(name)) continue;
        auto key = BlockKey::from_hex(name.substr(0, 32));
        if (!key.is_ok()) continue;
        struct stat st {};
        if (::fstatat(::dirfd(d), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) continue;
        found.push_back({*key, r, static_cast<int64_t>(st.st_size),
                         st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec});
      }
      ::closedir(d);
    }
  }
  // No access times are kept on disk; the write time is the best guess at recency.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime_ns < b.mtime_ns; });
  for (const Found& f : found) index_.insert(f.key, f.root, f.bytes);
  DP_LOG_INFO("block store: indexed {} block files under {} data path(s)", found.size(),
              options_.data_paths.size());
}

int FileStore::root_of(const BlockKey& key) const {
  return static_cast<int>(key.high % options_.data_paths.size());
}

std::string FileStore::path_in(int root, const BlockKey& key) const {
  return fmt::format("{}/blocks/{:02x}/{}{}", options_.data_paths[static_cast<size_t>(root)],
                     key.high >> 56, key.to_hex(), kBlockFileSuffix);
}

std::string FileStore::block_path(const BlockKey& key) const { return path_in(root_of(key), key); }

bool FileStore::contains(const BlockKey& key) {
  if (index_.contains(key)) return true;
  if (!options_.probe_disk_on_miss) return false;
  const int root = root_of(key);
  struct stat st {};
  if (::stat(path_in(root, key).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  index_.insert(key, root, static_cast<int64_t>(st.st_size));
  return true;
}

PrefixMatch FileStore::longest_cached_prefix(std::span<const TokenId> tokens,
                                             std::string_view cache_namespace) {
  PrefixMatch match;
  match.keys =
      block_key_chain(options_.model, tokens, options_.layout.block_tokens, cache_namespace);
  while (match.hit_blocks < match.keys.size() && contains(match.keys[match.hit_blocks])) {
    ++match.hit_blocks;
  }
  return match;
}

std::optional<int> FileStore::pin_for_read(const BlockKey& key) {
  if (auto root = index_.pin(key)) return root;
  if (!options_.probe_disk_on_miss || !contains(key)) return std::nullopt;
  return index_.pin(key);
}

void FileStore::unlink_victims(const std::vector<BlockIndex::Victim>& victims) {
  for (const auto& v : victims) {
    const std::string path = path_in(v.root, v.key);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      const int err = errno;
      DP_LOG_WARN("block store: cannot evict '{}': {}; it stays on disk", path, errno_text(err));
    }
  }
}

Status FileStore::quarantine(int root,
                             const BlockKey& key,
                             const std::string& path,
                             const Status& why) {
  index_.erase(key);
  const std::string target = fmt::format(
      "{}/quarantine/{}{}.{}.{}", options_.data_paths[static_cast<size_t>(root)], key.to_hex(),
      kBlockFileSuffix, writer_tag_, temp_sequence_.fetch_add(1, std::memory_order_relaxed));
  if (::rename(path.c_str(), target.c_str()) == 0) {
    quarantined_files_.fetch_add(1, std::memory_order_relaxed);
    DP_LOG_WARN(
        "block store: {}; moved it to '{}' and treated the block as a miss (it will be "
        "recomputed)",
        why.message(), target);
    return Status::not_found(
        fmt::format("block {} is invalid and was quarantined: {}", key.to_hex(), why.message()));
  }
  // Another reader (or process) moved it first and logged the warning; it is a miss here too.
  return Status::not_found(fmt::format("block {} is invalid: {}", key.to_hex(), why.message()));
}

Status FileStore::check_request(std::string_view what,
                                size_t i,
                                const BlockKey& key,
                                std::span<const std::byte> bytes) const {
  const auto payload_bytes = static_cast<size_t>(options_.layout.full_block_bytes());
  if (bytes.size() != payload_bytes) {
    return Status::invalid_argument(fmt::format(
        "{} request {} (block {}) has {} bytes; a Full Block of this layout is {} bytes", what, i,
        key.to_hex(), bytes.size(), payload_bytes));
  }
  if (options_.direct_io && !aligned(bytes.data())) {
    return Status::invalid_argument(fmt::format(
        "{} request {} (block {}): with direct_io its memory must be {}-byte aligned (use "
        "AlignedBuffer)",
        what, i, key.to_hex(), kIoAlignBytes));
  }
  return Status::ok();
}

Result<std::shared_ptr<internal::BatchState>> FileStore::new_batch(bool reads, size_t requests) {
  auto batch = std::make_shared<internal::BatchState>(
      reads ? internal::BatchState::Kind::kRead : internal::BatchState::Kind::kWrite, *this,
      *worker_, requests);
  DP_ASSIGN_OR_RETURN(batch->scratch,
                      AlignedBuffer::allocate(static_cast<size_t>(kScratchBytesPerOp) * requests));
  batch->ops.reserve(requests);
  return batch;
}

Result<IoBatch> FileStore::read(std::span<const ReadRequest> requests) {
  const auto payload_bytes = static_cast<size_t>(options_.layout.full_block_bytes());
  for (size_t i = 0; i < requests.size(); ++i) {
    DP_RETURN_IF_ERROR(check_request("read", i, requests[i].key, requests[i].buffer));
  }
  DP_ASSIGN_OR_RETURN(auto batch, new_batch(/*reads=*/true, requests.size()));
  const size_t body_bytes = payload_bytes / kIoAlignBytes * kIoAlignBytes;
  const size_t tail_bytes = payload_bytes - body_bytes;
  std::vector<std::pair<size_t, Status>> immediate;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto& item = batch->items[i];
    item.key = requests[i].key;
    item.buffer = requests[i].buffer;
    auto root = pin_for_read(item.key);
    if (!root) {
      immediate.emplace_back(
          i, Status::not_found(fmt::format("block {} is not stored", item.key.to_hex())));
      continue;
    }
    item.pinned = true;
    item.root = *root;
    item.path = path_in(item.root, item.key);
    int fd =
        ::open(item.path.c_str(), O_RDONLY | O_CLOEXEC | (options_.direct_io ? O_DIRECT : 0));
    if (const Fault f = fault(FileOp::kOpenRead, item.path); fd >= 0 && f.error != 0) {
      ::close(fd);
      fd = -1;
      errno = f.error;
    }
    if (fd < 0) {
      const int err = errno;
      index_.unpin(item.key);
      item.pinned = false;
      if (err == ENOENT) {  // evicted or quarantined by another process since we indexed it
        index_.erase(item.key);
        immediate.emplace_back(
            i, Status::not_found(fmt::format("block {} is gone from '{}' (evicted elsewhere)",
                                             item.key.to_hex(), item.path)));
      } else {
        immediate.emplace_back(
            i, Status::io_error(fmt::format("cannot open block file '{}': {}; the block is a miss",
                                            item.path, errno_text(err))));
      }
      continue;
    }
    IoOp& op = batch->ops.emplace_back();
    op.kind = IoOp::Kind::kReadv;
    op.fd = fd;
    op.tag = i;
    op.offset_bytes = 0;
    std::byte* scratch = batch->scratch.data() + kScratchBytesPerOp * static_cast<int64_t>(i);
    op.iov[op.iov_count++] = {scratch, static_cast<size_t>(kBlockHeaderBytes)};
    if (body_bytes > 0) op.iov[op.iov_count++] = {item.buffer.data(), body_bytes};
    if (tail_bytes > 0) {
      op.iov[op.iov_count++] = {scratch + kIoAlignBytes, static_cast<size_t>(kIoAlignBytes)};
    }
    op.iov[op.iov_count++] = {scratch + 2 * kIoAlignBytes, static_cast<size_t>(kIoAlignBytes)};
    op.io_bytes = file_bytes_;  // a whole, exact file; the probe page stays empty
    op.nic_bytes = options_.layout.full_block_bytes();
  }
  nic_->read_queue.add(
      static_cast<int64_t>(batch->ops.size()) * options_.layout.block_tokens,
      static_cast<int64_t>(batch->ops.size()) * static_cast<int64_t>(payload_bytes));
  for (auto& [i, status] : immediate) batch->complete(i, std::move(status));
  if (!batch->ops.empty()) internal::BatchState::submit(batch);
  return IoBatch(std::move(batch));
}

Result<IoBatch> FileStore::write(std::span<const WriteRequest> requests) {
  const auto payload_bytes = static_cast<size_t>(options_.layout.full_block_bytes());
  for (size_t i = 0; i < requests.size(); ++i) {
    DP_RETURN_IF_ERROR(check_request("write", i, requests[i].key, requests[i].payload));
  }
  DP_ASSIGN_OR_RETURN(auto batch, new_batch(/*reads=*/false, requests.size()));
  const size_t body_bytes = payload_bytes / kIoAlignBytes * kIoAlignBytes;
  const size_t tail_bytes = payload_bytes - body_bytes;
  std::vector<std::pair<size_t, Status>> immediate;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto& item = batch->items[i];
    item.key = requests[i].key;
    if (contains(item.key)) {
      immediate.emplace_back(i, Status::ok());  // content-addressed: same key, same bytes
      continue;
    }
    item.root = root_of(item.key);
    item.path = path_in(item.root, item.key);
    const std::string& root_dir = options_.data_paths[static_cast<size_t>(item.root)];
    auto victims = index_.reserve(file_bytes_);
    if (!victims.is_ok()) {
      immediate.emplace_back(i, victims.status());
      continue;
    }
    unlink_victims(*victims);
    item.reserved = true;
    item.temp_path = fmt::format("{}/tmp/{}.{}.{}.tmp", root_dir, item.key.to_hex(), writer_tag_,
                                 temp_sequence_.fetch_add(1, std::memory_order_relaxed));
    int fd = ::open(item.temp_path.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (options_.direct_io ? O_DIRECT : 0),
                    kFileMode);
    if (const Fault f = fault(FileOp::kCreate, item.temp_path); fd >= 0 && f.error != 0) {
      ::close(fd);
      ::unlink(item.temp_path.c_str());
      fd = -1;
      errno = f.error;
    }
    if (fd < 0) {
      const int err = errno;
      index_.release(file_bytes_);
      item.reserved = false;
      immediate.emplace_back(
          i, err == ENOSPC || err == EDQUOT
                 ? Status::resource_exhausted(fmt::format(
                       "cannot create block file '{}': {}; the file system of data path '{}' "
                       "is full: free space there or lower capacity_bytes",
                       item.temp_path, errno_text(err), root_dir))
                 : Status::io_error(fmt::format(
                       "cannot create block file '{}': {}; check that data path '{}' is "
                       "writable",
                       item.temp_path, errno_text(err), root_dir)));
      continue;
    }
    // Claim the space up front: a full disk fails here, cleanly, before any byte is written.
    auto allocate = [&] {
      int rc = ::posix_fallocate(fd, 0, file_bytes_);
      if (const Fault f = fault(FileOp::kAllocate, item.temp_path); rc == 0 && f.error != 0) {
        rc = f.error;
      }
      return rc;
    };
    int rc = allocate();
    if (rc == ENOSPC) {
      // The disk is full below the capacity (another tenant, or no capacity set): make room
      // by evicting this data path's least recently used blocks, then try once more. A full
      // disk degrades the cache to its newest blocks; the write fails only if that is not
      // enough (everything pinned, or the space is someone else's).
      const auto lru = index_.evict_lru(item.root, kEvictOnFullBlocks * file_bytes_);
      if (!lru.empty()) {
        DP_LOG_WARN("block store: data path '{}' is full; evicted {} least recently used blocks",
                    root_dir, lru.size());
        unlink_victims(lru);
        rc = allocate();
      }
    }
    if (rc != 0 && rc != EOPNOTSUPP) {
      ::close(fd);
      ::unlink(item.temp_path.c_str());
      index_.release(file_bytes_);
      item.reserved = false;
      immediate.emplace_back(
          i, rc == ENOSPC
                 ? Status::resource_exhausted(fmt::format(
                       "no space for block file '{}' ({} bytes) on data path '{}': {}; free "
                       "space there or lower capacity_bytes",
                       item.temp_path, file_bytes_, root_dir, errno_text(rc)))
                 : Status::io_error(fmt::format("cannot allocate block file '{}': {}",
                                                item.temp_path, errno_text(rc))));
      continue;
    }
    std::byte* scratch = batch->scratch.data() + kScratchBytesPerOp * static_cast<int64_t>(i);
    std::span<const std::byte> body = requests[i].payload.first(body_bytes);
    std::span<std::byte> tail(scratch + kIoAlignBytes, static_cast<size_t>(kIoAlignBytes));
    if (tail_bytes > 0) {
      std::memcpy(tail.data(), requests[i].payload.data() + body_bytes, tail_bytes);
    }
    std::vector<std::span<const std::byte>> pieces{body};
    if (tail_bytes > 0) pieces.emplace_back(tail);
    encode_block_header({options_.model, item.key, options_.layout}, payload_checksum(pieces),
                        std::span<std::byte, kBlockHeaderBytes>(scratch, kBlockHeaderBytes));
    IoOp& op = batch->ops.emplace_back();
    op.kind = options_.sync_writes ? IoOp::Kind::kWritevFsync : IoOp::Kind::kWritev;
    op.fd = fd;
    op.tag = i;
    op.iov[op.iov_count++] = {scratch, static_cast<size_t>(kBlockHeaderBytes)};
    // iovec wants a mutable pointer; a write only reads through it.
    if (body_bytes > 0) op.iov[op.iov_count++] = {const_cast<std::byte*>(body.data()), body_bytes};
    if (tail_bytes > 0) op.iov[op.iov_count++] = {tail.data(), tail.size()};
    op.io_bytes = file_bytes_;
    op.nic_bytes = options_.layout.full_block_bytes();
  }
  for (auto& [i, status] : immediate) batch->complete(i, std::move(status));
  if (!batch->ops.empty()) internal::BatchState::submit(batch);
  return IoBatch(std::move(batch));
}

void FileStore::note_read_io_done() {
  nic_->read_queue.remove(options_.layout.block_tokens, options_.layout.full_block_bytes());
}

void FileStore::abandon_read(internal::BatchState& batch, IoOp& op) {
  ::close(op.fd);
  index_.unpin(batch.items[op.tag].key);
}

Status FileStore::finish_read(internal::BatchState& batch, IoOp& op) {
  auto& item = batch.items[op.tag];
  ::close(op.fd);
  if (op.result >= 0) {
    if (const Fault f = fault(FileOp::kRead, item.path); f.error != 0) {
      op.result = -f.error;
    } else if (f.short_bytes >= 0) {
      op.result = static_cast<int>(std::min<int64_t>(op.result, f.short_bytes));
    }
  }
  // Unpin last: the block must not be evicted while its bytes are checked.
  struct Unpin {
    BlockIndex& index;
    const BlockKey& key;
    ~Unpin() { index.unpin(key); }
  } unpin{index_, item.key};
  if (op.result == -ECANCELED) {
    return Status::aborted(fmt::format("read of block {} was cancelled", item.key.to_hex()));
  }
  if (op.result < 0) {
    return Status::io_error(
        fmt::format("read of block file '{}' failed: {}; the block is a miss "
                    "and will be recomputed; check the disk behind it",
                    item.path, errno_text(-op.result)));
  }
  if (op.result != op.io_bytes) {
    return quarantine(
        item.root, item.key, item.path,
        Status::corruption(fmt::format(
            "'{}' is {}: a block file of this layout is {} bytes, read {}", item.path,
            op.result < op.io_bytes ? "truncated" : "longer than a block (trailing garbage)",
            op.io_bytes, op.result)));
  }
  const auto* header = static_cast<const std::byte*>(op.iov[0].iov_base);
  auto expected_sum =
      check_block_header(std::span<const std::byte, kBlockHeaderBytes>(header, kBlockHeaderBytes),
                         {options_.model, item.key, options_.layout}, item.path);
  if (!expected_sum.is_ok()) {
    return quarantine(item.root, item.key, item.path, expected_sum.status());
  }
  // iov: header, body (when any), tail (when any), end-of-file probe.
  std::array<std::span<const std::byte>, 2> pieces;
  size_t n = 0;
  for (int v = 1; v < op.iov_count - 1; ++v) {
    pieces[n++] = {static_cast<const std::byte*>(op.iov[static_cast<size_t>(v)].iov_base),
                   op.iov[static_cast<size_t>(v)].iov_len};
  }
  if (payload_checksum(std::span(pieces.data(), n)) != *expected_sum) {
    return quarantine(
        item.root, item.key, item.path,
        Status::corruption(fmt::format("'{}' fails its payload checksum", item.path)));
  }
  const size_t payload_bytes = item.buffer.size();
  const size_t body_bytes = payload_bytes / kIoAlignBytes * kIoAlignBytes;
  if (payload_bytes > body_bytes) {
    std::memcpy(item.buffer.data() + body_bytes,
                op.iov[static_cast<size_t>(op.iov_count - 2)].iov_base, payload_bytes - body_bytes);
  }
  return Status::ok();
}

Status FileStore::finish_write(internal::BatchState& batch, IoOp& op) {
  auto& item = batch.items[op.tag];
  const std::string& root_dir = options_.data_paths[static_cast<size_t>(item.root)];
  ::close(op.fd);
  if (op.result >= 0) {
    if (const Fault f = fault(FileOp::kWrite, item.temp_path); f.error != 0) {
      op.result = -f.error;
    } else if (f.short_bytes >= 0) {
      op.result = static_cast<int>(std::min<int64_t>(op.result, f.short_bytes));
    }
  }
  if (op.kind == IoOp::Kind::kWritevFsync && op.fsync_result >= 0) {
    if (const Fault f = fault(FileOp::kFsync, item.temp_path); f.error != 0) {
      op.fsync_result = -f.error;
    }
  }
  Status status;
  if (op.result == -ECANCELED) {
    status = Status::aborted(fmt::format("write of block {} was cancelled", item.key.to_hex()));
  } else if (op.result == -ENOSPC || op.fsync_result == -ENOSPC ||
             (op.result >= 0 && op.result < op.io_bytes)) {
    status = Status::resource_exhausted(fmt::format(
        "writing block file '{}' failed: the file system of data path '{}' is full ({} of {} "
        "bytes written); free space there or lower capacity_bytes",
        item.temp_path, root_dir, std::max(op.result, 0), op.io_bytes));
  } else if (op.result < 0) {
    status = Status::io_error(
        fmt::format("writing block file '{}' failed: {}", item.temp_path, errno_text(-op.result)));
  } else if (op.fsync_result < 0) {
    status = Status::io_error(fmt::format("fsync of block file '{}' failed: {}", item.temp_path,
                                          errno_text(-op.fsync_result)));
  } else if (!publish(item.temp_path, item.path)) {
    const int err = errno;
    status = Status::io_error(fmt::format("publishing block file '{}' as '{}' failed: {}",
                                          item.temp_path, item.path, errno_text(err)));
  } else {
    index_.commit(item.key, item.root, file_bytes_);
    return Status::ok();
  }
  ::unlink(item.temp_path.c_str());
  index_.release(file_bytes_);
  return status;
}

const char* file_op_name(FileOp op) {
  switch (op) {
    case FileOp::kOpenRead: return "open for read";
    case FileOp::kRead: return "read";
    case FileOp::kCreate: return "create";
    case FileOp::kAllocate: return "allocate";
    case FileOp::kWrite: return "write";
    case FileOp::kFsync: return "fsync";
    case FileOp::kRename: return "rename";
  }
  return "?";
}

bool FileStore::publish(const std::string& temp_path, const std::string& path) {
  if (const Fault f = fault(FileOp::kRename, path); f.error != 0) {
    errno = f.error;
    return false;
  }
  if (::rename(temp_path.c_str(), path.c_str()) == 0) return true;
  if (errno != ENOENT) return false;
  // The first block of its shard: make the shard directory (racing writers may both try).
  const std::string dir = path.substr(0, path.rfind('/'));
  if (::mkdir(dir.c_str(), kDirMode) != 0 && errno != EEXIST) return false;
  return ::rename(temp_path.c_str(), path.c_str()) == 0;
}

FileStore::Stats FileStore::stats() const {
  return Stats{index_.stats(), quarantined_files_.load(std::memory_order_relaxed),
               options_.capacity_bytes};
}

}  // namespace dualpath::store
