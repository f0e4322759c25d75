#pragma once
// SlotPool: registered memory cut into equal slots, handed out as contiguous runs. It is both the
// node's DRAM buffer pool (PE buffer, DE buffer; slots of one Full Block) and an engine's "HBM"
// arena. There is no GPU on this machine: the arena is host memory allocated and registered
// through UCX, and every copy into or out of it is a traffic-manager put, as it would be with
// GPUDirect RDMA (DESIGN.md "Data paths").
//
// A request that finds no room waits for it (allocate_wait: first come, first served, until its
// deadline or its cancel), as the simulator's requests wait for buffer and HBM: a full pool is
// backpressure, not an error. Only a request larger than the whole pool fails at once.
//
// Threads: thread-safe (one mutex around the free list and the queue of waiters). Leases are
// move-only RAII handles and return their slots on destruction; the pool must outlive them.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "common/clock.h"
#include "common/mutex.h"
#include "dualpath/result.h"
#include "transport/memory_region.h"
#include "transport/worker.h"

namespace dualpath::engine {

class SlotPool;

// A contiguous run of slots. Move-only; destruction returns it to the pool.
class SlotLease {
 public:
  SlotLease() = default;
  SlotLease(SlotLease&& other) noexcept { *this = std::move(other); }
  SlotLease& operator=(SlotLease&& other) noexcept;
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  ~SlotLease() { release(); }

  bool empty() const { return pool_ == nullptr; }
  // Offset of the run in the pool's region, and its bytes.
  uint64_t offset_bytes() const { return offset_bytes_; }
  uint64_t size_bytes() const { return size_bytes_; }
  std::span<std::byte> bytes() const;
  void release();

 private:
  friend class SlotPool;
  SlotPool* pool_ = nullptr;
  uint64_t first_slot_ = 0;
  uint64_t slots_ = 0;
  uint64_t offset_bytes_ = 0;
  uint64_t size_bytes_ = 0;
};

class SlotPool {
 public:
  // Allocates `total_bytes` (rounded down to whole slots) through `worker`'s context and
  // registers it. `name` and `config_key` appear in errors ("DE buffer", "live.de_dram_buffer_mb").
  // Deadlines of allocate_wait are times on `clock`, which must outlive the pool.
  // kInvalidArgument when not even one slot fits.
  static Result<std::unique_ptr<SlotPool>> create(transport::Worker& worker,
                                                  std::string name,
                                                  std::string config_key,
                                                  uint64_t total_bytes,
                                                  uint64_t slot_bytes,
                                                  const Clock& clock = real_clock());
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // A run of `bytes` (rounded up to slots), first fit. kResourceExhausted names the pool, its
  // size and what is free, and the key to raise.
  // Never waits (and may pass the waiters of allocate_wait: one-block staging leases).
  Result<SlotLease> allocate(uint64_t bytes);
  // Waits, in arrival order, until a run of `bytes` is free. kResourceExhausted at once when the
  // whole pool is smaller; kTimedOut at `deadline`, a time on the pool's clock (naming what is
  // free and the key to raise); kAborted when `stop` turns true (checked every few milliseconds
  // and whenever slots return).
  Result<SlotLease> allocate_wait(uint64_t bytes,
                                  Duration deadline,
                                  const std::function<bool()>& stop = {});
  // Requests waiting in allocate_wait.
  size_t waiting() const;

  transport::MemoryRegion& region() { return *region_; }
  std::span<std::byte> span() const { return region_->span(); }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t free_bytes() const;
  uint64_t total_bytes() const { return slots_ * slot_bytes_; }
  uint64_t used_bytes() const { return total_bytes() - free_bytes(); }

 private:
  friend class SlotLease;
  SlotPool(std::string name, std::string key, uint64_t slot_bytes, uint64_t slots,
           const Clock& clock);
  void give_back(uint64_t first, uint64_t count);
  uint64_t slots_for(uint64_t bytes) const;
  std::optional<SlotLease> take_run(uint64_t want) DP_REQUIRES(mu_);
  uint64_t free_slots() const DP_REQUIRES(mu_);
  Status exhausted(uint64_t want, uint64_t bytes) const DP_REQUIRES(mu_);

  const std::string name_;
  const std::string config_key_;
  const uint64_t slot_bytes_;
  const uint64_t slots_;
  const Clock& clock_;
  std::unique_ptr<transport::MemoryRegion> region_;
  mutable Mutex mu_;
  CondVar returned_;  // slots came back, or the queue's head moved
  std::map<uint64_t, uint64_t> free_runs_ DP_GUARDED_BY(mu_);  // first slot -> count, coalesced
  std::deque<uint64_t> waiters_ DP_GUARDED_BY(mu_);  // tickets of allocate_wait, in order
  uint64_t next_ticket_ DP_GUARDED_BY(mu_) = 0;
};

}  // namespace dualpath::engine
