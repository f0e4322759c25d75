#include "store/block_index.h"

#include <fmt/format.h>

namespace dualpath::store {

void BlockIndex::insert(const BlockKey& key, int root, int64_t file_bytes) {
  MutexLock lock(mu_);
  insert_locked(key, root, file_bytes);
}

void BlockIndex::insert_locked(const BlockKey& key, int root, int64_t file_bytes) {
  if (entries_.count(key) != 0) return;
  lru_.push_back(key);
  entries_.emplace(key, Entry{root, file_bytes, 0, std::prev(lru_.end())});
  used_bytes_ += file_bytes;
}

void BlockIndex::erase_locked(std::unordered_map<BlockKey, Entry, BlockKeyHash>::iterator it) {
  used_bytes_ -= it->second.file_bytes;
  if (it->second.pins > 0) --pinned_blocks_;
  lru_.erase(it->second.lru_position);
  entries_.erase(it);
}

bool BlockIndex::contains(const BlockKey& key) const {
  MutexLock lock(mu_);
  return entries_.count(key) != 0;
}

void BlockIndex::erase(const BlockKey& key) {
  MutexLock lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) erase_locked(it);
}

std::optional<int> BlockIndex::pin(const BlockKey& key) {
  MutexLock lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  if (it->second.pins++ == 0) ++pinned_blocks_;
  lru_.splice(lru_.end(), lru_, it->second.lru_position);
  return it->second.root;
}

void BlockIndex::unpin(const BlockKey& key) {
  MutexLock lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.pins == 0) return;
  if (--it->second.pins == 0) --pinned_blocks_;
}

Result<std::vector<BlockIndex::Victim>> BlockIndex::reserve(int64_t file_bytes) {
  MutexLock lock(mu_);
  std::vector<Victim> victims;
  if (capacity_bytes_ > 0) {
    // First check that room can be made, so that a failed reservation evicts nothing.
    int64_t need = used_bytes_ + reserved_bytes_ + file_bytes - capacity_bytes_;
    if (need > 0) {
      int64_t evictable = 0;
      for (const BlockKey& k : lru_) {
        const Entry& e = entries_.find(k)->second;
        if (e.pins == 0) evictable += e.file_bytes;
        if (evictable >= need) break;
      }
      if (evictable < need) {
        return Status::resource_exhausted(fmt::format(
            "store capacity {} bytes cannot fit a {}-byte block: {} bytes are stored, {} are "
            "being written and the rest is pinned by reads in progress; raise capacity_bytes or "
            "retry after the reads finish",
            capacity_bytes_, file_bytes, used_bytes_, reserved_bytes_));
      }
      for (auto k = lru_.begin(); need > 0 && k != lru_.end();) {
        auto it = entries_.find(*k);
        ++k;  // erase_locked invalidates the current position
        if (it->second.pins != 0) continue;
        need -= it->second.file_bytes;
        victims.push_back({it->first, it->second.root});
        erase_locked(it);
        ++evicted_blocks_;
      }
    }
  }
  reserved_bytes_ += file_bytes;
  return victims;
}

std::vector<BlockIndex::Victim> BlockIndex::evict_lru(int root, int64_t bytes) {
  MutexLock lock(mu_);
  std::vector<Victim> victims;
  for (auto k = lru_.begin(); bytes > 0 && k != lru_.end();) {
    auto it = entries_.find(*k);
    ++k;  // erase_locked invalidates the current position
    if (it->second.pins != 0 || it->second.root != root) continue;
    bytes -= it->second.file_bytes;
    victims.push_back({it->first, it->second.root});
    erase_locked(it);
    ++evicted_blocks_;
  }
  return victims;
}

void BlockIndex::release(int64_t file_bytes) {
  MutexLock lock(mu_);
  reserved_bytes_ -= file_bytes;
}

void BlockIndex::commit(const BlockKey& key, int root, int64_t file_bytes) {
  MutexLock lock(mu_);
  reserved_bytes_ -= file_bytes;
  insert_locked(key, root, file_bytes);
}

BlockIndex::Stats BlockIndex::stats() const {
  MutexLock lock(mu_);
  return Stats{static_cast<int64_t>(entries_.size()), used_bytes_, reserved_bytes_, pinned_blocks_,
               evicted_blocks_};
}

}  // namespace dualpath::store
