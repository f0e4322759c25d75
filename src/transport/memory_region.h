#pragma once
// Registered memory: MemoryRegion is a caller buffer registered with a Worker's UCX context;
// its descriptor() (address, length, packed remote key, owner) goes to peers, which turn it into
// a RemoteRegion with Worker::import_region() and then put to or get from it.
//
// A put or get must name a local span inside a MemoryRegion of the same worker (the NIC can only
// DMA registered memory) and a remote range inside the RemoteRegion's bounds; both are checked
// before anything reaches UCX, so a bad argument is a Status, never a segfault.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

struct ucp_mem;
struct ucp_rkey;

namespace dualpath::transport {

class Worker;
class Endpoint;

// Owned by the caller, who also owns the buffer; the buffer must outlive the region, and the
// region must outlive every operation using it. Destruction unregisters on the progress thread
// (blocking). Thread-safe.
class MemoryRegion {
 public:
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  std::span<std::byte> span() const { return buffer_; }
  uint64_t id() const { return id_; }
  // The bytes a peer passes to Worker::import_region(): owner context id, region id, address,
  // length and the packed UCX remote key, with a checksum.
  const std::vector<std::byte>& descriptor() const { return descriptor_; }
  ucp_mem* native() const { return memh_; }

 private:
  friend class Worker;
  MemoryRegion(Worker& worker,
               std::span<std::byte> buffer,
               uint64_t id,
               ucp_mem* memh,
               std::vector<std::byte> descriptor);

  Worker& worker_;
  std::span<std::byte> buffer_;
  uint64_t id_;
  ucp_mem* memh_;
  std::vector<std::byte> descriptor_;
};

// A peer's registered region, usable through one Endpoint (UCX remote keys are per endpoint).
// Owned by the caller; destroy it before its Endpoint. Thread-safe (immutable after import).
class RemoteRegion {
 public:
  ~RemoteRegion();
  RemoteRegion(const RemoteRegion&) = delete;
  RemoteRegion& operator=(const RemoteRegion&) = delete;

  uint64_t base_address() const { return base_address_; }
  uint64_t length_bytes() const { return length_bytes_; }
  uint64_t owner_context_id() const { return owner_context_id_; }
  uint64_t region_id() const { return region_id_; }
  const Endpoint& endpoint() const { return endpoint_; }
  ucp_rkey* native() const { return rkey_; }

 private:
  friend class Worker;
  RemoteRegion(const Endpoint& endpoint,
               uint64_t owner_context_id,
               uint64_t region_id,
               uint64_t base_address,
               uint64_t length_bytes,
               ucp_rkey* rkey);

  const Endpoint& endpoint_;
  uint64_t owner_context_id_;
  uint64_t region_id_;
  uint64_t base_address_;
  uint64_t length_bytes_;
  ucp_rkey* rkey_;
};

}  // namespace dualpath::transport
