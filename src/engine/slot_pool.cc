#include "engine/slot_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

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

SlotPool::SlotPool(std::string name,
                   std::string key,
                   uint64_t slot_bytes,
                   uint64_t slots,
                   const Clock& clock)
    : name_(std::move(name)),
      config_key_(std::move(key)),
      slot_bytes_(slot_bytes),
      slots_(slots),
      clock_(clock) {
  MutexLock lock(mu_);
  free_runs_[0] = slots;
}

Result<std::unique_ptr<SlotPool>> SlotPool::create(transport::Worker& worker,
                                                   std::string name,
                                                   std::string config_key,
                                                   uint64_t total_bytes,
                                                   uint64_t slot_bytes,
                                                   const Clock& clock) {
  if (slot_bytes == 0 || total_bytes < slot_bytes) {
    return Status::invalid_argument(
        fmt::format("{} = {} bytes is smaller than one slot of {} bytes (one Full Block); raise {}",
                    config_key, total_bytes, slot_bytes, config_key));
  }
  const uint64_t slots = total_bytes / slot_bytes;
  std::unique_ptr<SlotPool> pool(new SlotPool(name, config_key, slot_bytes, slots, clock));
  DP_ASSIGN_OR_RETURN(pool->region_, worker.allocate_memory(slots * slot_bytes));
  // Fault every page in now, as registering memory with an RDMA NIC pins it: a node's memory is
  // then what its config says from the start, instead of growing for hours as first-fit leases
  // reach slots never touched before (which `bench soak` read as a leak).
  const std::span<std::byte> bytes = pool->region_->span();
  std::memset(bytes.data(), 0, bytes.size());
  return pool;
}

uint64_t SlotPool::slots_for(uint64_t bytes) const {
  return bytes == 0 ? 1 : (bytes + slot_bytes_ - 1) / slot_bytes_;
}

std::optional<SlotLease> SlotPool::take_run(uint64_t want) {
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
  return std::nullopt;
}

uint64_t SlotPool::free_slots() const {
  uint64_t n = 0;
  for (const auto& [first, count] : free_runs_) n += count;
  return n;
}

Status SlotPool::exhausted(uint64_t want, uint64_t bytes) const {
  return Status::resource_exhausted(fmt::format(
      "{}: no run of {} free slots ({} bytes) among {} free of {} slots of {} bytes; raise {}",
      name_, want, bytes, free_slots(), slots_, slot_bytes_, config_key_));
}

Result<SlotLease> SlotPool::allocate(uint64_t bytes) {
  const uint64_t want = slots_for(bytes);
  MutexLock lock(mu_);
  if (auto lease = take_run(want)) return std::move(*lease);
  return exhausted(want, bytes);
}

Result<SlotLease> SlotPool::allocate_wait(uint64_t bytes,
                                          Duration deadline,
                                          const std::function<bool()>& stop) {
  const uint64_t want = slots_for(bytes);
  if (want > slots_) {
    return Status::resource_exhausted(fmt::format(
        "{}: a request of {} bytes ({} slots) is larger than the whole buffer of {} slots of {} "
        "bytes; raise {}",
        name_, bytes, want, slots_, slot_bytes_, config_key_));
  }
  // How often a waiter looks at `stop` when no slot returns.
  constexpr auto kStopPoll = std::chrono::milliseconds(10);
  MutexLock lock(mu_);
  const uint64_t ticket = next_ticket_++;
  waiters_.push_back(ticket);
  auto leave = [&]() DP_REQUIRES(mu_) {
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), ticket));
    returned_.notify_all();  // the next in line may fit now
  };
  while (true) {
    if (waiters_.front() == ticket) {
      if (auto lease = take_run(want)) {
        leave();
        return std::move(*lease);
      }
    }
    if (stop && stop()) {
      leave();
      return Status::aborted(
          fmt::format("{}: cancelled while waiting for {} bytes", name_, bytes));
    }
    const Duration now = clock_.now();
    if (now >= deadline) {
      const Status why = exhausted(want, bytes);
      const auto ahead = std::find(waiters_.begin(), waiters_.end(), ticket) - waiters_.begin();
      leave();
      return Status::timed_out(fmt::format(
          "{} (waited until the request's deadline with {} requests ahead)", why.message(), ahead));
    }
    (void)clock_.wait_until(returned_, lock, std::min(deadline, now + Duration(kStopPoll)));
  }
}

size_t SlotPool::waiting() const {
  MutexLock lock(mu_);
  return waiters_.size();
}

uint64_t SlotPool::free_bytes() const {
  MutexLock lock(mu_);
  return free_slots() * slot_bytes_;
}

void SlotPool::give_back(uint64_t first, uint64_t count) {
  MutexLock lock(mu_);
  returned_.notify_all();
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
