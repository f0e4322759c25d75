#pragma once
// BlockIndex: the in-memory index of the block files a FileStore knows, with LRU order, read
// pins and the capacity limit. It never touches files itself: it tells the store which files to
// unlink. Thread-safe (one mutex; every call is O(1) except the eviction loop).
//
// Capacity accounting works by reservation: a writer reserves its file's bytes before it writes,
// evicting least-recently-used unpinned blocks until used + reserved + new <= capacity, so the
// store stays under its capacity even while writes are in flight. A pinned block (one being read)
// is never chosen.

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "dualpath/result.h"
#include "store/block_key.h"

namespace dualpath::store {

class BlockIndex {
 public:
  struct Victim {
    BlockKey key;
    int root = 0;
  };
  struct Stats {
    int64_t blocks = 0;
    int64_t used_bytes = 0;      // bytes of indexed block files
    int64_t reserved_bytes = 0;  // bytes of writes in flight
    int64_t pinned_blocks = 0;
    int64_t evicted_blocks = 0;  // since construction
  };

  // capacity_bytes <= 0: unlimited.
  explicit BlockIndex(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // Adds a block file (a scan result or a block another process wrote) as most recently used.
  // No-op when the key is present.
  void insert(const BlockKey& key, int root, int64_t file_bytes);
  bool contains(const BlockKey& key) const;
  // Removes the key whatever its pins (its file was quarantined or found missing); later
  // unpin() calls for it are no-ops.
  void erase(const BlockKey& key);

  // Pins the block for a read and marks it most recently used. Returns its root, or nullopt
  // when the key is not indexed.
  std::optional<int> pin(const BlockKey& key);
  void unpin(const BlockKey& key);

  // Reserves room for a new file of `file_bytes`, choosing LRU unpinned victims (removed from
  // the index at once; the caller unlinks their files). kResourceExhausted when even evicting
  // every unpinned block would not make room; nothing is reserved or evicted then.
  Result<std::vector<Victim>> reserve(int64_t file_bytes);
  // The file system of `root` is full (ENOSPC) below the capacity: evicts its least recently used
  // unpinned blocks, `bytes` of them at least (fewer when there are not that many), and returns
  // them for the caller to unlink. The cache keeps the newest blocks instead of refusing them.
  std::vector<Victim> evict_lru(int root, int64_t bytes);
  // A reserved write failed: its bytes are free again.
  void release(int64_t file_bytes);
  // A reserved write was published: its bytes become the file's.
  void commit(const BlockKey& key, int root, int64_t file_bytes);

  Stats stats() const;
  int64_t capacity_bytes() const { return capacity_bytes_; }

 private:
  struct Entry {
    int root = 0;
    int64_t file_bytes = 0;
    int64_t pins = 0;
    std::list<BlockKey>::iterator lru_position;
  };
  void insert_locked(const BlockKey& key, int root, int64_t file_bytes) DP_REQUIRES(mu_);
  void erase_locked(std::unordered_map<BlockKey, Entry, BlockKeyHash>::iterator it)
      DP_REQUIRES(mu_);

  const int64_t capacity_bytes_;
  mutable Mutex mu_;
  std::unordered_map<BlockKey, Entry, BlockKeyHash> entries_ DP_GUARDED_BY(mu_);
  std::list<BlockKey> lru_ DP_GUARDED_BY(mu_);  // front = least recently used
  int64_t used_bytes_ DP_GUARDED_BY(mu_) = 0;
  int64_t reserved_bytes_ DP_GUARDED_BY(mu_) = 0;
  int64_t pinned_blocks_ DP_GUARDED_BY(mu_) = 0;
  int64_t evicted_blocks_ DP_GUARDED_BY(mu_) = 0;
};

}  // namespace dualpath::store
