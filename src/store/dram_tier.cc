#include "store/dram_tier.h"

#include <algorithm>
#include <cstring>

namespace dualpath::store {

DramTier::DramTier(const Options& options, const Clock& clock) : options_(options), clock_(clock) {
  stats_.capacity_bytes = options.capacity_bytes;
}

void DramTier::drop_locked(ChainList::iterator it) {
  for (const BlockKey& k : it->keys) {
    auto b = blocks_.find(k);
    if (b == blocks_.end()) continue;
    if (--b->second.refs <= 0) {
      blocks_.erase(b);
      stats_.used_bytes -= options_.block_bytes;
    }
  }
  if (!it->keys.empty()) {
    auto last = by_last_.find(it->keys.back());
    if (last != by_last_.end() && last->second == it) by_last_.erase(last);
  }
  chains_.erase(it);
}

void DramTier::expire_locked() {
  const Duration now = clock_.now();
  // One TTL for all: the least recently stored expires first.
  while (!chains_.empty() && chains_.front().expires <= now) {
    drop_locked(chains_.begin());
    ++stats_.expired;
  }
}

bool DramTier::store(std::span<const BlockKey> keys,
                     std::span<const std::byte> bytes,
                     size_t bytes_from) {
  const uint64_t bb = options_.block_bytes;
  // The copies are made before the lock is taken: a reader of another chain never waits for
  // them.
  std::vector<BlockBytes> fresh;
  if (options_.keep_bytes && bytes_from <= keys.size() &&
      bytes.size() >= (keys.size() - bytes_from) * bb) {
    for (size_t i = bytes_from; i < keys.size(); ++i) {
      fresh.push_back(std::make_unique<std::byte[]>(bb));
      std::memcpy(fresh.back().get(), bytes.data() + (i - bytes_from) * bb, bb);
    }
  }
  return store_blocks(keys, std::move(fresh), bytes_from);
}

bool DramTier::store_blocks(std::span<const BlockKey> keys,
                            std::vector<BlockBytes> fresh,
                            size_t bytes_from) {
  const uint64_t bb = options_.block_bytes;
  const bool fits = can_hold(keys.size()) && bytes_from <= keys.size() &&
                    (!options_.keep_bytes || fresh.size() == keys.size() - bytes_from);
  MutexLock lock(mu_);
  if (!fits) {
    ++stats_.not_kept;
    return false;
  }
  expire_locked();
  if (options_.keep_bytes) {
    for (size_t i = 0; i < bytes_from; ++i) {
      if (!blocks_.contains(keys[i])) {  // dropped since the caller looked: no bytes for it
        ++stats_.not_kept;
        return false;
      }
    }
  }
  // The chains this one extends (its session's earlier turns), found by their last keys.
  std::vector<ChainList::iterator> replaced;
  for (const BlockKey& k : keys) {
    auto it = by_last_.find(k);
    if (it != by_last_.end()) replaced.push_back(it->second);
  }
  // Take the new chain's blocks before dropping the old ones, so that shared blocks stay.
  chains_.push_back(Chain{std::vector<BlockKey>(keys.begin(), keys.end()),
                          clock_.now() + options_.ttl});
  const auto added = std::prev(chains_.end());
  for (size_t i = 0; i < keys.size(); ++i) {
    Block& b = blocks_[keys[i]];
    if (b.refs++ > 0) continue;
    stats_.used_bytes += bb;
    if (options_.keep_bytes) b.bytes = std::move(fresh[i - bytes_from]);  // i >= bytes_from
  }
  for (auto it : replaced) drop_locked(it);
  by_last_[keys.back()] = added;
  // Room: the least recently stored go first (never the new one: it fits the tier alone).
  while (stats_.used_bytes > options_.capacity_bytes && chains_.begin() != added) {
    drop_locked(chains_.begin());
    ++stats_.evicted;
  }
  ++stats_.stored;
  return true;
}

size_t DramTier::resident_prefix(std::span<const BlockKey> keys) {
  MutexLock lock(mu_);
  expire_locked();
  // Held keys are prefix-closed: find the first one not held.
  size_t lo = 0, hi = keys.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (blocks_.contains(keys[mid])) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

bool DramTier::read(const BlockKey& key, std::span<std::byte> out) {
  MutexLock lock(mu_);
  expire_locked();
  auto it = blocks_.find(key);
  if (it == blocks_.end() || !it->second.bytes || out.size() < options_.block_bytes) {
    ++stats_.missed_blocks;
    return false;
  }
  std::memcpy(out.data(), it->second.bytes.get(), options_.block_bytes);
  ++stats_.read_blocks;
  return true;
}

void DramTier::clear() {
  MutexLock lock(mu_);
  while (!chains_.empty()) drop_locked(chains_.begin());
}

DramTier::Stats DramTier::stats() const {
  MutexLock lock(mu_);
  Stats s = stats_;
  s.chains = static_cast<int64_t>(chains_.size());
  s.blocks = static_cast<int64_t>(blocks_.size());
  return s;
}

}  // namespace dualpath::store
