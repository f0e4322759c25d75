#pragma once
// SlotPool: registered memory cut into equal slots, handed out as contiguous runs. It is both the
// node's DRAM buffer pool (PE buffer, DE buffer; slots of one Full Block) and an engine's "HBM"
// arena. There is no GPU on this machine: the arena is host memory allocated and registered
// through UCX, and every copy into or out of it is a traffic-manager put, as it would be with
// GPUDirect RDMA (DESIGN.md "Data paths").
//
// Threads: thread-safe (one mutex around the free list). Leases are move-only RAII handles and
// return their slots on destruction; the pool must outlive them.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

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
  // kInvalidArgument when not even one slot fits.
  static Result<std::unique_ptr<SlotPool>> create(transport::Worker& worker,
                                                  std::string name,
                                                  std::string config_key,
                                                  uint64_t total_bytes,
                                                  uint64_t slot_bytes);
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // A run of `bytes` (rounded up to slots), first fit. kResourceExhausted names the pool, its
  // size and what is free, and the key to raise.
  Result<SlotLease> allocate(uint64_t bytes);

  transport::MemoryRegion& region() { return *region_; }
  std::span<std::byte> span() const { return region_->span(); }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t free_bytes() const;
  uint64_t total_bytes() const { return slots_ * slot_bytes_; }
  uint64_t used_bytes() const { return total_bytes() - free_bytes(); }

 private:
  friend class SlotLease;
  SlotPool(std::string name, std::string key, uint64_t slot_bytes, uint64_t slots);
  void give_back(uint64_t first, uint64_t count);

  const std::string name_;
  const std::string config_key_;
  const uint64_t slot_bytes_;
  const uint64_t slots_;
  std::unique_ptr<transport::MemoryRegion> region_;
  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> free_runs_;  // first slot -> count, coalesced; guarded by mu_
};

}  // namespace dualpath::engine
