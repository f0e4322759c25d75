#pragma once
// AmBufferPool: receive buffers for rendezvous active messages, kept for reuse (issue 4).
//
// A rendezvous message's data is fetched from the sender into a buffer of the receiver's. A
// fresh buffer per message costs about as much as the message itself: a large malloc is a fresh
// mmap, so every page faults in (and the kernel zeroes it), and a zero-filled std::vector writes
// the whole message once more before UCX copies into it (measured over shared memory, 1 MiB
// messages: the receiving thread spent as long on faults and zeroing as on the copy). The pool
// hands out buffers that the worker allocated once (UCX-allocated and registered, through the
// allocate/release functions it is given) and takes them back after the handler has run, keeping
// at most `max_cached_bytes` (oldest released first), so a stream of messages reuses the same few
// warm buffers — as ucx_perftest's receiver does with its one preallocated buffer.
//
// Thread-compatible: a Worker's pool is used on its progress thread only. Pure logic.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>

namespace dualpath::transport {

class AmBufferPool {
 public:
  struct Buffer {
    std::byte* data = nullptr;
    size_t capacity = 0;
    size_t size = 0;         // what the current message uses
    void* handle = nullptr;  // the allocator's (a UCX memory handle)
    std::span<std::byte> span() const { return {data, size}; }
  };
  // Returns a buffer of `capacity` bytes (contents unspecified), or nullopt when out of memory.
  using Allocate = std::function<std::optional<Buffer>(size_t capacity)>;
  using Release = std::function<void(const Buffer&)>;

  AmBufferPool(uint64_t max_cached_bytes, Allocate allocate, Release release);
  ~AmBufferPool();  // releases the cached buffers
  AmBufferPool(const AmBufferPool&) = delete;
  AmBufferPool& operator=(const AmBufferPool&) = delete;

  // The smallest cached buffer that holds `size` bytes, or a new one of exactly `size`; nullopt
  // when the allocation fails.
  std::optional<Buffer> take(size_t size);
  // Returns a buffer for reuse; released if it does not fit under the cache bound.
  void give_back(const Buffer& buffer);
  // Releases every cached buffer.
  void clear();

  uint64_t cached_bytes() const { return cached_bytes_; }
  size_t cached_buffers() const { return cached_.size(); }

 private:
  uint64_t max_cached_bytes_;
  Allocate allocate_;
  Release release_;
  uint64_t cached_bytes_ = 0;
  std::deque<Buffer> cached_;  // oldest first
};

}  // namespace dualpath::transport
