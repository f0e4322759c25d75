#include "engine/slot_pool.h"

#include <fmt/format.h>

namespace dualpath::engine {

SlotLease& SlotLease::operator=(SlotLease&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = other.pool_;
    first_slot_ = other.first_slot_;
    slots_ = other.slots_;
    offset_bytes_ = other.offset_bytes_;
    size_bytes_ = other.size_bytes_;
    other.pool_ = nullptr;
  }
  return *this;
}

std::span<std::byte> SlotLease::bytes() const {
  if (pool_ == nullptr) return {};
  return pool_->span().subspan(offset_bytes_, size_bytes_);
}

void SlotLease::release() {
  if (pool_ != nullptr) pool_->give_back(first_slot_, slots_);
  pool_ = nullptr;
}

SlotPool::SlotPool(std::string name, std::string key, uint64_t slot_bytes, uint64_t slots)
    : name_(std::move(name)), config_key_(std::move(key)), slot_bytes_(slot_bytes), slots_(slots) {
  free_runs_[0] = slots;
}

Result<std::unique_ptr<SlotPool>> SlotPool::create(transport::Worker& worker,
                                                   std::string name,
                                                   std::string config_key,
                                                   uint64_t total_bytes,
                                                   uint64_t slot_bytes) {
  if (slot_bytes == 0 || total_bytes < slot_bytes) {
    return Status::invalid_argument(
        fmt::format("{} = {} bytes is smaller than one slot of {} bytes (one Full Block); raise {}",
                    config_key, total_bytes, slot_bytes, config_key));
  }
  const uint64_t slots = total_bytes / slot_bytes;
  std::unique_ptr<SlotPool> pool(new SlotPool(name, config_key, slot_bytes, slots));
  DP_ASSIGN_OR_RETURN(pool->region_, worker.allocate_memory(slots * slot_bytes));
  return pool;
}

Result<SlotLease> SlotPool::allocate(uint64_t bytes) {
  const uint64_t want = bytes == 0 ? 1 : (bytes + slot_bytes_ - 1) / slot_bytes_;
  std::lock_guard lock(mu_);
  for (auto it = free_runs_.begin(); it != free_runs_.end(); ++it) {
    if (it->second < want) continue;
    SlotLease lease;
    lease.pool_ = this;
    lease.first_slot_ = it->first;
    lease.slots_ = want;
    lease.offset_bytes_ = it->first * slot_bytes_;
    lease.size_bytes_ = want * slot_bytes_;
    const uint64_t rest_first = it->first + want;
    const uint64_t rest = it->second - want;
    free_runs_.erase(it);
    if (rest > 0) free_runs_[rest_first] = rest;
    return lease;
  }
  uint64_t free_slots = 0;
  for (const auto& [first, count] : free_runs_) free_slots += count;
  return Status::resource_exhausted(fmt::format(
      "{}: no run of {} free slots ({} bytes) among {} free of {} slots of {} bytes; raise {}",
      name_, want, bytes, free_slots, slots_, slot_bytes_, config_key_));
}

uint64_t SlotPool::free_bytes() const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const auto& [first, count] : free_runs_) n += count;
  return n * slot_bytes_;
}

void SlotPool::give_back(uint64_t first, uint64_t count) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = free_runs_.emplace(first, count);
  (void)inserted;
  auto next = std::next(it);
  if (next != free_runs_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_runs_.erase(next);
  }
  if (it != free_runs_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_runs_.erase(it);
    }
  }
}

}  // namespace dualpath::engine
